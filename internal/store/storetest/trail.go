package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/store"
)

// Trail opens the store in dataDir, reads its whole audit trail and closes it again:
// what a test checks once a process it drove (the toolgate binary, a child) has written.
func Trail(t testing.TB, dataDir string) []audit.Event {
	t.Helper()
	st, err := store.Open(context.Background(), dataDir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	evs, err := st.ListAudit(context.Background(), audit.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// WaitAllowed waits, up to a minute, until dataDir's trail holds n allowed events of
// tool (the calls have started running), polling every 20 ms. It skips the test when
// such a call was refused sandbox_unavailable: bash cannot be confined on this host.
func WaitAllowed(t testing.TB, dataDir, tool string, n int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		got := 0
		for _, e := range Trail(t, dataDir) {
			switch {
			case e.Tool == tool && e.Decision == audit.Allowed:
				got++
			case e.Tool == tool && e.Code == "sandbox_unavailable":
				t.Skipf("%s cannot be confined on this host: %s", tool, e.Message)
			}
		}
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d %s calls started", got, n, tool)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
