package mcpserver_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/toolgate/toolgate/internal/mcpserver"
	"github.com/toolgate/toolgate/internal/mcpspec"
)

// rawTurn answers every call with a result another server wrote.
type rawTurn struct {
	raw        json.RawMessage
	resultType string
}

func (rawTurn) ListTools(context.Context) (*mcpspec.ToolList, error) {
	return &mcpspec.ToolList{Tools: []json.RawMessage{json.RawMessage(`{"name":"up.echo","inputSchema":{"type":"object"}}`)}}, nil
}

func (t rawTurn) CallTool(context.Context, *mcpspec.CallRequest) (*mcpspec.CallResult, error) {
	return &mcpspec.CallResult{Raw: t.raw, ResultType: t.resultType}, nil
}

// A raw result (an upstream's answer passed through) is the answer's result as it was
// written, up to insignificant white space; in the stateless revision resultType
// "complete" comes first when it has none.
func TestRawResultOnTheWire(t *testing.T) {
	raw := ` {"content":[{"type":"text","text":"<hi>","z":1.50}], "isError":false,"_meta":{"b":1,"a":2},"x-upstream":{}} `
	compact := `{"content":[{"type":"text","text":"<hi>","z":1.50}],"isError":false,"_meta":{"b":1,"a":2},"x-upstream":{}}`
	h := mcpserver.NewHandler(mcpserver.HandlerOptions{OpenTurn: func(context.Context, string) (mcpserver.Turn, error) {
		return rawTurn{raw: json.RawMessage(raw)}, nil
	}})
	defer h.Close()
	sid := initSession(t, h)
	rec := post(h, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"up.echo"}}`, "Mcp-Session-Id", sid)
	if want := `{"jsonrpc":"2.0","id":2,"result":` + compact + `}`; rec.Code != http.StatusOK || rec.Body.String() != want {
		t.Errorf("session: %d\n got %s\nwant %s", rec.Code, rec.Body, want)
	}
	rec = post(h, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"up.echo","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`,
		"MCP-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call", "Mcp-Name", "up.echo")
	if want := `{"jsonrpc":"2.0","id":3,"result":{"resultType":"complete",` + compact[1:] + `}`; rec.Code != http.StatusOK || rec.Body.String() != want {
		t.Errorf("stateless: %d\n got %s\nwant %s", rec.Code, rec.Body, want)
	}

	// Not an object: an internal failure, never bytes of unknown shape on the wire.
	bad := mcpserver.NewHandler(mcpserver.HandlerOptions{OpenTurn: func(context.Context, string) (mcpserver.Turn, error) {
		return rawTurn{raw: json.RawMessage(`[1]`)}, nil
	}})
	defer bad.Close()
	sid = initSession(t, bad)
	rec = post(bad, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"up.echo"}}`, "Mcp-Session-Id", sid)
	if want := `{"jsonrpc":"2.0","id":2,"error":{"code":-32603,"message":"internal error"}}`; rec.Body.String() != want {
		t.Errorf("a raw result that is not an object: %s", rec.Body)
	}
}
