package app_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/app"
	"github.com/toolgate/toolgate/internal/mcpserver"
	"github.com/toolgate/toolgate/internal/upstream/upstreamtest"
)

// everythingWorld is an App hosting the go-sdk's conformance server as upstream
// "everything" over stdio, its catalogue published.
func everythingWorld(t *testing.T) *upstreamWorld {
	t.Helper()
	spec, marker := upstreamtest.EverythingSpec(t)
	w := &upstreamWorld{markers: map[string]string{spec.Name: marker}}
	w.open(t, upstreamtest.Dialer{ToClient: true}.Host(spec), nil)
	w.sync(t, spec.Name, true, true)
	return w
}

// everythingBridge is what `toolgate bridge --no-auth --server everything` serves:
// one turn narrowed to the server's tools under their raw names, on a loopback bridge.
func everythingBridge(t *testing.T, w *upstreamWorld) *mcpserver.Bridge {
	t.Helper()
	tr, err := w.a.OpenTurn(context.Background(), app.TurnRequest{Transport: "bridge",
		Capabilities: []string{"everything.*"}, Namer: w.a.RawNamer("everything")})
	if err != nil {
		t.Fatal(err)
	}
	b, err := mcpserver.NewBridge(tr, mcpserver.BridgeOptions{ServerInfo: app.ServerInfo(), Instructions: app.Instructions})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func TestEverythingSmoke(t *testing.T) {
	w := everythingWorld(t)
	w.grant(t, "everything.*")
	b := everythingBridge(t, w)
	_, body := post(t, b.URL(), "", "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	t.Logf("%s", body)
	for _, m := range []string{
		`{"jsonrpc":"2.0","id":2,"method":"resources/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`,
		`{"jsonrpc":"2.0","id":3,"method":"resources/read","params":{"uri":"test://static-text","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`,
		`{"jsonrpc":"2.0","id":4,"method":"prompts/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`,
	} {
		_, body := postModern(t, b.URL(), m)
		t.Logf("%s", strings.TrimSpace(string(body)))
	}
}

func postModern(t *testing.T, url, body string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}
