package telemetry

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/internal/upstream/upstreamtest"
)

func tg(t *testing.T, data string, args ...string) string {
	t.Helper()
	out, errs, code := testenv.Run(t, data, args...)
	if code != 0 {
		t.Fatalf("toolgate %s: exit %d\n%s\n%s", strings.Join(args, " "), code, out, errs)
	}
	return out
}

// installFixture installs the stdio fixture as server fx with fixture flags, its
// tools published and granted to the owner (principal default).
func installFixture(t *testing.T, data string, args ...string) {
	t.Helper()
	doc := map[string]any{"mcpServers": map[string]any{"fx": map[string]any{
		"command": upstreamtest.Fixture(t), "args": args,
	}}}
	b, _ := json.Marshal(doc)
	cfg := filepath.Join(t.TempDir(), "mcp.json")
	if err := os.WriteFile(cfg, b, 0o600); err != nil {
		t.Fatal(err)
	}
	tg(t, data, "install", cfg, "--allow-implicit-invocation=true")
	tg(t, data, "grant", "add", "--principal", "default", "--tool", "fx.*", "--action", "execute")
}

func ownerToken(t *testing.T, data string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(data, "owner-token"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// client is a minimal Streamable HTTP client of /mcp that can set request headers.
type client struct {
	t          *testing.T
	url, token string
	session    string
	next       int
}

// post sends one request and returns the JSON-RPC message of its answer (JSON or
// SSE) and the HTTP status.
func (c *client) post(method, params string, hdr http.Header) (json.RawMessage, int) {
	c.t.Helper()
	c.next++
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`, c.next, method, params)
	req, _ := http.NewRequest("POST", c.url+"/mcp", strings.NewReader(body))
	for k, v := range hdr {
		req.Header[k] = v
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if c.session != "" {
		req.Header.Set("Mcp-Session-Id", c.session)
		req.Header.Set("MCP-Protocol-Version", "2025-06-18")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	if sid := resp.Header.Get("Mcp-Session-Id"); sid != "" {
		c.session = sid
	}
	raw, err := testenv.ReadAnswer(resp)
	if err != nil {
		c.t.Fatal(err)
	}
	return raw, resp.StatusCode
}

// open initializes a session and waits until its tools/list holds tool (a new
// server's first catalogue arrives in the background; a session opened before it is
// ended, 404, and opened again).
func open(t *testing.T, url, token, tool string) *client {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		c := &client{t: t, url: url, token: token}
		c.post("initialize", `{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"telemetry-e2e","version":"1"}}`, nil)
		if raw, code := c.post("tools/list", `{}`, nil); code == http.StatusOK && strings.Contains(string(raw), `"name":"`+tool+`"`) {
			return c
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never appeared in tools/list", tool)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// testenvStart starts serve on a free loopback port with extra environment.
func testenvStart(t *testing.T, data string, env ...string) *testenv.Serve {
	t.Helper()
	return testenv.StartServeEnv(t, data, env, "--listen", "127.0.0.1:0")
}

// scrape reads /metrics with the owner token.
func scrape(t *testing.T, url, token string) string {
	t.Helper()
	req, _ := http.NewRequest("GET", url+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: %d %s", resp.StatusCode, b)
	}
	return string(b)
}

// metricValue is the value of the series written exactly as series (name and
// labels), or -1 when there is none.
func metricValue(text, series string) float64 {
	for _, l := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(l, series+" "); ok {
			var f float64
			if _, err := fmt.Sscan(v, &f); err == nil {
				return f
			}
		}
	}
	return -1
}

func grepLines(text, prefix string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
