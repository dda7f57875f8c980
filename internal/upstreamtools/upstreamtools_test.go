package upstreamtools_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/host"
	"github.com/toolgate/toolgate/internal/host/hosttest"
	"github.com/toolgate/toolgate/internal/hostrelay"
	"github.com/toolgate/toolgate/internal/kernel"
	"github.com/toolgate/toolgate/internal/kernel/kerneltest"
	"github.com/toolgate/toolgate/internal/mcpspec"
	"github.com/toolgate/toolgate/internal/names"
	"github.com/toolgate/toolgate/internal/policy"
	"github.com/toolgate/toolgate/internal/upstream"
	"github.com/toolgate/toolgate/internal/upstream/upstreamtest"
	"github.com/toolgate/toolgate/internal/upstreamtools"
)

func tools(raws ...string) []json.RawMessage {
	out := make([]json.RawMessage, len(raws))
	for i, r := range raws {
		out[i] = json.RawMessage(r)
	}
	return out
}

func ids(c *upstreamtools.Catalogue) []string {
	var out []string
	for _, b := range c.Bindings {
		out = append(out, b.ID+"="+b.RawName)
	}
	return out
}

func TestNormalize(t *testing.T) {
	for raw, want := range map[string]string{
		"send_email":  "send_email",
		"Send Email":  "Send_Email",
		"a/b:c":       "a_b_c",
		"dotted.name": "dotted.name",
		"ünï":         "_n_",
		"a\x00b":      "a_b",
	} {
		if got := upstreamtools.Normalize(raw); got != want {
			t.Errorf("Normalize(%q) = %q, want %q", raw, got, want)
		}
	}
	long := strings.Repeat("x", 200)
	a, b := upstreamtools.Normalize(long+"a"), upstreamtools.Normalize(long+"b")
	if len(a) != 128 || a == b || !policy.ValidToolID("s."+a) {
		t.Errorf("long names: %q %q", a, b)
	}
}

// Raw names that meet once normalised get a hash suffix, whatever order the server
// lists them in; names that read as another tool's are refused, naming both.
func TestBuildCollisions(t *testing.T) {
	list := []string{
		`{"name":"read file","inputSchema":{"type":"object"}}`,
		`{"name":"read_file","inputSchema":{"type":"object"}}`,
		`{"name":"Read.File","inputSchema":{"type":"object"}}`,
		`{"name":"ok","inputSchema":{"type":"object"}}`,
		`{"inputSchema":{"type":"object"}}`,
		`{"name":"ok","description":"again"}`,
		`{"name":"dup","description":"a","description":"b"}`,
		`["not a tool"]`,
	}
	c1 := upstreamtools.Build("srv", host.Catalog{Version: 3, Tools: tools(list...)}, nil, nil)
	rev := slices.Clone(list)
	slices.Reverse(rev)
	rev = slices.DeleteFunc(rev, func(s string) bool { return strings.Contains(s, "again") }) // keep the first "ok"
	c2 := upstreamtools.Build("srv", host.Catalog{Version: 3, Tools: tools(rev...)}, nil, nil)
	got := ids(c1)
	if !slices.Equal(got, ids(c2)) {
		t.Fatalf("ids depend on the listing order: %v vs %v", got, ids(c2))
	}
	want := []string{"srv.Read.File=Read.File", "srv.ok=ok", "srv.read_file_" + hash6("read file") + "=read file", "srv.read_file_" + hash6("read_file") + "=read_file"}
	if !slices.Equal(got, want) {
		t.Fatalf("bindings %v, want %v", got, want)
	}
	var refused int
	for _, d := range c1.Diagnostics {
		if d.Refused {
			refused++
		}
	}
	if refused != 4 { // no name, "ok" twice, duplicate member, not an object
		t.Errorf("%d refused, want 4: %+v", refused, c1.Diagnostics)
	}

	// Against the other published names: server a's tool b_c is toolgate_a_b_c in
	// toolgate mcp, as is server a_b's tool c.
	reg := names.New(names.Options{})
	if err := reg.Add("local.read_file"); err != nil {
		t.Fatal(err)
	}
	a := upstreamtools.Build("a", host.Catalog{Tools: tools(`{"name":"b_c","inputSchema":{"type":"object"}}`)}, nil, reg)
	if len(a.Tools) != 1 {
		t.Fatalf("a: %+v", a.Diagnostics)
	}
	ab := upstreamtools.Build("a_b", host.Catalog{Tools: tools(`{"name":"c","inputSchema":{"type":"object"}}`, `{"name":"d","inputSchema":{"type":"object"}}`)}, nil, reg)
	if len(ab.Tools) != 1 || ab.Tools[0].ID != "a_b.d" || len(ab.Diagnostics) != 1 ||
		!strings.Contains(ab.Diagnostics[0].Message, "a_b.c") || !strings.Contains(ab.Diagnostics[0].Message, "a.b_c") {
		t.Fatalf("a_b: tools %d, diagnostics %+v", len(ab.Tools), ab.Diagnostics)
	}
	// A new catalogue of a frees a's old names.
	upstreamtools.Build("a", host.Catalog{Tools: tools(`{"name":"z","inputSchema":{"type":"object"}}`)}, nil, reg)
	if ab := upstreamtools.Build("a_b", host.Catalog{Tools: tools(`{"name":"c","inputSchema":{"type":"object"}}`)}, nil, reg); len(ab.Tools) != 1 {
		t.Fatalf("a_b after a changed: %+v", ab.Diagnostics)
	}
}

// hash6 is the suffix Build gives: the first 3 bytes of the raw name's SHA-256, in hex.
func hash6(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:3])
}

// world is a kernel with one server's tools registered from a host over fakes.
type world struct {
	k   *kernel.Kernel
	aud *kerneltest.Audit
	up  *hostrelay.Local
	d   *hosttest.Dialer
}

func newWorld(t *testing.T, servers ...string) *world {
	t.Helper()
	w := &world{aud: &kerneltest.Audit{}, d: hosttest.NewDialer()}
	var err error
	w.k, err = kernel.New(kernel.Options{Audit: w.aud, Escalations: &kerneltest.Escalations{}})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.k.SetGrants([]policy.Grant{{ID: "g", Principal: "p", Tool: "*", Action: "*", Effect: policy.Allow}}); err != nil {
		t.Fatal(err)
	}
	var defs []host.Definition
	for _, s := range servers {
		defs = append(defs, host.Definition{Name: s, Fingerprint: "sha256:" + s})
	}
	w.up, err = hostrelay.NewLocal(context.Background(), func(ctx context.Context, obs host.Observer) (*host.Host, error) {
		return host.New(host.Options{Dialer: w.d, Observer: obs, Servers: defs, IdleTimeout: -1, Health: host.HealthPolicy{Interval: -1},
			Restart: host.RestartPolicy{InitialInterval: time.Hour, MaxInterval: time.Hour}})
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.up.Close(context.Background()) })
	return w
}

func (w *world) publish(t *testing.T, server string, list ...string) {
	t.Helper()
	c := upstreamtools.Build(server, host.Catalog{Version: 1, Tools: tools(list...)}, w.up, nil)
	if _, err := w.k.ReplaceNamespace(server, kernel.NamespacePolicy{}, c.Tools...); err != nil {
		t.Fatal(err)
	}
}

func (w *world) call(t *testing.T, name, args string, meta string, peer mcpspec.Peer) *mcpspec.CallResult {
	t.Helper()
	tr, err := w.k.OpenTurn(context.Background(), kernel.TurnOptions{Principal: "p"})
	if err != nil {
		t.Fatal(err)
	}
	req := &mcpspec.CallRequest{Name: name, Arguments: json.RawMessage(args), Peer: peer}
	if meta != "" {
		req.Meta = json.RawMessage(meta)
	}
	r, err := tr.CallTool(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

type refusalBody struct {
	Status, Code, Message string
	Retryable             *bool
	Details               map[string]any
}

func refusal(t *testing.T, r *mcpspec.CallResult) refusalBody {
	t.Helper()
	if !r.IsError || len(r.Content) != 1 {
		t.Fatalf("not a refusal: %+v", r)
	}
	var block struct{ Text string }
	var b refusalBody
	if json.Unmarshal(r.Content[0], &block) != nil || json.Unmarshal([]byte(block.Text), &b) != nil {
		t.Fatalf("refusal %s", r.Content[0])
	}
	if r.Meta[mcpspec.MetaCode] != b.Code {
		t.Fatalf("_meta code %v, body %q", r.Meta[mcpspec.MetaCode], b.Code)
	}
	return b
}

// The call goes upstream as tools/call with the raw name and the arguments' bytes;
// the upstream's result bytes come back unchanged; the audit event names mcp:<server>.
func TestCallForwardsBytes(t *testing.T) {
	w := newWorld(t, "srv")
	const result = `{"content":[{"type":"text","text":"hi"},{"type":"x-unknown","v":1.50}],"structuredContent":{"n":12345678901234567890,"e":1e2},"isError":false,"x":{}}`
	var gotParams string
	w.d.Server("srv").Set(func(b *hosttest.Behavior) {
		b.Handler = func(_ context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
			gotParams = method + " " + string(params)
			return json.RawMessage(result), nil
		}
	})
	w.publish(t, "srv", `{"name":"Send Email","inputSchema":{"type":"object","properties":{"n":{"type":"number"}}}}`)
	r := w.call(t, "srv.Send_Email", `{"b":[1.50],"n":1e2}`, "", nil)
	if string(r.Raw) != result {
		t.Fatalf("result %s, want the upstream's bytes %s", r.Raw, result)
	}
	if want := `tools/call {"name":"Send Email","arguments":{"b":[1.50],"n":1e2}}`; gotParams != want {
		t.Fatalf("upstream got %s, want %s", gotParams, want)
	}
	ev := w.aud.Events()[0]
	if ev.Tool != "srv.Send_Email" || ev.Action != "execute" || ev.Resource != "mcp:srv" || ev.Decision != "allowed" {
		t.Fatalf("audit %+v", ev)
	}
	// The schema is still the kernel's to check: nothing reaches the upstream.
	gotParams = ""
	r = w.call(t, "srv.Send_Email", `{"n":"x"}`, "", nil)
	if b := refusal(t, r); b.Code != string(kernel.CodeInvalidArguments) || gotParams != "" {
		t.Fatalf("schema refusal %+v, upstream got %q", b, gotParams)
	}
	// An upstream's own isError result is passed through, audited as failed.
	w.d.Server("srv").Set(func(b *hosttest.Behavior) {
		b.Handler = func(context.Context, string, json.RawMessage) (json.RawMessage, error) {
			return json.RawMessage(`{"content":[{"type":"text","text":"no"}],"isError":true}`), nil
		}
	})
	r = w.call(t, "srv.Send_Email", `{}`, "", nil)
	if string(r.Raw) != `{"content":[{"type":"text","text":"no"}],"isError":true}` || !r.IsError {
		t.Fatalf("isError result %+v", r)
	}
}

func TestErrors(t *testing.T) {
	w := newWorld(t, "srv", "other")
	w.publish(t, "srv", `{"name":"t","inputSchema":{"type":"object"}}`)
	w.publish(t, "other", `{"name":"t","inputSchema":{"type":"object"}}`)
	w.publish(t, "gone", `{"name":"t","inputSchema":{"type":"object"}}`)

	w.d.Server("srv").Set(func(b *hosttest.Behavior) {
		b.Handler = func(context.Context, string, json.RawMessage) (json.RawMessage, error) {
			return nil, &upstream.RPCError{Code: -32602, Message: "bad <args>", Data: json.RawMessage(`{"field":"n"}`)}
		}
	})
	b := refusal(t, w.call(t, "srv.t", `{}`, "", nil))
	if b.Code != string(kernel.CodeUpstreamError) || b.Status != "failed" || b.Details["code"] != float64(-32602) ||
		b.Details["message"] != "bad <args>" || b.Details["data"].(map[string]any)["field"] != "n" {
		t.Fatalf("RPC error: %+v", b)
	}
	// Not installed: upstream_unavailable, at once.
	if b := refusal(t, w.call(t, "gone.t", `{}`, "", nil)); b.Code != string(kernel.CodeUpstreamUnavailable) || b.Retryable == nil || !*b.Retryable {
		t.Fatalf("unknown server: %+v", b)
	}
	// A crash mid-call: upstream_crashed; the other server is unaffected.
	w.d.Server("srv").Set(func(b *hosttest.Behavior) { b.Handler = nil; b.CallHang = true })
	s := w.d.Last("srv")
	before := s.Calls()
	tr, err := w.k.OpenTurn(context.Background(), kernel.TurnOptions{Principal: "p"})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan *mcpspec.CallResult)
	go func() {
		r, _ := tr.CallTool(context.Background(), &mcpspec.CallRequest{Name: "srv.t", Arguments: json.RawMessage(`{}`)})
		done <- r
	}()
	for s.Calls() == before { // the hanging call has reached the session
		time.Sleep(5 * time.Millisecond)
	}
	s.Crash(errors.New("killed"))
	select {
	case r := <-done:
		if b := refusal(t, r); b.Code != string(kernel.CodeUpstreamCrashed) {
			t.Fatalf("crash: %+v", b)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a crash mid-call did not end the call")
	}
	if r := w.call(t, "other.t", `{"x":1}`, "", nil); r.IsError || !strings.Contains(string(r.Raw), `"x":1`) {
		t.Fatalf("the other server: %+v %s", r, r.Raw)
	}
	if c := w.aud.Events(); c[len(c)-2].Code != string(kernel.CodeUpstreamCrashed) {
		t.Errorf("crash audited as %q", c[len(c)-2].Code)
	}
}

// notifier records what a call's peer is asked to send.
type notifier struct {
	mcpspec.NoPeer
	mu   sync.Mutex
	sent []string
}

func (n *notifier) Notify(_ context.Context, method string, params json.RawMessage) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.sent = append(n.sent, method+" "+string(params))
	return nil
}

// With the real fixture: the caller's progressToken goes upstream, the upstream's
// progress comes back with the caller's token, and cancelling the call sends
// notifications/cancelled upstream.
func TestProgressAndCancellationWithARealUpstream(t *testing.T) {
	spec, marker := upstreamtest.Spec(t)
	aud := &kerneltest.Audit{}
	k, err := kernel.New(kernel.Options{Audit: aud, Escalations: &kerneltest.Escalations{}})
	if err != nil {
		t.Fatal(err)
	}
	if err := k.SetGrants([]policy.Grant{{ID: "g", Principal: "p", Tool: "*", Action: "*", Effect: policy.Allow}}); err != nil {
		t.Fatal(err)
	}
	spec.Name = "fx"
	hold, asked, release := upstreamtest.HoldRequests()
	defer release()
	up, err := hostrelay.NewLocal(context.Background(), upstreamtest.Dialer{OnRequest: hold}.Host(spec), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		up.Close(context.Background())
		upstreamtest.WaitGone(t, marker, 5*time.Second)
	})
	ctx := context.Background()
	cat, err := up.RefreshCatalog(ctx, "fx")
	if err != nil {
		t.Fatal(err)
	}
	c := upstreamtools.Build("fx", cat, up, nil)
	if _, err := k.ReplaceNamespace("fx", kernel.NamespacePolicy{}, c.Tools...); err != nil {
		t.Fatal(err)
	}
	tr, err := k.OpenTurn(ctx, kernel.TurnOptions{Principal: "p"})
	if err != nil {
		t.Fatal(err)
	}
	n := &notifier{}
	r, err := tr.CallTool(ctx, &mcpspec.CallRequest{Name: "fx.progress", Arguments: json.RawMessage(`{"steps":3}`),
		Meta: json.RawMessage(`{"progressToken":"tok-1"}`), Peer: n})
	if err != nil || r.IsError {
		t.Fatalf("progress call: %v %+v", err, r)
	}
	if len(n.sent) != 3 || !strings.HasPrefix(n.sent[0], `notifications/progress {"progressToken":"tok-1","progress":`) {
		t.Fatalf("progress forwarded: %q", n.sent)
	}

	cctx, cancel := context.WithCancel(ctx)
	done := make(chan *mcpspec.CallResult)
	go func() {
		r, _ := tr.CallTool(cctx, &mcpspec.CallRequest{Name: "fx.ask", Arguments: json.RawMessage(`{"method":"roots/list"}`), Peer: n})
		done <- r
	}()
	select {
	case <-asked: // the call is upstream
	case <-time.After(10 * time.Second):
		t.Fatal("the call did not reach the upstream")
	}
	cancel()
	select {
	case r := <-done:
		if b := refusal(t, r); b.Code != string(kernel.CodeCancelled) {
			t.Fatalf("cancelled call: %+v", b)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("cancel did not end the call")
	}
	var got []struct{ What string }
	for i := 0; i < 100; i++ {
		res, err := up.Call(ctx, "fx", "tools/call", json.RawMessage(`{"name":"cancellations","arguments":{}}`), host.CallOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var out struct{ Content []struct{ Text string } }
		_ = json.Unmarshal(res, &out)
		if len(out.Content) > 0 && out.Content[0].Text != "[]" && out.Content[0].Text != "null" {
			_ = json.Unmarshal([]byte(out.Content[0].Text), &got)
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(got) != 1 || got[0].What != "tools/call:ask" {
		t.Fatalf("the upstream saw cancellations %+v, want the hung call's", got)
	}
}

// What a hostile server lists is bounded and left out, never fatal: more tools than a
// turn can hold, names with control characters, invalid UTF-8, huge names.
func TestBuildHostileCatalogue(t *testing.T) {
	var list []string
	for i := range 600 {
		list = append(list, `{"name":"t`+strings.Repeat("0", 3-len(itoa(i)))+itoa(i)+`","inputSchema":{"type":"object"}}`)
	}
	c := upstreamtools.Build("srv", host.Catalog{Tools: tools(list...)}, nil, nil)
	if len(c.Tools) != kernel.MaxCatalog || c.Tools[len(c.Tools)-1].ID != "srv.t511" {
		t.Fatalf("%d tools, last %s", len(c.Tools), c.Tools[len(c.Tools)-1].ID)
	}
	if d := c.Diagnostics[len(c.Diagnostics)-1]; !d.Refused || !strings.Contains(d.Message, "600 tools") {
		t.Fatalf("diagnostic %+v", d)
	}
	c = upstreamtools.Build("srv", host.Catalog{Tools: tools(
		`{"name":"a\nb\u0000c\u202ed","inputSchema":{"type":"object"}}`,
		"{\"name\":\"bad\xff\",\"inputSchema\":{\"type\":\"object\"}}",
		`{"name":"`+strings.Repeat("x", 5000)+`","inputSchema":{"type":"object"}}`,
		`{"name":"x","inputSchema":`+strings.Repeat(`{"a":`, 200)+`1`+strings.Repeat(`}`, 200)+`}`,
	)}, nil, nil)
	got := ids(c)
	if len(got) != 2 || !strings.HasPrefix(got[0], "srv.a_b_c_d=") || len(strings.SplitN(got[1], "=", 2)[0]) != len("srv.")+128 {
		t.Fatalf("bindings %q, diagnostics %+v", got, c.Diagnostics)
	}
	for _, tl := range c.Tools {
		if !policy.ValidToolID(tl.ID) {
			t.Errorf("invalid id %q", tl.ID)
		}
	}
	k, err := kernel.New(kernel.Options{Audit: &kerneltest.Audit{}, Escalations: &kerneltest.Escalations{}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.ReplaceNamespace("srv", kernel.NamespacePolicy{}, c.Tools...); err != nil {
		t.Fatalf("the kernel refused what Build kept: %v", err)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// errCaller fails every call with err.
type errCaller struct{ err error }

func (e errCaller) Call(context.Context, string, string, json.RawMessage, host.CallOptions) (json.RawMessage, error) {
	return nil, e.err
}

// The relay's own failures are upstream_unavailable; a context's error stays the
// kernel's to name (cancelled, timeout).
func TestRelayErrors(t *testing.T) {
	for _, c := range []struct {
		err  error
		code kernel.Code
	}{
		{&hostrelay.HostGoneError{Op: "call", Server: "srv", HostPID: 42, Sent: true}, kernel.CodeUpstreamUnavailable},
		{hostrelay.ErrNoHost, kernel.CodeUpstreamUnavailable},
		{&hostrelay.UnreachableError{Dir: "/d", HolderPID: 7, Err: errors.New("timeout")}, kernel.CodeUpstreamUnavailable},
		{&hostrelay.RemoteError{Message: "something else"}, kernel.CodeUpstreamUnavailable},
		{context.DeadlineExceeded, kernel.CodeTimeout},
		{&upstream.RPCError{Code: 1, Message: "x", Data: json.RawMessage("{\"bad\":\"\xff\"}")}, kernel.CodeUpstreamError},
	} {
		k, err := kernel.New(kernel.Options{Audit: &kerneltest.Audit{}, Escalations: &kerneltest.Escalations{}})
		if err != nil {
			t.Fatal(err)
		}
		if err := k.SetGrants([]policy.Grant{{ID: "g", Principal: "p", Tool: "*", Action: "*", Effect: policy.Allow}}); err != nil {
			t.Fatal(err)
		}
		cat := upstreamtools.Build("srv", host.Catalog{Tools: tools(`{"name":"t","inputSchema":{"type":"object"}}`)}, errCaller{c.err}, nil)
		if _, err := k.ReplaceNamespace("srv", kernel.NamespacePolicy{}, cat.Tools...); err != nil {
			t.Fatal(err)
		}
		tr, err := k.OpenTurn(context.Background(), kernel.TurnOptions{Principal: "p"})
		if err != nil {
			t.Fatal(err)
		}
		r, err := tr.CallTool(context.Background(), &mcpspec.CallRequest{Name: "srv.t"})
		if err != nil {
			t.Fatal(err)
		}
		if b := refusal(t, r); b.Code != string(c.code) {
			t.Errorf("%v: %+v", c.err, b)
		}
	}
}
