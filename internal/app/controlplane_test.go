package app_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/app"
	"github.com/toolgate/toolgate/internal/host"
	"github.com/toolgate/toolgate/internal/hostrelay"
	"github.com/toolgate/toolgate/internal/kernel"
	"github.com/toolgate/toolgate/internal/localtools"
	"github.com/toolgate/toolgate/internal/mcpserver"
	"github.com/toolgate/toolgate/internal/mcpspec"
	"github.com/toolgate/toolgate/internal/policy"
	"github.com/toolgate/toolgate/internal/upstream/upstreamtest"
)

// controlWorld is an App with the control-plane tools wired to it and one real
// fixture upstream, "fx", synced with allow_implicit_invocation false.
func controlWorld(t *testing.T) (*app.App, *hostrelay.Local) {
	t.Helper()
	spec, marker := upstreamtest.Spec(t)
	spec.Name = "fx"
	w := &upstreamWorld{markers: map[string]string{"fx": marker}}
	tools, err := localtools.Build(localtools.Config{ControlPlane: func() localtools.ControlPlane { return app.ControlPlane{A: w.a} }})
	if err != nil {
		t.Fatal(err)
	}
	w.open(t, upstreamtest.NewHost(spec), tools)
	w.sync(t, "fx", true, false)
	return w.a, w.up
}

func callJSON(t *testing.T, tr app.Turn, name, args string, v any) *mcpspec.CallResult {
	t.Helper()
	r, err := tr.CallTool(context.Background(), &mcpspec.CallRequest{Name: name, Arguments: json.RawMessage(args)})
	if err != nil {
		t.Fatal(err)
	}
	if v != nil && !r.IsError {
		var block struct{ Text string }
		if err := json.Unmarshal(r.Content[0], &block); err != nil || json.Unmarshal([]byte(block.Text), v) != nil {
			t.Fatalf("%s answered %s", name, r.Content[0])
		}
	}
	return r
}

func TestControlPlaneTools(t *testing.T) {
	a, _ := controlWorld(t)
	ctx := context.Background()
	tr, err := a.OpenTurn(ctx, app.TurnRequest{Transport: "stdio"})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	tr.(mcpserver.ClientNoter).NoteClient("2025-06-18", json.RawMessage(`{"name":"claude-code","version":"2.0"}`))

	var servers struct{ Servers []app.ServerSummary }
	callJSON(t, tr, "server.list_servers", `{}`, &servers)
	if len(servers.Servers) != 1 {
		t.Fatalf("list_servers %+v", servers)
	}
	s := servers.Servers[0]
	if s.Name != "fx" || s.Runtime.State != "ready" || !s.Runtime.Live || !s.Policy.Enabled || s.Policy.AllowImplicitInvocation ||
		s.ToolsCount == 0 || s.PublishedTools != s.ToolsCount || s.CatalogVersion == 0 {
		t.Fatalf("list_servers: %+v", s)
	}
	var status struct{ Servers []app.ServerSummary }
	callJSON(t, tr, "server.status", `{}`, &status)
	if len(status.Servers) != 1 || status.Servers[0].Name != "fx" {
		t.Fatalf("status servers %+v", status)
	}

	var st app.ServerState
	callJSON(t, tr, "server.read_state", `{"server":"fx"}`, &st)
	if st.Name != "fx" || st.Catalog.Version != s.CatalogVersion || st.Connections != 1 || len(st.Bindings) != s.ToolsCount {
		t.Fatalf("read_state %+v", st)
	}
	if r := callJSON(t, tr, "server.read_state", `{"server":"nope"}`, nil); !r.IsError || r.Meta[mcpspec.MetaCode] != string(kernel.CodeInvalidArguments) {
		t.Fatalf("read_state of an unknown server: %+v", r)
	}

	var clients struct{ Clients []app.Client }
	callJSON(t, tr, "server.list_clients", `{}`, &clients)
	if len(clients.Clients) != 1 {
		t.Fatalf("list_clients %+v", clients)
	}
	c := clients.Clients[0]
	if c.TurnID != tr.ID() || c.Principal != app.DefaultPrincipal || c.Transport != "stdio" || c.ProtocolVersion != "2025-06-18" ||
		!strings.Contains(string(c.ClientInfo), "claude-code") || c.Calls < 4 || c.LastCall == nil {
		t.Fatalf("list_clients %+v", c)
	}
	// A server named like the control plane's namespace cannot take its place.
	a.SyncUpstream(app.UpstreamServer{Name: "server", Enabled: true, Implicit: true}, host.Catalog{Version: 1,
		Tools: []json.RawMessage{json.RawMessage(`{"name":"status","inputSchema":{"type":"object"}}`)}})
	tr2, err := a.OpenTurn(ctx, app.TurnRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var again struct{ Version string }
	if r := callJSON(t, tr2, "server.status", `{}`, &again); r.IsError || r.Raw != nil || again.Version == "" {
		t.Fatalf("server.status after a server named \"server\" synced: %+v", r)
	}
	tr2.Close()
	a.RemoveUpstream("server")
	// Nor can one named like toolgate's own namespace, and removing either changes nothing.
	a.SyncUpstream(app.UpstreamServer{Name: "toolgate", Enabled: true, Implicit: true}, host.Catalog{Version: 1,
		Tools: []json.RawMessage{json.RawMessage(`{"name":"server_status","inputSchema":{"type":"object"}}`)}})
	for _, u := range a.UpstreamTools() {
		if u.Server.Name == "server" || u.Server.Name == "toolgate" {
			t.Errorf("a server named %q was published: %+v", u.Server.Name, u)
		}
	}
	tr2, err = a.OpenTurn(ctx, app.TurnRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if r := callJSON(t, tr2, "server.status", `{}`, &again); r.IsError || r.Raw != nil {
		t.Fatalf("server.status after RemoveUpstream(server): %+v", r)
	}
	tr2.Close()
	other, err := a.OpenTurn(ctx, app.TurnRequest{Transport: "http"})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(a.Clients()); n != 2 {
		t.Errorf("%d clients with two turns open", n)
	}
	other.Close()
	if n := len(a.Clients()); n != 1 {
		t.Errorf("%d clients after one closed", n)
	}
}

// server.manage_backup is a write: the default server.* read grant does not cover it.
// Granted, it makes owner-only copies that open as databases, lists and deletes them,
// and takes no path from the caller.
func TestManageBackup(t *testing.T) {
	a, _ := controlWorld(t)
	ctx := context.Background()
	tr, err := a.OpenTurn(ctx, app.TurnRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if r := callJSON(t, tr, "server.manage_backup", `{"action":"create"}`, nil); r.Meta[mcpspec.MetaCode] != string(kernel.CodeNoMatchingGrant) {
		t.Fatalf("manage_backup under the default grants: %+v", r)
	}
	tr.Close()
	if _, err := a.Store().AddGrant(ctx, policy.Grant{Principal: app.DefaultPrincipal, Tool: "server.manage_backup", Action: "write", Effect: policy.Allow}); err != nil {
		t.Fatal(err)
	}
	tr, err = a.OpenTurn(ctx, app.TurnRequest{})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	var created struct {
		Created app.Backup
		Dir     string
	}
	callJSON(t, tr, "server.manage_backup", `{"action":"create"}`, &created)
	p := filepath.Join(a.Dir(), app.BackupDir, created.Created.Name)
	fi, err := os.Stat(p)
	if err != nil || fi.Mode().Perm() != 0o600 || fi.Size() != created.Created.Size {
		t.Fatalf("backup %+v: %v %v", created, fi, err)
	}
	if di, err := os.Stat(filepath.Dir(p)); err != nil || di.Mode().Perm() != 0o700 {
		t.Fatalf("backups dir: %v %v", di, err)
	}
	var list struct{ Backups []app.Backup }
	callJSON(t, tr, "server.manage_backup", `{"action":"list"}`, &list)
	if len(list.Backups) != 1 || list.Backups[0].Name != created.Created.Name {
		t.Fatalf("list %+v", list)
	}
	for _, bad := range []string{"../toolgate.db", "toolgate.db", "/etc/passwd", created.Created.Name + "/x", strings.Replace(created.Created.Name, "toolgate-", "toolgate-../", 1)} {
		args, _ := json.Marshal(map[string]string{"action": "delete", "name": bad})
		if r := callJSON(t, tr, "server.manage_backup", string(args), nil); r.Meta[mcpspec.MetaCode] != string(kernel.CodeInvalidArguments) {
			t.Errorf("delete %q: %+v", bad, r)
		}
	}
	if _, err := os.Stat(filepath.Join(a.Dir(), "toolgate.db")); err != nil {
		t.Fatalf("the database: %v", err)
	}
	args, _ := json.Marshal(map[string]string{"action": "delete", "name": created.Created.Name})
	if r := callJSON(t, tr, "server.manage_backup", string(args), nil); r.IsError {
		t.Fatalf("delete: %+v", r)
	}
	if _, err := os.Stat(p); !os.IsNotExist(err) {
		t.Fatalf("deleted backup still there: %v", err)
	}
	if r := callJSON(t, tr, "server.manage_backup", string(args), nil); r.Meta[mcpspec.MetaCode] != string(kernel.CodeInvalidArguments) {
		t.Errorf("deleting twice: %+v", r)
	}
	// A backups directory others can write to is refused.
	if err := os.Chmod(filepath.Dir(p), 0o777); err != nil {
		t.Fatal(err)
	}
	if r := callJSON(t, tr, "server.manage_backup", `{"action":"create"}`, nil); !r.IsError {
		t.Errorf("create into a world-writable backups directory: %+v", r)
	}
}
