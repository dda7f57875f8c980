package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/host"
	"github.com/toolgate/toolgate/internal/mgmt"
	"github.com/toolgate/toolgate/internal/upstream/upstreamtest"
)

// TestRemoteServerEraProbe: the host dials an installed Streamable HTTP server the
// way a 2026-07-28 client must (docs/host.md, "Eras"): server/discover first, and a
// server that answers it as that revision is used statelessly (no initialize, no
// session, _meta and the standard headers on every request); a server that does
// not is dialled again with initialize.
func TestRemoteServerEraProbe(t *testing.T) {
	stateless := upstreamtest.NewStatelessServer(t, nil)
	legacy := upstreamtest.NewHTTPServer(t, upstreamtest.HTTPServerOptions{Session: true})
	a, m, _ := managed(t)
	ctx := context.Background()
	doc := fmt.Sprintf(`{"mcpServers":{"modern":{"type":"http","url":%q},"old":{"type":"http","url":%q}}}`,
		stateless.URL, legacy.URL)
	if res, err := m.Install(ctx, owner, mgmt.InstallParams{ConfigJSON: doc}); err != nil || res.Status != mgmt.InstallOK {
		t.Fatalf("install: %+v %v", res, err)
	}

	res, err := a.Upstreams().Call(ctx, "modern", "tools/call", json.RawMessage(`{"name":"echo","arguments":{"text":"hi"}}`), host.CallOptions{})
	if err != nil || !strings.Contains(string(res), `args {\"text\":\"hi\"}`) {
		t.Fatalf("call of the stateless server: %s %v", res, err)
	}
	cat, err := a.Upstreams().RefreshCatalog(ctx, "modern")
	if err != nil || cat.Info.ProtocolVersion != "2026-07-28" {
		t.Fatalf("the stateless server's handshake: %+v (%v), want protocol 2026-07-28", cat.Info, err)
	}
	for _, r := range stateless.Requests() {
		if strings.Contains(r.Body, `"initialize"`) || r.Header.Get("Mcp-Session-Id") != "" {
			t.Fatalf("a stateless server got an initialize or a session id: %+v", r)
		}
		if r.Method == "POST" && (r.Header.Get("Mcp-Protocol-Version") != "2026-07-28" || r.Header.Get("Mcp-Method") == "") {
			t.Fatalf("a request without the 2026-07-28 headers: %v %s", r.Header, r.Body)
		}
	}

	if _, err := a.Upstreams().Call(ctx, "old", "tools/list", json.RawMessage(`{}`), host.CallOptions{}); err != nil {
		t.Fatalf("call of the legacy server: %v", err)
	}
	methods := postedMethods(legacy.Requests())
	if len(methods) < 2 || methods[0] != "server/discover" || methods[1] != "initialize" {
		t.Fatalf("the legacy server got %v, want server/discover then initialize", methods)
	}
	// (The fixture lists no resources or prompts: the catalogue comes with that error.)
	if cat, _ := a.Upstreams().RefreshCatalog(ctx, "old"); cat.Info.ProtocolVersion != "2025-11-25" {
		t.Fatalf("the legacy server's handshake: %+v, want initialize's 2025-11-25", cat.Info)
	}

}

// postedMethods are the JSON-RPC methods of the requests a server got, in order.
func postedMethods(reqs []upstreamtest.Request) []string {
	var out []string
	for _, r := range reqs {
		var m struct {
			Method string `json:"method"`
		}
		if json.Unmarshal([]byte(r.Body), &m) == nil && m.Method != "" {
			out = append(out, m.Method)
		}
	}
	return out
}
