package app_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/toolgate/toolgate/internal/app"
	"github.com/toolgate/toolgate/internal/kernel"
	"github.com/toolgate/toolgate/internal/mcpserver"
	"github.com/toolgate/toolgate/internal/policy"
	"github.com/toolgate/toolgate/internal/store"
)

// TestTurnStale: a turn is stale once the grants or namespace switches in the
// store changed after it opened — even when the change was made by another
// process through its own store handle, as `toolgate grant rm` does — and a turn
// opened afterwards is not. toolgate serve's /mcp handler ends stale sessions
// (mcpserver.StaleTurn), so a removed grant stops working for open sessions too.
func TestTurnStale(t *testing.T) {
	ctx := context.Background()
	a, dir, g := openWithAliceGrant(t)
	stale := func(tr app.Turn) bool {
		t.Helper()
		st, ok := tr.(mcpserver.StaleTurn)
		if !ok {
			t.Fatal("an app turn does not implement mcpserver.StaleTurn")
		}
		return st.Stale(ctx)
	}
	tr, err := a.OpenTurn(ctx, app.TurnRequest{Principal: "alice", Transport: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if stale(tr) {
		t.Fatal("a turn is stale right after opening")
	}
	other, err := store.Open(ctx, dir) // another process's handle, like the CLI's
	if err != nil {
		t.Fatal(err)
	}
	if err := other.RemoveGrant(ctx, g.ID); err != nil {
		t.Fatal(err)
	}
	if !stale(tr) {
		t.Error("a turn is not stale after its principal's grant was removed")
	}
	fresh, err := a.OpenTurn(ctx, app.TurnRequest{Principal: "alice", Transport: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if stale(fresh) {
		t.Error("a turn opened after the change is stale")
	}
	if err := other.SetNamespaceEnabled(ctx, "local", false); err != nil {
		t.Fatal(err)
	}
	if !stale(fresh) {
		t.Error("a turn is not stale after a namespace was disabled")
	}
	other.Close()
}

// openWithAliceGrant opens an App over a fresh data directory with one local tool
// and a grant of it to alice, closed when the test ends.
func openWithAliceGrant(t *testing.T) (*app.App, string, policy.Grant) {
	t.Helper()
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "data")
	ran := 0
	a, err := app.Open(ctx, app.Options{DataDir: dir, Tools: []*kernel.Tool{localTool(&ran)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	g, err := a.Store().AddGrant(ctx, policy.Grant{Principal: "alice", Tool: "local.*", Action: "*", Effect: policy.Allow})
	if err != nil {
		t.Fatal(err)
	}
	return a, dir, g
}
