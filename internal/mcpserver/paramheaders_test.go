package mcpserver_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/mcpserver"
	"github.com/toolgate/toolgate/internal/mcpspec"
)

// headerTurn publishes one tool whose "region" argument is annotated
// x-mcp-header, and counts its calls.
type headerTurn struct{ calls int }

func (t *headerTurn) ListTools(context.Context) (*mcpspec.ToolList, error) {
	return &mcpspec.ToolList{Tools: []json.RawMessage{json.RawMessage(
		`{"name":"route","inputSchema":{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"},"n":{"type":"integer"}}}}`)}}, nil
}

func (t *headerTurn) CallTool(context.Context, *mcpspec.CallRequest) (*mcpspec.CallResult, error) {
	t.calls++
	return &mcpspec.CallResult{Content: []json.RawMessage{json.RawMessage(`{"type":"text","text":"ok"}`)}}, nil
}

// A 2026-07-28 tools/call must mirror each x-mcp-header argument in its
// Mcp-Param-* header: missing, different, repeated or malformed base64 is 400
// with -32020 and the tool does not run; plain, valid base64 and a literal that
// only looks like base64 are served. Before, the headers were not read at all.
func TestParamHeadersChecked(t *testing.T) {
	turn := &headerTurn{}
	b, err := mcpserver.NewBridge(turn, mcpserver.BridgeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	call := func(region string, headers ...string) (int, string) {
		t.Helper()
		body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"route","arguments":{"region":` + region +
			`},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
		req, _ := http.NewRequest("POST", b.URL(), strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("MCP-Protocol-Version", "2026-07-28")
		req.Header.Set("Mcp-Method", "tools/call")
		req.Header.Set("Mcp-Name", "route")
		for _, h := range headers {
			req.Header.Add("Mcp-Param-Region", h)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(out)
	}
	for _, c := range []struct {
		region  string
		headers []string
		ok      bool
	}{
		{`"eu"`, []string{"eu"}, true},
		{`"eu"`, []string{" eu "}, true},
		{`"Hello"`, []string{"=?base64?SGVsbG8=?="}, true},
		{`"=?base64?SGVsbG8"`, []string{"=?base64?SGVsbG8"}, true},
		{`"eu"`, nil, false},
		{`"eu"`, []string{"us"}, false},
		{`"eu"`, []string{"eu", "eu"}, false},
		{`"Hello"`, []string{"=?base64?SGVsbG8?="}, false},
		{`"Hello"`, []string{"=?base64?SGVs!!!bG8=?="}, false},
	} {
		before := turn.calls
		code, body := call(c.region, c.headers...)
		ran := turn.calls > before
		if c.ok && (code != 200 || !ran) {
			t.Errorf("region %s, headers %q: %d %s (ran %v), want served", c.region, c.headers, code, body, ran)
		}
		if !c.ok && (code != 400 || ran || !strings.Contains(body, `"code":-32020`)) {
			t.Errorf("region %s, headers %q: %d %s (ran %v), want 400 -32020", c.region, c.headers, code, body, ran)
		}
	}
}
