package app_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/app"
	"github.com/toolgate/toolgate/internal/host"
	"github.com/toolgate/toolgate/internal/mgmt"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/internal/upstream/upstreamtest"
)

// countingDialer counts the dials of the app's upstream dialer.
type countingDialer struct {
	host.Dialer
	n *atomic.Int64
}

func (d countingDialer) Dial(ctx context.Context, req host.DialRequest) (host.Session, error) {
	d.n.Add(1)
	return d.Dialer.Dial(ctx, req)
}

// TestCrashLoopLeavesNoChild: a required server that crashes shortly after every start
// is restarted 200 times (the circuit kept closed for the test), and then a clean Close
// finds no process of it left: every crashed one was reaped, the last one stopped.
func TestCrashLoopLeavesNoChild(t *testing.T) {
	if testing.Short() {
		t.Skip("200 process starts")
	}
	var dials atomic.Int64
	dir := testenv.PrivateDir(t)
	a, err := app.Open(context.Background(), app.Options{DataDir: dir, HostOptions: func(o *host.Options) {
		quickHost(o)
		o.Dialer = countingDialer{o.Dialer, &dials}
		o.Restart = host.RestartPolicy{InitialInterval: time.Millisecond, Multiplier: 1, MaxInterval: time.Millisecond,
			Jitter: 0.1, Threshold: 1 << 20, Window: time.Second, CooldownInitial: time.Second, CooldownMax: time.Second}
	}})
	if err != nil {
		t.Fatal(err)
	}
	marker := upstreamtest.Marker(t)
	doc := fmt.Sprintf(`{"mcpServers":{"crashy":{"command":%q,"args":["-marker",%q,"-crash-after","20ms"],"required":true}}}`,
		upstreamtest.Fixture(t), marker)
	if _, err := mgmt.Checked(a).Install(context.Background(), owner, mgmt.InstallParams{ConfigJSON: doc}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for dials.Load() < 200 {
		if time.Now().After(deadline) {
			t.Fatalf("only %d starts in two minutes", dials.Load())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if pids := upstreamtest.Processes(t, marker); len(pids) != 0 {
		t.Fatalf("after %d starts and Close, processes left: %v", dials.Load(), pids)
	}
	if z := zombies(t); len(z) != 0 {
		t.Fatalf("after %d starts and Close, unreaped children: %v", dials.Load(), z)
	}
}

// zombies lists this process's children that exited and were never reaped.
func zombies(t *testing.T) []int {
	t.Helper()
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		if len(f) > 1 && f[0] == "Z" && f[1] == strconv.Itoa(os.Getpid()) {
			out = append(out, pid)
		}
	}
	return out
}
