package serve

import (
	"net/http"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/mcpserver"
	"github.com/toolgate/toolgate/internal/policy"
)

// TestAttackToollessPrincipalsHoldFewSessions: a principal whose token
// authenticates but who can see no tool — no grant at all, only a denial, or a
// grant to a tool this daemon does not serve (local tools without
// --workspace) — keeps at most two sessions on /mcp: each further initialize
// ends its own least recently used idle session. Before, each could hold 64
// and a handful of them filled the daemon's session cap for half an hour. A
// principal that sees a tool keeps its ordinary quota.
func TestAttackToollessPrincipalsHoldFewSessions(t *testing.T) {
	data, toks := setup(t, []policy.Grant{
		{Principal: "denied", Tool: "*", Action: "*", Resource: "*", Effect: policy.Deny},
		{Principal: "lena", Tool: "local.read_file", Action: "read", Resource: "*", Effect: policy.Allow},
		{Principal: "dana", Tool: "server.version", Action: "read", Effect: policy.Allow},
	}, "ghost", "denied", "lena", "dana")
	d := startServe(t, data, "")
	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{}}}`
	list := `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`
	for _, c := range []struct {
		principal string
		sees      bool
	}{{"ghost", false}, {"denied", false}, {"lena", false}, {"dana", true}} {
		var sessions []string
		for range mcpserver.DefaultMaxSessionsWithoutTools + 2 {
			status, h, body := request(t, "POST", d.url+"/mcp", toks[c.principal], initialize)
			if status != http.StatusOK {
				t.Fatalf("%s: initialize %d %s", c.principal, status, body)
			}
			sessions = append(sessions, h.Get("Mcp-Session-Id"))
		}
		for i, sid := range sessions {
			status, _, body := request(t, "POST", d.url+"/mcp", toks[c.principal], list, "Mcp-Session-Id", sid, "MCP-Protocol-Version", "2025-06-18")
			alive := i >= len(sessions)-mcpserver.DefaultMaxSessionsWithoutTools || c.sees
			switch {
			case alive && status != http.StatusOK:
				t.Errorf("%s: session %d: %d %s, want it alive", c.principal, i, status, body)
			case !alive && (status != http.StatusNotFound || !strings.Contains(string(body), "unknown_session")):
				t.Errorf("%s: session %d: %d %s, want it ended", c.principal, i, status, body)
			case alive && status == http.StatusOK && c.sees != strings.Contains(string(body), `"name"`):
				t.Errorf("%s: tools/list %s", c.principal, body)
			}
		}
	}
}
