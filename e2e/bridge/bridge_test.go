// Package bridge_test drives the real toolgate binary's `bridge` command as a
// subprocess: the official Go SDK client over Streamable HTTP and stdio, the
// official MCP conformance suite, and the command's refusals.
package bridge_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/testenv"
)

type bridgeProc struct {
	cmd    *exec.Cmd
	url    string
	token  string
	stderr *testenv.SyncBuffer
	exited chan error
}

// startBridge runs `toolgate bridge ARGS` on a fresh data directory and reads the
// URL (and the token unless --no-auth) from its stdout.
func startBridge(t *testing.T, args ...string) *bridgeProc {
	t.Helper()
	return startBridgeIn(t, testenv.PrivateDir(t), args...)
}

// startBridgeIn is startBridge on the data directory dir.
func startBridgeIn(t *testing.T, dir string, args ...string) *bridgeProc {
	t.Helper()
	bin := testenv.Binary(t)
	cmd := exec.Command(bin, append([]string{"bridge", "--data-dir", dir}, args...)...)
	stderr := &testenv.SyncBuffer{}
	cmd.Stderr = stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &bridgeProc{cmd: cmd, stderr: stderr, exited: make(chan error, 1)}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-p.exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-p.exited
			t.Errorf("bridge did not exit on SIGINT; stderr:\n%s", stderr)
		}
	})
	r := bufio.NewReader(out)
	line, err := r.ReadString('\n')
	if err != nil {
		go func() { p.exited <- cmd.Wait() }()
		t.Fatalf("reading the URL: %v; stderr:\n%s", err, stderr)
	}
	p.url = strings.TrimSpace(line)
	noAuth := false
	for _, a := range args {
		noAuth = noAuth || a == "--no-auth"
	}
	if !noAuth {
		line, err = r.ReadString('\n')
		if err != nil {
			go func() { p.exited <- cmd.Wait() }()
			t.Fatalf("reading the token: %v; stderr:\n%s", err, stderr)
		}
		p.token = strings.TrimSpace(line)
	}
	go func() {
		// Nothing else may appear on stdout.
		rest, _ := r.ReadString(0)
		if rest != "" {
			t.Errorf("unexpected stdout: %q", rest)
		}
		p.exited <- cmd.Wait()
	}()
	return p
}

type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

func textOf(res *mcp.CallToolResult) string {
	if len(res.Content) == 0 {
		return ""
	}
	if tc, ok := res.Content[0].(*mcp.TextContent); ok {
		return tc.Text
	}
	return ""
}

// useTurn lists the real catalogue and calls tools through the kernel: an
// unknown tool is refused tool_unavailable, toolgate.escalate ends the turn, and
// a later call is refused escalation_pending.
func useTurn(t *testing.T, cs *mcp.ClientSession) {
	t.Helper()
	ctx := context.Background()
	init := cs.InitializeResult()
	if init.ServerInfo.Name != "toolgate" || init.ServerInfo.Version == "" || init.Capabilities.Tools == nil {
		t.Errorf("initialize: %+v", init)
	}
	list, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	names := map[string]bool{}
	for _, tool := range list.Tools {
		names[tool.Name] = true
	}
	// The default grants give `default` the escalation tool and the read-only control
	// plane; a bridge publishes the same toolgate-provided tools as serve and mcp.
	for _, want := range []string{"toolgate.escalate", "server.status", "server.version"} {
		if !names[want] {
			t.Fatalf("%s not published: %v", want, names)
		}
	}
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "server.version", Arguments: map[string]any{}}); err != nil || res.IsError {
		t.Fatalf("server.version: %v %+v", err, res)
	}
	if h, _ := list.Meta["toolgate/catalogHash"].(string); len(h) != 64 {
		t.Errorf("catalogHash %q", h)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "nope.missing", Arguments: map[string]any{}})
	if err != nil {
		t.Fatalf("tools/call unknown: %v", err)
	}
	if !res.IsError || res.Meta["toolgate/code"] != "tool_unavailable" {
		t.Errorf("unknown tool: %+v %q", res.Meta, textOf(res))
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "toolgate.escalate", Arguments: map[string]any{"reason": "need a person"}})
	if err != nil {
		t.Fatalf("tools/call escalate: %v", err)
	}
	if res.IsError {
		t.Fatalf("escalate refused: %q", textOf(res))
	}
	var out struct {
		Escalated bool
		Reason    string
	}
	b, _ := json.Marshal(res.StructuredContent)
	if json.Unmarshal(b, &out) != nil || !out.Escalated || out.Reason != "need a person" {
		t.Errorf("escalate result %s", b)
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "toolgate.escalate", Arguments: map[string]any{"reason": "again"}})
	if err != nil {
		t.Fatalf("tools/call after escalation: %v", err)
	}
	if !res.IsError || res.Meta["toolgate/code"] != "escalation_pending" {
		t.Errorf("after escalation: %+v %q", res.Meta, textOf(res))
	}
}

// TestGoSDKOverHTTP: the Go SDK client connects to `toolgate bridge` with the
// printed token and uses the turn; closing the session (DELETE) ends that
// session, not the command (TestBridgeLivesForItsTurn), and SIGINT ends the
// command with exit status 0.
func TestGoSDKOverHTTP(t *testing.T) {
	p := startBridge(t)
	if !strings.HasPrefix(p.url, "http://127.0.0.1:") || !strings.HasSuffix(p.url, "/mcp") || p.token == "" {
		t.Fatalf("url %q token %q", p.url, p.token)
	}
	// Without the token: 401.
	res, err := http.Post(p.url, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusUnauthorized {
		t.Errorf("without token: %d", res.StatusCode)
	}
	// A client of the session-based era (the SDK asked for 2025-11-25, so it
	// sends initialize instead of server/discover).
	tr := &mcp.StreamableClientTransport{Endpoint: p.url, HTTPClient: &http.Client{Transport: bearer{p.token}}, MaxRetries: -1}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, nil).Connect(context.Background(), tr,
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatalf("connect: %v; stderr:\n%s", err, p.stderr)
	}
	if v := cs.InitializeResult().ProtocolVersion; v != "2025-11-25" {
		t.Errorf("negotiated %q", v)
	}
	checkServerIdentity(t, cs.InitializeResult())
	useTurn(t, cs)
	if err := cs.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
	if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-p.exited:
		if err != nil {
			t.Errorf("bridge exited with %v on SIGINT; stderr:\n%s", err, p.stderr)
		}
		p.exited <- err // for the cleanup
	case <-time.After(10 * time.Second):
		t.Errorf("bridge still running 10 s after SIGINT")
	}
}

// TestGoSDKOverHTTPStateless: by default the Go SDK finds the stateless
// 2026-07-28 revision through server/discover and uses the turn without a
// session; the bridge serves until it is interrupted.
func TestGoSDKOverHTTPStateless(t *testing.T) {
	p := startBridge(t)
	tr := &mcp.StreamableClientTransport{Endpoint: p.url, HTTPClient: &http.Client{Transport: bearer{p.token}}, MaxRetries: -1}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, nil).Connect(context.Background(), tr, nil)
	if err != nil {
		t.Fatalf("connect: %v; stderr:\n%s", err, p.stderr)
	}
	if v := cs.InitializeResult().ProtocolVersion; v != "2026-07-28" || cs.ID() != "" {
		t.Errorf("negotiated %q, session %q", v, cs.ID())
	}
	checkServerIdentity(t, cs.InitializeResult())
	useTurn(t, cs)
	if err := cs.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
}

// checkServerIdentity: both eras name toolgate, state that the catalogue never changes
// under a turn, and carry the instructions that teach a model to read denials.
func checkServerIdentity(t *testing.T, ir *mcp.InitializeResult) {
	t.Helper()
	if ir.ServerInfo == nil || ir.ServerInfo.Name != "toolgate" || ir.ServerInfo.Version == "" {
		t.Errorf("serverInfo = %+v", ir.ServerInfo)
	}
	if ir.Capabilities == nil || ir.Capabilities.Tools == nil || ir.Capabilities.Tools.ListChanged {
		t.Errorf("capabilities.tools = %+v, want listChanged false", ir.Capabilities)
	}
	if !strings.Contains(ir.Instructions, `_meta["toolgate/status"]`) || !strings.Contains(ir.Instructions, "toolgate.escalate") {
		t.Errorf("instructions = %q", ir.Instructions)
	}
}

// TestGoSDKOverStdio: the Go SDK's CommandTransport spawns `toolgate bridge --stdio`.
func TestGoSDKOverStdio(t *testing.T) {
	cmd := exec.Command(testenv.Binary(t), "bridge", "--stdio", "--data-dir", testenv.PrivateDir(t))
	stderr := &testenv.SyncBuffer{}
	cmd.Stderr = stderr
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, nil).
		Connect(context.Background(), &mcp.CommandTransport{Command: cmd, TerminateDuration: 10 * time.Second}, nil)
	if err != nil {
		t.Fatalf("connect: %v; stderr:\n%s", err, stderr)
	}
	checkServerIdentity(t, cs.InitializeResult())
	useTurn(t, cs)
	if err := cs.Close(); err != nil {
		t.Errorf("close: %v; stderr:\n%s", err, stderr)
	}
	if cmd.ProcessState == nil || !cmd.ProcessState.Success() {
		t.Errorf("process state %v; stderr:\n%s", cmd.ProcessState, stderr)
	}
}

// TestBridgeRefusals: --no-auth is refused off loopback, bad flags are clear
// errors, and nothing is printed on stdout.
func TestBridgeRefusals(t *testing.T) {
	bin := testenv.Binary(t)
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--no-auth", "--listen", "0.0.0.0:0"}, "--no-auth is only allowed on a loopback address"},
		{[]string{"--no-auth", "--listen", "192.0.2.1:0"}, "--no-auth is only allowed on a loopback address"},
		{[]string{"--no-auth", "--listen", "[::]:0"}, "--no-auth is only allowed on a loopback address"},
		{[]string{"--no-auth", "--listen", "bridge.example.invalid:0"}, "--no-auth is only allowed on a loopback address"},
		{[]string{"--listen", "nonsense"}, "--listen"},
		{[]string{"--listen", "127.0.0.1:99999"}, "invalid port"},
		{[]string{"--stdio", "--listen", "127.0.0.1:0"}, "contradict"},
		{[]string{"--principal", " "}, "--principal"},
		{[]string{"--ttl", "0s"}, "--ttl"},
	}
	for _, tt := range tests {
		cmd := exec.Command(bin, append([]string{"bridge", "--data-dir", testenv.PrivateDir(t)}, tt.args...)...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		if err == nil {
			t.Errorf("%v: succeeded", tt.args)
			continue
		}
		if !strings.Contains(stderr.String(), tt.want) {
			t.Errorf("%v: stderr %q does not mention %q", tt.args, stderr.String(), tt.want)
		}
		if stdout.Len() != 0 {
			t.Errorf("%v: stdout %q", tt.args, stdout.String())
		}
	}
}

// TestBridgeNoAuthLoopback: --no-auth on loopback serves without a token and
// still refuses a foreign Host.
func TestBridgeNoAuthLoopback(t *testing.T) {
	p := startBridge(t, "--no-auth")
	res, err := http.Post(p.url, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Errorf("ping: %d", res.StatusCode)
	}
	req, _ := http.NewRequest(http.MethodPost, p.url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	req.Host = "evil.example.com"
	req.Header.Set("Content-Type", "application/json")
	res, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusForbidden {
		t.Errorf("foreign Host: %d", res.StatusCode)
	}
}
