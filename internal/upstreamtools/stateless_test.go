package upstreamtools_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/toolgate/toolgate/internal/host"
	"github.com/toolgate/toolgate/internal/kernel"
	"github.com/toolgate/toolgate/internal/kernel/kerneltest"
	"github.com/toolgate/toolgate/internal/mcpspec"
	"github.com/toolgate/toolgate/internal/policy"
	"github.com/toolgate/toolgate/internal/rpcwire"
	"github.com/toolgate/toolgate/internal/upstream"
	"github.com/toolgate/toolgate/internal/upstreamtools"
)

// statelessUpstream is an upstream that speaks 2026-07-28: it records every request it
// gets (params and the capabilities declared) and answers with answer's result.
type statelessUpstream struct {
	mu     sync.Mutex
	params []json.RawMessage
	caps   []json.RawMessage
	answer func(params json.RawMessage) (json.RawMessage, error)
}

func (u *statelessUpstream) Call(_ context.Context, _, _ string, params json.RawMessage, opts host.CallOptions) (json.RawMessage, error) {
	if opts.Stateless == nil {
		return nil, errors.New("a 2026-07-28 call went to the legacy connection")
	}
	u.mu.Lock()
	u.params = append(u.params, params)
	u.caps = append(u.caps, opts.Stateless.Capabilities)
	u.mu.Unlock()
	return u.answer(params)
}

func (u *statelessUpstream) calls() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.params)
}

func (u *statelessUpstream) last() (params, caps json.RawMessage) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.params[len(u.params)-1], u.caps[len(u.caps)-1]
}

// askOnce asks for "name" (with the state "up-1") until the retry carries it, then
// completes; it echoes what it was given.
func askOnce(params json.RawMessage) (json.RawMessage, error) {
	if resp, ok := rpcwire.Member(params, "inputResponses"); ok {
		st, _ := rpcwire.Member(params, "requestState")
		return json.RawMessage(`{"resultType":"complete","content":[{"type":"text","text":"ok"}],"_meta":{"got":` + string(resp) + `,"state":` + string(st) + `}}`), nil
	}
	return json.RawMessage(`{"resultType":"input_required","inputRequests":{"name":{"method":"elicitation/create","params":{"message":"name?","requestedSchema":{"type":"object","properties":{"n":{"type":"number","default":1.50}}}}}},"requestState":"up-1"}`), nil
}

// denyPolicy lets servers ask for nothing but what allow names, and records what it
// was asked to decide.
type denyPolicy struct {
	allow    string
	recorded []string
}

func (p *denyPolicy) May(_, _, method string) bool { return method == p.allow }
func (p *denyPolicy) Record(_ context.Context, _, _, _, method string) error {
	p.recorded = append(p.recorded, method)
	if method != p.allow {
		return kernel.Denied(kernel.CodeNoMatchingGrant, "no grant lets the server ask for %s", method)
	}
	return nil
}

func statelessTurn(t *testing.T, principal string, up upstreamtools.Caller, opts upstreamtools.Options) *kernel.Turn {
	t.Helper()
	k, err := kernel.New(kernel.Options{Audit: &kerneltest.Audit{}, Escalations: &kerneltest.Escalations{}})
	if err != nil {
		t.Fatal(err)
	}
	if err := k.SetGrants([]policy.Grant{{ID: "g", Principal: "*", Tool: "*", Action: "*", Effect: policy.Allow}}); err != nil {
		t.Fatal(err)
	}
	cat := upstreamtools.BuildWith("srv", host.Catalog{Tools: tools(`{"name":"t","inputSchema":{"type":"object"}}`, `{"name":"u","inputSchema":{"type":"object"}}`)}, up, nil, opts)
	if _, err := k.ReplaceNamespace("srv", kernel.NamespacePolicy{}, cat.Tools...); err != nil {
		t.Fatal(err)
	}
	tr, err := k.OpenTurn(context.Background(), kernel.TurnOptions{Principal: principal})
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func statelessCall(t *testing.T, tr *kernel.Turn, tool, args, state, responses string, peer mcpspec.Peer) *mcpspec.CallResult {
	t.Helper()
	req := &mcpspec.CallRequest{Name: tool, ProtocolVersion: mcpspec.ModernVersion, Peer: peer, Arguments: json.RawMessage(args)}
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

func invalidState(t *testing.T, r *mcpspec.CallResult, want string) {
	t.Helper()
	if r.ProtocolError == nil || r.ProtocolError.Code != -32602 || !strings.Contains(r.ProtocolError.Message, want) {
		t.Errorf("want -32602 naming %q, got %+v %+v", want, r, r.ProtocolError)
	}
}

// An upstream that speaks 2026-07-28 gets the caller's own request: its capabilities,
// its inputResponses (only the keys it asked), its own requestState back byte for byte;
// the caller gets the upstream's inputRequests and keys unchanged, and a state of
// toolgate's it cannot alter or use for another principal, tool or arguments.
func TestStatelessRoundTrip(t *testing.T) {
	up := &statelessUpstream{answer: askOnce}
	tr := statelessTurn(t, "alice", up, upstreamtools.Options{})
	first := statelessCall(t, tr, "srv.t", `{"x":1}`, "", `{"name":{"action":"accept"}}`, elicitCaps)
	if first.ResultType != mcpspec.ResultInputRequired || string(first.InputRequests) !=
		`{"name":{"method":"elicitation/create","params":{"message":"name?","requestedSchema":{"type":"object","properties":{"n":{"type":"number","default":1.50}}}}}}` {
		t.Fatalf("first round: %+v (%s)", first, first.InputRequests)
	}
	params, caps := up.last()
	if string(caps) != `{"elicitation":{}}` {
		t.Errorf("declared %s, want the caller's own capabilities", caps)
	}
	if _, has := rpcwire.Member(params, "inputResponses"); has {
		t.Errorf("inputResponses the upstream never asked for (no state) reached it: %s", params)
	}
	state := string(first.RequestState)
	if !strings.HasPrefix(state, `"tgs1.`) || strings.Contains(state, "up-1") {
		t.Fatalf("the upstream's state reached the caller unsealed: %s", state)
	}
	n := up.calls()
	bad := []byte(state)
	bad[len(bad)-3] ^= 1
	invalidState(t, statelessCall(t, tr, "srv.t", `{"x":1}`, string(bad), `{"name":{"action":"accept"}}`, elicitCaps), "altered")
	invalidState(t, statelessCall(t, tr, "srv.t", `{"x":1}`, strings.TrimSuffix(state, `"`)+`-TAMPERED"`, `{"name":{"action":"accept"}}`, elicitCaps), "altered")
	invalidState(t, statelessCall(t, tr, "srv.t", `{"x":2}`, state, `{"name":{"action":"accept"}}`, elicitCaps), "other arguments")
	invalidState(t, statelessCall(t, tr, "srv.u", `{"x":1}`, state, `{"name":{"action":"accept"}}`, elicitCaps), "another request")
	invalidState(t, statelessCall(t, statelessTurn(t, "mallory", up, upstreamtools.Options{}), "srv.t", `{"x":1}`, state, `{"name":{"action":"accept"}}`, elicitCaps), "another principal")
	// Not a state of the stateless path at all: the held path refuses it.
	if r := statelessCall(t, tr, "srv.t", `{"x":1}`, `{"not":"a string"}`, `{"name":{"action":"accept"}}`, elicitCaps); refusal(t, r).Code != string(kernel.CodeInvalidRequestState) {
		t.Errorf("a state that is no string: %+v", r)
	}
	if up.calls() != n {
		t.Errorf("a refused state reached the upstream (%d calls, want %d)", up.calls(), n)
	}
	// The retry: a forged key is dropped, the asked one and the upstream's own state
	// (exactly "up-1") reach it.
	done := statelessCall(t, tr, "srv.t", `{"x":1}`, state, `{"name":{"action":"accept","content":{"n":1e2}},"forged":{"action":"accept"}}`, elicitCaps)
	if done.IsError || done.ResultType == mcpspec.ResultInputRequired {
		t.Fatalf("retry: %+v", done)
	}
	params, _ = up.last()
	resp, _ := rpcwire.Member(params, "inputResponses")
	st, _ := rpcwire.Member(params, "requestState")
	if string(resp) != `{"name":{"action":"accept","content":{"n":1e2}}}` || string(st) != `"up-1"` {
		t.Errorf("upstream got inputResponses %s and requestState %s", resp, st)
	}
}

// A state of toolgate's is refused past its expiry, before the upstream sees it.
func TestStatelessStateExpires(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		up := &statelessUpstream{answer: askOnce}
		tr := statelessTurn(t, "alice", up, upstreamtools.Options{})
		first := statelessCall(t, tr, "srv.t", `{}`, "", "", elicitCaps)
		time.Sleep(upstreamtools.InputTimeout + time.Second)
		n := up.calls()
		invalidState(t, statelessCall(t, tr, "srv.t", `{}`, string(first.RequestState), `{"name":{"action":"accept"}}`, elicitCaps), "expired")
		if up.calls() != n {
			t.Error("an expired state reached the upstream")
		}
	})
}

// What the upstream may hand out through toolgate is bounded and checked: a huge
// requestState, a non-string one, an input kind the caller did not declare, one the
// grants refuse, more keys than a round may carry. Its JSON-RPC errors (-32021 for a
// capability the caller did not declare) reach the caller as errors.
func TestStatelessHostileUpstream(t *testing.T) {
	answer := func(res string) func(json.RawMessage) (json.RawMessage, error) {
		return func(json.RawMessage) (json.RawMessage, error) { return json.RawMessage(res), nil }
	}
	elicit := `{"method":"elicitation/create","params":{}}`
	manyKeys := make([]string, 65)
	for i := range manyKeys {
		manyKeys[i] = `"k` + strings.Repeat("x", i) + `":` + elicit
	}
	for _, tc := range []struct {
		name, result, want string
	}{
		{"huge requestState", `{"resultType":"input_required","inputRequests":{"a":` + elicit + `},"requestState":"` + strings.Repeat("s", upstreamtools.MaxUpstreamState) + `"}`, "over"},
		{"requestState not a string", `{"resultType":"input_required","inputRequests":{"a":` + elicit + `},"requestState":{"x":1}}`, "not a string"},
		{"no inputRequests", `{"resultType":"input_required","requestState":"s"}`, "no inputRequests"},
		{"undeclared sampling", `{"resultType":"input_required","inputRequests":{"a":{"method":"sampling/createMessage","params":{}}}}`, "did not declare"},
		{"not an input request", `{"resultType":"input_required","inputRequests":{"a":{"method":"tools/call","params":{}}}}`, "not an input request"},
		{"too many keys", `{"resultType":"input_required","inputRequests":{` + strings.Join(manyKeys, ",") + `}}`, "more than 64"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := statelessTurn(t, "alice", &statelessUpstream{answer: answer(tc.result)}, upstreamtools.Options{})
			r := statelessCall(t, tr, "srv.t", `{}`, "", "", elicitCaps)
			if b := refusal(t, r); b.Code != string(kernel.CodeUpstreamError) || !strings.Contains(b.Message, tc.want) {
				t.Errorf("%+v, want upstream_error naming %q", b, tc.want)
			}
		})
	}
	t.Run("its -32021 is the caller's error", func(t *testing.T) {
		up := &statelessUpstream{answer: func(json.RawMessage) (json.RawMessage, error) {
			return nil, &upstream.RPCError{Code: mcpspec.CodeMissingClientCapability, Message: "needs sampling", Data: json.RawMessage(`{"requiredCapabilities":{"sampling":{}}}`)}
		}}
		r := statelessCall(t, statelessTurn(t, "alice", up, upstreamtools.Options{}), "srv.t", `{}`, "", "", elicitCaps)
		if r.ProtocolError == nil || r.ProtocolError.Code != mcpspec.CodeMissingClientCapability || string(r.ProtocolError.Data) != `{"requiredCapabilities":{"sampling":{}}}` {
			t.Errorf("%+v %+v", r, r.ProtocolError)
		}
	})
	t.Run("grants decide the capabilities declared and each input asked", func(t *testing.T) {
		pol := &denyPolicy{allow: mcpspec.MethodSamplingCreateMessage}
		up := &statelessUpstream{answer: answer(`{"resultType":"input_required","inputRequests":{"a":` + elicit + `}}`)}
		tr := statelessTurn(t, "alice", up, upstreamtools.Options{Requests: pol})
		r := statelessCall(t, tr, "srv.t", `{}`, "", "", mcpspec.NoPeer{Capabilities: json.RawMessage(`{"elicitation":{},"sampling":{},"x":1}`)})
		if _, caps := up.last(); string(caps) != `{"sampling":{},"x":1}` {
			t.Errorf("declared %s, want the caller's less elicitation", caps)
		}
		// The upstream asked for elicitation anyway: not declared, so refused.
		if b := refusal(t, r); b.Code != string(kernel.CodeUpstreamError) {
			t.Errorf("%+v", b)
		}
		up.answer = answer(`{"resultType":"input_required","inputRequests":{"a":{"method":"sampling/createMessage","params":{}}}}`)
		if r := statelessCall(t, tr, "srv.t", `{}`, "", "", mcpspec.NoPeer{Capabilities: json.RawMessage(`{"sampling":{}}`)}); r.ResultType != mcpspec.ResultInputRequired {
			t.Errorf("an allowed input round: %+v", r)
		}
		if strings.Join(pol.recorded, ",") != mcpspec.MethodSamplingCreateMessage {
			t.Errorf("recorded %v", pol.recorded)
		}
	})
}
