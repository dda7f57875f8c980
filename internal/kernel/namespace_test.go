package kernel_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/host"
	"github.com/toolgate/toolgate/internal/kernel"
	"github.com/toolgate/toolgate/internal/mcpspec"
	"github.com/toolgate/toolgate/internal/policy"
)

// rawTool is an upstream tool: its published object given raw, its Run answering the
// raw name it was made for.
func rawTool(id, rawName, object string) *kernel.Tool {
	return &kernel.Tool{ID: id, RawName: rawName, Raw: json.RawMessage(object), Source: "srv",
		Access: func(map[string]any) (kernel.Access, error) {
			return kernel.Access{Action: kernel.ActionExecute, Resource: "mcp:" + strings.SplitN(id, ".", 2)[0]}, nil
		},
		Run: func(_ context.Context, c *kernel.Call) (*kernel.Output, error) {
			return &kernel.Output{Text: rawName + " " + string(c.Arguments)}, nil
		}}
}

func listRaw(t *testing.T, tr *kernel.Turn) map[string]string {
	t.Helper()
	l, err := tr.ListTools(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, raw := range l.Tools {
		var v struct{ Name string }
		if err := json.Unmarshal(raw, &v); err != nil {
			t.Fatalf("published tool is not JSON: %s", raw)
		}
		out[v.Name] = string(raw)
	}
	return out
}

func TestReplaceNamespace(t *testing.T) {
	f := newFixture(t, echoTool("local.echo"))
	f.grants(t, policy.Grant{Principal: "p", Tool: "*"})
	if _, err := f.k.ReplaceNamespace("srv", kernel.NamespacePolicy{},
		rawTool("srv.a", "a", `{"name":"a","inputSchema":{"type":"object"}}`),
		rawTool("srv.b", "b", `{"name":"b","inputSchema":{"type":"object"}}`)); err != nil {
		t.Fatal(err)
	}
	old := f.turn(t, "p")
	if got := names(t, old); !slices.Equal(got, []string{"local.echo", "srv.a", "srv.b", "toolgate.escalate"}) {
		t.Fatalf("catalogue %v", got)
	}
	if _, err := f.k.ReplaceNamespace("srv", kernel.NamespacePolicy{},
		rawTool("srv.c", "c", `{"name":"c","inputSchema":{"type":"object"}}`)); err != nil {
		t.Fatal(err)
	}
	fresh := f.turn(t, "p")
	if got := names(t, fresh); !slices.Equal(got, []string{"local.echo", "srv.c", "toolgate.escalate"}) {
		t.Fatalf("new turn's catalogue %v", got)
	}
	// The open turn keeps the catalogue it opened with, and its tools still run.
	if got := names(t, old); !slices.Equal(got, []string{"local.echo", "srv.a", "srv.b", "toolgate.escalate"}) {
		t.Fatalf("open turn's catalogue changed: %v", got)
	}
	if r := call(t, old, "srv.a", `{}`); r.IsError {
		t.Fatalf("an open turn's tool of the replaced catalogue: %s", mustJSON(r))
	}
	refusal(t, call(t, fresh, "srv.a", `{}`), kernel.StatusDenied, kernel.CodeToolUnavailable)

	for name, tools := range map[string][]*kernel.Tool{
		"another namespace": {rawTool("other.x", "x", `{"name":"x","inputSchema":{"type":"object"}}`)},
		"twice":             {rawTool("srv.x", "x", `{"name":"x"}`), rawTool("srv.x", "x", `{"name":"x"}`)},
		"duplicate member":  {rawTool("srv.x", "x", `{"name":"x","inputSchema":{"type":"object"},"inputSchema":{"type":"string"}}`)},
		"case variant":      {rawTool("srv.x", "x", `{"name":"x","description":"a","Description":"b"}`)},
		"not an object":     {rawTool("srv.x", "x", `["x"]`)},
	} {
		if _, err := f.k.ReplaceNamespace("srv", kernel.NamespacePolicy{}, tools...); !errors.Is(err, kernel.ErrInvalidTool) {
			t.Errorf("%s: ReplaceNamespace = %v, want ErrInvalidTool", name, err)
		}
	}
	if got := names(t, f.turn(t, "p")); !slices.Equal(got, []string{"local.echo", "srv.c", "toolgate.escalate"}) {
		t.Fatalf("a refused batch changed the catalogue: %v", got)
	}
	if _, err := f.k.ReplaceNamespace("toolgate", kernel.NamespacePolicy{}); err == nil {
		t.Fatal("the toolgate namespace was replaced")
	}
	// A namespace of tools registered one by one is never replaced or removed, and a
	// replaced one takes no tool registered on its own.
	if _, err := f.k.ReplaceNamespace("local", kernel.NamespacePolicy{}, rawTool("local.x", "x", `{"name":"x"}`)); !errors.Is(err, kernel.ErrInvalidTool) {
		t.Fatalf("replacing local: %v", err)
	}
	f.k.RemoveNamespace("local")
	if err := f.k.Register(echoTool("srv.echo")); !errors.Is(err, kernel.ErrInvalidTool) {
		t.Fatalf("Register into a replaced namespace: %v", err)
	}
	f.k.RemoveNamespace("srv")
	if got := names(t, f.turn(t, "p")); !slices.Equal(got, []string{"local.echo", "toolgate.escalate"}) {
		t.Fatalf("after RemoveNamespace: %v", got)
	}
}

// The published object is the upstream's with the name replaced and _meta spliced:
// every other member keeps its bytes, numbers and unknown members included.
func TestRawToolPublishedAsWritten(t *testing.T) {
	f := newFixture(t)
	f.grants(t, policy.Grant{Principal: "p", Tool: "*"})
	const obj = `{"name":"Send Email","title":"Send","inputSchema":{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","properties":{"n":{"type":"number","maximum":1.50,"default":1e2}},"$defs":{"big":{"const":12345678901234567890}}},"x-unknown":{"keep":[1.0, 2]},"annotations":{"destructiveHint":false},"_meta":{"vendor/key":"v","toolgate/source":"spoofed"}}`
	diags, err := f.k.ReplaceNamespace("srv", kernel.NamespacePolicy{}, rawTool("srv.Send_Email", "Send Email", obj))
	if err != nil {
		t.Fatal(err)
	}
	if len(diags) != 1 || !strings.Contains(diags[0].Message, "toolgate/source") {
		t.Fatalf("diagnostics %+v, want the spoofed _meta member reported", diags)
	}
	got := listRaw(t, f.turn(t, "p"))["srv.Send_Email"]
	want := `{"name":"srv.Send_Email","title":"Send","inputSchema":{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","properties":{"n":{"type":"number","maximum":1.50,"default":1e2}},"$defs":{"big":{"const":12345678901234567890}}},"x-unknown":{"keep":[1.0, 2]},"annotations":{"destructiveHint":false},"_meta":{"toolgate/namespace":"srv","toolgate/source":"srv","vendor/key":"v"}}`
	if got != want {
		t.Fatalf("published\n%s\nwant\n%s", got, want)
	}
	// The schema was compiled: maximum 1.50 holds.
	tr := f.turn(t, "p")
	refusal(t, call(t, tr, "srv.Send_Email", `{"n":2}`), kernel.StatusFailed, kernel.CodeInvalidArguments)
	if r := call(t, tr, "srv.Send_Email", `{"n":1.5}`); r.IsError {
		t.Fatalf("valid call refused: %s", mustJSON(r))
	}

	// No _meta: one is added. A Namer renames.
	if _, err := f.k.ReplaceNamespace("srv", kernel.NamespacePolicy{}, rawTool("srv.t", "t", `{"name":"t","inputSchema":{"type":"object"}}`)); err != nil {
		t.Fatal(err)
	}
	tr, err = f.k.OpenTurn(context.Background(), kernel.TurnOptions{Principal: "p", Namer: func(id string) string { return "x_" + strings.ReplaceAll(id, ".", "_") }})
	if err != nil {
		t.Fatal(err)
	}
	if got := listRaw(t, tr)["x_srv_t"]; got != `{"name":"x_srv_t","inputSchema":{"type":"object"},"_meta":{"toolgate/namespace":"srv","toolgate/source":"srv"}}` {
		t.Fatalf("published %s", got)
	}
}

// A schema the validator cannot compile does not drop the tool: it is published, its
// calls are checked as objects only, and the registration says so.
func TestRawToolUncompilableSchema(t *testing.T) {
	f := newFixture(t)
	f.grants(t, policy.Grant{Principal: "p", Tool: "*"})
	for _, schema := range []string{
		`{"type":"object","properties":{"a":{"$ref":"https://example.com/schema.json"}}}`,
		`{"type":"object","properties":{"a":{"type":"no-such-type"}}}`,
		`{"properties":{}}`,
	} {
		diags, err := f.k.ReplaceNamespace("srv", kernel.NamespacePolicy{}, rawTool("srv.t", "t", `{"name":"t","inputSchema":`+schema+`}`))
		if err != nil {
			t.Fatalf("%s: %v", schema, err)
		}
		if len(diags) != 1 || diags[0].Tool != "srv.t" || !strings.Contains(diags[0].Message, "checked only for being an object") {
			t.Fatalf("%s: diagnostics %+v", schema, diags)
		}
		tr := f.turn(t, "p")
		if got := listRaw(t, tr)["srv.t"]; !strings.Contains(got, schema) {
			t.Fatalf("%s: published %s", schema, got)
		}
		if r := call(t, tr, "srv.t", `{"a":1}`); r.IsError {
			t.Fatalf("%s: call refused: %s", schema, mustJSON(r))
		}
		refusal(t, call(t, tr, "srv.t", `[1]`), kernel.StatusFailed, kernel.CodeInvalidArguments)
	}
}

func TestExplicitOnlyAndSelections(t *testing.T) {
	f := newFixture(t, echoTool("local.echo"))
	f.grants(t, policy.Grant{Principal: "p", Tool: "resend.*"}, policy.Grant{Principal: "p", Tool: "local.*"},
		policy.Grant{Principal: "p", Tool: "open.*"}, policy.Grant{Principal: "p", Tool: "off.*"})
	mk := func(ns string, raws ...string) []*kernel.Tool {
		var out []*kernel.Tool
		for _, r := range raws {
			out = append(out, rawTool(ns+"."+r, r, `{"name":"`+r+`","inputSchema":{"type":"object"}}`))
		}
		return out
	}
	if _, err := f.k.ReplaceNamespace("empty", kernel.NamespacePolicy{ExplicitOnly: true}); err != nil {
		t.Fatal(err)
	}
	for ns, p := range map[string]kernel.NamespacePolicy{"resend": {ExplicitOnly: true}, "open": {}, "off": {Disabled: true}, "ungranted": {ExplicitOnly: true}} {
		if _, err := f.k.ReplaceNamespace(ns, p, mk(ns, "send_email", "list")...); err != nil {
			t.Fatal(err)
		}
	}
	open := func(caps []string, sel ...kernel.Selection) *kernel.Turn {
		t.Helper()
		tr, err := f.k.OpenTurn(context.Background(), kernel.TurnOptions{Principal: "p", Capabilities: caps, Selections: sel})
		if err != nil {
			t.Fatal(err)
		}
		return tr
	}
	plain := open(nil)
	if got := names(t, plain); !slices.Equal(got, []string{"local.echo", "open.list", "open.send_email"}) {
		t.Fatalf("without selections: %v", got)
	}
	refusal(t, call(t, plain, "resend.list", `{}`), kernel.StatusDenied, kernel.CodeToolUnavailable)
	refusal(t, call(t, plain, "off.list", `{}`), kernel.StatusDenied, kernel.CodeToolUnavailable)
	evs := f.aud.Events()
	if c := evs[len(evs)-2].Code; c != string(kernel.CodeNotSelected) {
		t.Errorf("an explicit-only tool not selected audited as %q", c)
	}
	if c := evs[len(evs)-1].Code; c != string(kernel.CodeNamespaceDisabled) {
		t.Errorf("a disabled server's tool audited as %q", c)
	}

	before := f.aud.Len()
	tr := open(nil,
		kernel.Selection{ID: "cap_resend", Kind: kernel.SelectTool, Server: "resend", RawTool: "send_email", ScopeKind: "workspace"},
		kernel.Selection{ID: "cap_nope", Kind: kernel.SelectServer, Server: "nope"},
		kernel.Selection{ID: "cap_tool", Kind: kernel.SelectTool, Server: "resend", RawTool: "nope"},
		kernel.Selection{ID: "cap_off", Kind: kernel.SelectServer, Server: "off"},
		kernel.Selection{ID: "cap_ungranted", Kind: kernel.SelectServer, Server: "ungranted"},
		kernel.Selection{ID: "cap_kind", Kind: "skill", Server: "resend"},
		kernel.Selection{ID: "cap_empty", Kind: kernel.SelectServer, Server: "empty"},
	)
	if got := names(t, tr); !slices.Equal(got, []string{"local.echo", "open.list", "open.send_email", "resend.send_email"}) {
		t.Fatalf("with an mcpTool selection: %v", got)
	}
	if r := call(t, tr, "resend.send_email", `{}`); r.IsError {
		t.Fatalf("selected tool: %s", mustJSON(r))
	}
	want := map[string]string{"cap_resend": "", "cap_nope": kernel.RejectUnknownServer, "cap_tool": kernel.RejectUnknownTool,
		"cap_off": kernel.RejectDisabled, "cap_ungranted": kernel.RejectNotGranted, "cap_kind": kernel.RejectInvalid, "cap_empty": kernel.RejectNoTools}
	ds := tr.Selections()
	if len(ds) != len(want) {
		t.Fatalf("diagnostics %+v", ds)
	}
	for _, d := range ds {
		if d.Reason != want[d.Selection.ID] || d.Accepted != (want[d.Selection.ID] == "") || d.Message == "" {
			t.Errorf("diagnostic %+v, want reason %q", d, want[d.Selection.ID])
		}
	}
	// Each selection is audited: one allowed, six denied selection_rejected.
	var allowed, rejected int
	for _, e := range f.aud.Events()[before:] {
		if e.Action != "select" {
			continue
		}
		switch {
		case e.Decision == audit.Allowed && e.Tool == "resend.send_email":
			allowed++
		case e.Decision == audit.Denied && e.Code == string(kernel.CodeSelectionRejected):
			rejected++
		}
	}
	if allowed != 1 || rejected != 6 {
		t.Errorf("selection events: %d allowed, %d rejected", allowed, rejected)
	}

	// mcpServer selects the whole server; patterns narrow, selections add.
	tr = open([]string{"local.*"}, kernel.Selection{Kind: kernel.SelectServer, Server: "resend"})
	if got := names(t, tr); !slices.Equal(got, []string{"local.echo", "resend.list", "resend.send_email"}) {
		t.Fatalf("capability local.* + mcpServer=resend: %v", got)
	}
	if r := call(t, tr, "resend.list", `{}`); r.IsError {
		t.Fatalf("selected tool under a narrowing capability: %s", mustJSON(r))
	}
	// A selection never grants: a selected server's tools still need a grant.
	if err := f.k.SetGrants([]policy.Grant{{ID: "g1", Principal: "p", Tool: "local.*", Action: "*", Effect: policy.Allow}}); err != nil {
		t.Fatal(err)
	}
	refusal(t, call(t, tr, "resend.list", `{}`), kernel.StatusDenied, kernel.CodeNoMatchingGrant)
	tr = open(nil, kernel.Selection{Kind: kernel.SelectServer, Server: "resend"})
	if got := names(t, tr); !slices.Equal(got, []string{"local.echo"}) {
		t.Fatalf("selection without a grant: %v", got)
	}
	if d := tr.Selections(); len(d) != 1 || d[0].Reason != kernel.RejectNotGranted {
		t.Fatalf("selection without a grant: %+v", d)
	}
}

// Host errors become the upstream reason codes (docs/reason-codes.md).
func TestHostErrorsMapToReasonCodes(t *testing.T) {
	retry := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	cases := []struct {
		err       error
		code      kernel.Code
		retryable bool
		retryAt   string
	}{
		{&host.ServerError{Server: "s", Kind: host.ErrCrashed}, kernel.CodeUpstreamCrashed, true, ""},
		{&host.ServerError{Server: "s", Kind: host.ErrTimeout}, kernel.CodeUpstreamTimeout, true, ""},
		{&host.ServerError{Server: "s", Kind: host.ErrUnavailable, RetryAt: retry}, kernel.CodeUpstreamUnavailable, true, "2030-01-02T03:04:05Z"},
		{&host.ServerError{Server: "s", Kind: host.ErrDisabled}, kernel.CodeUpstreamUnavailable, true, ""},
		{&host.ServerError{Server: "s", Kind: host.ErrUnknownServer}, kernel.CodeUpstreamUnavailable, true, ""},
		{&host.ServerError{Server: "s", Kind: host.ErrStartTimeout}, kernel.CodeUpstreamUnavailable, true, ""},
		{&host.ServerError{Server: "s", Kind: host.ErrAuthRequired}, kernel.CodeUpstreamAuthRequired, false, ""},
		{errors.Join(errors.New("session"), host.ErrAuthRequired), kernel.CodeUpstreamAuthRequired, false, ""},
	}
	for _, c := range cases {
		tool := rawTool("srv.t", "t", `{"name":"t","inputSchema":{"type":"object"}}`)
		tool.Run = func(context.Context, *kernel.Call) (*kernel.Output, error) { return nil, c.err }
		f := newFixture(t)
		f.grants(t, policy.Grant{Principal: "p", Tool: "*"})
		if _, err := f.k.ReplaceNamespace("srv", kernel.NamespacePolicy{}, tool); err != nil {
			t.Fatal(err)
		}
		r := call(t, f.turn(t, "p"), "srv.t", `{}`)
		b := refusal(t, r, kernel.StatusFailed, c.code)
		if b.Retryable == nil || *b.Retryable != c.retryable {
			t.Errorf("%v: retryable %v", c.err, b.Retryable)
		}
		if b.RetryAt != c.retryAt {
			t.Errorf("%v: retryAt %q, want %q", c.err, b.RetryAt, c.retryAt)
		}
		if evs := f.aud.Events(); evs[len(evs)-1].Code != string(c.code) || evs[len(evs)-1].Resource != "mcp:srv" {
			t.Errorf("%v: audited %+v", c.err, evs[len(evs)-1])
		}
	}
}

// A forwarding tool sees the turn id and the request's _meta.
func TestCallCarriesTurnAndMeta(t *testing.T) {
	var got *kernel.Call
	tool := rawTool("srv.t", "t", `{"name":"t","inputSchema":{"type":"object"}}`)
	tool.Run = func(_ context.Context, c *kernel.Call) (*kernel.Output, error) { got = c; return &kernel.Output{}, nil }
	f := newFixture(t)
	f.grants(t, policy.Grant{Principal: "p", Tool: "*"})
	if _, err := f.k.ReplaceNamespace("srv", kernel.NamespacePolicy{}, tool); err != nil {
		t.Fatal(err)
	}
	tr := f.turn(t, "p")
	if _, err := tr.CallTool(context.Background(), &mcpspec.CallRequest{Name: "srv.t", Meta: json.RawMessage(`{"progressToken":7}`)}); err != nil {
		t.Fatal(err)
	}
	if got == nil || got.TurnID != tr.ID() || string(got.Meta) != `{"progressToken":7}` {
		t.Fatalf("call %+v", got)
	}
}

// Too many selections apply none; a namespace's policy changes without recompiling.
func TestSelectionBoundsAndPolicyChange(t *testing.T) {
	f := newFixture(t)
	f.grants(t, policy.Grant{Principal: "p", Tool: "*"})
	if _, err := f.k.ReplaceNamespace("srv", kernel.NamespacePolicy{ExplicitOnly: true}, rawTool("srv.t", "t", `{"name":"t","inputSchema":{"type":"object"}}`)); err != nil {
		t.Fatal(err)
	}
	sel := make([]kernel.Selection, kernel.MaxSelections+1)
	for i := range sel {
		sel[i] = kernel.Selection{Kind: kernel.SelectServer, Server: "srv"}
	}
	tr, err := f.k.OpenTurn(context.Background(), kernel.TurnOptions{Principal: "p", Selections: sel})
	if err != nil {
		t.Fatal(err)
	}
	if got := names(t, tr); slices.Contains(got, "srv.t") {
		t.Fatalf("%d selections applied: %v", len(sel), got)
	}
	if d := tr.Selections(); len(d) != 1 || d[0].Reason != kernel.RejectInvalid {
		t.Fatalf("diagnostics %+v", d)
	}
	if !f.k.SetNamespacePolicy("srv", kernel.NamespacePolicy{}) || f.k.SetNamespacePolicy("nope", kernel.NamespacePolicy{}) {
		t.Fatal("SetNamespacePolicy")
	}
	if got := names(t, f.turn(t, "p")); !slices.Contains(got, "srv.t") {
		t.Fatalf("after allowing implicit use: %v", got)
	}
	if !slices.Equal(f.k.IDs(), []string{"srv.t", "toolgate.escalate"}) {
		t.Fatalf("IDs %v", f.k.IDs())
	}
}

// A raw object as an upstream may write it, white space and escapes included, keeps
// every member's bytes; only the name and _meta change.
func TestRawToolWhiteSpace(t *testing.T) {
	f := newFixture(t)
	f.grants(t, policy.Grant{Principal: "p", Tool: "*"})
	const obj = "{\n  \"n\\u0061me\" : \"t\",\n  \"description\" : \"a \\\"quoted\\\" \\u00e9\",\n  \"inputSchema\" : { \"type\" : \"object\" } ,\n  \"_meta\" : { \"x\" : [ 1 , 2 ] }\n}\n"
	if _, err := f.k.ReplaceNamespace("srv", kernel.NamespacePolicy{}, rawTool("srv.t", "t", obj)); err != nil {
		t.Fatal(err)
	}
	got := listRaw(t, f.turn(t, "p"))["srv.t"]
	want := `{"name":"srv.t","description":"a \"quoted\" \u00e9","inputSchema":{ "type" : "object" },"_meta":{"toolgate/namespace":"srv","toolgate/source":"srv","x":[ 1 , 2 ]}}`
	if got != want {
		t.Fatalf("published\n%s\nwant\n%s", got, want)
	}
	if !json.Valid([]byte(got)) {
		t.Fatal("not JSON")
	}
}
