package tsclient

import (
	"context"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/testenv"
)

// newReplicaProxy is the round-robin load balancer in front of the replicas; a
// request without Authorization gets token (the conformance suite sends none).
func newReplicaProxy(t *testing.T, bases []string, token string) *testenv.RoundRobin {
	return testenv.NewRoundRobin(t, token, bases...)
}

// startReplicas runs n `toolgate serve` processes on one PostgreSQL database (each
// with its own data directory, the same workspace) and returns their base URLs and
// the first one's data directory, for CLI commands.
func startReplicas(t *testing.T, n int, ws string) ([]string, string) {
	t.Helper()
	t.Setenv("TOOLGATE_DATABASE_URL", testenv.Postgres(t))
	var bases []string
	var first string
	for i := range n {
		data := filepath.Join(t.TempDir(), "data")
		if i == 0 {
			first = data
		}
		bases = append(bases, startServe(t, data, ws))
	}
	return bases, first
}

// TestServeReplicas: two `toolgate serve` replicas on one PostgreSQL behind a
// round-robin proxy. The TypeScript SDK and the Go SDK each keep one legacy session
// whose requests both replicas serve (one catalogue hash, the session closed by its
// DELETE); a namespace switched off through the CLI against the database stops the
// principal's next call on a replica at once.
func TestServeReplicas(t *testing.T) {
	c := newTSClient(t)
	ws, _ := newWorkspace(t)
	bases, data := startReplicas(t, 2, ws)
	toolgate(t, data, "grant", "add", "--principal", "carol", "--tool", "local.read_file", "--action", "read", "--resource", "path:docs/")
	token := strings.TrimSpace(toolgate(t, data, "token", "mint", "--principal", "carol", "--ttl", "10m"))
	p := newReplicaProxy(t, bases, "")

	s := c.run(t, spec{Transport: httpTransport(p.URL+"/mcp", token), Steps: []map[string]any{
		list(),
		call("local.read_file", map[string]any{"path": "docs/a.md"}),
		call("local.read_file", map[string]any{"path": "docs/a.md"}),
		list(),
		call("local.read_file", map[string]any{"path": "docs/a.md"}),
		closeOp(),
	}})
	mustOK(t, s, 6)
	checkNegotiated(t, s, true)
	if !strings.HasPrefix(s.SessionID, "tg1.") {
		t.Errorf("session id %q is not a shared one", s.SessionID)
	}
	h := checkList(t, s.Steps[0], []string{"local.read_file"}, apiHash(t, bases[1], token))
	checkList(t, s.Steps[3], []string{"local.read_file"}, h)
	for _, i := range []int{1, 2, 4} {
		checkAllowed(t, s.Steps[i], "alpha\n")
	}
	if st := s.Steps[5]; st.Op != "close" || !st.Terminated {
		t.Errorf("DELETE of the session: %+v", st)
	}
	// The replica the DELETE reached ends it at once, the other on the store's
	// notification (docs/deployment.md); neither serves it after.
	for i, base := range bases {
		deadline := time.Now().Add(20 * time.Second)
		for {
			status, body := postSession(t, base, token, s.SessionID, `{"jsonrpc":"2.0","id":9,"method":"ping"}`)
			if status == 404 && strings.TrimSpace(body) == `{"error":"unknown_session"}` {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("replica %d still serves the deleted session: %d %s", i, status, body)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	for i := range p.Hits {
		if p.Hits[i].Load() < 3 {
			t.Errorf("replica %d served %d of the TypeScript client's requests", i, p.Hits[i].Load())
		}
	}

	ctx := context.Background()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "replicas", Version: "1"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: p.URL + "/mcp", HTTPClient: &http.Client{Transport: bearerRT{token}}, MaxRetries: -1},
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	for range 4 {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "local.read_file", Arguments: map[string]any{"path": "docs/a.md"}})
		if err != nil || res.IsError {
			t.Fatalf("Go SDK call through the proxy: %v %+v", err, res)
		}
	}
	toolgate(t, data, "namespaces", "disable", "local")
	status, body := invoke(t, bases[1], token, `{"name":"local.read_file","arguments":{"path":"docs/a.md"}}`)
	if status != 200 || !strings.Contains(body, `"isError":true`) || !strings.Contains(body, "tool_unavailable") {
		t.Errorf("a call on replica 1 right after the namespace was disabled: %d %s", status, body)
	}
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "local.read_file", Arguments: map[string]any{"path": "docs/a.md"}}); err == nil {
		t.Error("the Go SDK session opened before the switch still calls")
	}
}

type bearerRT struct{ token string }

func (b bearerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

func invoke(t *testing.T, base, token, body string) (int, string) {
	t.Helper()
	return postTo(t, base+"/v1/tools/invoke", token, "", body)
}

// postSession POSTs one JSON-RPC body to a replica's /mcp naming session sid.
func postSession(t *testing.T, base, token, sid, body string) (int, string) {
	t.Helper()
	return postTo(t, base+"/mcp", token, sid, body)
}

func postTo(t *testing.T, url, token, sid, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// runConformance runs the official suite's 2026-07-28 requirements (0.2.0-alpha.12,
// `--requirements 2026-07-28`) against url and returns each check's status by
// "scenario/check".
func runConformance(t *testing.T, url string) map[string]string {
	t.Helper()
	node := testenv.Node(t)
	env := append(testenv.NodeEnv(t), "NO_COLOR=1", "FORCE_COLOR=0")
	main := testenv.NPMPackageFile(t, "@modelcontextprotocol/conformance-next", "dist/index.js")
	results := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, main, "server", "--url", url, "-o", results, "--requirements", "2026-07-28")
	cmd.Env = env
	cmd.Dir = t.TempDir()
	out, err := cmd.CombinedOutput()
	_, summary, found := strings.Cut(string(out), "=== SUMMARY ===")
	if !found {
		t.Fatalf("the suite did not run to its end (%v):\n%s", err, out)
	}
	total, _, _ := strings.Cut(summary[strings.Index(summary, "Total:"):], "\n")
	t.Logf("conformance 0.2.0-alpha.12 --requirements 2026-07-28 at %s: %s", url, total)
	statuses := map[string]string{}
	for scenario, checks := range testenv.ConformanceResults(t, results) {
		for _, c := range checks {
			statuses[scenario+"/"+c.ID] = c.Status
			if connectionClosed.MatchString(c.ErrorMessage) {
				t.Errorf("%s/%s failed on a closed connection: %s", scenario, c.ID, c.ErrorMessage)
			}
		}
	}
	return statuses
}

// connectionClosed matches the errors of a check whose connection was refused or cut.
var connectionClosed = regexp.MustCompile(`(?i)fetch failed|ECONNREFUSED|ECONNRESET|socket hang up|other side closed|UND_ERR_SOCKET|terminated`)

// TestConformanceThroughReplicas runs the official suite's 2026-07-28 requirements
// against one `toolgate serve` (SQLite) and then against two replicas on one
// PostgreSQL, each behind the round-robin proxy (which adds the default principal's
// execution token: the suite sends none). The replicas must pass every check the
// single daemon passes: spreading the requests costs no conformance. (The checks both
// fail need fixture tools, resources, prompts or extensions a daemon with only its
// local tools does not have; the bridge's suite, e2e/bridge.TestConformance, lists
// why for each.)
func TestConformanceThroughReplicas(t *testing.T) {
	ws, _ := newWorkspace(t)
	single := filepath.Join(t.TempDir(), "data")
	base := startServe(t, single, ws)
	token := strings.TrimSpace(toolgate(t, single, "token", "mint", "--principal", "default", "--ttl", "10m"))
	want := runConformance(t, newReplicaProxy(t, []string{base}, token).URL+"/mcp")

	bases, data := startReplicas(t, 2, ws)
	token = strings.TrimSpace(toolgate(t, data, "token", "mint", "--principal", "default", "--ttl", "10m"))
	p := newReplicaProxy(t, bases, token)
	got := runConformance(t, p.URL+"/mcp")
	keys := make([]string, 0, len(want))
	passed := 0
	for k := range want {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if want[k] != "SUCCESS" {
			continue
		}
		passed++
		if got[k] != "SUCCESS" {
			t.Errorf("%s passes on one daemon, not through the replicas: %q", k, got[k])
		}
	}
	if passed < 50 {
		t.Errorf("only %d checks pass on one daemon", passed)
	}
	for i := range p.Hits {
		if p.Hits[i].Load() < 50 {
			t.Errorf("replica %d served %d of the suite's requests", i, p.Hits[i].Load())
		}
	}
}
