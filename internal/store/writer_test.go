package store_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/policy"
	"github.com/toolgate/toolgate/internal/store"
	"github.com/toolgate/toolgate/internal/testenv"
)

// A batch that fails inside its transaction (here a trigger, added by another
// connection after the writer's statements were compiled, aborts one insert) is rolled
// back and reported as not written; the writer's connection is not left holding the
// write lock, and later appends go through on a clean chain.
func TestAuditWriterRecoversFromAFailedBatch(t *testing.T) {
	ctx := context.Background()
	dir := testenv.PrivateDir(t)
	s := openDir(t, dir)
	ok := func(id string) {
		t.Helper()
		if err := s.AppendAudit(ctx, &audit.Event{CallID: id, Principal: "p", Tool: "t.x", Decision: audit.Allowed}); err != nil {
			t.Fatalf("AppendAudit(%s): %v", id, err)
		}
	}
	ok("before") // compiles the writer's statements
	db := rawDB(t, dir)
	if _, err := db.Exec(`CREATE TRIGGER boom BEFORE INSERT ON audit_events WHEN NEW.call_id = 'boom'
		BEGIN SELECT RAISE(ABORT, 'refused by test trigger'); END`); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		e := &audit.Event{CallID: "boom", Principal: "p", Tool: "t.x", Decision: audit.Allowed}
		if err := s.AppendAudit(ctx, e); err == nil {
			t.Fatal("AppendAudit through an aborting trigger succeeded")
		}
		if e.Seq != 0 || e.Hash != "" {
			t.Errorf("failed append changed the event: seq %d hash %q", e.Seq, e.Hash)
		}
		// Another writer gets the lock at once: the failed transaction was ended.
		if _, err := s.AddGrant(ctx, policy.Grant{Principal: "p", Tool: "*", Effect: policy.Allow}); err != nil {
			t.Fatalf("write after a failed batch: %v", err)
		}
	}
	if _, err := db.Exec(`DROP TRIGGER boom`); err != nil {
		t.Fatal(err)
	}
	ok("after")
	evs, err := s.ListAudit(ctx, audit.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 2 || evs[0].CallID != "before" || evs[1].CallID != "after" || evs[1].Seq != 2 {
		t.Fatalf("events = %+v", evs)
	}
	if err := audit.Verify(evs); err != nil {
		t.Error(err)
	}
}

// Close while appends are in flight neither hangs nor panics; every append that
// returned nil is in the database afterwards, and the chain verifies.
func TestCloseDuringAppends(t *testing.T) {
	ctx := context.Background()
	dir := testenv.PrivateDir(t)
	s, err := store.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		acked = map[string]bool{}
		wg    sync.WaitGroup
	)
	started := make(chan struct{})
	for g := range 8 {
		wg.Go(func() {
			for i := 0; ; i++ {
				if g == 0 && i == 5 {
					close(started)
				}
				id := fmt.Sprintf("%d-%d", g, i)
				if err := s.AppendAudit(ctx, &audit.Event{CallID: id, Principal: "p", Tool: "t.x", Decision: audit.Allowed}); err != nil {
					return
				}
				mu.Lock()
				acked[id] = true
				mu.Unlock()
			}
		})
	}
	<-started
	if err := s.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	wg.Wait()
	if err := s.AppendAudit(ctx, &audit.Event{Principal: "p", Tool: "t.x", Decision: audit.Allowed}); err == nil {
		t.Error("AppendAudit after Close succeeded")
	}
	if _, err := s.PolicyVersion(ctx); err == nil {
		t.Error("PolicyVersion after Close succeeded")
	}
	s2 := openDir(t, dir)
	evs, err := s2.ListAudit(ctx, audit.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if err := audit.Verify(evs); err != nil {
		t.Error(err)
	}
	stored := map[string]bool{}
	for _, e := range evs {
		stored[e.CallID] = true
	}
	for id := range acked {
		if !stored[id] {
			t.Errorf("event %s was acknowledged but is not stored", id)
		}
	}
	if len(acked) < 5 {
		t.Errorf("only %d appends acknowledged before Close", len(acked))
	}
}

// Appends from one Store keep chaining onto events another Store (another process's
// writer connection, with its own compiled statements) appended in between: the chain
// head is read inside every batch's transaction, never cached.
func TestAuditWriterSeesOtherWriters(t *testing.T) {
	ctx := context.Background()
	dir := testenv.PrivateDir(t)
	a, b := openDir(t, dir), openDir(t, dir)
	for i := range 20 {
		s := a
		if i%3 == 0 {
			s = b
		}
		e := &audit.Event{CallID: fmt.Sprint(i), Principal: "p", Tool: "t.x", Decision: audit.Allowed}
		if err := s.AppendAudit(ctx, e); err != nil {
			t.Fatal(err)
		}
		if e.Seq != int64(i+1) {
			t.Fatalf("event %d got seq %d", i, e.Seq)
		}
	}
	evs, err := a.ListAudit(ctx, audit.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if err := audit.Verify(evs); err != nil || len(evs) != 20 {
		t.Errorf("%d events, %v", len(evs), err)
	}
}
