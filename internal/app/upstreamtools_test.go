package app_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/app"
	"github.com/toolgate/toolgate/internal/app/daemon"
	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/harness"
	"github.com/toolgate/toolgate/internal/host"
	"github.com/toolgate/toolgate/internal/hostrelay"
	"github.com/toolgate/toolgate/internal/kernel"
	"github.com/toolgate/toolgate/internal/localtools"
	"github.com/toolgate/toolgate/internal/mcpserver"
	"github.com/toolgate/toolgate/internal/mcpspec"
	"github.com/toolgate/toolgate/internal/policy"
	"github.com/toolgate/toolgate/internal/upstream"
	"github.com/toolgate/toolgate/internal/upstream/upstreamtest"
	"github.com/toolgate/toolgate/internal/upstream/upstreamtest/fixturedata"
)

// upstreamWorld is an App whose upstream tools call a host of real fixture processes,
// one per server name, each with its own argv marker.
type upstreamWorld struct {
	a       *app.App
	up      *hostrelay.Local
	markers map[string]string
}

func newUpstreamWorld(t *testing.T, servers ...string) *upstreamWorld {
	t.Helper()
	w := &upstreamWorld{markers: map[string]string{}}
	w.open(t, upstreamtest.NewHost(w.specs(t, servers)...), nil)
	return w
}

// specs are fixture processes started with args, one per server name, each marked.
func (w *upstreamWorld) specs(t *testing.T, servers []string, args ...string) []upstream.Spec {
	t.Helper()
	var specs []upstream.Spec
	for _, s := range servers {
		spec, marker := upstreamtest.Spec(t, args...)
		spec.Name = s
		w.markers[s] = marker
		specs = append(specs, spec)
	}
	return specs
}

// open opens w's App with tools over a host newHost builds, and closes both when the
// test ends, checking that no process of w.markers is left.
func (w *upstreamWorld) open(t *testing.T, newHost hostrelay.NewHostFunc, tools []*kernel.Tool) {
	t.Helper()
	w.openAt(t, dataDir(t), newHost, tools)
	t.Cleanup(func() { w.close(t) })
}

// openAt is open over the data directory dir, left open: the test closes it.
func (w *upstreamWorld) openAt(t *testing.T, dir string, newHost hostrelay.NewHostFunc, tools []*kernel.Tool) {
	t.Helper()
	var err error
	w.up, err = hostrelay.NewLocal(context.Background(), newHost, nil)
	if err != nil {
		t.Fatal(err)
	}
	w.a, err = app.Open(context.Background(), app.Options{DataDir: dir, Tools: tools})
	if err != nil {
		w.up.Close(context.Background())
		t.Fatal(err)
	}
	app.UseUpstreams(w.a, w.up)
}

// close closes w's App and host and checks that no process of w.markers is left.
func (w *upstreamWorld) close(t *testing.T) {
	t.Helper()
	w.a.Close()
	w.up.Close(context.Background())
	for _, m := range w.markers {
		upstreamtest.WaitGone(t, m, 5*time.Second)
	}
}

// sync fetches server's catalogue and publishes it, with the given policy.
func (w *upstreamWorld) sync(t *testing.T, server string, enabled, implicit bool) {
	t.Helper()
	cat, err := w.up.RefreshCatalog(context.Background(), server)
	if err != nil {
		t.Fatal(err)
	}
	w.a.SyncUpstream(app.UpstreamServer{Name: server, Enabled: enabled, Implicit: implicit}, cat)
}

func (w *upstreamWorld) grant(t *testing.T, tool string) {
	t.Helper()
	if _, err := w.a.Store().AddGrant(context.Background(), policy.Grant{Principal: app.DefaultPrincipal, Tool: tool, Action: "*", Effect: policy.Allow}); err != nil {
		t.Fatal(err)
	}
}

func (w *upstreamWorld) turn(t *testing.T, sel ...kernel.Selection) app.Turn {
	t.Helper()
	tr, err := w.a.OpenTurn(context.Background(), app.TurnRequest{Transport: "test", Selections: sel})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr
}

// listed is the turn's published names of the fixture servers' tools.
func listed(t *testing.T, tr app.Turn) []string {
	t.Helper()
	var out []string
	for _, n := range listNames(t, tr) {
		if strings.HasPrefix(n, "fx") {
			out = append(out, n)
		}
	}
	return out
}

func post(t *testing.T, url, token, session string, body string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
		req.Header.Set("MCP-Protocol-Version", "2025-06-18")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

// sseData returns the data of the last SSE event in b, or b itself for a JSON body.
func sseData(b []byte) []byte {
	i := bytes.LastIndex(b, []byte("data: "))
	if i < 0 {
		return b
	}
	b = b[i+len("data: "):]
	if j := bytes.IndexByte(b, '\n'); j >= 0 {
		b = b[:j]
	}
	return b
}

// A real upstream's tool is called through /mcp and /v1/tools/invoke, and what the
// caller gets is the upstream's result, byte for byte.
func TestUpstreamToolThroughTheDaemon(t *testing.T) {
	w := newUpstreamWorld(t, "fx")
	w.grant(t, "fx.*")
	w.sync(t, "fx", true, true)
	ctx := context.Background()
	direct, err := w.up.Call(ctx, "fx", "tools/call", json.RawMessage(`{"name":"awkward","arguments":{}}`), host.CallOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, direct); err != nil {
		t.Fatal(err)
	}
	want := compact.String()
	if want != fixturedata.AwkwardResult {
		t.Fatalf("the fixture answered %s", want)
	}
	// The published tool is the upstream's object, name replaced, _meta added.
	wantTool := `{"name":"fx.awkward",` + strings.TrimPrefix(fixturedata.AwkwardTool, `{"name":"awkward",`)
	wantTool = strings.TrimSuffix(wantTool, "}") + `,"_meta":{"toolgate/namespace":"fx","toolgate/source":"fx"}}`

	d, err := daemon.Start(w.a, daemon.Options{Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		d.Shutdown(sctx, time.Second)
	})
	owner, _, err := w.a.OwnerToken()
	if err != nil {
		t.Fatal(err)
	}

	resp, body := post(t, d.URL()+"/v1/tools/invoke", owner, "", `{"name":"fx.awkward","arguments":{"n":1.50}}`)
	if resp.StatusCode != 200 || strings.TrimSpace(string(body)) != want {
		t.Fatalf("/v1/tools/invoke: %d\n%s\nwant the upstream's\n%s", resp.StatusCode, body, want)
	}

	resp, body = post(t, d.URL()+"/mcp", owner, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != 200 || sid == "" {
		t.Fatalf("initialize: %d %s", resp.StatusCode, body)
	}
	post(t, d.URL()+"/mcp", owner, sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	resp, body = post(t, d.URL()+"/mcp", owner, sid, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	if resp.StatusCode != 200 || !bytes.Contains(body, []byte(wantTool)) {
		t.Fatalf("tools/list: %d %s", resp.StatusCode, body)
	}
	resp, body = post(t, d.URL()+"/mcp", owner, sid, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"fx.awkward","arguments":{"n":1.50}}}`)
	var rpc struct{ Result json.RawMessage }
	if err := json.Unmarshal(sseData(body), &rpc); err != nil || resp.StatusCode != 200 {
		t.Fatalf("tools/call: %d %s", resp.StatusCode, body)
	}
	if string(rpc.Result) != want {
		t.Fatalf("/mcp result\n%s\nwant the upstream's\n%s", rpc.Result, want)
	}
	// The upstream's progress reaches the client on the call's SSE stream, with the
	// client's own token.
	_, body = post(t, d.URL()+"/mcp", owner, sid, `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"fx.progress","arguments":{"steps":2},"_meta":{"progressToken":"p-7"}}}`)
	if n := bytes.Count(body, []byte(`"method":"notifications/progress","params":{"progressToken":"p-7"`)); n != 2 {
		t.Fatalf("%d progress notifications for p-7 in\n%s", n, body)
	}
	// The call is audited as execute on mcp:fx.
	evs, err := w.a.Audit(ctx, audit.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	var n int
	for _, e := range evs {
		if e.Tool == "fx.awkward" && e.Resource == "mcp:fx" && e.Action == "execute" && e.Decision == "allowed" {
			n++
		}
	}
	if n != 2 {
		t.Errorf("%d allowed events for fx.awkward on mcp:fx, want 2", n)
	}
}

// implicit=false: published only to a turn that selects the server or the tool; a
// grant is still needed; disabling hides the tools from new turns.
func TestUpstreamPolicy(t *testing.T) {
	w := newUpstreamWorld(t, "fx")
	w.sync(t, "fx", true, false)
	if got := listed(t, w.turn(t)); len(got) != 0 {
		t.Fatalf("implicit=false, no grant, no selection: %v", got)
	}
	tr := w.turn(t, kernel.Selection{Kind: kernel.SelectServer, Server: "fx"})
	if got := listed(t, tr); len(got) != 0 {
		t.Fatalf("selected without a grant: %v", got)
	}
	if d := app.Selections(tr); len(d) != 1 || d[0].Reason != kernel.RejectNotGranted {
		t.Fatalf("selection without a grant: %+v", d)
	}
	w.grant(t, "fx.*")
	if got := listed(t, w.turn(t)); len(got) != 0 {
		t.Fatalf("implicit=false, granted, not selected: %v", got)
	}
	tr = w.turn(t, kernel.Selection{Kind: kernel.SelectTool, Server: "fx", RawTool: "echo"})
	if got := listed(t, tr); !slices.Equal(got, []string{"fx.echo"}) {
		t.Fatalf("mcpTool=fx/echo: %v", got)
	}
	r, err := tr.CallTool(context.Background(), &mcpspec.CallRequest{Name: "fx.echo", Arguments: json.RawMessage(`{"text":"hi"}`)})
	if err != nil || r.IsError || !bytes.Contains(r.Raw, []byte(`"hi"`)) {
		t.Fatalf("selected call: %v %+v %s", err, r, r.Raw)
	}
	if got := listed(t, w.turn(t, kernel.Selection{Kind: kernel.SelectServer, Server: "fx"})); len(got) < 5 {
		t.Fatalf("mcpServer=fx: %v", got)
	}
	w.sync(t, "fx", true, true)
	if got := listed(t, w.turn(t)); len(got) < 5 {
		t.Fatalf("implicit=true: %v", got)
	}
	w.sync(t, "fx", false, true)
	if got := listed(t, w.turn(t, kernel.Selection{Kind: kernel.SelectServer, Server: "fx"})); len(got) != 0 {
		t.Fatalf("disabled: %v", got)
	}
	if got := w.a.CallableName("fx", "echo"); got != "fx.echo" {
		t.Errorf("CallableName(fx, echo) = %q", got)
	}
	w.a.RemoveUpstream("fx")
	if got := listed(t, w.turn(t)); len(got) != 0 {
		t.Fatalf("removed: %v", got)
	}
	if got := w.a.CallableName("fx", "Send Email"); got != "fx.Send_Email" {
		t.Errorf("CallableName of a tool not published = %q", got)
	}
}

// An upstream that dies mid-call fails that call with upstream_crashed, not at a
// timeout; another server's tools keep working.
func TestUpstreamCrashMidCall(t *testing.T) {
	w := newUpstreamWorld(t, "fx", "fx2")
	w.grant(t, "fx.*")
	w.grant(t, "fx2.*")
	w.sync(t, "fx", true, true)
	w.sync(t, "fx2", true, true)
	tr := w.turn(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	start := time.Now()
	r, err := tr.CallTool(ctx, &mcpspec.CallRequest{Name: "fx.crash", Arguments: json.RawMessage(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	if code := r.Meta[mcpspec.MetaCode]; code != string(kernel.CodeUpstreamCrashed) {
		t.Fatalf("crash mid-call: code %v, result %+v", code, r)
	}
	t.Logf("the crash was answered after %v", time.Since(start))
	for _, name := range []string{"fx2.echo", "fx.echo"} { // the other, and the crashed one restarted
		r, err = tr.CallTool(ctx, &mcpspec.CallRequest{Name: name, Arguments: json.RawMessage(`{"text":"still"}`)})
		if err != nil || r.IsError || !bytes.Contains(r.Raw, []byte("still")) {
			t.Fatalf("%s after fx crashed: %v %+v %s", name, err, r, r.Raw)
		}
	}
	if len(upstreamtest.Processes(t, w.markers["fx"])) != 1 {
		t.Errorf("fx processes: %v", upstreamtest.Processes(t, w.markers["fx"]))
	}
}

// The view toolgate bridge --server gives: one server's tools under their raw names,
// an implicit=false server's included, each call authorized and audited under its
// canonical id.
func TestUpstreamRawNamesView(t *testing.T) {
	w := newUpstreamWorld(t, "fx")
	w.grant(t, "fx.*")
	w.sync(t, "fx", true, false)
	tr, err := w.a.OpenTurn(context.Background(), app.TurnRequest{Transport: "test", Capabilities: []string{"fx.*"},
		Selections: []kernel.Selection{{Kind: kernel.SelectServer, Server: "fx"}}, Namer: w.a.RawNamer("fx")})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	got := listNames(t, tr)
	if !slices.Contains(got, "echo") || !slices.Contains(got, "awkward") || slices.ContainsFunc(got, func(n string) bool { return strings.Contains(n, ".") }) {
		t.Fatalf("raw view: %v", got)
	}
	r, err := tr.CallTool(context.Background(), &mcpspec.CallRequest{Name: "echo", Arguments: json.RawMessage(`{"text":"raw"}`)})
	if err != nil || r.IsError || !bytes.Contains(r.Raw, []byte("raw")) {
		t.Fatalf("call by raw name: %v %+v", err, r)
	}
	evs, _ := w.a.Audit(context.Background(), audit.Filter{Tool: "fx.echo", Principal: app.DefaultPrincipal})
	if len(evs) != 1 || evs[0].Resource != "mcp:fx" {
		t.Fatalf("audit %+v", evs)
	}
}

// A catalogue or policy change makes open toolgate serve sessions stale (their
// clients re-initialize and see it); syncing what is already published does not.
func TestUpstreamChangeMakesTurnsStale(t *testing.T) {
	w := newUpstreamWorld(t, "fx")
	w.grant(t, "fx.*")
	type stale interface{ Stale(context.Context) bool }
	ctx := context.Background()
	before := w.turn(t)
	if before.(stale).Stale(ctx) {
		t.Fatal("a fresh turn is stale")
	}
	w.sync(t, "fx", true, true)
	if !before.(stale).Stale(ctx) {
		t.Fatal("a turn opened before the server's tools were published is not stale")
	}
	after := w.turn(t)
	w.sync(t, "fx", true, true)
	if after.(stale).Stale(ctx) {
		t.Fatal("syncing the same catalogue and policy made a turn stale")
	}
	w.sync(t, "fx", true, false)
	if !after.(stale).Stale(ctx) {
		t.Fatal("a policy change did not make the turn stale")
	}
	last := w.turn(t)
	w.a.RemoveUpstream("fx")
	if !last.(stale).Stale(ctx) {
		t.Fatal("removing the server did not make the turn stale")
	}
}

// toolgate mcp's style: an upstream tool is toolgate_<server>_<tool>, and under every
// harness's name rules its published name is one the harness accepts; calls by it work.
func TestUpstreamToolsInToolgateMCPStyle(t *testing.T) {
	w := newUpstreamWorld(t, "fx")
	w.grant(t, "fx.*")
	w.sync(t, "fx", true, true)
	base := localtools.Namer(localtools.DefaultPrefix)
	for _, h := range harness.All() {
		rule := h.Names
		tr, err := w.a.OpenTurn(context.Background(), app.TurnRequest{Transport: "stdio",
			Namer: func(id string) string { return rule.Published("toolgate", base(id)) }})
		if err != nil {
			t.Fatalf("%s: %v", h.ID, err)
		}
		names := listNames(t, tr)
		echo := rule.Published("toolgate", "toolgate_fx_echo")
		if !slices.Contains(names, echo) {
			t.Fatalf("%s: %s not in %v", h.ID, echo, names)
		}
		for _, n := range names {
			if p := rule.Problem("toolgate", n); p != "" {
				t.Errorf("%s: published %s, which it rejects: %s", h.ID, n, p)
			}
		}
		r, err := tr.CallTool(context.Background(), &mcpspec.CallRequest{Name: echo, Arguments: json.RawMessage(`{"text":"styled"}`)})
		if err != nil || r.IsError || !bytes.Contains(r.Raw, []byte("styled")) {
			t.Fatalf("%s: calling %s: %v %+v", h.ID, echo, err, r)
		}
		tr.Close()
	}
}

// The upstream's result bytes reach a client of a bridge (raw names, as toolgate bridge
// --server serves them) and of the stdio server (toolgate mcp's names) unchanged.
func TestUpstreamToolThroughBridgeAndStdio(t *testing.T) {
	w := newUpstreamWorld(t, "fx")
	w.grant(t, "fx.*")
	w.sync(t, "fx", true, false)
	ctx := context.Background()
	sel := []kernel.Selection{{Kind: kernel.SelectServer, Server: "fx"}}

	tr, err := w.a.OpenTurn(ctx, app.TurnRequest{Transport: "http", Capabilities: []string{"fx.*"}, Selections: sel, Namer: w.a.RawNamer("fx")})
	if err != nil {
		t.Fatal(err)
	}
	b, err := mcpserver.NewBridge(tr, mcpserver.BridgeOptions{ServerInfo: app.ServerInfo()})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	resp, body := post(t, b.URL(), "", "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != 200 {
		t.Fatalf("initialize: %d %s", resp.StatusCode, body)
	}
	_, body = post(t, b.URL(), "", sid, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"awkward","arguments":{"n":1.50}}}`)
	var rpc struct{ Result json.RawMessage }
	if err := json.Unmarshal(sseData(body), &rpc); err != nil || string(rpc.Result) != fixturedata.AwkwardResult {
		t.Fatalf("bridge result %s (%v), want %s", rpc.Result, err, fixturedata.AwkwardResult)
	}

	st, err := w.a.OpenTurn(ctx, app.TurnRequest{Transport: "stdio", Selections: sel, Namer: localtools.Namer(localtools.DefaultPrefix)})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	in := strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"toolgate_fx_awkward","arguments":{"n":1.50}}}`,
	}, "\n") + "\n"
	var out bytes.Buffer
	if err := mcpserver.ServeStdio(ctx, strings.NewReader(in), &out, st, mcpserver.StdioOptions{ServerInfo: app.ServerInfo()}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if want := `{"jsonrpc":"2.0","id":2,"result":` + fixturedata.AwkwardResult + `}`; lines[len(lines)-1] != want {
		t.Fatalf("stdio answer\n%s\nwant\n%s", lines[len(lines)-1], want)
	}
}

// A server of "session" isolation runs one process per turn, and the turn's close
// stops it: a turn per request (the HTTP API, a stateless client) leaves nothing behind.
func TestUpstreamSessionEndsWithTheTurn(t *testing.T) {
	spec, marker := upstreamtest.Spec(t)
	spec.Name = "fx"
	w := &upstreamWorld{markers: map[string]string{"fx": marker}}
	w.open(t, func(ctx context.Context, obs host.Observer) (*host.Host, error) {
		return host.New(host.Options{Dialer: upstreamtest.Dialer{}, Observer: obs, IdleTimeout: -1, Health: host.HealthPolicy{Interval: -1},
			Servers: []host.Definition{{Name: "fx", Fingerprint: "sha256:fx", Isolation: host.IsolationSession, Config: spec}}})
	}, nil)
	a := w.a
	w.grant(t, "fx.*")
	w.sync(t, "fx", true, true)
	base := len(upstreamtest.Processes(t, marker)) // the catalogue's own connection, if it stays
	for i := range 3 {
		tr, err := a.OpenTurn(context.Background(), app.TurnRequest{Transport: "api"})
		if err != nil {
			t.Fatal(err)
		}
		r, err := tr.CallTool(context.Background(), &mcpspec.CallRequest{Name: "fx.echo", Arguments: json.RawMessage(`{"text":"s"}`)})
		if err != nil || r.IsError {
			t.Fatalf("call %d: %v %+v", i, err, r)
		}
		if n := len(upstreamtest.Processes(t, marker)); n != base+1 {
			t.Fatalf("call %d: %d processes during the turn, %d before", i, n, base)
		}
		tr.Close()
		deadline := time.Now().Add(5 * time.Second)
		for len(upstreamtest.Processes(t, marker)) != base {
			if time.Now().After(deadline) {
				t.Fatalf("call %d: the turn's process outlived it: %v", i, upstreamtest.Processes(t, marker))
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// A client's notifications/cancelled reaches the upstream as its own
// notifications/cancelled for the forwarded request, and the call is answered
// cancelled.
func TestUpstreamCancellationFromTheClient(t *testing.T) {
	// The fixture's ask tool sends the client a request and waits for the answer or
	// its call's cancellation: the request arriving here says the call is upstream.
	hold, asked, release := upstreamtest.HoldRequests()
	defer release()
	spec, marker := upstreamtest.Spec(t)
	spec.Name = "fx"
	w := &upstreamWorld{markers: map[string]string{"fx": marker}}
	w.open(t, upstreamtest.Dialer{OnRequest: hold}.Host(spec), nil)
	up := w.up
	w.grant(t, "fx.*")
	w.sync(t, "fx", true, true)
	ctx := context.Background()
	tr := w.turn(t)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- mcpserver.ServeStdio(ctx, inR, outW, tr, mcpserver.StdioOptions{ServerInfo: app.ServerInfo()})
		outW.Close()
	}()
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(outR)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	send := func(s string) {
		if _, err := io.WriteString(inW, s+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{}}}`)
	<-lines
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	send(`{"jsonrpc":"2.0","id":"h","method":"tools/call","params":{"name":"fx.ask","arguments":{"method":"roots/list"}}}`)
	select {
	case <-asked:
	case <-time.After(10 * time.Second):
		t.Fatal("the call did not reach the upstream")
	}
	send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"h","reason":"user"}}`)
	select {
	case l := <-lines:
		if !strings.Contains(l, `"id":"h"`) || !strings.Contains(l, `cancelled`) {
			t.Fatalf("answer to the cancelled call: %s", l)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the cancelled call was not answered")
	}
	var seen []struct{ What string }
	for range 250 {
		res, err := up.Call(ctx, "fx", "tools/call", json.RawMessage(`{"name":"cancellations","arguments":{}}`), host.CallOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var out struct{ Content []struct{ Text string } }
		_ = json.Unmarshal(res, &out)
		if len(out.Content) > 0 && json.Unmarshal([]byte(out.Content[0].Text), &seen) == nil && len(seen) > 0 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(seen) != 1 || seen[0].What != "tools/call:ask" {
		t.Fatalf("the upstream saw cancellations %+v", seen)
	}
	inW.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
