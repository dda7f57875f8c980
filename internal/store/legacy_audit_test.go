package store

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/testenv"
)

// TestAuditRowsFromEarlierBuildsVerify loads audit rows an earlier build wrote (a real
// daemon's, kept verbatim in testdata) into a store at the current schema and checks
// that they read back and verify, head hash included. A change to the chain encoding,
// to how events are stored or read, or a migration that rewrites audit rows breaks
// `toolgate audit --verify` on every existing trail; this test is where that shows.
func TestAuditRowsFromEarlierBuildsVerify(t *testing.T) {
	ctx := context.Background()
	rows, err := os.ReadFile("testdata/audit_v1_rows.sql")
	if err != nil {
		t.Fatal(err)
	}
	s, err := Open(ctx, testenv.PrivateDir(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	n := 0
	for _, line := range strings.Split(string(rows), "\n") {
		if !strings.HasPrefix(line, "INSERT ") {
			continue
		}
		if _, err := s.db.ExecContext(ctx, line); err != nil {
			t.Fatalf("loading a stored row: %v", err)
		}
		n++
	}
	if n != 6 {
		t.Fatalf("loaded %d rows from the fixture, want 6", n)
	}
	evs, err := s.ListAudit(ctx, audit.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if err := audit.Verify(evs); err != nil {
		t.Fatalf("events an earlier build wrote no longer verify: %v", err)
	}
	seq, hash, err := s.AuditHead(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := "353f74c3723ead0d8464c60189bc7aaae9592a42599d13c2352374c07381b51d"; seq != 6 || hash != want {
		t.Errorf("head = %d %s, want 6 %s", seq, hash, want)
	}
	// The rows carry what the trail promises: HMAC'd argument values, no clear ones.
	if evs[4].Tool != "local.write_file" || len(evs[4].Args["content"]) != 64 {
		t.Errorf("row 5 = %+v, want write_file with an HMAC'd content argument", evs[4])
	}
	// An edit is still caught in the old rows.
	evs[2].Principal = "mallory"
	if err := audit.Verify(evs); err == nil {
		t.Error("an edited old row verified")
	}
}
