package daemon_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/toolgate/toolgate/internal/kernel"
	"github.com/toolgate/toolgate/internal/telemetry"
)

// The caller's W3C trace context — a traceparent header, or MCP's params._meta —
// reaches the tool's context through the surface and the kernel, where an upstream
// adapter injects it into its own requests.
func TestDaemonTraceContextReachesTheTool(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	a, d := startWithTool(t, func(ctx context.Context, _ *kernel.Call) (*kernel.Output, error) {
		mu.Lock()
		seen = append(seen, telemetry.TraceID(ctx))
		mu.Unlock()
		return &kernel.Output{Text: "ok"}, nil
	})
	owner, _, _ := a.OwnerToken()

	req, _ := http.NewRequest("POST", d.URL()+"/v1/tools/invoke", strings.NewReader(`{"name":"local.echo","arguments":{}}`))
	req.Header.Set("Authorization", "Bearer "+owner)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()

	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"local.echo","arguments":{},"_meta":{` +
		`"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},` +
		`"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}}}`
	req, _ = http.NewRequest("POST", d.URL()+"/mcp", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+owner)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", "local.echo")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 2 || seen[0] != "4bf92f3577b34da6a3ce929d0e0e4736" || seen[1] != "0af7651916cd43dd8448eb211c80319c" {
		t.Errorf("trace ids the tool saw: %q (status of the MCP call %d)", seen, resp.StatusCode)
	}
}
