package reliability

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/internal/upstream/upstreamtest"
)

// rig is one data directory with the fixture installed as fx (its argv carrying
// marker), every fx tool granted to the default principal, and a private TMPDIR
// for the toolgate processes it runs.
type rig struct {
	data, marker, token, tmp string
}

func newRig(t *testing.T, fixtureArgs ...string) *rig {
	t.Helper()
	return newRigWith(t, nil, fixtureArgs...)
}

// newRigWith is newRig with more members in fx's entry (callTimeout …).
func newRigWith(t *testing.T, members map[string]any, fixtureArgs ...string) *rig {
	t.Helper()
	r := &rig{data: testenv.PrivateDir(t), marker: upstreamtest.Marker(t), tmp: t.TempDir()}
	fixture := upstreamtest.Fixture(t)
	testenv.Binary(t) // both built before TMPDIR points at the rig's own
	t.Setenv("TMPDIR", r.tmp)
	entry := map[string]any{"command": fixture, "args": append([]string{"-marker", r.marker}, fixtureArgs...)}
	for k, v := range members {
		entry[k] = v
	}
	doc := map[string]any{"mcpServers": map[string]any{"fx": entry}}
	b, _ := json.Marshal(doc)
	cfg := filepath.Join(t.TempDir(), "mcp.json")
	if err := os.WriteFile(cfg, b, 0o600); err != nil {
		t.Fatal(err)
	}
	r.tg(t, "install", cfg, "--allow-implicit-invocation=true")
	r.tg(t, "grant", "add", "--principal", "default", "--tool", "fx.*", "--action", "execute")
	return r
}

// addServer installs another fixture as name, with marker in its argv, and grants
// its tools.
func (r *rig) addServer(t *testing.T, name, marker string, args ...string) {
	t.Helper()
	doc := map[string]any{"mcpServers": map[string]any{name: map[string]any{
		"command": upstreamtest.Fixture(t), "args": append([]string{"-marker", marker}, args...),
	}}}
	b, _ := json.Marshal(doc)
	cfg := filepath.Join(t.TempDir(), "mcp.json")
	if err := os.WriteFile(cfg, b, 0o600); err != nil {
		t.Fatal(err)
	}
	r.tg(t, "install", cfg, "--allow-implicit-invocation=true")
	r.tg(t, "grant", "add", "--principal", "default", "--tool", name+".*", "--action", "execute")
}

// auditEvent is the part of a `toolgate audit --json` line the tests read.
type auditEvent struct {
	CallID   string `json:"call_id"`
	Tool     string `json:"tool"`
	Decision string `json:"decision"`
	Code     string `json:"code"`
}

func (r *rig) audit(t testing.TB, args ...string) []auditEvent {
	t.Helper()
	var out []auditEvent
	for _, l := range strings.Split(r.tg(t, append([]string{"audit", "--json", "--limit", "1000000"}, args...)...), "\n") {
		if strings.TrimSpace(l) == "" {
			continue
		}
		var e auditEvent
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("audit line: %v: %s", err, l)
		}
		out = append(out, e)
	}
	return out
}

func (r *rig) tg(t testing.TB, args ...string) string {
	t.Helper()
	out, errs, code := testenv.Run(t, r.data, args...)
	if code != 0 {
		t.Fatalf("toolgate %s: exit %d\n%s\n%s", strings.Join(args, " "), code, out, errs)
	}
	return out
}

func (r *rig) serve(t *testing.T) *testenv.Serve {
	t.Helper()
	return testenv.StartServe(t, r.data, "--listen", "127.0.0.1:0")
}

// session opens an MCP session on srv that lists tool (waiting for the upstream's
// first catalogue when it is an fx tool).
func (r *rig) session(t testing.TB, url, tool string) *session {
	t.Helper()
	if r.token == "" {
		tok, err := os.ReadFile(filepath.Join(r.data, "owner-token"))
		if err != nil {
			t.Fatal(err)
		}
		r.token = strings.TrimSpace(string(tok))
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		s := &session{url: url, token: r.token}
		if err := s.open(); err == nil {
			if l, err := s.rpc("tools/list", `{}`); err == nil && strings.Contains(string(l), `"name":"`+tool+`"`) {
				return s
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no session listing %s", tool)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// tmpLeft lists the files in the data directory that look temporary, and
// everything left in the rig's TMPDIR.
func (r *rig) tmpLeft(t testing.TB) []string {
	t.Helper()
	var left []string
	filepath.WalkDir(r.data, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			n := d.Name()
			if strings.Contains(n, ".tmp") || strings.HasPrefix(n, "tmp") || strings.HasSuffix(n, "~") {
				left = append(left, p)
			}
		}
		return nil
	})
	entries, _ := os.ReadDir(r.tmp)
	for _, e := range entries {
		left = append(left, filepath.Join(r.tmp, e.Name()))
	}
	return left
}

// session is a minimal Streamable HTTP client of /mcp (JSON or SSE answers), so
// the tests see exactly what goes over the wire.
type session struct {
	url, token, id string
	client         *http.Client
	next           int
}

var errGone = testenv.ErrSessionGone

func (s *session) open() error {
	_, err := s.rpc("initialize", `{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"reliability-e2e","version":"1"}}`)
	return err
}

// rpc sends one request and returns its result, or an error for a JSON-RPC error,
// a transport failure or an ended session.
func (s *session) rpc(method, params string) (json.RawMessage, error) {
	return s.rpcContext(context.Background(), method, params)
}

// post sends body on the session and returns the HTTP status.
func (s *session) post(body string) (int, error) {
	req, _ := http.NewRequest("POST", s.url+"/mcp", strings.NewReader(body))
	s.headers(req)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

func (s *session) headers(req *http.Request) {
	req.Header.Set("Authorization", "Bearer "+s.token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if s.id != "" {
		req.Header.Set("Mcp-Session-Id", s.id)
		req.Header.Set("MCP-Protocol-Version", "2025-06-18")
	}
}

func (s *session) rpcContext(ctx context.Context, method, params string) (json.RawMessage, error) {
	s.next++
	return testenv.MCPCall(ctx, s.client, s.url, s.token, &s.id, s.next, method, params)
}

// outcome is what a tools/call answered: its text and, for a refusal or failure,
// its reason code (docs/reason-codes.md).
type outcome struct {
	text, code string
}

func (s *session) call(name, args string) (outcome, error) {
	res, err := s.rpc("tools/call", fmt.Sprintf(`{"name":%q,"arguments":%s}`, name, args))
	if err != nil {
		return outcome{}, err
	}
	return parseOutcome(res)
}

// parseOutcome reads a tools/call result.
func parseOutcome(res json.RawMessage) (outcome, error) {
	var r struct {
		Content []struct{ Text string }
		IsError bool
		Meta    map[string]string `json:"_meta"`
	}
	if err := json.Unmarshal(res, &r); err != nil {
		return outcome{}, fmt.Errorf("not a tool result: %.300s", res)
	}
	var o outcome
	if len(r.Content) > 0 {
		o.text = r.Content[0].Text
	}
	if r.IsError {
		o.code = r.Meta["toolgate/code"]
		if o.code == "" {
			o.code = "<none>"
		}
	}
	return o, nil
}

// procInfo reads what /proc says of pid: its open descriptors and its RSS in KiB.
func fdCount(t testing.TB, pid int) int {
	t.Helper()
	e, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatalf("reading fds of %d: %v", pid, err)
	}
	return len(e)
}

func rssKiB(t testing.TB, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatalf("reading status of %d: %v", pid, err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			n, _ := strconv.Atoi(strings.Fields(v)[0])
			return n
		}
	}
	t.Fatalf("no VmRSS for %d", pid)
	return 0
}

// inGroups returns the live processes whose process group is one of pgids.
func inGroups(pgids map[int]bool) []int {
	var out []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if state, pg := stat(pid); state != "" && state != "Z" && state != "X" && pgids[pg] {
			out = append(out, pid)
		}
	}
	return out
}

// pgidOf returns pid's process group.
func pgidOf(pid int) int {
	_, pg := stat(pid)
	return pg
}

// stat reads pid's state and process group from /proc/PID/stat ("" when gone).
func stat(pid int) (state string, pgid int) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", 0
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return "", 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 3 {
		return "", 0
	}
	pgid, _ = strconv.Atoi(f[2])
	return f[0], pgid
}
