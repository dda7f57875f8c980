package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/store"
	"github.com/toolgate/toolgate/internal/toolpin"
	"github.com/toolgate/toolgate/internal/toolpin/toolpintest"
)

// TrustStore is what the upstream-trust tables offer (migration 0006).
type TrustStore interface {
	toolpin.Store
	TrustPolicy(ctx context.Context, server string) (store.TrustPolicy, bool, error)
	SetTrustPolicy(ctx context.Context, p store.TrustPolicy) error
	PolicyVersion(ctx context.Context) (int64, error)
}

var _ TrustStore = (*store.Store)(nil)

// RunTrust runs toolpin's Store suite and the trust policy's against stores made by
// open (each subtest gets a fresh, empty one).
func RunTrust(t *testing.T, open func(t *testing.T) TrustStore) {
	toolpintest.RunStore(t, func(t *testing.T) toolpin.Store { return open(t) })
	t.Run("TrustPolicy", func(t *testing.T) { testTrustPolicy(t, open(t)) })
	t.Run("TrustVersion", func(t *testing.T) { testTrustVersion(t, open(t)) })
}

func testTrustPolicy(t *testing.T, s TrustStore) {
	ctx := context.Background()
	if p, ok, err := s.TrustPolicy(ctx, "github"); ok || err != nil || p.Server != "github" || p.Trusted {
		t.Fatalf("no policy: %+v %v %v", p, ok, err)
	}
	want := store.TrustPolicy{Server: "github", Pin: "approve", HoldAt: "medium", Trusted: true}
	if err := s.SetTrustPolicy(ctx, want); err != nil {
		t.Fatal(err)
	}
	if got, ok, err := s.TrustPolicy(ctx, "github"); !ok || err != nil || got != want {
		t.Fatalf("TrustPolicy = %+v %v %v, want %+v", got, ok, err, want)
	}
	want.Trusted = false
	if err := s.SetTrustPolicy(ctx, want); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := s.TrustPolicy(ctx, "github"); got != want {
		t.Fatalf("replaced = %+v, want %+v", got, want)
	}
	for _, bad := range []string{"", " x", "a\nb"} {
		if err := s.SetTrustPolicy(ctx, store.TrustPolicy{Server: bad}); err == nil {
			t.Errorf("SetTrustPolicy(%q) accepted", bad)
		}
	}
	if err := s.DeleteServer(ctx, "github"); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := s.TrustPolicy(ctx, "github"); ok {
		t.Error("DeleteServer left the trust policy (a reinstall must start trust over)")
	}
}

// testTrustVersion: what decides publication moves the policy version, so that every
// process re-reconciles; a hold seen again (only its last-seen time moves) does not.
func testTrustVersion(t *testing.T, s TrustStore) {
	ctx := context.Background()
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	c := []byte(`{"name":"t"}`)
	h := toolpin.Hold{Server: "s", Tool: "t", Reason: toolpin.HoldChanged, State: toolpin.HoldPending,
		Digest: toolpin.Digest(c), Canonical: c, FirstSeen: at, LastSeen: at}
	steps := []struct {
		what  string
		do    func() error
		moves bool
	}{
		{"a hold raised", func() error { return s.PutHold(ctx, h) }, true},
		{"the same hold seen again", func() error { h.LastSeen = at.Add(time.Hour); return s.PutHold(ctx, h) }, false},
		{"the hold rejected", func() error { h.State = toolpin.HoldRejected; return s.PutHold(ctx, h) }, true},
		{"a pin", func() error {
			return s.PutPin(ctx, toolpin.Pin{Server: "s", Tool: "t", Digest: h.Digest, Canonical: c, FirstSeen: at})
		}, true},
		{"a trust policy", func() error { return s.SetTrustPolicy(ctx, store.TrustPolicy{Server: "s", Pin: "tofu"}) }, true},
		{"the same trust policy", func() error { return s.SetTrustPolicy(ctx, store.TrustPolicy{Server: "s", Pin: "tofu"}) }, false},
		{"the server deleted", func() error { return s.DeleteServer(ctx, "s") }, true},
	}
	for _, st := range steps {
		before, err := s.PolicyVersion(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.do(); err != nil {
			t.Fatalf("%s: %v", st.what, err)
		}
		after, _ := s.PolicyVersion(ctx)
		if (after != before) != st.moves {
			t.Errorf("%s: policy version %d → %d, want moved=%v", st.what, before, after, st.moves)
		}
	}
}
