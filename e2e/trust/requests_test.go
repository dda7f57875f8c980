package trust

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// seen records what reached the client's handlers.
type seen struct {
	mu   sync.Mutex
	meta []string // method + " " + _meta["toolgate/source"]
}

func (s *seen) add(method string, meta map[string]any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	src, _ := meta["toolgate/source"].(string)
	s.meta = append(s.meta, method+" "+src)
}

func (s *seen) list() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.meta...)
}

// requestClient is a Go SDK client that declares sampling, elicitation and roots.
func requestClient(r *rig, sn *seen) *mcp.ClientSession {
	c := mcp.NewClient(&mcp.Implementation{Name: "e2e-trust", Version: "1"}, &mcp.ClientOptions{
		CreateMessageHandler: func(_ context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			sn.add("sampling/createMessage", req.Params.Meta)
			return &mcp.CreateMessageResult{Model: "test-model", Role: "assistant", Content: &mcp.TextContent{Text: "sampled"}}, nil
		},
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			sn.add("elicitation/create", req.Params.Meta)
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"answer": "elicited"}}, nil
		},
	})
	c.AddRoots(&mcp.Root{URI: "file:///work/root-of-client", Name: "ws"})
	return r.connect("default", c)
}

var serverRequests = []struct{ method, params, tool, answer string }{
	{"sampling/createMessage", `{"messages":[{"role":"user","content":{"type":"text","text":"hi"}}],"maxTokens":5}`, "mcp.request.sampling", "sampled"},
	{"elicitation/create", `{"message":"your name?","requestedSchema":{"type":"object","properties":{"answer":{"type":"string"}}}}`, "mcp.request.elicitation", "elicited"},
	{"roots/list", `{}`, "mcp.request.roots", "root-of-client"},
}

// ask has server's fixture send method to the client and returns what it got back.
func ask(t *testing.T, s *mcp.ClientSession, server, method, params string) string {
	t.Helper()
	txt, _ := call(t, s, server+".ask", map[string]any{"method": method, "params": json.RawMessage(params)})
	return txt
}

// Sampling, elicitation and roots requests from an upstream are refused (and audited)
// without a grant of mcp.request.* for that server; with one they reach the client
// labelled with the server that asked, and are audited allowed; another server without
// the grant is still refused.
func TestServerRequestsNeedAGrant(t *testing.T) {
	r := newRig(t)
	if out, code := r.install(map[string]server{"fx": fixture(t), "other": fixture(t)}); code != 0 {
		t.Fatalf("install: %s", out)
	}
	r.grant("--principal", "default", "--tool", "fx.*")
	r.grant("--principal", "default", "--tool", "other.*")
	r.serve()
	r.waitTools("default", "fx.ask", "other.ask")
	sn := &seen{}
	s := requestClient(r, sn)
	for _, q := range serverRequests {
		if got := ask(t, s, "fx", q.method, q.params); !strings.HasPrefix(got, "error:") || !strings.Contains(got, "refused by toolgate") {
			t.Errorf("%s without a grant: %s", q.method, got)
		}
		if !r.hasEvent(q.tool, "execute", "denied", "no_matching_grant") {
			t.Errorf("%s's refusal is not audited: %+v", q.method, r.audit(q.tool))
		}
	}
	if got := sn.list(); len(got) != 0 {
		t.Fatalf("refused requests reached the client: %v", got)
	}
	if txt, isErr := call(t, s, "fx.echo", map[string]any{"text": "ok"}); isErr || txt != "ok" {
		t.Fatalf("the server's tools after the refusals: %s", txt)
	}

	for _, q := range serverRequests {
		r.grant("--principal", "default", "--tool", q.tool, "--action", "execute", "--resource", "mcp:fx")
	}
	s = requestClient(r, sn)
	for _, q := range serverRequests {
		if got := ask(t, s, "fx", q.method, q.params); !strings.HasPrefix(got, "result:") || !strings.Contains(got, q.answer) {
			t.Errorf("%s with a grant: %s", q.method, got)
		}
		if !r.hasEvent(q.tool, "execute", "allowed", "") {
			t.Errorf("%s is not audited allowed: %+v", q.method, r.audit(q.tool))
		}
		if got := ask(t, s, "other", q.method, q.params); !strings.Contains(got, "refused by toolgate") {
			t.Errorf("%s from a server without the grant: %s", q.method, got)
		}
	}
	got := sn.list()
	for _, want := range []string{"sampling/createMessage fx", "elicitation/create fx"} {
		if !contains(got, want) {
			t.Errorf("the client did not get %q labelled with its server: %v", want, got)
		}
	}
	for _, g := range got {
		if strings.HasSuffix(g, " other") {
			t.Errorf("a refused request of other reached the client: %v", got)
		}
	}
}
