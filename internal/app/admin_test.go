package app_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/app"
	"github.com/toolgate/toolgate/internal/mcpspec"
	"github.com/toolgate/toolgate/internal/policy"
)

func openAdmin(t *testing.T, dir string) *app.Admin {
	t.Helper()
	m, err := app.OpenAdmin(context.Background(), dir, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// Tokens are made in one place: the lifetime's bounds, a random session when none is
// given, and the data directory's key, which App.VerifyToken and Authenticate use too.
func TestAdminTokens(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "data")
	m := openAdmin(t, dir)
	for ttl, want := range map[time.Duration]string{
		0: "must be positive", -time.Second: "must be positive", 500 * time.Millisecond: "one-second precision",
		app.MaxTokenTTL + time.Second: "longer than",
	} {
		if _, err := m.MintToken(ctx, "p", "", ttl); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("MintToken ttl %s: %v, want %q", ttl, err, want)
		}
	}
	tok, err := m.MintToken(ctx, "alice", "", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	c, err := m.VerifyToken(ctx, tok)
	if err != nil || c.Principal != "alice" || !strings.HasPrefix(c.Session, "s_") || time.Until(c.Expires) > time.Minute {
		t.Fatalf("claims %+v, %v", c, err)
	}
	if tok2, _ := m.MintToken(ctx, "alice", "", time.Minute); tok2 == tok {
		t.Error("two tokens with a random session are equal")
	}
	if _, err := m.VerifyToken(ctx, tok+"x"); !errors.Is(err, app.ErrInvalidToken) {
		t.Errorf("VerifyToken(forged) = %v, want ErrInvalidToken", err)
	}
	m.Close()
	a, err := app.Open(ctx, app.Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if p, ok := a.VerifyToken(tok); !ok || p != "alice" {
		t.Errorf("the App does not accept the Admin's token: %q %v", p, ok)
	}
}

// A grant the store refuses is refused by Admin too, and an unknown id is ErrNotFound.
func TestAdminGrants(t *testing.T) {
	ctx := context.Background()
	m := openAdmin(t, filepath.Join(t.TempDir(), "data"))
	bad := policy.Grant{Principal: "bob", Tool: "local.echo", Resource: "path:a/../b", Effect: policy.Allow}
	if err := app.ValidateGrant(bad); !errors.Is(err, policy.ErrInvalidGrant) {
		t.Errorf("ValidateGrant = %v", err)
	}
	if _, err := m.AddGrant(ctx, bad); !errors.Is(err, policy.ErrInvalidGrant) {
		t.Errorf("AddGrant = %v", err)
	}
	g, err := m.AddGrant(ctx, policy.Grant{Principal: "bob", Tool: "local.echo", Action: "read", Effect: policy.Allow})
	if err != nil {
		t.Fatal(err)
	}
	if gs, _ := m.Grants(ctx); len(gs) != 1 || gs[0].ID != g.ID {
		t.Errorf("grants %+v", gs)
	}
	if err := m.RemoveGrant(ctx, g.ID); err != nil {
		t.Fatal(err)
	}
	if err := m.RemoveGrant(ctx, g.ID); !errors.Is(err, app.ErrNotFound) {
		t.Errorf("removing it twice: %v", err)
	}
}

// VerifyAudit checks the chain and an anchor; an anchor past the head or with another
// hash is a broken chain.
func TestAdminVerifyAudit(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "data")
	m := openAdmin(t, dir)
	if h, err := m.VerifyAudit(ctx, nil); err != nil || h.Events != 0 {
		t.Fatalf("empty log: %+v %v", h, err)
	}
	m.Close()
	a, err := app.Open(ctx, app.Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	tr := mustTurn(t, a, "nobody")
	for i := 0; i < 3; i++ { // refused tool_unavailable, and recorded
		if _, err := tr.CallTool(ctx, &mcpspec.CallRequest{Name: "local.none"}); err != nil {
			t.Fatal(err)
		}
	}
	a.Close()
	m = openAdmin(t, dir)
	h, err := m.VerifyAudit(ctx, nil)
	if err != nil || h.Events != 3 || h.Seq != 3 || len(h.Hash) != 64 {
		t.Fatalf("head %+v %v", h, err)
	}
	if _, err := m.VerifyAudit(ctx, &app.AuditAnchor{Seq: 2, Hash: h.Hash}); err == nil || !strings.Contains(err.Error(), "differs from the anchor") {
		t.Errorf("anchor with another hash: %v", err)
	}
	if _, err := m.VerifyAudit(ctx, &app.AuditAnchor{Seq: 4, Hash: h.Hash}); err == nil || !strings.Contains(err.Error(), "newest events were removed") {
		t.Errorf("anchor past the head: %v", err)
	}
	if _, err := m.VerifyAudit(ctx, &app.AuditAnchor{Seq: 3, Hash: h.Hash}); err != nil {
		t.Errorf("the head as anchor: %v", err)
	}
}
