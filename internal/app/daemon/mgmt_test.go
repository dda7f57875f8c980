package daemon_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/app"
	"github.com/toolgate/toolgate/internal/app/daemon"
	"github.com/toolgate/toolgate/internal/mgmt"
	"github.com/toolgate/toolgate/internal/policy"
	"github.com/toolgate/toolgate/internal/upstream/upstreamtest"
)

func rpc(t *testing.T, url, token, body string) (int, string) {
	t.Helper()
	return do(t, "POST", url+"/v1/rpc", token, body)
}

// TestManagementRoute: /v1/rpc is served by toolgate serve behind the guard: the
// owner token manages, a principal's token only with an allow grant on
// toolgate.admin (taking effect at the next request), refusals come from the one
// error map; a socket gets the notifications of a change; the daemon file names the
// daemon while it runs and is gone after Shutdown.
func TestManagementRoute(t *testing.T) {
	a := openApp(t)
	d, err := daemon.Start(a, daemon.Options{Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	down := false
	defer func() {
		if !down {
			d.Shutdown(context.Background(), time.Second)
		}
	}()
	owner, _, _ := a.OwnerToken()
	info, ok, err := app.FindDaemon(a.Dir())
	if err != nil || !ok || info.URL != d.URL() || info.PID != os.Getpid() {
		t.Fatalf("daemon file: %+v %v %v", info, ok, err)
	}
	if fi, err := os.Stat(filepath.Join(a.Dir(), app.DaemonFile)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("daemon file mode: %v %v", fi, err)
	}

	list := `{"jsonrpc":"2.0","id":1,"method":"mcp/list"}`
	if status, body := rpc(t, d.URL(), "", list); status != 401 || !strings.Contains(body, `"unauthorized"`) {
		t.Fatalf("no token: %d %s", status, body)
	}
	if status, body := rpc(t, d.URL(), owner, list); status != 200 || !strings.Contains(body, `"servers":[]`) {
		t.Fatalf("owner: %d %s", status, body)
	}
	tok, err := a.MintToken("ops", "s1", 600)
	if err != nil {
		t.Fatal(err)
	}
	if status, body := rpc(t, d.URL(), tok, list); status != 403 || !strings.Contains(body, `"forbidden"`) {
		t.Fatalf("non-admin: %d %s", status, body)
	}
	adm, err := app.OpenAdmin(context.Background(), a.Dir(), "")
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	g, err := adm.AddGrant(context.Background(), policy.Grant{Principal: "ops", Tool: app.AdminToolID, Action: "*", Effect: policy.Allow})
	if err != nil {
		t.Fatal(err)
	}
	if status, body := rpc(t, d.URL(), tok, list); status != 200 {
		t.Fatalf("admin: %d %s", status, body)
	}
	if err := adm.RemoveGrant(context.Background(), g.ID); err != nil {
		t.Fatal(err)
	}
	if status, _ := rpc(t, d.URL(), tok, list); status != 403 {
		t.Fatalf("after revoking the grant: %d", status)
	}
	if status, body := rpc(t, d.URL(), owner, `[`+list+`]`); status != 400 || !strings.Contains(body, "invalid_request") {
		t.Fatalf("batch: %d %s", status, body)
	}
	// toolgate.admin is never published as a tool.
	if _, body := get(t, d.URL()+"/v1/tools", owner); strings.Contains(body, app.AdminToolID) {
		t.Fatalf("toolgate.admin is published: %s", body)
	}

	// A socket sees the notification of an install made over POST.
	sub := mgmt.NewClient(d.URL(), owner, nil)
	got := make(chan mgmt.Notification, 64)
	stop, err := sub.Subscribe(func(n mgmt.Notification) { got <- n })
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	marker := upstreamtest.Marker(t)
	cfg, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{"fx": map[string]any{
		"command": upstreamtest.Fixture(t), "args": []string{"-marker", marker}}}})
	res, err := sub.Install(context.Background(), mgmt.Caller{}, mgmt.InstallParams{ConfigJSON: string(cfg)})
	if err != nil || res.Status != mgmt.InstallOK {
		t.Fatalf("install over POST: %+v %v", res, err)
	}
	// The daemon also starts the new server to fetch its first catalogue
	// (docs/management.md, "First catalogue"): its status and catalogue notifications
	// may come before or after mcp/changed.
	sawCatalog := false
	changedTimeout := time.After(10 * time.Second)
	for changed := false; !changed; {
		select {
		case n := <-got:
			switch n := n.(type) {
			case *mgmt.StatusChanged:
			case *mgmt.CatalogChanged:
				sawCatalog = sawCatalog || (n.ToolsCount > 0 && n.CatalogVersion > 0)
			case *mgmt.Changed:
				if n.Change != mgmt.ChangeInstalled || n.Name != "fx" || n.SnapshotVersion == 0 {
					t.Fatalf("notification %#v", n)
				}
				changed = true
			default:
				t.Fatalf("notification %#v", n)
			}
		case <-changedTimeout:
			t.Fatal("no mcp/changed on the socket")
		}
	}
	// A restart is accepted at once; its transitions and the catalogue (unless the first
	// fetch already sent it: the same content is the same version) follow on the socket.
	if _, err := sub.Restart(context.Background(), mgmt.Caller{}, mgmt.RestartParams{ServerRef: mgmt.ServerRef{Name: "fx"}}); err != nil {
		t.Fatal(err)
	}
	sawReady := false
	timeout := time.After(20 * time.Second)
	for !sawReady || !sawCatalog {
		select {
		case n := <-got:
			switch n := n.(type) {
			case *mgmt.StatusChanged:
				if n.State == "ready" && n.Live && n.ServerID == res.Servers[0].Server.ID {
					sawReady = true
				}
			case *mgmt.CatalogChanged:
				if n.ToolsCount > 0 && n.CatalogVersion > 0 {
					sawCatalog = true
				}
			}
		case <-timeout:
			t.Fatalf("ready %v, catalogue %v: notifications missing", sawReady, sawCatalog)
		}
	}
	stop()
	down = true
	if _, err := d.Shutdown(context.Background(), time.Second); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := app.FindDaemon(a.Dir()); ok {
		t.Fatal("the daemon file outlived the daemon")
	}
}
