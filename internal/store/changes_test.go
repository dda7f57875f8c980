package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/policy"
	"github.com/toolgate/toolgate/internal/store"
	"github.com/toolgate/toolgate/internal/testenv"
)

// waitWake waits for one wake-up on sub. The bound only keeps a broken listener from
// hanging the test; it is not a latency requirement.
func waitWake(t *testing.T, sub *store.Subscription, what string) {
	t.Helper()
	select {
	case _, ok := <-sub.C:
		if !ok {
			t.Fatalf("%s: subscription closed", what)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: no wake-up", what)
	}
}

func drain(sub *store.Subscription) {
	select {
	case <-sub.C:
	default:
	}
}

// A grant or namespace change committed through one replica wakes another replica's
// subscription; a listener whose connection is cut reconnects and wakes everyone once
// more, so a change made while it was away is re-read, not missed.
func TestChangesAcrossReplicas(t *testing.T) {
	ctx := context.Background()
	url := testenv.Postgres(t)
	a, b := openPGAt(t, url), openPGAt(t, url)
	if !a.Changes().Notifies() {
		t.Fatal("a PostgreSQL store does not notify")
	}
	sub := a.Changes().Subscribe(store.TopicPolicy)
	waitWake(t, sub, "first connection")
	if !a.Changes().Live() {
		t.Error("listener not live after its first wake-up")
	}

	g, err := b.AddGrant(ctx, policy.Grant{Principal: "bob", Tool: "*", Effect: policy.Allow})
	if err != nil {
		t.Fatal(err)
	}
	waitWake(t, sub, "AddGrant through another store")
	if err := b.SetNamespaceEnabled(ctx, "github", false); err != nil {
		t.Fatal(err)
	}
	waitWake(t, sub, "SetNamespaceEnabled through another store")

	// Cut the listener's connection and change something at once: whether the
	// notification is lost or not, a wake-up follows the change.
	drain(sub)
	var n int
	if err := rawPG(t, url).QueryRow(`SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE application_name = $1 AND datname = current_database()`, store.ListenerApplicationName).Scan(&n); err != nil || n != 1 {
		t.Fatalf("terminating the listener: %d backends, %v", n, err)
	}
	before := policyVersion(t, a)
	if err := b.RemoveGrant(ctx, g.ID); err != nil {
		t.Fatal(err)
	}
	waitWake(t, sub, "change while the listener was cut off")
	if v := policyVersion(t, a); v <= before {
		t.Errorf("after the wake-up the version is %d, not past %d", v, before)
	}
	for deadline := time.Now().Add(30 * time.Second); store.ListenerConnects(a.Changes()) < 2; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the listener did not reconnect")
		}
	}
	drain(sub)
	if _, err := b.AddGrant(ctx, policy.Grant{Principal: "carol", Tool: "*", Effect: policy.Allow}); err != nil {
		t.Fatal(err)
	}
	waitWake(t, sub, "change after the reconnection")

	a.Close()
	if _, ok := <-sub.C; ok {
		// One wake-up may still have been waiting; then the channel closes.
		if _, ok := <-sub.C; ok {
			t.Error("subscription still open after Close")
		}
	}
}

// SQLite has nothing to listen to: its subscriptions never fire and close with the
// store; readers keep reading their counters.
func TestChangesSQLite(t *testing.T) {
	s, err := store.Open(context.Background(), testenv.PrivateDir(t))
	if err != nil {
		t.Fatal(err)
	}
	if s.Changes().Notifies() || s.Changes().Live() {
		t.Error("a SQLite store claims to notify")
	}
	sub := s.Changes().Subscribe(store.TopicPolicy)
	other := s.Changes().Subscribe(store.TopicPolicy)
	other.Close()
	if _, ok := <-other.C; ok {
		t.Error("a closed subscription delivered a wake-up")
	}
	s.Close()
	if _, ok := <-sub.C; ok {
		t.Error("subscription still open after Close")
	}
	after := s.Changes().Subscribe(store.TopicPolicy)
	if _, ok := <-after.C; ok {
		t.Error("a subscription made after Close is open")
	}
	after.Close()
}
