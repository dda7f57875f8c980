package kernel_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/kernel"
	"github.com/toolgate/toolgate/internal/mcpspec"
	"github.com/toolgate/toolgate/internal/policy"
)

// A tool that forwards its call (to an upstream server) hands back the answer's bytes:
// they reach the surface as they are — member order, unknown members, number spelling —
// and their isError decides how the call is audited. A result two readers could read
// differently is refused.
func TestRawResultPassesThrough(t *testing.T) {
	var result json.RawMessage
	var forwarded json.RawMessage
	f := newFixture(t, &kernel.Tool{ID: "up.echo", InputSchema: json.RawMessage(`{"type":"object"}`),
		Run: func(_ context.Context, c *kernel.Call) (*kernel.Output, error) {
			forwarded = c.Arguments
			return &kernel.Output{Result: result, Text: "ignored"}, nil
		}})
	f.grants(t, policy.Grant{Principal: "p", Tool: "up.*"})
	tr := f.turn(t, "p")

	result = json.RawMessage(` {"content":[{"type":"text","text":"hi","z":1.50}],"isError":false,"_meta":{"b":1,"a":2},"x-upstream":{}} `)
	r := call(t, tr, "up.echo", `{"q":"x","n":1.0}`)
	if string(r.Raw) != `{"content":[{"type":"text","text":"hi","z":1.50}],"isError":false,"_meta":{"b":1,"a":2},"x-upstream":{}}` || r.IsError || r.ResultType != "" {
		t.Errorf("result %+v, raw %s", r, r.Raw)
	}
	if string(forwarded) != `{"n":1.0,"q":"x"}` {
		t.Errorf("the tool was given %s to forward", forwarded)
	}
	if ev := f.aud.Last(); ev.Decision != audit.Allowed {
		t.Errorf("a successful forwarded call is audited %+v", ev)
	}

	result = json.RawMessage(`{"content":[],"isError":true}`)
	if r := call(t, tr, "up.echo", `{}`); !r.IsError || string(r.Raw) != string(result) {
		t.Errorf("an upstream failure: %+v", r)
	}
	if ev := f.aud.Last(); ev.Decision != audit.Failed || ev.Code != string(kernel.CodeToolFailed) {
		t.Errorf("an upstream failure is audited %+v", ev)
	}

	result = json.RawMessage(`{"resultType":"input_required","inputRequests":{"a":{}}}`)
	if r := callModern(t, tr, "up.echo"); r.ResultType != mcpspec.ResultInputRequired || string(r.Raw) != string(result) {
		t.Errorf("a stateless upstream result: %+v", r)
	}

	for _, bad := range []string{`[1]`, `"x"`, `{"isError":false,"ISERROR":true}`, `{"isError":true,"isError":false}`, `{"content":[]`, `{"resultType":7}`} {
		result = json.RawMessage(bad)
		refusal(t, call(t, tr, "up.echo", `{}`), kernel.StatusFailed, kernel.CodeToolFailed)
	}
}

func callModern(t *testing.T, tr *kernel.Turn, name string) *mcpspec.CallResult {
	t.Helper()
	r, err := tr.CallTool(context.Background(), &mcpspec.CallRequest{Name: name, ProtocolVersion: mcpspec.ModernVersion})
	if err != nil {
		t.Fatal(err)
	}
	return r
}
