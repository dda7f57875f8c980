package serve

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/app"
	"github.com/toolgate/toolgate/internal/policy"
	"github.com/toolgate/toolgate/internal/testenv"
)

// setup creates a data directory with extra grants and returns execution tokens for the
// named principals (minted with the data directory's key, as `toolgate token mint` does).
func setup(t testing.TB, grants []policy.Grant, principals ...string) (string, map[string]string) {
	t.Helper()
	data := filepath.Join(t.TempDir(), "data")
	a, err := app.Open(context.Background(), app.Options{DataDir: data})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	for _, g := range grants {
		if _, err := a.Store().AddGrant(context.Background(), g); err != nil {
			t.Fatal(err)
		}
	}
	toks := map[string]string{}
	for _, p := range principals {
		tok, err := a.MintToken(p, "e2e", 3600)
		if err != nil {
			t.Fatal(err)
		}
		toks[p] = tok
	}
	return data, toks
}

func workspaceDir(t testing.TB) string {
	t.Helper()
	ws := filepath.Join(t.TempDir(), "ws")
	for p, s := range map[string]string{"docs/a.md": "alpha\n", "src/x.go": "package x\n"} {
		os.MkdirAll(filepath.Join(ws, filepath.Dir(p)), 0o755)
		if err := os.WriteFile(filepath.Join(ws, p), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return ws
}

func TestFirstStart(t *testing.T) {
	data := filepath.Join(t.TempDir(), "fresh", "data")
	d := startServe(t, data, workspaceDir(t))
	fi, err := os.Stat(data)
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("data dir %v %v", fi, err)
	}
	fi, err = os.Stat(filepath.Join(data, app.OwnerTokenFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("owner token %v %v", fi, err)
	}
	owner := d.ownerToken()
	if s := d.stderr.String(); !strings.Contains(s, "created the owner token") || !strings.Contains(s, d.url+"/mcp") || strings.Contains(s, owner) {
		t.Errorf("first-start message (must say how to connect, never print the token):\n%s", s)
	}
	if status, _, body := request(t, "GET", d.url+"/healthz", "", ""); status != 200 || string(body) != "{\"status\":\"ok\"}\n" {
		t.Errorf("healthz: %d %s", status, body)
	}
	if status, _, body := request(t, "GET", d.url+"/readyz", "", ""); status != 200 || string(body) != "{\"status\":\"ready\"}\n" {
		t.Errorf("readyz: %d %s", status, body)
	}
	for _, c := range []struct{ method, path, body string }{
		{"GET", "/v1/tools", ""},
		{"POST", "/v1/tools/invoke", `{"name":"local.read_file","arguments":{"path":"docs/a.md"}}`},
		{"POST", "/mcp", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`},
	} {
		status, h, body := request(t, c.method, d.url+c.path, "", c.body)
		if status != 401 || h.Get("WWW-Authenticate") != `Bearer realm="toolgate"` {
			t.Errorf("%s %s without a token: %d %s", c.method, c.path, status, body)
		}
		if status, _, _ := request(t, c.method, d.url+c.path, "not-a-token", c.body); status != 401 {
			t.Errorf("%s %s with a bad token: %d", c.method, c.path, status)
		}
	}
	// A cross-site "simple" POST (text/plain) never reaches the kernel.
	if status, _, body := request(t, "POST", d.url+"/v1/tools/invoke", owner, `{"name":"local.read_file","arguments":{"path":"docs/a.md"}}`,
		"Content-Type", "text/plain"); status != 415 {
		t.Errorf("text/plain invoke: %d %s", status, body)
	}
	// DNS rebinding: a foreign Host is refused before anything else.
	if status, _, body := request(t, "GET", d.url+"/v1/tools", owner, "", "Host", "evil.example"); status != 403 {
		t.Errorf("foreign Host: %d %s", status, body)
	}
	status, _, body := request(t, "GET", d.url+"/v1/tools", owner, "")
	if status != 200 {
		t.Fatalf("list: %d %s", status, body)
	}
	names := toolNames(t, body)
	for _, want := range []string{"local.read_file", "local.write_file", "toolgate.escalate"} {
		if !slices.Contains(names, want) {
			t.Errorf("default catalogue %v lacks %s", names, want)
		}
	}
	// /metrics: the owner token only; the refused calls above are not calls.
	if status, _, _ := request(t, "GET", d.url+"/metrics", "", ""); status != 401 {
		t.Errorf("/metrics without a token: %d", status)
	}
	if status, _, body := request(t, "POST", d.url+"/v1/tools/invoke", owner, `{"name":"local.read_file","arguments":{"path":"docs/a.md"}}`); status != 200 {
		t.Fatalf("invoke: %d %s", status, body)
	}
	status, _, body = request(t, "GET", d.url+"/metrics", owner, "")
	if status != 200 || !strings.Contains(string(body), "\n"+`toolgate_tool_calls_total{code="none",outcome="ok",tool="local.read_file"} 1`+"\n") {
		t.Errorf("/metrics: %d\n%s", status, body)
	}
	if err := d.stop(syscall.SIGTERM); err != nil {
		t.Errorf("SIGTERM exit: %v\n%s", err, d.stderr.String())
	}
	if !strings.Contains(d.stderr.String(), "toolgate: stopped") {
		t.Errorf("no clean stop:\n%s", d.stderr.String())
	}
	// A second start reuses the owner token.
	d2 := startServe(t, data, "")
	if d2.ownerToken() != owner || strings.Contains(d2.stderr.String(), "created the owner token") {
		t.Errorf("owner token changed on restart")
	}
}

func TestNonLoopbackListen(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	if _, errOut, code := run(t, data, "serve", "--listen", "example.com:7077"); code == 0 || !strings.Contains(errOut, "--listen") {
		t.Errorf("a host name listen address: exit %d %s", code, errOut)
	}
	if _, errOut, code := run(t, data, "serve", "--listen", "nonsense"); code == 0 || !strings.Contains(errOut, "--listen") {
		t.Errorf("a malformed listen address: exit %d %s", code, errOut)
	}
	d := startServeAt(t, data, "0.0.0.0:0")
	if !strings.Contains(d.stderr.String(), "beyond loopback") {
		t.Errorf("no warning for a non-loopback listen:\n%s", d.stderr.String())
	}
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(d.url, "http://"))
	url := "http://127.0.0.1:" + port
	if status, _, _ := request(t, "GET", url+"/v1/tools", "", ""); status != 401 {
		t.Errorf("non-loopback without a token: %d", status)
	}
	if status, _, _ := request(t, "GET", url+"/v1/tools", d.ownerToken(), ""); status != 200 {
		t.Errorf("non-loopback with the owner token: %d", status)
	}
	// A name not on --allow-host is refused (DNS rebinding), even with a token.
	if status, _, _ := request(t, "GET", url+"/v1/tools", d.ownerToken(), "", "Host", "gw.example:"+port); status != 403 {
		t.Errorf("unlisted host: %d", status)
	}
	d.stop(syscall.SIGTERM)
	d2 := startServe(t, data, "", "--listen", "0.0.0.0:0", "--allow-host", "gw.example")
	_, port, _ = net.SplitHostPort(strings.TrimPrefix(d2.url, "http://"))
	if status, _, b := request(t, "GET", "http://127.0.0.1:"+port+"/v1/tools", d2.ownerToken(), "", "Host", "gw.example:"+port); status != 200 {
		t.Errorf("--allow-host name: %d %s", status, b)
	}
}

func startServeAt(t *testing.T, data, listen string) *daemon {
	t.Helper()
	d := startServe(t, data, "", "--listen", listen)
	return d
}

func toolNames(t *testing.T, body []byte) []string {
	t.Helper()
	var l struct {
		Tools []struct{ Name string }
	}
	if err := json.Unmarshal(body, &l); err != nil {
		t.Fatalf("%s: %v", body, err)
	}
	var out []string
	for _, x := range l.Tools {
		out = append(out, x.Name)
	}
	return out
}

// GET /v1/tools and tools/list give the same catalogue and hash for the same principal;
// each principal's /mcp session sees its own; invoke and tools/call give the same result.
func TestSameKernelOnEverySurface(t *testing.T) {
	data, toks := setup(t, []policy.Grant{
		{Principal: "alice", Tool: "local.read_file", Action: "read", Resource: "path:docs/", Effect: policy.Allow},
		{Principal: "bob", Tool: "local.*", Action: "*", Effect: policy.Allow},
	}, "alice", "bob", "nobody")
	d := startServe(t, data, workspaceDir(t))

	hashes := map[string]string{}
	for _, p := range []string{"alice", "bob", "nobody"} {
		tok := toks[p]
		status, _, apiBody := request(t, "GET", d.url+"/v1/tools", tok, "")
		if status != 200 {
			t.Fatalf("%s list: %d %s", p, status, apiBody)
		}
		s := openMCP(t, d.url, tok)
		mcpBody := s.call("tools/list", "{}")
		var api, rpc struct {
			Tools json.RawMessage
			Meta  map[string]string `json:"_meta"`
		}
		json.Unmarshal(apiBody, &api)
		json.Unmarshal(mcpBody, &rpc)
		if canonical(t, api.Tools) != canonical(t, rpc.Tools) {
			t.Errorf("%s: /v1/tools and tools/list differ:\n%s\n%s", p, api.Tools, rpc.Tools)
		}
		h := api.Meta["toolgate/catalogHash"]
		if len(h) != 64 || h != rpc.Meta["toolgate/catalogHash"] {
			t.Errorf("%s: catalogHash %q vs %q", p, h, rpc.Meta["toolgate/catalogHash"])
		}
		if api.Meta["toolgate/executionId"] == rpc.Meta["toolgate/executionId"] {
			t.Errorf("%s: two turns share an execution id", p)
		}
		hashes[p] = h
		names := toolNames(t, apiBody)
		switch p {
		case "alice":
			if strings.Join(names, ",") != "local.read_file" {
				t.Errorf("alice sees %v", names)
			}
		case "nobody":
			if len(names) != 0 {
				t.Errorf("nobody sees %v", names)
			}
		case "bob":
			if !slices.Contains(names, "local.write_file") || slices.Contains(names, "toolgate.escalate") {
				t.Errorf("bob sees %v", names)
			}
		}
	}
	if hashes["alice"] == hashes["bob"] {
		t.Errorf("different catalogues, same hash")
	}

	// A session is bound to its principal: bob cannot use alice's session id.
	alice := openMCP(t, d.url, toks["alice"])
	status, _, body := request(t, "POST", d.url+"/mcp", toks["bob"], `{"jsonrpc":"2.0","id":9,"method":"tools/list"}`,
		"Mcp-Session-Id", alice.id, "MCP-Protocol-Version", "2025-06-18")
	if status != 404 {
		t.Errorf("bob with alice's session: %d %s", status, body)
	}

	// invoke ≡ tools/call, allowed and refused.
	for _, c := range []string{
		`{"name":"local.read_file","arguments":{"path":"docs/a.md"}}`,
		`{"name":"local.read_file","arguments":{"path":"docs/../src/x.go"}}`,
		`{"name":"local.write_file","arguments":{"path":"docs/b.md","content":"x"}}`,
		`{"name":"local.nope","arguments":{}}`,
	} {
		status, _, apiRes := request(t, "POST", d.url+"/v1/tools/invoke", toks["alice"], c)
		if status != 200 {
			t.Fatalf("invoke %s: %d %s", c, status, apiRes)
		}
		rpcRes := alice.call("tools/call", c)
		if canonical(t, apiRes) != canonical(t, rpcRes) {
			t.Errorf("invoke and tools/call differ for %s:\n%s\n%s", c, apiRes, rpcRes)
		}
	}
	if _, err := os.Stat(filepath.Join(d.ws, "docs", "b.md")); err == nil {
		t.Errorf("alice wrote a file without a write grant")
	}

	// The official Go SDK as a client over the same endpoint.
	ctx := withTimeout(t)
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e-sdk", Version: "1"}, nil)
	sess, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: d.url + "/mcp",
		HTTPClient: &http.Client{Transport: bearerRT{toks["bob"]}}, DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	lt, err := sess.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(lt.Tools) == 0 || lt.Meta["toolgate/catalogHash"] != hashes["bob"] {
		t.Errorf("SDK list: %d tools, meta %v", len(lt.Tools), lt.Meta)
	}
	res, err := sess.CallTool(ctx, &mcp.CallToolParams{Name: "local.read_file", Arguments: map[string]any{"path": "src/x.go"}})
	if err != nil || res.IsError {
		t.Fatalf("SDK call: %+v %v", res, err)
	}
}

type bearerRT struct{ tok string }

func (b bearerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.tok)
	return http.DefaultTransport.RoundTrip(r)
}

func TestEscalationThroughTheCLI(t *testing.T) {
	data, toks := setup(t, nil, "default")
	d := startServe(t, data, workspaceDir(t))
	s := openMCP(t, d.url, toks["default"])
	res := s.call("tools/call", `{"name":"toolgate.escalate","arguments":{"reason":"need to deploy","note":"ticket 42"}}`)
	var r struct {
		IsError           bool
		StructuredContent map[string]any
	}
	json.Unmarshal(res, &r)
	if r.IsError || r.StructuredContent["escalated"] != true || r.StructuredContent["reason"] != "need to deploy" {
		t.Fatalf("escalate: %s", res)
	}
	res = s.call("tools/call", `{"name":"local.read_file","arguments":{"path":"docs/a.md"}}`)
	if !strings.Contains(string(res), `"toolgate/code":"escalation_pending"`) || !strings.Contains(string(res), `\"retryable\":false`) {
		t.Errorf("after escalating: %s", res)
	}
	out, errOut, code := run(t, data, "escalations", "ls")
	if code != 0 || !strings.Contains(out, "need to deploy") || !strings.Contains(out, "pending") {
		t.Fatalf("escalations ls: %d %s %s", code, out, errOut)
	}
	out, _, _ = run(t, data, "escalations", "ls", "--json")
	var e struct{ ID, Principal, Note string }
	if err := json.Unmarshal([]byte(strings.SplitN(out, "\n", 2)[0]), &e); err != nil || e.Principal != "default" || e.Note != "ticket 42" {
		t.Fatalf("escalations ls --json: %q %v", out, err)
	}
	if out, errOut, code := run(t, data, "escalations", "approve", e.ID, "--note", "ok", "--by", "ops"); code != 0 || !strings.Contains(out, "approved") {
		t.Errorf("approve: %d %s %s", code, out, errOut)
	}
	if _, errOut, code := run(t, data, "escalations", "deny", e.ID); code == 0 || !strings.Contains(errOut, "already") {
		t.Errorf("deny after approve: %d %s", code, errOut)
	}
	if _, errOut, code := run(t, data, "escalations", "approve", "esc-nope"); code == 0 || !strings.Contains(errOut, "no escalation") {
		t.Errorf("approve unknown: %d %s", code, errOut)
	}
	out, _, _ = run(t, data, "escalations", "ls", "--status", "approved", "--json")
	if !strings.Contains(out, `"decided_by":"ops"`) {
		t.Errorf("approved list: %s", out)
	}
	if _, _, code := run(t, data, "escalations", "ls", "--status", "weird"); code == 0 {
		t.Errorf("a bad --status was accepted")
	}
}

func writeFile(t testing.TB, root, rel, content string) {
	t.Helper()
	p := filepath.Join(root, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// The same tool set gives the same catalogHash across processes and transports: the
// daemon's /v1/tools and /mcp, and a stdio bridge for the same principal.
func TestCatalogHashAcrossTransports(t *testing.T) {
	data, toks := setup(t, []policy.Grant{
		{Principal: "eve", Tool: "toolgate.escalate", Action: "execute", Effect: policy.Allow},
	}, "eve")
	d := startServe(t, data, "")
	_, _, body := request(t, "GET", d.url+"/v1/tools", toks["eve"], "")
	var api struct {
		Meta map[string]string `json:"_meta"`
	}
	json.Unmarshal(body, &api)
	var rpc struct {
		Meta map[string]string `json:"_meta"`
	}
	json.Unmarshal(openMCP(t, d.url, toks["eve"]).call("tools/list", "{}"), &rpc)

	ctx := withTimeout(t)
	cmd := exec.Command(testenv.Binary(t), "bridge", "--stdio", "--principal", "eve")
	cmd.Env = env(data)
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e-stdio", Version: "1"}, nil)
	sess, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	lt, err := sess.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	stdio, _ := lt.Meta["toolgate/catalogHash"].(string)
	h := api.Meta["toolgate/catalogHash"]
	if len(h) != 64 || h != rpc.Meta["toolgate/catalogHash"] || h != stdio {
		t.Errorf("catalogHash /v1/tools %q, /mcp %q, stdio bridge %q", h, rpc.Meta["toolgate/catalogHash"], stdio)
	}
	if len(lt.Tools) != 1 || lt.Tools[0].Name != "toolgate.escalate" {
		t.Errorf("stdio bridge lists %d tools", len(lt.Tools))
	}
}

// A stateless 2026-07-28 tools/call on the daemon's /mcp goes through the same kernel:
// same authorization, same refusal shape, an audit event per decision.
func TestStatelessCallThroughTheDaemon(t *testing.T) {
	data, toks := setup(t, []policy.Grant{
		{Principal: "dana", Tool: "local.read_file", Action: "read", Resource: "path:docs/", Effect: policy.Allow},
	}, "dana")
	d := startServe(t, data, workspaceDir(t))
	call := func(path string) string {
		body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"local.read_file","arguments":{"path":"` + path +
			`"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
		status, _, b := request(t, "POST", d.url+"/mcp", toks["dana"], body,
			"MCP-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call", "Mcp-Name", "local.read_file")
		if status != 200 {
			t.Fatalf("stateless call: %d %s", status, b)
		}
		return string(b)
	}
	if r := call("docs/a.md"); !strings.Contains(r, `"resultType":"complete"`) || !strings.Contains(r, "alpha") {
		t.Errorf("allowed stateless call: %s", r)
	}
	if r := call("src/x.go"); !strings.Contains(r, `"toolgate/code":"no_matching_grant"`) || strings.Contains(r, "package x") {
		t.Errorf("refused stateless call: %s", r)
	}
	out, _, _ := run(t, data, "audit", "--json", "--principal", "dana")
	if strings.Count(out, "\n") != 2 || !strings.Contains(out, `"transport":"http"`) {
		t.Errorf("audit of stateless calls:\n%s", out)
	}
}
