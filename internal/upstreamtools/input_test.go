package upstreamtools_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/toolgate/toolgate/internal/host"
	"github.com/toolgate/toolgate/internal/kernel"
	"github.com/toolgate/toolgate/internal/kernel/kerneltest"
	"github.com/toolgate/toolgate/internal/mcpspec"
	"github.com/toolgate/toolgate/internal/policy"
	"github.com/toolgate/toolgate/internal/upstreamtools"
)

// askingCaller is a session-based upstream whose tool asks its client for a name
// (elicitation/create) mid-call and answers with what it got.
type askingCaller struct{}

func (askingCaller) Call(ctx context.Context, _, _ string, _ json.RawMessage, opts host.CallOptions) (json.RawMessage, error) {
	ans, err := opts.Request(ctx, "elicitation/create", json.RawMessage(`{"message":"name?","requestedSchema":{"type":"object","properties":{"n":{"type":"number","default":1.50}}}}`))
	if err != nil {
		return json.RawMessage(`{"content":[{"type":"text","text":"refused"}],"isError":true}`), nil
	}
	b, _ := json.Marshal(string(ans))
	return json.RawMessage(`{"content":[{"type":"text","text":` + string(b) + `}]}`), nil
}

func askingTurn(t *testing.T, principal string) *kernel.Turn {
	t.Helper()
	k, err := kernel.New(kernel.Options{Audit: &kerneltest.Audit{}, Escalations: &kerneltest.Escalations{}})
	if err != nil {
		t.Fatal(err)
	}
	if err := k.SetGrants([]policy.Grant{{ID: "g", Principal: "*", Tool: "*", Action: "*", Effect: policy.Allow}}); err != nil {
		t.Fatal(err)
	}
	cat := upstreamtools.Build("srv", host.Catalog{Tools: tools(`{"name":"t","inputSchema":{"type":"object"}}`)}, askingCaller{}, nil)
	if _, err := k.ReplaceNamespace("srv", kernel.NamespacePolicy{}, cat.Tools...); err != nil {
		t.Fatal(err)
	}
	tr, err := k.OpenTurn(context.Background(), kernel.TurnOptions{Principal: principal})
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

var elicitCaps = mcpspec.NoPeer{Capabilities: json.RawMessage(`{"elicitation":{}}`)}

func modernCall(t *testing.T, tr *kernel.Turn, args, state, responses string, peer mcpspec.Peer) *mcpspec.CallResult {
	t.Helper()
	req := &mcpspec.CallRequest{Name: "srv.t", ProtocolVersion: mcpspec.ModernVersion, Peer: peer}
	if args != "" {
		req.Arguments = json.RawMessage(args)
	}
	if state != "" {
		req.RequestState = json.RawMessage(state)
	}
	if responses != "" {
		req.InputResponses = json.RawMessage(responses)
	}
	r, err := tr.CallTool(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// A session-based upstream's elicitation reaches a 2026-07-28 caller as
// input_required (the upstream's params byte for byte) with a requestState; the
// retry with inputResponses answers the held request and gets the upstream's result.
// A state that is tampered with, replayed after its retry, replayed by another
// principal or with other arguments is refused invalid_request_state.
func TestUpstreamInputRoundTrip(t *testing.T) {
	tr := askingTurn(t, "alice")
	first := modernCall(t, tr, `{"x":1}`, "", "", elicitCaps)
	if first.ResultType != mcpspec.ResultInputRequired || string(first.InputRequests) !=
		`{"upstream-1":{"method":"elicitation/create","params":{"message":"name?","requestedSchema":{"type":"object","properties":{"n":{"type":"number","default":1.50}}}}}}` {
		t.Fatalf("first round: %+v (%s)", first, first.InputRequests)
	}
	state := string(first.RequestState)
	// Tampered: one character of the sealed text changed.
	bad := []byte(state)
	bad[len(bad)-3] ^= 1
	if r := modernCall(t, tr, `{"x":1}`, string(bad), `{"upstream-1":{"action":"accept"}}`, elicitCaps); refusal(t, r).Code != string(kernel.CodeInvalidRequestState) {
		t.Errorf("tampered state: %+v", r)
	}
	if r := modernCall(t, tr, `{"x":2}`, state, `{"upstream-1":{"action":"accept"}}`, elicitCaps); refusal(t, r).Code != string(kernel.CodeInvalidRequestState) {
		t.Errorf("other arguments: %+v", r)
	}
	if r := modernCall(t, askingTurn(t, "mallory"), `{"x":1}`, state, `{"upstream-1":{"action":"accept"}}`, elicitCaps); refusal(t, r).Code != string(kernel.CodeInvalidRequestState) {
		t.Errorf("another principal: %+v", r)
	}
	done := modernCall(t, tr, `{"x":1}`, state, `{"upstream-1":{"action":"accept","content":{"n":1e2}}}`, elicitCaps)
	if done.IsError || !strings.Contains(string(done.Raw), `{\"action\":\"accept\",\"content\":{\"n\":1e2}}`) {
		t.Fatalf("retry: %+v %s", done, done.Raw)
	}
	if r := modernCall(t, tr, `{"x":1}`, state, `{"upstream-1":{"action":"accept"}}`, elicitCaps); refusal(t, r).Code != string(kernel.CodeInvalidRequestState) {
		t.Errorf("replayed after its retry: %+v", r)
	}
	// A caller that did not declare elicitation is not asked: the upstream is refused
	// and the call is answered -32021 naming the capability.
	r := modernCall(t, tr, `{}`, "", "", mcpspec.NoPeer{Capabilities: json.RawMessage(`{}`)})
	if !r.IsError || r.ResultType == mcpspec.ResultInputRequired || r.ProtocolError == nil ||
		r.ProtocolError.Code != mcpspec.CodeMissingClientCapability || string(r.ProtocolError.Data) != `{"requiredCapabilities":{"elicitation":{}}}` {
		t.Errorf("no elicitation capability: %+v %+v", r, r.ProtocolError)
	}
}

// A state past its expiry is refused, and the held upstream call was cancelled.
func TestUpstreamInputExpired(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := askingTurn(t, "alice")
		first := modernCall(t, tr, `{}`, "", "", elicitCaps)
		if first.ResultType != mcpspec.ResultInputRequired {
			t.Fatalf("first round: %+v", first)
		}
		time.Sleep(upstreamtools.InputTimeout + time.Second)
		synctest.Wait()
		r := modernCall(t, tr, `{}`, string(first.RequestState), `{"upstream-1":{"action":"accept"}}`, elicitCaps)
		if b := refusal(t, r); b.Code != string(kernel.CodeInvalidRequestState) || !strings.Contains(b.Message, "expired") {
			t.Errorf("expired state: %+v", b)
		}
	})
}

// originCaller answers with the principal of the Origin in the call's context.
type originCaller struct{}

func (originCaller) Call(ctx context.Context, _, _ string, _ json.RawMessage, _ host.CallOptions) (json.RawMessage, error) {
	o, _ := upstreamtools.OriginFrom(ctx)
	b, _ := json.Marshal("origin:" + o.Principal + "/" + o.TurnID)
	return json.RawMessage(`{"content":[{"type":"text","text":` + string(b) + `}]}`), nil
}

// A 2026-07-28 call runs upstream on a context of its own; the Origin still travels
// in it, or every request the upstream makes during the call is no caller's and
// refused (App.UpstreamRequests attributes requests by it).
func TestModernCallCarriesTheOrigin(t *testing.T) {
	k, err := kernel.New(kernel.Options{Audit: &kerneltest.Audit{}, Escalations: &kerneltest.Escalations{}})
	if err != nil {
		t.Fatal(err)
	}
	k.SetGrants([]policy.Grant{{ID: "g", Principal: "*", Tool: "*", Action: "*", Effect: policy.Allow}})
	cat := upstreamtools.Build("srv", host.Catalog{Tools: tools(`{"name":"t","inputSchema":{"type":"object"}}`)}, originCaller{}, nil)
	k.ReplaceNamespace("srv", kernel.NamespacePolicy{}, cat.Tools...)
	tr, err := k.OpenTurn(context.Background(), kernel.TurnOptions{Principal: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	r := modernCall(t, tr, `{}`, "", "", elicitCaps)
	if !strings.Contains(string(r.Raw), "origin:alice/"+tr.ID()) {
		t.Fatalf("the upstream call's context has no origin: %s", r.Raw)
	}
}
