package upstreamtools_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/toolgate/toolgate/internal/host"
	"github.com/toolgate/toolgate/internal/kernel"
	"github.com/toolgate/toolgate/internal/kernel/kerneltest"
	"github.com/toolgate/toolgate/internal/mcpspec"
	"github.com/toolgate/toolgate/internal/policy"
	"github.com/toolgate/toolgate/internal/upstreamtools"
)

// statelessCaller is a 2026-07-28 upstream with input rounds of its own: without
// inputResponses it answers input_required (with its requestState when it has one),
// with them it finishes. It records the params of every call.
type statelessCaller struct {
	state string // "" sends no requestState
	mu    sync.Mutex
	got   []string
}

func (s *statelessCaller) Call(_ context.Context, _, _ string, params json.RawMessage, _ host.CallOptions) (json.RawMessage, error) {
	s.mu.Lock()
	s.got = append(s.got, string(params))
	s.mu.Unlock()
	if !strings.Contains(string(params), `"inputResponses"`) {
		st := ""
		if s.state != "" {
			st = `,"requestState":` + s.state
		}
		return json.RawMessage(`{"resultType":"input_required","inputRequests":{"q":{"method":"elicitation/create","params":{"message":"ok?","requestedSchema":{"type":"object","properties":{}}}}}` + st + `}`), nil
	}
	return json.RawMessage(`{"resultType":"complete","content":[{"type":"text","text":"done"}]}`), nil
}

func statelessTurn(t *testing.T, up upstreamtools.Caller, protocol string) *kernel.Turn {
	t.Helper()
	k, err := kernel.New(kernel.Options{Audit: &kerneltest.Audit{}, Escalations: &kerneltest.Escalations{}})
	if err != nil {
		t.Fatal(err)
	}
	if err := k.SetGrants([]policy.Grant{{ID: "g", Principal: "*", Tool: "*", Action: "*", Effect: policy.Allow}}); err != nil {
		t.Fatal(err)
	}
	cat := upstreamtools.Build("srv", host.Catalog{Info: host.SessionInfo{ProtocolVersion: protocol},
		Tools: tools(`{"name":"t","inputSchema":{"type":"object"}}`)}, up, nil)
	if _, err := k.ReplaceNamespace("srv", kernel.NamespacePolicy{}, cat.Tools...); err != nil {
		t.Fatal(err)
	}
	tr, err := k.OpenTurn(context.Background(), kernel.TurnOptions{Principal: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// A 2026-07-28 upstream's own input round crosses toolgate as the upstream wrote it:
// its input_required reaches the caller unchanged, and the retry's inputResponses and
// the upstream's requestState (object or string, or none when it sent none) reach the
// upstream byte for byte, on a call authorized like any other.
func TestUpstreamInputRoundForwarded(t *testing.T) {
	const responses = `{"q":{"action":"accept","content":{}}}`
	for _, state := range []string{`{"step":1,"sig":"x"}`, `"opaque-1"`, ``} {
		up := &statelessCaller{state: state}
		tr := statelessTurn(t, up, mcpspec.ModernVersion)
		first := modernCall(t, tr, `{"a":1}`, "", "", elicitCaps)
		if first.ResultType != mcpspec.ResultInputRequired || (state != "" && !strings.Contains(string(first.Raw), state)) {
			t.Fatalf("state %s: first round %+v %s", state, first, first.Raw)
		}
		done := modernCall(t, tr, `{"a":1}`, state, responses, elicitCaps)
		if done.ResultType == mcpspec.ResultInputRequired || done.IsError || !strings.Contains(string(done.Raw), "done") {
			t.Fatalf("state %s: retry %+v %s", state, done, done.Raw)
		}
		want := `{"name":"t","arguments":{"a":1},"inputResponses":` + responses
		if state != "" {
			want += `,"requestState":` + state
		}
		want += `}`
		if len(up.got) != 2 || up.got[1] != want {
			t.Errorf("state %s: the upstream got %q, want the retry %s", state, up.got, want)
		}
	}
}

// A state that looks like toolgate's own is still opened and checked by toolgate: a
// forged one is refused and never reaches the upstream. To a session-based upstream
// (its catalogue listed after initialize) no state toolgate did not issue is
// forwarded: toolgate runs that upstream's input rounds itself.
func TestForeignStateNotForwarded(t *testing.T) {
	for _, tc := range []struct{ protocol, state string }{
		{mcpspec.ModernVersion, `"tgu1.forged"`},
		{"2025-11-25", `"opaque-1"`},
		{"2025-11-25", `{"step":1}`},
	} {
		up := &statelessCaller{}
		tr := statelessTurn(t, up, tc.protocol)
		r := modernCall(t, tr, `{}`, tc.state, `{"q":{}}`, elicitCaps)
		if !r.IsError || len(up.got) != 0 {
			t.Errorf("%s state %s: %+v %s; upstream got %q", tc.protocol, tc.state, r, r.Raw, up.got)
		}
	}
}
