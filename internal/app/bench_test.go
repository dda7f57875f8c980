package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/toolgate/toolgate/internal/app"
	"github.com/toolgate/toolgate/internal/host"
	"github.com/toolgate/toolgate/internal/kernel"
	"github.com/toolgate/toolgate/internal/mcpspec"
	"github.com/toolgate/toolgate/internal/mgmt"
)

// BenchmarkAppCallAuthorized is one authorized call end to end below the transport:
// the kernel plus the durable (fsynced) audit append to the SQLite store.
func BenchmarkAppCallAuthorized(b *testing.B) {
	ctx := context.Background()
	tool := &kernel.Tool{ID: "local.noop", InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}}}`),
		Run: func(context.Context, *kernel.Call) (*kernel.Output, error) { return &kernel.Output{Text: "ok"}, nil }}
	a, err := app.Open(ctx, app.Options{DataDir: filepath.Join(b.TempDir(), "data"), Tools: []*kernel.Tool{tool}})
	if err != nil {
		b.Fatal(err)
	}
	defer a.Close()
	tr, err := a.OpenTurn(ctx, app.TurnRequest{})
	if err != nil {
		b.Fatal(err)
	}
	req := &mcpspec.CallRequest{Name: "local.noop", Arguments: json.RawMessage(`{"path":"docs/a.md"}`)}
	b.ReportAllocs()
	for b.Loop() {
		r, err := tr.CallTool(ctx, req)
		if err != nil || r.IsError {
			b.Fatalf("%v %+v", err, r)
		}
	}
}

// BenchmarkManageList is mcp/list over 20 installed servers (not started): the snapshot
// version, the store's rows and one host snapshot, with each definition read back.
func BenchmarkManageList(b *testing.B) {
	ctx := context.Background()
	a, err := app.Open(ctx, app.Options{DataDir: filepath.Join(b.TempDir(), "data")})
	if err != nil {
		b.Fatal(err)
	}
	defer a.Close()
	m := mgmt.Checked(a)
	servers := map[string]any{}
	for i := range 20 {
		servers[fmt.Sprintf("s%02d", i)] = map[string]any{"command": "/bin/true", "args": []string{"-x"}, "env": map[string]string{"K": "v"}}
	}
	doc, _ := json.Marshal(map[string]any{"mcpServers": servers})
	if res, err := m.Install(ctx, mgmt.Caller{Principal: "default", Owner: true}, mgmt.InstallParams{ConfigJSON: string(doc)}); err != nil || res.Status != mgmt.InstallOK {
		b.Fatalf("%+v %v", res, err)
	}
	b.ReportAllocs()
	for b.Loop() {
		r, err := m.List(ctx, mgmt.Caller{}, mgmt.ListParams{})
		if err != nil || len(r.Servers) != 20 {
			b.Fatal(err)
		}
	}
}

// BenchmarkSyncUpstreamScreen is the trust step of one listing of 200 tools already
// pinned (docs/trust.md): each listing (a list_changed, a restart, or another process
// moving the policy version) reads the server's policy, pins and holds, parses and
// scans every definition, and compares it with its pin. The catalogue's version moves
// each time, so the tools are also built and registered (the kernel's compile): the
// whole cost of a catalogue change now.
func BenchmarkSyncUpstreamScreen(b *testing.B) {
	ctx := context.Background()
	a, err := app.Open(ctx, app.Options{DataDir: filepath.Join(b.TempDir(), "data")})
	if err != nil {
		b.Fatal(err)
	}
	defer a.Close()
	cat := host.Catalog{}
	for i := range 200 {
		cat.Tools = append(cat.Tools, json.RawMessage(fmt.Sprintf(`{"name":"tool_%d","description":"Reads the item with the given id and returns it as JSON.",`+
			`"inputSchema":{"type":"object","properties":{"id":{"type":"string","description":"the item's id"},"limit":{"type":"integer","minimum":1}},"required":["id"]}}`, i)))
	}
	srv := app.UpstreamServer{Name: "srv", Enabled: true, Implicit: true}
	a.SyncUpstream(srv, cat) // pins them all
	b.ReportAllocs()
	for b.Loop() {
		cat.Version++
		cat.Digest = fmt.Sprint(cat.Version)
		a.SyncUpstream(srv, cat)
	}
	if got := a.UpstreamTools(); len(got) != 1 || len(got[0].Bindings) != 200 {
		b.Fatalf("published %+v", got)
	}
}

// BenchmarkResyncUnchanged is what each process does for a server of 200 tools when
// the policy version moved for something else (a grant): it reads the server's trust
// state and finds it as its last reconciliation left it.
func BenchmarkResyncUnchanged(b *testing.B) {
	ctx := context.Background()
	a, err := app.Open(ctx, app.Options{DataDir: filepath.Join(b.TempDir(), "data")})
	if err != nil {
		b.Fatal(err)
	}
	defer a.Close()
	cat := host.Catalog{Version: 1, Digest: "1"}
	for i := range 200 {
		cat.Tools = append(cat.Tools, json.RawMessage(fmt.Sprintf(`{"name":"tool_%d","description":"Reads the item with the given id and returns it as JSON.",`+
			`"inputSchema":{"type":"object","properties":{"id":{"type":"string","description":"the item's id"},"limit":{"type":"integer","minimum":1}},"required":["id"]}}`, i)))
	}
	a.SyncUpstream(app.UpstreamServer{Name: "srv", Enabled: true, Implicit: true}, cat)
	b.ReportAllocs()
	for b.Loop() {
		app.ResyncTrust(a)
	}
}
