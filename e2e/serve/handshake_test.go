package serve

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/policy"
)

// TestAttackBatchedInitializeThroughTheDaemon: an initialize batched with a
// tools/call opened a session on /mcp and ran the call beside the handshake.
// initialize cannot be batched: such a batch opens no session (400
// missing_session) and the file the call would write never appears. A session
// opened properly answers a second initialize with 400 and -32600.
func TestAttackBatchedInitializeThroughTheDaemon(t *testing.T) {
	data, toks := setup(t, []policy.Grant{
		{Principal: "dana", Tool: "local.write_file", Action: "*", Resource: "*", Effect: policy.Allow},
	}, "dana")
	ws := workspaceDir(t)
	d := startServe(t, data, ws)
	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{}}}`
	write := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"local.write_file","arguments":{"path":"planted.txt","content":"x"}}}`
	status, hdr, body := request(t, "POST", d.url+"/mcp", toks["dana"], "["+initialize+","+write+"]")
	if status != http.StatusBadRequest || !strings.Contains(string(body), "missing_session") || hdr.Get("Mcp-Session-Id") != "" {
		t.Errorf("batched initialize: %d %v %s, want 400 missing_session", status, hdr, body)
	}
	if _, err := os.Stat(filepath.Join(ws, "planted.txt")); err == nil {
		t.Fatal("the call batched with initialize ran")
	}
	status, hdr, body = request(t, "POST", d.url+"/mcp", toks["dana"], initialize)
	sid := hdr.Get("Mcp-Session-Id")
	if status != http.StatusOK || sid == "" {
		t.Fatalf("initialize: %d %s", status, body)
	}
	status, _, body = request(t, "POST", d.url+"/mcp", toks["dana"], initialize, "Mcp-Session-Id", sid)
	if status != http.StatusBadRequest || !strings.Contains(string(body), `"code":-32600`) {
		t.Errorf("second initialize on the session: %d %s, want 400 with -32600", status, body)
	}
	if out, _, _ := run(t, data, "audit", "--json", "--principal", "dana"); out != "" {
		t.Errorf("calls audited:\n%s", out)
	}
}
