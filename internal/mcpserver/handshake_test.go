package mcpserver_test

import (
	"bufio"
	"io"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/mcpserver"
	"github.com/toolgate/toolgate/internal/mcpserver/mcpservertest"
)

// TestStdioHandshake: over stdio the handshake is decided in arrival order. A
// tool's Peer cannot send the client a request (elicitation) between
// initialize and notifications/initialized, and can after; a second
// initialize is refused; with the 2026-07-28 revision turned off a request
// carrying its _meta is an ordinary one and waits for initialize too.
func TestStdioHandshake(t *testing.T) {
	inW, outR, done := pipeStdio(mcpservertest.NewTurn(), mcpserver.StdioOptions{})
	out := bufio.NewReader(outR)
	exchange := func(line, want string) {
		t.Helper()
		if _, err := io.WriteString(inW, line+"\n"); err != nil {
			t.Fatal(err)
		}
		if want == "" {
			return
		}
		got, err := out.ReadString('\n')
		if err != nil || !strings.HasPrefix(got, want) {
			t.Fatalf("after %s:\n got %s (%v)\nwant %s…", line, got, err, want)
		}
	}
	elicit := func(id string) string {
		return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"test.elicit"}}`
	}
	exchange(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{}}}}`,
		`{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-11-25"`)
	exchange(elicit("2"), `{"jsonrpc":"2.0","id":2,"result":{"content":[{"text":"{\"code\":\"tool_failed\",\"message\":\"mcpserver: the client cannot receive requests on this connection\"`)
	exchange(`{"jsonrpc":"2.0","method":"notifications/initialized"}`, "")
	exchange(`{"jsonrpc":"2.0","id":3,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}`,
		`{"jsonrpc":"2.0","id":3,"error":{"code":-32600,"message":"invalid request: the session is already initialized"}}`)
	exchange(elicit("4"), `{"jsonrpc":"2.0","id":"toolgate-1","method":"elicitation/create","params":`)
	exchange(`{"jsonrpc":"2.0","id":"toolgate-1","result":{"action":"accept","content":{"ok":true}}}`,
		`{"jsonrpc":"2.0","id":4,"result":{"content":[{"text":"{\"action\":\"accept\"`)
	inW.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
	lines := runStdio(t, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"test.echo",`+meta+`}}`, mcpserver.StdioOptions{NoStateless: true})
	if len(lines) != 1 || !strings.Contains(lines[0], `"code":-32600,"message":"invalid request: \"tools/call\" before initialize`) {
		t.Errorf("2026-07-28 _meta with NoStateless, before initialize: %v", lines)
	}
}
