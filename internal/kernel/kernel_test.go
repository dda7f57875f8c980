package kernel_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/kernel"
	"github.com/toolgate/toolgate/internal/kernel/kerneltest"
	"github.com/toolgate/toolgate/internal/mcpspec"
	"github.com/toolgate/toolgate/internal/policy"
)

type fixture struct {
	k   *kernel.Kernel
	aud *kerneltest.Audit
	esc *kerneltest.Escalations
}

func newFixture(t testing.TB, tools ...*kernel.Tool) *fixture {
	t.Helper()
	f := &fixture{aud: &kerneltest.Audit{}, esc: &kerneltest.Escalations{}}
	k, err := kernel.New(kernel.Options{Audit: f.aud, Escalations: f.esc,
		HashArg: func([]byte) string { return "h" }})
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Register(tools...); err != nil {
		t.Fatal(err)
	}
	f.k = k
	return f
}

func (f *fixture) grants(t testing.TB, gs ...policy.Grant) {
	t.Helper()
	for i := range gs {
		if gs[i].ID == "" {
			gs[i].ID = fmt.Sprintf("g%03d", i)
		}
		if gs[i].Effect == "" {
			gs[i].Effect = policy.Allow
		}
		if gs[i].Action == "" {
			gs[i].Action = "*"
		}
	}
	if err := f.k.SetGrants(gs); err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) turn(t testing.TB, principal string) *kernel.Turn {
	t.Helper()
	tr, err := f.k.OpenTurn(context.Background(), kernel.TurnOptions{Principal: principal, Transport: "test"})
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// echoTool returns its principal and arguments, as structured output.
func echoTool(id string) *kernel.Tool {
	return &kernel.Tool{
		ID:           id,
		Description:  "echo " + id,
		InputSchema:  json.RawMessage(`{"type":"object","properties":{"msg":{"type":"string"},"path":{"type":"string"}},"additionalProperties":false}`),
		OutputSchema: json.RawMessage(`{"type":"object"}`),
		Annotations:  kernel.Annotations{ReadOnly: true},
		Source:       "test",
		Access: func(args map[string]any) (kernel.Access, error) {
			p, _ := args["path"].(string)
			if p == "" {
				return kernel.Access{Action: kernel.ActionRead}, nil
			}
			return kernel.Access{Action: kernel.ActionRead, Resource: "path:" + p}, nil
		},
		Run: func(_ context.Context, c *kernel.Call) (*kernel.Output, error) {
			return &kernel.Output{Structured: map[string]any{"principal": c.Principal, "args": c.Args, "call": c.ID}}, nil
		},
	}
}

func names(t testing.TB, tr *kernel.Turn) []string {
	t.Helper()
	l, err := tr.ListTools(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, raw := range l.Tools {
		var v struct{ Name string }
		if err := json.Unmarshal(raw, &v); err != nil {
			t.Fatal(err)
		}
		out = append(out, v.Name)
	}
	return out
}

func call(t testing.TB, tr *kernel.Turn, name string, args string) *mcpspec.CallResult {
	t.Helper()
	var raw json.RawMessage
	if args != "" {
		raw = json.RawMessage(args)
	}
	r, err := tr.CallTool(context.Background(), &mcpspec.CallRequest{Name: name, Arguments: raw})
	if err != nil {
		t.Fatalf("CallTool(%s): %v", name, err)
	}
	return r
}

type body struct {
	Status    string         `json:"status"`
	Code      string         `json:"code"`
	Message   string         `json:"message"`
	Retryable *bool          `json:"retryable"`
	RetryAt   string         `json:"retryAt"`
	Details   map[string]any `json:"details"`
}

// refusal checks the exact shape of a refusal result (docs/reason-codes.md) and returns
// its body.
func refusal(t testing.TB, r *mcpspec.CallResult, status kernel.Status, code kernel.Code) body {
	t.Helper()
	if !r.IsError {
		t.Fatalf("result is not an error: %s", mustJSON(r))
	}
	if len(r.Content) != 1 {
		t.Fatalf("refusal has %d content blocks", len(r.Content))
	}
	var block struct{ Type, Text string }
	if err := json.Unmarshal(r.Content[0], &block); err != nil || block.Type != "text" {
		t.Fatalf("refusal content %s: %v", r.Content[0], err)
	}
	var b body
	dec := json.NewDecoder(strings.NewReader(block.Text))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&b); err != nil {
		t.Fatalf("refusal text %q: %v", block.Text, err)
	}
	if b.Status != string(status) || b.Code != string(code) || b.Message == "" {
		t.Errorf("refusal body %+v, want %s/%s with a message", b, status, code)
	}
	if r.Meta["toolgate/status"] != string(status) || r.Meta["toolgate/code"] != string(code) || len(r.Meta) != 2 {
		t.Errorf("refusal _meta %v, want status %s code %s only", r.Meta, status, code)
	}
	if r.StructuredContent != nil {
		t.Errorf("refusal carries structuredContent")
	}
	return b
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestGatesHideTools(t *testing.T) {
	f := newFixture(t, echoTool("files.read"), echoTool("files.list"), echoTool("web.fetch"))
	f.grants(t,
		policy.Grant{Principal: "p", Tool: "files.*"},
		policy.Grant{Principal: "p", Tool: "web.fetch"},
		policy.Grant{Principal: "p", Tool: "ghost.tool"}, // gate 1: not registered
	)
	if got := strings.Join(names(t, f.turn(t, "p")), ","); got != "files.list,files.read,web.fetch" {
		t.Errorf("all gates open: %s", got)
	}
	// Gate 2: namespace disabled.
	f.k.SetNamespaces(map[string]bool{"web": false, "files": true})
	if got := strings.Join(names(t, f.turn(t, "p")), ","); got != "files.list,files.read" {
		t.Errorf("web disabled: %s", got)
	}
	f.k.SetNamespaces(nil)
	// Gate 3: no grant for this principal.
	if got := names(t, f.turn(t, "q")); len(got) != 0 {
		t.Errorf("ungranted principal sees %v", got)
	}
	// Gate 3: a deny that refuses everything hides the tool.
	f.grants(t, policy.Grant{Principal: "p", Tool: "*"}, policy.Grant{Principal: "p", Tool: "files.read", Effect: policy.Deny})
	if got := strings.Join(names(t, f.turn(t, "p")), ","); got != "files.list,toolgate.escalate,web.fetch" {
		t.Errorf("files.read denied: %s", got)
	}
	f.grants(t, policy.Grant{Principal: "p", Tool: "files.*"})
	// The escalation tool is permission-filtered like any other.
	for _, n := range names(t, f.turn(t, "p")) {
		if n == kernel.EscalateID {
			t.Errorf("%s published without a grant on it", kernel.EscalateID)
		}
	}
	f.grants(t, policy.Grant{Principal: "p", Tool: "toolgate.escalate", Action: "execute"})
	if got := strings.Join(names(t, f.turn(t, "p")), ","); got != kernel.EscalateID {
		t.Errorf("escalate granted: %s", got)
	}
}

func TestPublishedForm(t *testing.T) {
	tool := echoTool("files.read")
	tool.InputSchema = json.RawMessage(`{ "type": "object",
		"properties": {"path": {"type": "string"}} }`)
	w := &kernel.Tool{ID: "files.write", Description: "write", InputSchema: json.RawMessage(`{"type":"object"}`),
		Annotations: kernel.Annotations{Destructive: true, OpenWorld: new(false)}, Source: "workspace",
		Run: func(context.Context, *kernel.Call) (*kernel.Output, error) { return &kernel.Output{}, nil }}
	f := newFixture(t, tool, w)
	f.grants(t, policy.Grant{Principal: "p", Tool: "files.*"})
	l, _ := f.turn(t, "p").ListTools(context.Background())
	want := []string{
		`{"name":"files.read","description":"echo files.read","inputSchema":{"type":"object","properties":{"path":{"type":"string"}}},"outputSchema":{"type":"object"},"annotations":{"readOnlyHint":true},"_meta":{"toolgate/namespace":"files","toolgate/source":"test"}}`,
		`{"name":"files.write","description":"write","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":false,"destructiveHint":true,"idempotentHint":false,"openWorldHint":false},"_meta":{"toolgate/namespace":"files","toolgate/source":"workspace"}}`,
	}
	if len(l.Tools) != len(want) {
		t.Fatalf("got %d tools", len(l.Tools))
	}
	for i := range want {
		if string(l.Tools[i]) != want[i] {
			t.Errorf("tool %d:\n got %s\nwant %s", i, l.Tools[i], want[i])
		}
	}
	if len(l.CatalogHash) != 64 || strings.Trim(l.CatalogHash, "0123456789abcdef") != "" {
		t.Errorf("catalogHash %q is not 64 hex characters", l.CatalogHash)
	}
	if !strings.HasPrefix(l.ExecutionID, "exec-") {
		t.Errorf("execution id %q", l.ExecutionID)
	}
}

func TestCatalogHashIndependentOfOrderAliasTransport(t *testing.T) {
	a, b := echoTool("a.one"), echoTool("b.two")
	f1 := newFixture(t, a, b)
	f2 := newFixture(t, echoTool("b.two"), echoTool("a.one"))
	// The same schema written with other member order and whitespace.
	f2b := echoTool("b.two")
	f2b.InputSchema = json.RawMessage(`{"additionalProperties": false, "properties":{"path":{"type":"string"},"msg":{"type":"string"}},"type":"object"}`)
	f3 := newFixture(t, f2b, echoTool("a.one"))
	g := policy.Grant{Principal: "*", Tool: "*"}
	var hashes []string
	for i, f := range []*fixture{f1, f2, f3} {
		f.grants(t, g)
		for j, o := range []kernel.TurnOptions{
			{Principal: "p", Transport: "stdio"},
			{Principal: "q", Transport: "http", Alias: func(n string) string { return "mcp__toolgate__" + n }},
		} {
			tr, err := f.k.OpenTurn(context.Background(), o)
			if err != nil {
				t.Fatal(err)
			}
			l, _ := tr.ListTools(context.Background())
			hashes = append(hashes, l.CatalogHash)
			if i == 0 && j == 1 && l.ExecutionID == hashes[0] {
				t.Errorf("execution id equals hash")
			}
		}
	}
	for i, h := range hashes {
		if h != hashes[0] {
			t.Errorf("hash %d = %s, want %s", i, h, hashes[0])
		}
	}
	// A different tool set gives a different hash.
	f1.grants(t, policy.Grant{Principal: "p", Tool: "a.*"})
	l, _ := f1.turn(t, "p").ListTools(context.Background())
	if l.CatalogHash == hashes[0] {
		t.Errorf("a smaller catalogue has the same hash")
	}
	// A renamed surface publishes other names, so another hash.
	tr, _ := f2.k.OpenTurn(context.Background(), kernel.TurnOptions{Principal: "p", Namer: func(id string) string { return "x_" + id }})
	l2, _ := tr.ListTools(context.Background())
	if l2.CatalogHash == hashes[0] {
		t.Errorf("renamed tools have the same hash")
	}
}

func TestCatalogLimit(t *testing.T) {
	var tools []*kernel.Tool
	for i := 0; i < kernel.MaxCatalog+1; i++ {
		tools = append(tools, echoTool(fmt.Sprintf("ns.t%03d", i)))
	}
	f := newFixture(t, tools...)
	f.grants(t, policy.Grant{Principal: "p", Tool: "ns.*"})
	_, err := f.k.OpenTurn(context.Background(), kernel.TurnOptions{Principal: "p"})
	if !errors.Is(err, kernel.ErrCatalogTooLarge) || !strings.Contains(err.Error(), "513") {
		t.Fatalf("513 tools: %v, want ErrCatalogTooLarge naming the count", err)
	}
	f.grants(t, policy.Grant{Principal: "p", Tool: "ns.*"}, policy.Grant{Principal: "p", Tool: "ns.t000", Effect: policy.Deny})
	tr := f.turn(t, "p")
	if n := len(names(t, tr)); n != kernel.MaxCatalog {
		t.Errorf("512 tools: published %d", n)
	}
}

func TestRegisterRejects(t *testing.T) {
	run := func(context.Context, *kernel.Call) (*kernel.Output, error) { return nil, nil }
	bad := []*kernel.Tool{
		{ID: "noDot", Run: run},
		{ID: "Ns.x", Run: run},
		{ID: "ns.x"},
		{ID: "ns.x", Run: run, InputSchema: json.RawMessage(`[`)},
		{ID: "ns.x", Run: run, InputSchema: json.RawMessage(`"string"`)},
		{ID: "ns.x", Run: run, InputSchema: json.RawMessage(`{"type":"string"}`)},
		{ID: "ns.x", Run: run, InputSchema: json.RawMessage(`{"type":"object","properties":{"a":{"$ref":"file:///etc/passwd"}}}`)},
		{ID: "ns.x", Run: run, InputSchema: json.RawMessage(`{"type":"object","properties":{"a":{"$ref":"http://127.0.0.1:1/x.json"}}}`)},
		{ID: "ns.x", Run: run, InputSchema: json.RawMessage(`{"type":"object","properties":{"a":{"type":"nonsense"}}}`)},
		{ID: "ns.x", Run: run, OutputSchema: json.RawMessage(`[]`)},
	}
	f := newFixture(t)
	for i, tool := range bad {
		if err := f.k.Register(tool); !errors.Is(err, kernel.ErrInvalidTool) {
			t.Errorf("bad tool %d registered: %v", i, err)
		}
	}
	if err := f.k.Register(echoTool("ns.x")); err != nil {
		t.Fatal(err)
	}
	if err := f.k.Register(echoTool("ns.x")); !errors.Is(err, kernel.ErrInvalidTool) {
		t.Errorf("duplicate registered: %v", err)
	}
	if err := f.k.Register(echoTool(kernel.EscalateID)); err == nil {
		t.Errorf("toolgate.escalate could be replaced")
	}
}

func TestSuccessfulCall(t *testing.T) {
	f := newFixture(t, echoTool("files.read"))
	f.grants(t, policy.Grant{ID: "gread", Principal: "p", Tool: "files.read", Action: "read", Resource: "path:docs/"})
	tr := f.turn(t, "p")
	r := call(t, tr, "files.read", `{"path":"docs/./a.md","msg":"s3cret"}`)
	if r.IsError {
		t.Fatalf("refused: %s", mustJSON(r))
	}
	var sc struct {
		Principal string
		Call      string
	}
	if err := json.Unmarshal(r.StructuredContent, &sc); err != nil || sc.Principal != "p" {
		t.Fatalf("structuredContent %s: %v", r.StructuredContent, err)
	}
	if len(r.Content) != 1 || !strings.Contains(string(r.Content[0]), `"type":"text"`) {
		t.Errorf("content %s", r.Content)
	}
	evs := f.aud.ByCall(sc.Call)
	if len(evs) != 1 {
		t.Fatalf("events for the call: %+v", evs)
	}
	e := evs[0]
	if e.Decision != audit.Allowed || e.GrantID != "gread" || e.Tool != "files.read" || e.Resource != "path:docs/a.md" ||
		e.Action != "read" || e.Principal != "p" || e.TurnID != tr.ID() || e.Transport != "test" || e.Time.IsZero() {
		t.Errorf("allowed event %+v", e)
	}
	if e.Args["msg"] != "h" || strings.Contains(mustJSON(e), "s3cret") {
		t.Errorf("event arguments not hashed: %+v", e.Args)
	}
}

// A failure the tool reports itself keeps its content and says failed/tool_failed.
func TestToolReportedError(t *testing.T) {
	f := newFixture(t, &kernel.Tool{ID: "x.y", InputSchema: json.RawMessage(`{"type":"object"}`),
		Run: func(context.Context, *kernel.Call) (*kernel.Output, error) {
			return &kernel.Output{Text: "exit status 3", IsError: true}, nil
		}})
	f.grants(t, policy.Grant{Principal: "p", Tool: "*"})
	r := call(t, f.turn(t, "p"), "x.y", "")
	if !r.IsError || !strings.Contains(string(r.Content[0]), "exit status 3") ||
		r.Meta["toolgate/status"] != "failed" || r.Meta["toolgate/code"] != "tool_failed" {
		t.Errorf("tool-reported error: %s", mustJSON(r))
	}
	evs := f.aud.Events()
	if len(evs) != 2 || evs[0].Decision != audit.Allowed || evs[1].Decision != audit.Failed || evs[1].Code != "tool_failed" {
		t.Errorf("events %+v", evs)
	}
}

// A 2026-07-28 call may answer input_required; the retry carries the responses and
// state to the tool and is authorized and audited again. An older session's call
// cannot, and fails instead.
func TestInputRequiredRoundTrip(t *testing.T) {
	var seen []*kernel.Call
	f := newFixture(t, &kernel.Tool{ID: "local.ask", InputSchema: json.RawMessage(`{"type":"object"}`),
		Run: func(_ context.Context, c *kernel.Call) (*kernel.Output, error) {
			seen = append(seen, c)
			if c.InputResponses == nil {
				return &kernel.Output{InputRequests: json.RawMessage(`{"answer":{"method":"elicitation/create"}}`), RequestState: json.RawMessage(`"s1"`)}, nil
			}
			return &kernel.Output{Text: "got " + string(c.InputResponses)}, nil
		}})
	f.grants(t, policy.Grant{Principal: "p", Tool: "local.*"})
	tr := f.turn(t, "p")
	ctx := context.Background()
	r, err := tr.CallTool(ctx, &mcpspec.CallRequest{Name: "local.ask", ProtocolVersion: mcpspec.ModernVersion})
	if err != nil || r.ResultType != "input_required" || string(r.RequestState) != `"s1"` || r.IsError {
		t.Fatalf("first round: %+v %v", r, err)
	}
	r, err = tr.CallTool(ctx, &mcpspec.CallRequest{Name: "local.ask", ProtocolVersion: mcpspec.ModernVersion,
		InputResponses: json.RawMessage(`{"answer":"yes"}`), RequestState: json.RawMessage(`"s1"`)})
	if err != nil || r.ResultType != "" || r.IsError || !strings.Contains(string(r.Content[0]), "yes") {
		t.Fatalf("second round: %s %v", mustJSON(r), err)
	}
	if len(seen) != 2 || string(seen[1].RequestState) != `"s1"` || seen[1].ProtocolVersion != mcpspec.ModernVersion {
		t.Errorf("calls seen by the tool: %+v", seen)
	}
	evs := f.aud.Events()
	if len(evs) != 2 || evs[0].Decision != audit.Allowed || evs[1].Decision != audit.Allowed || evs[0].CallID == evs[1].CallID {
		t.Errorf("each round is its own authorized call: %+v", evs)
	}
	refusal(t, call(t, tr, "local.ask", ""), kernel.StatusFailed, kernel.CodeToolFailed)
}

func TestStructuredContentOnlyWithSchemaAndObject(t *testing.T) {
	mk := func(id string, schema bool, out any) *kernel.Tool {
		tool := &kernel.Tool{ID: id, InputSchema: json.RawMessage(`{"type":"object"}`),
			Run: func(context.Context, *kernel.Call) (*kernel.Output, error) {
				return &kernel.Output{Structured: out, Text: "t"}, nil
			}}
		if schema {
			tool.OutputSchema = json.RawMessage(`{"type":"object"}`)
		}
		return tool
	}
	f := newFixture(t, mk("a.obj", true, map[string]any{"x": 1}), mk("a.arr", true, []int{1}), mk("a.noschema", false, map[string]any{"x": 1}))
	f.grants(t, policy.Grant{Principal: "p", Tool: "*"})
	tr := f.turn(t, "p")
	if r := call(t, tr, "a.obj", ""); string(r.StructuredContent) != `{"x":1}` {
		t.Errorf("object with schema: %s", r.StructuredContent)
	}
	if r := call(t, tr, "a.arr", ""); r.StructuredContent != nil {
		t.Errorf("array output published as structuredContent")
	}
	if r := call(t, tr, "a.noschema", ""); r.StructuredContent != nil {
		t.Errorf("output without outputSchema published as structuredContent")
	}
}

// Every reason code in errors.go is produced here, through the real call path.
func TestEveryReasonCode(t *testing.T) {
	block := make(chan struct{})
	tools := []*kernel.Tool{
		echoTool("files.read"),
		echoTool("web.fetch"),
		{ID: "files.write", InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`),
			Access: func(a map[string]any) (kernel.Access, error) {
				p := a["path"].(string)
				return kernel.Access{Action: kernel.ActionWrite, Resource: "path:" + p, Protected: strings.HasPrefix(p, ".git/hooks"), ProtectedRoot: "path:.git/hooks"}, nil
			},
			Run: func(context.Context, *kernel.Call) (*kernel.Output, error) { return &kernel.Output{Text: "ok"}, nil }},
		{ID: "bash.run", InputSchema: json.RawMessage(`{"type":"object"}`),
			Run: func(context.Context, *kernel.Call) (*kernel.Output, error) {
				return nil, kernel.Failed(kernel.CodeSandboxUnavailable, "no sandbox on this host")
			}},
		{ID: "slow.op", InputSchema: json.RawMessage(`{"type":"object"}`),
			Run: func(ctx context.Context, _ *kernel.Call) (*kernel.Output, error) {
				ctx, cancel := context.WithTimeout(ctx, time.Nanosecond)
				defer cancel()
				select {
				case <-ctx.Done():
					return nil, fmt.Errorf("waiting: %w", ctx.Err())
				case <-block:
					return nil, nil
				}
			}},
		{ID: "bad.tool", InputSchema: json.RawMessage(`{"type":"object","properties":{"token":{"type":"string"}}}`),
			Run: func(_ context.Context, c *kernel.Call) (*kernel.Output, error) {
				return nil, fmt.Errorf("disk on fire while using %v", c.Args["token"])
			}},
		{ID: "bad.panic", InputSchema: json.RawMessage(`{"type":"object"}`),
			Run: func(context.Context, *kernel.Call) (*kernel.Output, error) { panic("boom") }},
		{ID: "bad.access", InputSchema: json.RawMessage(`{"type":"object"}`),
			Access: func(map[string]any) (kernel.Access, error) { return kernel.Access{Action: "delete"}, nil },
			Run:    func(context.Context, *kernel.Call) (*kernel.Output, error) { return nil, nil }},
	}
	f := newFixture(t, tools...)
	f.grants(t,
		policy.Grant{ID: "a", Principal: "p", Tool: "files.*", Action: "read", Resource: "path:docs/"},
		policy.Grant{ID: "h", Principal: "p", Tool: "files.write", Action: "write", Resource: "path:"},
		policy.Grant{ID: "b", Principal: "p", Tool: "bash.run"},
		policy.Grant{ID: "c", Principal: "p", Tool: "slow.op"},
		policy.Grant{ID: "d", Principal: "p", Tool: "bad.*"},
		policy.Grant{ID: "e", Principal: "p", Tool: "web.fetch"},
		policy.Grant{ID: "f", Principal: "p", Tool: "files.read", Resource: "path:secret/", Effect: policy.Deny},
		policy.Grant{ID: "g", Principal: "p", Tool: "toolgate.escalate"},
	)
	type tc struct {
		name, tool, args string
		status           kernel.Status
		code             kernel.Code
		auditCode        kernel.Code
		grant            string
	}
	cases := []tc{
		{"no grant covers the resource", "files.read", `{"path":"x"}`, kernel.StatusDenied, kernel.CodeNoMatchingGrant, "", ""},
		{"explicit deny", "files.read", `{"path":"secret/k"}`, kernel.StatusDenied, kernel.CodeExplicitDeny, "", "f"},
		{"unknown tool", "files.nope", `{}`, kernel.StatusDenied, kernel.CodeToolUnavailable, "", ""},
		{"misspelled tool", "Files.read", `{}`, kernel.StatusDenied, kernel.CodeToolUnavailable, "", ""},
		{"invalid arguments", "files.read", `{"path":7}`, kernel.StatusFailed, kernel.CodeInvalidArguments, "", ""},
		{"unknown argument", "files.read", `{"nope":1}`, kernel.StatusFailed, kernel.CodeInvalidArguments, "", ""},
		{"arguments not an object", "files.read", `[1]`, kernel.StatusFailed, kernel.CodeInvalidArguments, "", ""},
		{"path escapes", "files.read", `{"path":"docs/../../etc/passwd"}`, kernel.StatusDenied, kernel.CodePathOutsideWorkspace, "", ""},
		{"absolute path", "files.read", `{"path":"/etc/passwd"}`, kernel.StatusDenied, kernel.CodePathOutsideWorkspace, "", ""},
		{"protected path", "files.write", `{"path":".git/hooks/pre-commit"}`, kernel.StatusDenied, kernel.CodeProtectedPath, "", ""},
		{"sandbox", "bash.run", `{}`, kernel.StatusFailed, kernel.CodeSandboxUnavailable, "", "b"},
		{"timeout", "slow.op", `{}`, kernel.StatusFailed, kernel.CodeTimeout, "", "c"},
		{"tool failed", "bad.tool", `{"token":"hunter2"}`, kernel.StatusFailed, kernel.CodeToolFailed, "", "d"},
		{"tool panicked", "bad.panic", `{}`, kernel.StatusFailed, kernel.CodeToolFailed, "", "d"},
		{"internal", "bad.access", `{}`, kernel.StatusFailed, kernel.CodeInternal, "", ""},
	}
	tr := f.turn(t, "p")
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := len(f.aud.Events())
			r := call(t, tr, c.tool, c.args)
			refusal(t, r, c.status, c.code)
			evs := f.aud.Events()[before:]
			last := evs[len(evs)-1]
			want := c.code
			if c.auditCode != "" {
				want = c.auditCode
			}
			if last.Code != string(want) || last.GrantID != c.grant {
				t.Errorf("audit event code %q grant %q, want %q %q", last.Code, last.GrantID, want, c.grant)
			}
			wantDecision := audit.Denied
			if c.status == kernel.StatusFailed {
				wantDecision = audit.Failed
			}
			if last.Decision != wantDecision {
				t.Errorf("audit decision %q, want %q", last.Decision, wantDecision)
			}
			if b, _ := json.Marshal(evs); strings.Contains(string(b), "etc/passwd") || strings.Contains(string(b), "hunter2") {
				t.Errorf("audit events echo argument values: %s", b)
			}
		})
	}

	t.Run("namespace disabled is audited as such", func(t *testing.T) {
		f.k.SetNamespaces(map[string]bool{"web": false})
		defer f.k.SetNamespaces(nil)
		tr := f.turn(t, "p")
		refusal(t, call(t, tr, "web.fetch", `{}`), kernel.StatusDenied, kernel.CodeToolUnavailable)
		if e := f.aud.Last(); e.Code != string(kernel.CodeNamespaceDisabled) || e.Tool != "web.fetch" {
			t.Errorf("audit %+v, want namespace_disabled", e)
		}
	})

	t.Run("outside capability", func(t *testing.T) {
		tr, err := f.k.OpenTurn(context.Background(), kernel.TurnOptions{Principal: "p", Capabilities: []string{"files.*:read"}})
		if err != nil {
			t.Fatal(err)
		}
		b := refusal(t, call(t, tr, "files.write", `{"path":"docs/a"}`), kernel.StatusDenied, kernel.CodeOutsideCapability)
		if b.Retryable == nil || *b.Retryable {
			t.Errorf("outside_capability must say retryable:false: %+v", b)
		}
		if e := f.aud.Last(); e.Code != string(kernel.CodeOutsideCapability) || e.Decision != audit.Denied || e.GrantID != "" {
			t.Errorf("audit %+v, want denied outside_capability without a grant", e)
		}
	})

	t.Run("audit unavailable", func(t *testing.T) {
		ran := false
		f2 := newFixture(t, &kernel.Tool{ID: "x.y", InputSchema: json.RawMessage(`{"type":"object"}`),
			Run: func(context.Context, *kernel.Call) (*kernel.Output, error) { ran = true; return &kernel.Output{}, nil }})
		f2.grants(t, policy.Grant{Principal: "p", Tool: "*"})
		tr := f2.turn(t, "p")
		f2.aud.SetFailing(true)
		b := refusal(t, call(t, tr, "x.y", `{}`), kernel.StatusFailed, kernel.CodeAuditUnavailable)
		if ran {
			t.Errorf("the tool ran although its allowed event could not be written")
		}
		if b.Retryable == nil || !*b.Retryable {
			t.Errorf("audit_unavailable should be retryable: %+v", b)
		}
		if tr.Outcome() != kernel.OutcomeFailed {
			t.Errorf("outcome %s", tr.Outcome())
		}
		f2.aud.SetFailing(false)
		if r := call(t, tr, "x.y", `{}`); r.IsError || !ran {
			t.Errorf("after the log recovered the call should run: %s", mustJSON(r))
		}
	})

	t.Run("escalation pending and turn closed", func(t *testing.T) {
		tr := f.turn(t, "p")
		r := call(t, tr, "toolgate.escalate", `{"reason":"need prod access","note":"ticket 7"}`)
		if r.IsError || string(r.StructuredContent) != `{"escalated":true,"note":"ticket 7","reason":"need prod access"}` {
			t.Fatalf("escalate result %s", mustJSON(r))
		}
		if tr.Outcome() != kernel.OutcomeEscalated {
			t.Errorf("outcome %s", tr.Outcome())
		}
		if e := f.aud.Last(); e.Decision != audit.Escalated || e.Tool != kernel.EscalateID || e.GrantID != "g" {
			t.Errorf("escalation audit %+v", e)
		}
		esc := f.esc.List()
		if len(esc) != 1 || esc[0].Reason != "need prod access" || esc[0].Note != "ticket 7" || esc[0].TurnID != tr.ID() || esc[0].Principal != "p" {
			t.Errorf("escalations %+v", esc)
		}
		for _, name := range []string{"files.read", "toolgate.escalate", "no.such"} {
			b := refusal(t, call(t, tr, name, `{"reason":"again"}`), kernel.StatusDenied, kernel.CodeEscalationPending)
			if b.Retryable == nil || *b.Retryable {
				t.Errorf("escalation_pending must say retryable:false: %+v", b)
			}
		}
		tr2 := f.turn(t, "p")
		_ = tr2.Close()
		refusal(t, call(t, tr2, "files.read", `{}`), kernel.StatusDenied, kernel.CodeTurnClosed)
	})
	close(block)
}

func TestEscalateValidatedAndStoreFailure(t *testing.T) {
	f := newFixture(t)
	f.grants(t, policy.Grant{Principal: "p", Tool: "toolgate.escalate", Action: "execute"})
	tr := f.turn(t, "p")
	refusal(t, call(t, tr, "toolgate.escalate", `{}`), kernel.StatusFailed, kernel.CodeInvalidArguments)
	refusal(t, call(t, tr, "toolgate.escalate", `{"reason":""}`), kernel.StatusFailed, kernel.CodeInvalidArguments)
	if tr.Outcome() != kernel.OutcomeCompleted {
		t.Errorf("an invalid escalation ended the turn")
	}
	f.esc.SetFailing(true)
	refusal(t, call(t, tr, "toolgate.escalate", `{"reason":"r"}`), kernel.StatusFailed, kernel.CodeInternal)
	// A principal without the grant is refused tool_unavailable: it was never published.
	refusal(t, call(t, f.turn(t, "q"), "toolgate.escalate", `{"reason":"r"}`), kernel.StatusDenied, kernel.CodeToolUnavailable)
}

// The allowed event is durable before the tool runs.
func TestAllowedEventBeforeRun(t *testing.T) {
	var f *fixture
	var seen []audit.Event
	tool := &kernel.Tool{ID: "x.y", InputSchema: json.RawMessage(`{"type":"object"}`),
		Run: func(_ context.Context, c *kernel.Call) (*kernel.Output, error) {
			seen = f.aud.ByCall(c.ID)
			return nil, errors.New("then it failed")
		}}
	f = newFixture(t, tool)
	f.grants(t, policy.Grant{Principal: "p", Tool: "*"})
	call(t, f.turn(t, "p"), "x.y", "")
	if len(seen) != 1 || seen[0].Decision != audit.Allowed {
		t.Fatalf("during Run the log held %+v, want one allowed event", seen)
	}
	evs := f.aud.ByCall(seen[0].CallID)
	if len(evs) != 2 || evs[1].Decision != audit.Failed || evs[1].Code != string(kernel.CodeToolFailed) {
		t.Errorf("after a failing run: %+v", evs)
	}
}

func TestNamerMapsBack(t *testing.T) {
	f := newFixture(t, echoTool("files.read"))
	f.grants(t, policy.Grant{Principal: "p", Tool: "files.*"})
	tr, err := f.k.OpenTurn(context.Background(), kernel.TurnOptions{Principal: "p",
		Namer: func(id string) string { return "toolgate_" + strings.ReplaceAll(id, ".", "_") },
		Alias: func(n string) string { return "mcp__toolgate__" + n }})
	if err != nil {
		t.Fatal(err)
	}
	if got := names(t, tr); len(got) != 1 || got[0] != "toolgate_files_read" {
		t.Fatalf("published %v", got)
	}
	if r := call(t, tr, "toolgate_files_read", `{}`); r.IsError {
		t.Fatalf("published name refused: %s", mustJSON(r))
	}
	e := f.aud.Last()
	if e.Tool != "files.read" || e.Alias != "mcp__toolgate__toolgate_files_read" {
		t.Errorf("audit %+v", e)
	}
	// The canonical id is not a published name on this surface.
	refusal(t, call(t, tr, "files.read", `{}`), kernel.StatusDenied, kernel.CodeToolUnavailable)
	// An alias never reaches a decision.
	refusal(t, call(t, tr, "mcp__toolgate__toolgate_files_read", `{}`), kernel.StatusDenied, kernel.CodeToolUnavailable)
	// A namer that is not one-to-one is refused at open.
	_, err = f.k.OpenTurn(context.Background(), kernel.TurnOptions{Principal: "p", Namer: func(string) string { return "same" }})
	if err == nil {
		f2 := newFixture(t, echoTool("a.b"), echoTool("a.c"))
		f2.grants(t, policy.Grant{Principal: "p", Tool: "*"})
		if _, err := f2.k.OpenTurn(context.Background(), kernel.TurnOptions{Principal: "p", Namer: func(string) string { return "same" }}); err == nil {
			t.Errorf("a namer mapping two tools to one name was accepted")
		}
	}
}

// Turns share a resolved catalogue until the grants, the namespace switches or the
// registry change; each still has its own execution id.
func TestCatalogueCacheInvalidation(t *testing.T) {
	f := newFixture(t, echoTool("files.read"))
	f.grants(t, policy.Grant{Principal: "p", Tool: "files.*"})
	t1, t2 := f.turn(t, "p"), f.turn(t, "p")
	l1, _ := t1.ListTools(context.Background())
	l2, _ := t2.ListTools(context.Background())
	if l1.ExecutionID == l2.ExecutionID || l1.CatalogHash != l2.CatalogHash {
		t.Errorf("two turns: ids %s %s, hashes %s %s", l1.ExecutionID, l2.ExecutionID, l1.CatalogHash, l2.CatalogHash)
	}
	if err := f.k.Register(echoTool("files.list")); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(names(t, f.turn(t, "p")), ","); got != "files.list,files.read" {
		t.Errorf("after Register: %s", got)
	}
	f.k.SetNamespaces(map[string]bool{"files": false})
	if got := names(t, f.turn(t, "p")); len(got) != 0 {
		t.Errorf("after disabling files: %v", got)
	}
	f.k.SetNamespaces(nil)
	f.grants(t, policy.Grant{Principal: "p", Tool: "files.list"})
	if got := strings.Join(names(t, f.turn(t, "p")), ","); got != "files.list" {
		t.Errorf("after narrowing the grant: %s", got)
	}
	if got := names(t, f.turn(t, "q")); len(got) != 0 {
		t.Errorf("another principal shares p's catalogue: %v", got)
	}
	// The old turns are unaffected.
	if got := strings.Join(names(t, t1), ","); got != "files.read" {
		t.Errorf("an open turn changed: %s", got)
	}
}

// A turn keeps the catalogue and policy it opened with.
func TestTurnIsFixed(t *testing.T) {
	f := newFixture(t, echoTool("files.read"), echoTool("files.write"))
	f.grants(t, policy.Grant{Principal: "p", Tool: "files.read"})
	tr := f.turn(t, "p")
	before, _ := tr.ListTools(context.Background())
	if r := call(t, tr, "files.read", `{}`); r.IsError {
		t.Fatalf("granted call refused: %s", mustJSON(r))
	}

	// A wider grant never widens an open turn: files.write stays unpublished there.
	f.grants(t, policy.Grant{Principal: "p", Tool: "files.*"})
	if r := call(t, tr, "files.write", `{}`); !r.IsError || r.Meta["toolgate/code"] != "tool_unavailable" {
		t.Errorf("a newer, wider policy widened the open turn: %s", mustJSON(r))
	}

	// A revocation reaches the open turn at its next call; its catalogue does not change.
	f.grants(t)
	after, _ := tr.ListTools(context.Background())
	if before.CatalogHash != after.CatalogHash || len(after.Tools) != 1 {
		t.Errorf("catalogue changed under an open turn")
	}
	if r := call(t, tr, "files.read", `{}`); !r.IsError || r.Meta["toolgate/code"] != "no_matching_grant" {
		t.Errorf("revoked grant still allowed a call on the open turn: %s", mustJSON(r))
	}
	if len(names(t, f.turn(t, "p"))) != 0 {
		t.Errorf("a new turn did not pick up the revoked grant")
	}
}

// 10,000 concurrent calls from mixed principals never cross principals.
func TestConcurrentCallsNeverCrossPrincipals(t *testing.T) {
	f := newFixture(t, echoTool("files.read"), echoTool("admin.only"))
	f.grants(t,
		policy.Grant{Principal: "*", Tool: "files.read"},
		policy.Grant{Principal: "p0", Tool: "admin.only"},
	)
	const principals, calls = 10, 10000
	turns := make([]*kernel.Turn, principals)
	for i := range turns {
		turns[i] = f.turn(t, fmt.Sprintf("p%d", i))
	}
	var wg sync.WaitGroup
	errs := make(chan string, calls)
	for i := 0; i < calls; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			p := i % principals
			tool := "files.read"
			if i%3 == 0 {
				tool = "admin.only"
			}
			r, err := turns[p].CallTool(context.Background(), &mcpspec.CallRequest{Name: tool, Arguments: json.RawMessage(fmt.Sprintf(`{"msg":"%d"}`, i))})
			if err != nil {
				errs <- err.Error()
				return
			}
			if tool == "admin.only" && p != 0 {
				if !r.IsError || r.Meta["toolgate/code"] != string(kernel.CodeToolUnavailable) {
					errs <- fmt.Sprintf("p%d ran admin.only", p)
				}
				return
			}
			var sc struct {
				Principal string
				Args      map[string]string
			}
			if err := json.Unmarshal(r.StructuredContent, &sc); err != nil || sc.Principal != fmt.Sprintf("p%d", p) || sc.Args["msg"] != fmt.Sprint(i) {
				errs <- fmt.Sprintf("call %d of p%d answered %s", i, p, r.StructuredContent)
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	n := 0
	for e := range errs {
		if n++; n <= 5 {
			t.Error(e)
		}
	}
	evs := f.aud.Events()
	if len(evs) != calls {
		t.Errorf("%d audit events for %d calls", len(evs), calls)
	}
	byTurn := map[string]string{}
	for _, tr := range turns {
		byTurn[tr.ID()] = tr.Principal()
	}
	for _, e := range evs {
		if byTurn[e.TurnID] != e.Principal {
			t.Fatalf("event %+v recorded under the wrong principal", e)
		}
	}
}

// Hostile inputs: huge names, deep arguments, invalid UTF-8 never panic.
func TestHostileCalls(t *testing.T) {
	f := newFixture(t, echoTool("files.read"))
	f.grants(t, policy.Grant{Principal: "p", Tool: "*"})
	tr := f.turn(t, "p")
	huge := strings.Repeat("é", 100000)
	b := refusal(t, call(t, tr, huge, ""), kernel.StatusDenied, kernel.CodeToolUnavailable)
	if len(b.Message) > 400 {
		t.Errorf("refusal echoes a %d-byte name", len(b.Message))
	}
	refusal(t, call(t, tr, "files.\xff\x00read", ""), kernel.StatusDenied, kernel.CodeToolUnavailable)
	if e := f.aud.Last(); !utf8.ValidString(e.Tool) || !utf8.ValidString(e.Message) {
		t.Errorf("audit event carries invalid UTF-8: %q %q", e.Tool, e.Message)
	}
	deep := strings.Repeat(`{"a":`, 500) + "1" + strings.Repeat("}", 500)
	refusal(t, call(t, tr, "files.read", `{"msg":`+deep+`}`), kernel.StatusFailed, kernel.CodeInvalidArguments)
	refusal(t, call(t, tr, "files.read", `{"msg":"\xff"`), kernel.StatusFailed, kernel.CodeInvalidArguments)
	refusal(t, call(t, tr, "files.read", `"str"`), kernel.StatusFailed, kernel.CodeInvalidArguments)
	refusal(t, call(t, tr, "files.read", `{"msg":"a"} {"msg":"b"}`), kernel.StatusFailed, kernel.CodeInvalidArguments)
	refusal(t, call(t, tr, "files.read", `{"msg":"a"}x`), kernel.StatusFailed, kernel.CodeInvalidArguments)
	refusal(t, call(t, tr, "files.read", `{"msg":1e999999}`), kernel.StatusFailed, kernel.CodeInvalidArguments)
	refusal(t, call(t, tr, "files.read", `{"path":"a\u0000b"}`), kernel.StatusFailed, kernel.CodeInvalidArguments)
	refusal(t, call(t, tr, "files.read", `{"path":"a\\..\\..\\x"}`), kernel.StatusFailed, kernel.CodeInvalidArguments)
	if _, err := f.k.OpenTurn(context.Background(), kernel.TurnOptions{}); err == nil {
		t.Errorf("a turn opened without a principal")
	}
}

func TestKernelOptionsRequired(t *testing.T) {
	if _, err := kernel.New(kernel.Options{}); err == nil {
		t.Errorf("kernel without an audit log")
	}
}
