package app_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/toolgate/toolgate/internal/app"
	"github.com/toolgate/toolgate/internal/kernel"
	"github.com/toolgate/toolgate/internal/mcpspec"
	"github.com/toolgate/toolgate/internal/policy"
	"github.com/toolgate/toolgate/internal/store"
)

// openWithOther opens an App and, on the same data directory, a second Store standing
// for another process (`toolgate grant add` while serve runs): its own connections and
// its own prepared statements.
func openWithOther(t *testing.T) (*app.App, *store.Store) {
	t.Helper()
	ctx := context.Background()
	dir := dataDir(t)
	ran := 0
	a, err := app.Open(ctx, app.Options{DataDir: dir, Tools: []*kernel.Tool{localTool(&ran)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	other, err := store.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() })
	return a, other
}

// Turns opened while nothing changes cost no reload; a grant or namespace change made
// through another store is seen by the very next turn, with exactly one reload.
func TestRefreshReloadsOnlyWhenSomethingChanged(t *testing.T) {
	ctx := context.Background()
	a, other := openWithOther(t)
	loads := app.PolicyLoads(a)
	if loads != 1 {
		t.Errorf("Open loaded the policy %d times, want 1", loads)
	}
	for range 20 {
		if n := listNames(t, mustTurn(t, a, "bob")); len(n) != 0 {
			t.Fatalf("bob sees %v", n)
		}
	}
	if got := app.PolicyLoads(a); got != loads {
		t.Errorf("20 turns with no change reloaded %d times, want 0", got-loads)
	}
	expectLoad := func(what string) {
		t.Helper()
		loads++
		if got := app.PolicyLoads(a); got != loads {
			t.Errorf("%s: %d reloads, want 1", what, got-(loads-1))
		}
		loads = app.PolicyLoads(a)
	}

	g, err := other.AddGrant(ctx, policy.Grant{Principal: "bob", Tool: "local.echo", Action: "execute", Effect: policy.Allow})
	if err != nil {
		t.Fatal(err)
	}
	if n := listNames(t, mustTurn(t, a, "bob")); !slices.Equal(n, []string{"local.echo"}) {
		t.Errorf("after another store added a grant bob sees %v", n)
	}
	expectLoad("grant added elsewhere")
	mustTurn(t, a, "bob")
	if got := app.PolicyLoads(a); got != loads {
		t.Errorf("a turn after the reload reloaded again")
	}

	if err := other.SetNamespaceEnabled(ctx, "local", false); err != nil {
		t.Fatal(err)
	}
	if n := listNames(t, mustTurn(t, a, "bob")); len(n) != 0 {
		t.Errorf("after another store disabled the namespace bob sees %v", n)
	}
	expectLoad("namespace disabled elsewhere")
	if err := other.SetNamespaceEnabled(ctx, "local", false); err != nil { // already off: no change
		t.Fatal(err)
	}
	mustTurn(t, a, "bob")
	if got := app.PolicyLoads(a); got != loads {
		t.Errorf("re-disabling a disabled namespace caused %d reloads", got-loads)
	}
	if err := other.SetNamespaceEnabled(ctx, "local", true); err != nil {
		t.Fatal(err)
	}
	if n := listNames(t, mustTurn(t, a, "bob")); len(n) != 1 {
		t.Errorf("after the namespace came back bob sees %v", n)
	}
	expectLoad("namespace enabled elsewhere")

	if err := other.RemoveGrant(ctx, g.ID); err != nil {
		t.Fatal(err)
	}
	if n := listNames(t, mustTurn(t, a, "bob")); len(n) != 0 {
		t.Errorf("after another store removed the grant bob sees %v", n)
	}
	expectLoad("grant removed elsewhere")

	// Writes that do not touch the policy (audit events, settings) cause no reload.
	tr := mustTurn(t, a, app.DefaultPrincipal)
	for range 5 {
		if r, err := tr.CallTool(ctx, &mcpspec.CallRequest{Name: "local.echo", Arguments: json.RawMessage(`{}`)}); err != nil || r.IsError {
			t.Fatalf("local.echo: %v %+v", err, r)
		}
		if err := other.SetMeta(ctx, "k", "v"); err != nil {
			t.Fatal(err)
		}
		mustTurn(t, a, app.DefaultPrincipal)
	}
	if got := app.PolicyLoads(a); got != loads {
		t.Errorf("audit appends and meta writes caused %d reloads", got-loads)
	}
}

// A grant that does not compile keeps failing every turn closed (the failure is not
// remembered as loaded), and the first turn after it is removed succeeds.
func TestRefreshKeepsFailingClosedUntilFixed(t *testing.T) {
	ctx := context.Background()
	a, other := openWithOther(t)
	db, err := sql.Open("sqlite", other.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, `INSERT INTO grants (id, principal, tool, action, resource, effect, note, created_at)
		VALUES ('g_bad', 'bob', 'local.echo', '*', 'path:a/../../b/', 'deny', '', '2026-01-01T00:00:00.000000Z')`); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := a.OpenTurn(ctx, app.TurnRequest{Principal: "bob"}); err == nil {
			t.Fatalf("turn %d opened with an uncompilable grant in the store", i)
		}
	}
	if err := other.RemoveGrant(ctx, "g_bad"); err != nil {
		t.Fatal(err)
	}
	mustTurn(t, a, "bob")
}

// Many turns open concurrently while another store keeps changing grants: no race
// (under -race), no error, and once the changes stop the next turn sees the final
// state exactly.
func TestRefreshConcurrentWithChanges(t *testing.T) {
	ctx := context.Background()
	a, other := openWithOther(t)
	const rounds = 30
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := a.OpenTurn(ctx, app.TurnRequest{Principal: "bob"}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	var last policy.Grant
	for i := range rounds {
		g, err := other.AddGrant(ctx, policy.Grant{Principal: "bob", Tool: "local.echo", Action: "execute", Effect: policy.Allow,
			Note: fmt.Sprint(i)})
		if err != nil {
			t.Fatal(err)
		}
		if i < rounds-1 {
			if err := other.RemoveGrant(ctx, g.ID); err != nil {
				t.Fatal(err)
			}
		}
		last = g
	}
	close(stop)
	wg.Wait()
	if n := listNames(t, mustTurn(t, a, "bob")); !slices.Equal(n, []string{"local.echo"}) {
		t.Errorf("after the changes bob sees %v", n)
	}
	if err := other.RemoveGrant(ctx, last.ID); err != nil {
		t.Fatal(err)
	}
	if n := listNames(t, mustTurn(t, a, "bob")); len(n) != 0 {
		t.Errorf("after the last grant was removed bob sees %v", n)
	}
}

// One request reads the store once, whatever it does: open a turn (the HTTP API, a
// stateless MCP request), check a session's staleness, make calls. Without
// app.Request each step reads: a /v1/tools/invoke read it twice, a /mcp tools/call
// twice (the staleness check, then the call).
func TestRefreshOncePerRequest(t *testing.T) {
	a, _ := openWithOther(t)
	steps := func(ctx context.Context) {
		tr, err := a.OpenTurn(ctx, app.TurnRequest{Principal: "default"})
		if err != nil {
			t.Fatal(err)
		}
		defer tr.Close()
		if st, ok := tr.(interface{ Stale(context.Context) bool }); !ok || st.Stale(ctx) {
			t.Fatal("a fresh turn is stale, or cannot say")
		}
		for range 3 {
			if _, err := tr.CallTool(ctx, &mcpspec.CallRequest{Name: "local.echo", Arguments: json.RawMessage(`{}`)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	before := app.PolicyReads(a)
	steps(context.Background())
	if got := app.PolicyReads(a) - before; got != 5 {
		t.Errorf("outside a request: %d reads, want 5 (one per step)", got)
	}
	before = app.PolicyReads(a)
	steps(a.Request(context.Background()))
	if got := app.PolicyReads(a) - before; got != 1 {
		t.Errorf("one request: %d reads, want 1", got)
	}
}

// A change made between two requests reaches the second: the memo is the request's.
func TestRequestSeesChangesOfEarlierRequests(t *testing.T) {
	ctx := context.Background()
	a, other := openWithOther(t)
	if n := listNames(t, mustTurnCtx(t, a, a.Request(ctx), "bob")); len(n) != 0 {
		t.Fatalf("bob sees %v", n)
	}
	if _, err := other.AddGrant(ctx, policy.Grant{Principal: "bob", Tool: "local.echo", Action: "*", Effect: policy.Allow}); err != nil {
		t.Fatal(err)
	}
	if n := listNames(t, mustTurnCtx(t, a, a.Request(ctx), "bob")); len(n) != 1 {
		t.Errorf("the next request does not see the new grant: %v", n)
	}
}

func mustTurnCtx(t *testing.T, a *app.App, ctx context.Context, principal string) app.Turn {
	t.Helper()
	tr, err := a.OpenTurn(ctx, app.TurnRequest{Principal: principal})
	if err != nil {
		t.Fatal(err)
	}
	return tr
}
