package trust

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/internal/upstream/upstreamtest"
)

// rig is one data directory with a `toolgate serve` over it (started by serve), driven
// through the CLI and the Go SDK over /mcp.
type rig struct {
	t    *testing.T
	data string
	srv  *testenv.Serve
}

func newRig(t *testing.T) *rig {
	t.Helper()
	return &rig{t: t, data: filepath.Join(t.TempDir(), "data")}
}

// tg runs the CLI and fails the test unless it exits 0.
func (r *rig) tg(args ...string) string {
	r.t.Helper()
	out, errb, code := testenv.Run(r.t, r.data, args...)
	if code != 0 {
		r.t.Fatalf("toolgate %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, out, errb)
	}
	return out
}

// server is one mcpServers entry.
type server struct {
	Command string            `json:"command,omitempty"`
	Args    []string          `json:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	URL     string            `json:"url,omitempty"`
	Type    string            `json:"type,omitempty"`
}

// fixture is the Go fixture upstream with args.
func fixture(t *testing.T, args ...string) server {
	return server{Command: upstreamtest.Fixture(t), Args: args}
}

// install installs servers with implicit invocation (their tools published to every
// turn) and returns the CLI's output and exit code.
func (r *rig) install(servers map[string]server) (string, int) {
	r.t.Helper()
	b, _ := json.Marshal(map[string]any{"mcpServers": servers})
	p := filepath.Join(r.t.TempDir(), "mcp.json")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		r.t.Fatal(err)
	}
	out, errb, code := testenv.Run(r.t, r.data, "install", p, "--allow-implicit-invocation")
	return out + errb, code
}

func (r *rig) grant(args ...string) {
	r.t.Helper()
	r.tg(append([]string{"grant", "add"}, args...)...)
}

func (r *rig) serve() {
	r.t.Helper()
	r.srv = testenv.StartServe(r.t, r.data, "--listen", "127.0.0.1:0")
}

func (r *rig) stop() {
	r.t.Helper()
	r.srv.Stop(r.t, 15)
	r.srv = nil
}

// token mints an execution token for principal.
func (r *rig) token(principal string) string {
	return strings.TrimSpace(r.tg("token", "mint", "--principal", principal))
}

type bearer struct{ tok string }

func (b bearer) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.Header.Set("Authorization", "Bearer "+b.tok)
	return http.DefaultTransport.RoundTrip(req)
}

// client connects a Go SDK client to serve's /mcp as principal; opts may declare
// capabilities and handlers.
func (r *rig) client(principal string, opts *mcp.ClientOptions) *mcp.ClientSession {
	r.t.Helper()
	return r.connect(principal, mcp.NewClient(&mcp.Implementation{Name: "e2e-trust", Version: "1"}, opts))
}

// connect connects c to serve's /mcp as principal.
func (r *rig) connect(principal string, c *mcp.Client) *mcp.ClientSession {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: r.srv.URL + "/mcp",
		HTTPClient: &http.Client{Transport: bearer{r.token(principal)}}}, nil)
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() { s.Close() })
	return s
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// tools lists s's tool names.
func tools(t *testing.T, s *mcp.ClientSession) []string {
	t.Helper()
	l, err := s.ListTools(ctxT(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, tl := range l.Tools {
		out = append(out, tl.Name)
	}
	return out
}

// waitTools lists tools on fresh sessions of principal until every name of want is
// listed (the daemon fetches a new server's first catalogue in the background).
func (r *rig) waitTools(principal string, want ...string) []string {
	r.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		s := r.client(principal, nil)
		got := tools(r.t, s)
		s.Close()
		ok := true
		for _, w := range want {
			ok = ok && slices.Contains(got, w)
		}
		if ok {
			return got
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("tools %v never listed; last: %v\n%s", want, got, r.srv.Stderr.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// call calls tool on s and returns its text and whether it is an error result.
func call(t *testing.T, s *mcp.ClientSession, tool string, args map[string]any) (string, bool) {
	t.Helper()
	res, err := s.CallTool(ctxT(t), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		return "error: " + err.Error(), true
	}
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	if res.StructuredContent != nil {
		sc, _ := json.Marshal(res.StructuredContent)
		b.Write(sc)
	}
	return b.String(), res.IsError
}

// auditEvent is one line of `toolgate audit --json`.
type auditEvent struct {
	Tool, Principal, Action, Resource, Decision, Code, Message string
}

// audit returns the events of tool.
func (r *rig) audit(tool string) []auditEvent {
	r.t.Helper()
	var out []auditEvent
	for _, l := range strings.Split(strings.TrimSpace(r.tg("audit", "--json", "--tool", tool)), "\n") {
		var e auditEvent
		if l != "" && json.Unmarshal([]byte(l), &e) == nil {
			out = append(out, e)
		}
	}
	return out
}

// hasEvent reports whether an event of tool has action, decision and code.
func (r *rig) hasEvent(tool, action, decision, code string) bool {
	for _, e := range r.audit(tool) {
		if e.Action == action && e.Decision == decision && e.Code == code {
			return true
		}
	}
	return false
}

// eventually retries f (a fresh look each time) for up to 30s: the daemon applies a
// CLI decision or a list_changed at its next request, not at once.
func eventually(t *testing.T, what string, f func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !f() {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// listed reports whether a fresh session of principal lists every name of want and
// none of not.
func (r *rig) listed(principal string, want, not []string) bool {
	r.t.Helper()
	s := r.client(principal, nil)
	defer s.Close()
	got := tools(r.t, s)
	for _, w := range want {
		if !slices.Contains(got, w) {
			return false
		}
	}
	for _, n := range not {
		if slices.Contains(got, n) {
			return false
		}
	}
	return true
}

// details is `toolgate details server --json`, decoded loosely.
type detailsDoc struct {
	Catalog struct {
		Tools []struct {
			Name, Callable string
			Diagnostics    []json.RawMessage
		}
	}
	Trust struct {
		Policy struct {
			Pin     string
			Trusted bool
		}
		Holds []struct {
			Tool, Reason, Digest string
			Findings             []json.RawMessage
		}
		Tools []struct {
			Tool, Verdict, Reason string
			Findings              []json.RawMessage
			LooksLike             string `json:"looks_like"`
		}
	}
}

func (r *rig) details(server string) (detailsDoc, string) {
	r.t.Helper()
	out := r.tg("details", server, "--json")
	var d detailsDoc
	if err := json.Unmarshal([]byte(out), &d); err != nil {
		r.t.Fatalf("details --json: %v\n%s", err, out)
	}
	return d, out
}

// digestOf is the digest `pins show` prints to approve server's tool.
func (r *rig) digestOf(server, tool string) string {
	r.t.Helper()
	out := r.tg("pins", "show", server, tool)
	m := digestRE.FindStringSubmatch(out)
	if m == nil {
		r.t.Fatalf("pins show %s %s prints no digest:\n%s", server, tool, out)
	}
	return m[1]
}
