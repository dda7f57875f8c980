package app_test

import (
	"context"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/app"
	"github.com/toolgate/toolgate/internal/mgmt"
	"github.com/toolgate/toolgate/internal/policy"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/internal/upstream/upstreamtest"
)

// A server installed with no catalogue is started once to fetch one, so its tools can
// be published; the next App over the data directory publishes them from the persisted
// catalogue at once and starts nothing until a call (start stays lazy).
func TestFirstCatalogThenLazy(t *testing.T) {
	dir := testenv.PrivateDir(t)
	marker := upstreamtest.Marker(t)
	ctx := context.Background()
	a := openManaged(t, dir)
	implicit := true
	if _, err := mgmt.Checked(a).Install(ctx, owner, mgmt.InstallParams{ConfigJSON: fixtureConfig(t, "fx", marker, "c"), AllowImplicitInvocation: &implicit}); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	a.WaitFirstCatalogs(wctx)
	cancel()
	if n := len(a.UpstreamTools()); n != 1 {
		t.Fatalf("after the first fetch, %d servers published", n)
	}
	// The fetched catalogue is persisted before the App closes (the host saves it after
	// publishing it; under load that can trail the publication).
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, ok, err := a.Store().LoadMCPCatalog(ctx, "fx"); err == nil && ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the first catalogue was never persisted")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := a.Store().AddGrant(ctx, policy.Grant{Principal: app.DefaultPrincipal, Tool: "fx.*", Action: "execute", Effect: policy.Allow}); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	upstreamtest.WaitGone(t, marker, 10*time.Second)

	b := openManaged(t, dir)
	defer b.Close()
	wctx, cancel = context.WithTimeout(ctx, 20*time.Second)
	b.WaitFirstCatalogs(wctx)
	cancel()
	tools := b.UpstreamTools()
	if len(tools) != 1 || len(tools[0].Bindings) == 0 {
		t.Fatalf("from the persisted catalogue: %+v", tools)
	}
	if n := len(upstreamtest.Processes(t, marker)); n != 0 {
		t.Fatalf("%d processes started with a persisted catalogue; start is lazy", n)
	}
	tr, err := b.OpenTurn(ctx, app.TurnRequest{})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if names := listNames(t, tr); !contains(names, "fx.echo") {
		t.Fatalf("published without a start: %v", names)
	}
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}
