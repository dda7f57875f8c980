package app_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/toolgate/toolgate/internal/app"
	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/mcpspec"
	"github.com/toolgate/toolgate/internal/policy"
	"github.com/toolgate/toolgate/internal/upstream"
	"github.com/toolgate/toolgate/internal/upstream/upstreamtest"
)

// recordingPeer is a client that answers every request and records it.
type recordingPeer struct {
	mu   sync.Mutex
	got  []string // method and params of each request
	fail error
}

func (p *recordingPeer) ClientCapabilities() json.RawMessage {
	return json.RawMessage(`{"sampling":{},"elicitation":{},"roots":{}}`)
}

func (p *recordingPeer) Request(_ context.Context, method string, params any) (json.RawMessage, error) {
	b, _ := json.Marshal(params)
	p.mu.Lock()
	p.got = append(p.got, method+" "+string(b))
	p.mu.Unlock()
	if p.fail != nil {
		return nil, p.fail
	}
	return json.RawMessage(`{"answered":"` + method + `"}`), nil
}

func (p *recordingPeer) requests() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.got...)
}

// requestWorld hosts fixture servers whose requests to the client go through the
// App's handler (App.UpstreamRequests), as the daemon's dialer wires them.
func requestWorld(t *testing.T, servers ...string) *upstreamWorld {
	t.Helper()
	w := &upstreamWorld{markers: map[string]string{}}
	var opened *app.App
	var mu sync.Mutex
	d := upstreamtest.Dialer{OnRequestFor: func(server, key string) upstream.RequestHandler {
		mu.Lock()
		defer mu.Unlock()
		return opened.UpstreamRequests(server, key, nil)
	}}
	w.open(t, d.Host(w.specs(t, servers)...), nil)
	mu.Lock()
	opened = w.a
	mu.Unlock()
	return w
}

// ask makes the fixture server send method to the client during a call of its ask
// tool, on a turn whose client is peer, and returns what the fixture got back.
func ask(t *testing.T, w *upstreamWorld, principal, server, method string, peer mcpspec.Peer) string {
	t.Helper()
	tr, err := w.a.OpenTurn(context.Background(), app.TurnRequest{Principal: principal, Transport: "test"})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	// The server claims to be someone else in its own label.
	args, _ := json.Marshal(map[string]any{"method": method, "params": map[string]any{
		"messages": []any{}, "_meta": map[string]any{"toolgate/source": "someone-else"}}})
	r, err := tr.CallTool(context.Background(), &mcpspec.CallRequest{Name: server + ".ask", Arguments: args, Peer: peer})
	if err != nil || r.IsError {
		t.Fatalf("ask %s: %v %+v", method, err, r)
	}
	return string(r.Raw)
}

// A server's sampling, elicitation and roots requests are refused unless a grant lets
// that server make that kind of request for the principal whose call is in flight;
// an allowed one reaches that caller's client labelled with the server (a label the
// server wrote itself is replaced), and each is audited.
func TestUpstreamRequestsNeedAGrant(t *testing.T) {
	ctx := context.Background()
	w := requestWorld(t, "fx", "fy")
	for _, p := range []string{app.DefaultPrincipal, "bob"} {
		for _, tool := range []string{"fx.*", "fy.*"} {
			if _, err := w.a.Store().AddGrant(ctx, policy.Grant{Principal: p, Tool: tool, Action: "*", Effect: policy.Allow}); err != nil {
				t.Fatal(err)
			}
		}
	}
	w.sync(t, "fx", true, true)
	w.sync(t, "fy", true, true)
	peer := &recordingPeer{}
	for _, m := range []string{"sampling/createMessage", "elicitation/create", "roots/list"} {
		if out := ask(t, w, app.DefaultPrincipal, "fx", m, peer); !strings.Contains(out, "error:") || !strings.Contains(out, "refused by toolgate") {
			t.Fatalf("%s without a grant: %s", m, out)
		}
	}
	if got := peer.requests(); len(got) != 0 {
		t.Fatalf("refused requests reached the client: %q", got)
	}
	if _, err := w.a.Store().AddGrant(ctx, policy.Grant{Principal: app.DefaultPrincipal, Tool: app.RequestSampling, Action: "execute",
		Resource: "mcp:fx", Effect: policy.Allow}); err != nil {
		t.Fatal(err)
	}
	out := ask(t, w, app.DefaultPrincipal, "fx", "sampling/createMessage", peer)
	if !strings.Contains(out, `result:{\"answered\":\"sampling/createMessage\"}`) {
		t.Fatalf("granted sampling: %s", out)
	}
	got := peer.requests()
	if len(got) != 1 || !strings.Contains(got[0], `"toolgate/source":"fx"`) || strings.Contains(got[0], "someone-else") {
		t.Fatalf("the client got %q: want one sampling request labelled fx", got)
	}
	// The grant is for that kind of request, that server and that principal only.
	for _, c := range []struct{ principal, server, method string }{
		{app.DefaultPrincipal, "fx", "elicitation/create"},
		{app.DefaultPrincipal, "fx", "roots/list"},
		{app.DefaultPrincipal, "fy", "sampling/createMessage"},
		{"bob", "fx", "sampling/createMessage"},
	} {
		if out := ask(t, w, c.principal, c.server, c.method, peer); !strings.Contains(out, "refused by toolgate") {
			t.Errorf("%s asked %s for %s: %s", c.server, c.method, c.principal, out)
		}
	}
	if got := peer.requests(); len(got) != 1 {
		t.Fatalf("requests outside the grant reached the client: %q", got[1:])
	}
	evs, _ := w.a.Audit(ctx, audit.Filter{Tool: app.RequestSampling})
	var decisions []string
	for _, e := range evs {
		decisions = append(decisions, e.Principal+" "+e.Resource+" "+string(e.Decision)+" "+e.Code)
	}
	want := []string{"default mcp:fx denied no_matching_grant", "default mcp:fx allowed ", "default mcp:fy denied no_matching_grant", "bob mcp:fx denied no_matching_grant"}
	if strings.Join(decisions, "|") != strings.Join(want, "|") {
		t.Fatalf("audit of sampling requests:\n%q\nwant\n%q", decisions, want)
	}
	// Allowed, but the caller's client cannot be asked (the HTTP API, a stateless
	// request): the server gets an error and the audit says the request failed.
	if out := ask(t, w, app.DefaultPrincipal, "fx", "sampling/createMessage", nil); !strings.Contains(out, "error:") || !strings.Contains(out, "cannot receive requests") {
		t.Fatalf("granted sampling, a client that cannot be asked: %s", out)
	}
	if evs, _ := w.a.Audit(ctx, audit.Filter{Tool: app.RequestSampling, Decision: "failed"}); len(evs) != 1 {
		t.Fatalf("failed request events: %+v", evs)
	}
	// A request when no call of the server is in flight is no caller's: refused.
	h := w.a.UpstreamRequests("fx", "", nil)
	if _, err := h(ctx, "sampling/createMessage", json.RawMessage(`{}`)); err == nil || !strings.Contains(err.Error(), "in flight") {
		t.Fatalf("a request outside any call: %v", err)
	}
	if _, err := h(ctx, "tools/list", nil); err == nil {
		t.Fatal("an unknown method was answered")
	}
	if res, err := h(ctx, "ping", nil); err != nil || string(res) != `{}` {
		t.Fatalf("ping: %s %v", res, err)
	}
}
