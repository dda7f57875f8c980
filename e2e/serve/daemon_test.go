package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/app"
	"github.com/toolgate/toolgate/internal/testenv"
)

// daemon is one running `toolgate serve`.
type daemon struct {
	*testenv.Serve
	t    testing.TB
	cmd  *exec.Cmd
	url  string
	data string
	ws   string
	// stderr and done are Serve's, under the names the tests use.
	stderr *testenv.SyncBuffer
	done   chan struct{}
}

// env returns the environment for spawned binaries: TOOLGATE_HOME = data.
func env(data string) []string { return testenv.Env(data) }

// startServe runs `toolgate serve --listen 127.0.0.1:0 [--workspace ws] extra...` over
// data and waits for its listening line.
func startServe(t testing.TB, data, ws string, extra ...string) *daemon {
	t.Helper()
	args := []string{"--listen", "127.0.0.1:0"}
	if ws != "" {
		args = append(args, "--workspace", ws)
	}
	s := testenv.StartServe(t, data, append(args, extra...)...)
	return &daemon{Serve: s, t: t, cmd: s.Cmd, url: s.URL, data: data, ws: ws, stderr: s.Stderr, done: s.Done}
}

func (d *daemon) ownerToken() string {
	d.t.Helper()
	b, err := os.ReadFile(filepath.Join(d.data, app.OwnerTokenFile))
	if err != nil {
		d.t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// stop sends sig and waits for the process to exit.
func (d *daemon) stop(sig syscall.Signal) error { return d.Stop(d.t, sig) }

// request sends one HTTP request and returns status, headers and body.
func request(t testing.TB, method, url, token, body string, hdr ...string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i] == "Host" {
			req.Host = hdr[i+1]
			continue
		}
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}

// mcpSession is a raw Streamable HTTP session, for byte-level comparisons.
type mcpSession struct {
	t     *testing.T
	url   string
	token string
	id    string
	next  int
}

func openMCP(t *testing.T, base, token string) *mcpSession {
	t.Helper()
	s := &mcpSession{t: t, url: base + "/mcp", token: token}
	status, h, body := request(t, "POST", s.url, token,
		`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"e2e","version":"1"}}}`,
		"Accept", "application/json, text/event-stream")
	if status != 200 {
		t.Fatalf("initialize: %d %s", status, body)
	}
	s.id = h.Get("Mcp-Session-Id")
	if s.id == "" {
		t.Fatalf("initialize gave no session id: %s", body)
	}
	status, _, body = request(t, "POST", s.url, token, `{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		"Mcp-Session-Id", s.id, "MCP-Protocol-Version", "2025-06-18")
	if status != 202 {
		t.Fatalf("initialized: %d %s", status, body)
	}
	return s
}

// call sends one request and returns its result member, raw.
func (s *mcpSession) call(method, params string) json.RawMessage {
	s.t.Helper()
	s.next++
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`, s.next, method, params)
	status, _, b := request(s.t, "POST", s.url, s.token, body, "Mcp-Session-Id", s.id, "MCP-Protocol-Version", "2025-06-18",
		"Accept", "application/json")
	if status != 200 {
		s.t.Fatalf("%s: %d %s", method, status, b)
	}
	var msg struct {
		Result json.RawMessage
		Error  json.RawMessage
	}
	if err := json.Unmarshal(b, &msg); err != nil || msg.Result == nil {
		s.t.Fatalf("%s: %s (%v)", method, b, err)
	}
	return msg.Result
}

// canonical re-encodes JSON with sorted keys for comparisons.
func canonical(t *testing.T, b []byte) string {
	t.Helper()
	var v any
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(&v); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	out, _ := json.Marshal(v)
	return string(out)
}

func withTimeout(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// run runs the toolgate CLI over data and returns stdout, stderr and the exit code.
func run(t *testing.T, data string, args ...string) (string, string, int) {
	t.Helper()
	return testenv.Run(t, data, args...)
}
