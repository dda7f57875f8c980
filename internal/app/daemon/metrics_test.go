package daemon_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/app"
	"github.com/toolgate/toolgate/internal/app/daemon"
	"github.com/toolgate/toolgate/internal/kernel"
)

func post(t *testing.T, url, token, body string) (int, http.Header, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

// startWithTool runs a daemon over a fresh SQLite App serving local.echo with run.
func startWithTool(t *testing.T, run func(context.Context, *kernel.Call) (*kernel.Output, error)) (*app.App, *daemon.Daemon) {
	t.Helper()
	tool := &kernel.Tool{ID: "local.echo", InputSchema: json.RawMessage(`{"type":"object"}`), Run: run}
	a, err := app.Open(context.Background(), app.Options{DataDir: filepath.Join(t.TempDir(), "data"), Tools: []*kernel.Tool{tool}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	d, err := daemon.Start(a, daemon.Options{Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Shutdown(context.Background(), time.Second) })
	return a, d
}

// /metrics answers the owner token only (not an execution token, not none) and counts
// the calls of every surface by tool, outcome and code, with the audit commits and the
// live MCP sessions; a name outside the catalogue is tool="other".
func TestDaemonMetrics(t *testing.T) {
	a, d := startWithTool(t, func(context.Context, *kernel.Call) (*kernel.Output, error) { return &kernel.Output{Text: "ok"}, nil })
	owner, _, _ := a.OwnerToken()
	exec, err := a.MintToken("default", "s1", 60)
	if err != nil {
		t.Fatal(err)
	}
	for _, tok := range []string{"", exec, owner + "x"} {
		if status, _ := get(t, d.URL()+"/metrics", tok); status != 401 {
			t.Errorf("/metrics with token %q: %d, want 401", tok, status)
		}
	}
	for _, body := range []string{`{"name":"local.echo","arguments":{}}`, `{"name":"local.echo","arguments":{}}`, `{"name":"no.such_tool"}`} {
		if status, _, b := post(t, d.URL()+"/v1/tools/invoke", exec, body); status != 200 {
			t.Fatalf("invoke %s: %d %s", body, status, b)
		}
	}
	status, h, b := post(t, d.URL()+"/mcp", owner, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	if status != 200 || h.Get("Mcp-Session-Id") == "" {
		t.Fatalf("initialize: %d %s", status, b)
	}
	status, text := get(t, d.URL()+"/metrics", owner)
	if status != 200 {
		t.Fatalf("/metrics: %d %s", status, text)
	}
	for _, line := range []string{
		`toolgate_tool_calls_total{code="none",outcome="ok",tool="local.echo"} 2`,
		`toolgate_tool_calls_total{code="tool_unavailable",outcome="denied",tool="other"} 1`,
		`toolgate_tool_call_duration_seconds_count{surface="api"} 3`,
		`toolgate_mcp_sessions 1`,
		`toolgate_audit_queue_depth 0`,
		`toolgate_audit_commit_failures_total 0`,
	} {
		if !strings.Contains(text, "\n"+line+"\n") {
			t.Errorf("no line %q in /metrics", line)
		}
	}
	if !strings.Contains(text, "\ntoolgate_audit_commit_duration_seconds_count ") || strings.Contains(text, "\ntoolgate_audit_commit_duration_seconds_count 0\n") {
		t.Error("no audit commit observed")
	}
	if strings.Contains(text, "no.such_tool") {
		t.Error("a caller's unknown tool name became a label")
	}
}
