package manage

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/internal/upstreamauth/upstreamauthtest"
)

// mcpCaller is a harness of toolgate serve's /mcp with the owner's token: one JSON
// request per call (the stateless 2026-07-28 revision needs no session).
type mcpCaller struct {
	t          *testing.T
	url, token string
	next       int
}

// call returns the result or the error object of one request.
func (c *mcpCaller) call(method, name, params string) (result, rpcErr json.RawMessage) {
	c.t.Helper()
	c.next++
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`, c.next, method, params)
	req, _ := http.NewRequest("POST", c.url+"/mcp", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", method)
	if name != "" {
		req.Header.Set("Mcp-Name", name)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		for _, l := range strings.Split(string(raw), "\n") {
			if d, ok := strings.CutPrefix(l, "data: "); ok {
				raw = []byte(d)
			}
		}
	}
	var m struct{ Result, Error json.RawMessage }
	if err := json.Unmarshal(raw, &m); err != nil {
		c.t.Fatalf("%s: status %d, %s", method, resp.StatusCode, raw)
	}
	return m.Result, m.Error
}

// echo calls the fixture's tool through toolgate and returns what came back.
func (c *mcpCaller) echo() string {
	c.t.Helper()
	res, e := c.call("tools/call", "prot.echo", `{"name":"prot.echo","arguments":{"n":1},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"e2e","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}}`)
	return string(res) + string(e)
}

// waitEcho retries echo until it works (the server's first catalogue may still be on
// its way).
func (c *mcpCaller) waitEcho() string {
	c.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		got := c.echo()
		if strings.Contains(got, `echo {\"n\":1}`) {
			return got
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("the tool call never worked: %s", got)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

type authDetails struct {
	Server struct{ Runtime struct{ State string } }
	Auth   struct{ State, Reason string }
}

func details(t *testing.T, data, name string, answers *strings.Builder) authDetails {
	t.Helper()
	out := tgOK(t, data, "details", name, "--json")
	answers.WriteString(out)
	var d authDetails
	if err := json.Unmarshal([]byte(out), &d); err != nil {
		t.Fatalf("details: %v\n%s", err, out)
	}
	return d
}

func waitDetails(t *testing.T, data, name string, answers *strings.Builder, ok func(authDetails) bool) authDetails {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		d := details(t, data, name, answers)
		if ok(d) {
			return d
		}
		if time.Now().After(deadline) {
			t.Fatalf("details of %s never matched: %+v", name, d)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestOAuthLoginThroughTheBinary: a remote server behind OAuth (the upstreamauth
// fixture) installed with no credentials behind toolgate serve parks in auth_required;
// `toolgate auth login --headless` (through the daemon) signs in with dynamic
// registration and PKCE, the server goes ready and a harness's tool call works; an
// access token's expiry is survived by one refresh; a revoked grant parks the server
// with no further request to it or to its authorization server; no token, code or
// client secret appears in an answer, the daemon's log, the data directory's files,
// the audit trail or a process's command line.
func TestOAuthLoginThroughTheBinary(t *testing.T) {
	canary := fmt.Sprintf("tgoauth%d", time.Now().UnixNano())
	f := upstreamauthtest.New(t, upstreamauthtest.Options{Canary: canary})
	data := testenv.PrivateDir(t)
	s := startServe(t, data)
	var answers strings.Builder
	cfg := filepath.Join(t.TempDir(), "mcp.json")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`{"mcpServers":{"prot":{"url":%q}}}`, f.URL)), 0o600)
	answers.WriteString(tgOK(t, data, "install", cfg, "--allow-implicit-invocation=true", "--json"))
	tgOK(t, data, "grant", "add", "--principal", "default", "--tool", "prot.*", "--action", "execute")

	// The first start meets the 401 and parks.
	d := waitDetails(t, data, "prot", &answers, func(d authDetails) bool { return d.Server.Runtime.State == "auth_required" })
	if d.Auth.State != "sign_in_required" || d.Auth.Reason != "login_required" {
		t.Fatalf("auth before login: %+v", d.Auth)
	}
	if human := tgOK(t, data, "details", "prot"); !strings.Contains(human, "Sign-in") || !strings.Contains(human, "sign_in_required (login_required: the server requires a sign-in: toolgate auth login prot)") {
		t.Fatalf("details for a person:\n%s", human)
	}
	mcpN, asN := f.MCPTotal(), f.ASRequests()
	time.Sleep(300 * time.Millisecond)
	details(t, data, "prot", &answers)
	if f.MCPTotal() != mcpN || f.ASRequests() != asN {
		t.Fatalf("requests while parked: mcp %d→%d, authorization server %d→%d", mcpN, f.MCPTotal(), asN, f.ASRequests())
	}

	out, errs, code := tg(t, data, "auth", "login", "prot", "--headless", "--json")
	answers.WriteString(out + errs)
	if code != 0 || !strings.Contains(out, `"state":"signed_in"`) {
		t.Fatalf("auth login: exit %d\n%s\n%s", code, out, errs)
	}
	if !strings.Contains(out, f.Issuer) || f.Registrations() != 1 {
		t.Fatalf("login: %s, %d registrations", out, f.Registrations())
	}
	waitDetails(t, data, "prot", &answers, func(d authDetails) bool { return d.Server.Runtime.State == "ready" })
	raw, err := os.ReadFile(filepath.Join(data, "owner-token"))
	if err != nil {
		t.Fatal(err)
	}
	tok := strings.TrimSpace(string(raw))
	h := &mcpCaller{t: t, url: s.URL, token: tok}
	got := h.waitEcho()
	answers.WriteString(got)
	answers.WriteString(tgOK(t, data, "auth", "status", "--json"))
	answers.WriteString(tgOK(t, data, "auth", "status", "prot"))

	// An expiry: one refresh, with the resource indicator, and the call works.
	f.ExpireAccessTokens()
	if got := h.echo(); !strings.Contains(got, `echo {\"n\":1}`) {
		t.Fatalf("call after expiry: %s", got)
	}
	refreshes := 0
	for _, r := range f.TokenRequests() {
		if r.GrantType == "refresh_token" {
			refreshes++
			if r.Status != 200 || len(r.Resource) != 1 || r.Resource[0] != f.URL {
				t.Fatalf("refresh: %+v", r)
			}
		}
	}
	if refreshes != 1 {
		t.Fatalf("%d refreshes, want 1", refreshes)
	}

	// A revoked grant: the refresh is refused, the server parks, nothing more is sent.
	f.RevokeRefreshTokens()
	f.ExpireAccessTokens()
	answers.WriteString(h.echo())
	d = waitDetails(t, data, "prot", &answers, func(d authDetails) bool { return d.Server.Runtime.State == "auth_required" })
	if d.Auth.Reason != "grant_revoked" {
		t.Fatalf("auth after revocation: %+v", d.Auth)
	}
	mcpN, asN = f.MCPTotal(), f.ASRequests()
	for range 5 {
		answers.WriteString(h.echo())
	}
	tgOK(t, data, "restart", "prot")
	time.Sleep(300 * time.Millisecond)
	details(t, data, "prot", &answers)
	if f.MCPTotal() != mcpN || f.ASRequests() != asN {
		t.Fatalf("requests after revocation: mcp %d→%d, authorization server %d→%d", mcpN, f.MCPTotal(), asN, f.ASRequests())
	}
	answers.WriteString(tgOK(t, data, "auth", "logout", "prot", "--json"))
	answers.WriteString(tgOK(t, data, "audit", "--json"))

	if strings.Contains(answers.String(), canary) {
		t.Fatalf("a token or secret is in an answer:\n%s", answers.String())
	}
	noSecretLeft(t, canary, data, s)
}

// noSecretLeft checks that canary (a secret or token) is in no process's command
// line, then stops the daemon and checks its log and the data directory's files.
func noSecretLeft(t *testing.T, canary, data string, s *serve) {
	t.Helper()
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(cmdline), canary) {
			t.Fatalf("a secret is in the command line of %s: %q", e.Name(), cmdline)
		}
	}
	s.Stop(t, syscall.SIGTERM)
	if strings.Contains(s.Stderr.String(), canary) {
		t.Fatalf("a secret is in the daemon's log:\n%s", s.Stderr.String())
	}
	files, _ := filepath.Glob(filepath.Join(data, "*"))
	for _, p := range files {
		if b, err := os.ReadFile(p); err == nil && strings.Contains(string(b), canary) {
			t.Fatalf("a secret is in %s in clear", p)
		}
	}
}

// TestOAuthLoginWithoutDaemon: with no daemon, `toolgate auth login` signs in from
// the command's own process (the tokens go sealed to the keystore); a daemon started
// afterwards uses them: its first start of the server sends the stored token and the
// tool call works, with no new sign-in.
func TestOAuthLoginWithoutDaemon(t *testing.T) {
	canary := fmt.Sprintf("tgoauth%d", time.Now().UnixNano())
	f := upstreamauthtest.New(t, upstreamauthtest.Options{Canary: canary})
	data := testenv.PrivateDir(t)
	cfg := filepath.Join(t.TempDir(), "mcp.json")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`{"mcpServers":{"prot":{"url":%q}}}`, f.URL)), 0o600)
	var answers strings.Builder
	answers.WriteString(tgOK(t, data, "install", cfg, "--allow-implicit-invocation=true", "--json"))
	tgOK(t, data, "grant", "add", "--principal", "default", "--tool", "prot.*", "--action", "execute")
	out, errs, code := tg(t, data, "auth", "login", "prot", "--headless")
	answers.WriteString(out + errs)
	if code != 0 || !strings.Contains(out, "prot: signed_in") {
		t.Fatalf("auth login: exit %d\n%s\n%s", code, out, errs)
	}
	if st := tgOK(t, data, "auth", "status", "prot", "--json"); !strings.Contains(st, `"state":"signed_in"`) {
		t.Fatalf("status after login: %s", st)
	}
	codes := len(f.TokenRequests())
	s := startServe(t, data)
	raw, _ := os.ReadFile(filepath.Join(data, "owner-token"))
	h := &mcpCaller{t: t, url: s.URL, token: strings.TrimSpace(string(raw))}
	got := h.waitEcho()
	if n := len(f.TokenRequests()); n != codes {
		t.Fatalf("the daemon asked for %d more tokens; the stored ones were not used", n-codes)
	}
	if strings.Contains(answers.String()+got, canary) {
		t.Fatalf("a token is in an answer:\n%s", answers.String())
	}
	noSecretLeft(t, canary, data, s)
}
