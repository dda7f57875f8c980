package npmservers

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/internal/upstream/upstreamtest"
)

// servers writes an mcpServers file with the three npm servers, each carrying marker
// in its argv (server-filesystem's is its allowed directory, ws), and returns its path.
func servers(t *testing.T, marker, ws, memFile string) string {
	t.Helper()
	return serversFor(t, marker, ws, memFile)
}

func serversFor(t testing.TB, marker, ws, memFile string) string {
	t.Helper()
	node := testenv.Node(t)
	pkg := func(name string) string {
		return testenv.NPMPackageFile(t, "@modelcontextprotocol/"+name, "dist/index.js")
	}
	doc := map[string]any{"mcpServers": map[string]any{
		"everything": map[string]any{"command": node, "args": []string{pkg("server-everything"), "stdio", marker}},
		"memory": map[string]any{"command": node, "args": []string{pkg("server-memory"), marker},
			"env": map[string]string{"MEMORY_FILE_PATH": memFile}},
		"filesystem": map[string]any{"command": node, "args": []string{pkg("server-filesystem"), ws}},
	}}
	b, _ := json.MarshalIndent(doc, "", "  ")
	p := filepath.Join(t.TempDir(), "mcp.json")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func tg(t *testing.T, data string, args ...string) string {
	t.Helper()
	return run(t, data, args...)
}

func run(t testing.TB, data string, args ...string) string {
	t.Helper()
	out, errs, code := testenv.Run(t, data, args...)
	if code != 0 {
		t.Fatalf("toolgate %s: exit %d\n%s\n%s", strings.Join(args, " "), code, out, errs)
	}
	return out
}

// session is a minimal Streamable HTTP client of /mcp (JSON or one-event SSE answers).
type session struct {
	t          *testing.T // or tb
	tb         testing.TB
	url, token string
	id         string
	next       int
}

func (s *session) fail() testing.TB {
	if s.tb != nil {
		return s.tb
	}
	return s.t
}

func (s *session) call(method, params string) json.RawMessage {
	s.fail().Helper()
	r, ok := s.try(method, params)
	if !ok {
		s.fail().Fatalf("%s: the session ended", method)
	}
	return r
}

// try is call that reports a session the server ended (404) instead of failing.
func (s *session) try(method, params string) (json.RawMessage, bool) {
	t := s.fail()
	t.Helper()
	s.next++
	r, err := testenv.MCPCall(context.Background(), nil, s.url, s.token, &s.id, s.next, method, params)
	if errors.Is(err, testenv.ErrSessionGone) {
		return nil, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return r, true
}

func toolNames(t testing.TB, list json.RawMessage) map[string]bool {
	var l struct{ Tools []struct{ Name string } }
	if err := json.Unmarshal(list, &l); err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, x := range l.Tools {
		out[x.Name] = true
	}
	return out
}

func text(t *testing.T, res json.RawMessage) string {
	t.Helper()
	var r struct {
		Content []struct{ Text string }
		IsError bool
	}
	if err := json.Unmarshal(res, &r); err != nil || len(r.Content) == 0 {
		t.Fatalf("not a tool result: %s", res)
	}
	if r.IsError {
		t.Fatalf("tool error: %s", res)
	}
	return r.Content[0].Text
}

// Three real npm servers installed behind `toolgate serve`: each one's tools are
// published only once granted, calls reach them and their answers come back, the
// management commands see them running, and stopping serve leaves no process.
func TestNPMServersBehindServe(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, "hello.txt"), []byte("hello from the workspace\n"), 0o644)
	marker := upstreamtest.Marker(t)
	cfg := servers(t, marker, ws, filepath.Join(t.TempDir(), "memory.jsonl"))
	out := tg(t, data, "install", cfg, "--allow-implicit-invocation=true", "--json")
	if !strings.Contains(out, `"installed"`) {
		t.Fatalf("install: %s", out)
	}
	srv := testenv.StartServe(t, data, "--listen", "127.0.0.1:0")
	tok := strings.TrimSpace(string(must(os.ReadFile(filepath.Join(data, "owner-token")))))
	s := &session{t: t, url: srv.URL, token: tok}
	s.call("initialize", `{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"npm-e2e","version":"1"}}`)
	// No install grants anything: the upstream tools are not published yet.
	for name := range toolNames(t, s.call("tools/list", `{}`)) {
		if strings.HasPrefix(name, "everything.") || strings.HasPrefix(name, "memory.") || strings.HasPrefix(name, "filesystem.") {
			t.Fatalf("%s published without a grant", name)
		}
	}
	for _, ns := range []string{"everything", "memory", "filesystem"} {
		tg(t, data, "grant", "add", "--principal", "default", "--tool", ns+".*", "--action", "execute")
	}
	// The servers start and publish their first catalogues in the background; a
	// session opened before a catalogue changed is ended (404) and opened again.
	var names map[string]bool
	deadline := time.Now().Add(60 * time.Second)
	for {
		s = &session{t: t, url: srv.URL, token: tok}
		s.call("initialize", `{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"npm-e2e","version":"1"}}`)
		if l, ok := s.try("tools/list", `{}`); ok {
			names = toolNames(t, l)
			if names["everything.echo"] && names["memory.create_entities"] && names["filesystem.read_text_file"] {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the npm servers' tools never appeared: %v", names)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if got := text(t, s.call("tools/call", `{"name":"everything.echo","arguments":{"message":"über <&> 1.50"}}`)); !strings.Contains(got, "über <&> 1.50") {
		t.Errorf("everything.echo: %q", got)
	}
	if got := text(t, s.call("tools/call", fmt.Sprintf(`{"name":"filesystem.read_text_file","arguments":{"path":%q}}`, filepath.Join(ws, "hello.txt")))); !strings.Contains(got, "hello from the workspace") {
		t.Errorf("filesystem.read_text_file: %q", got)
	}
	text(t, s.call("tools/call", `{"name":"memory.create_entities","arguments":{"entities":[{"name":"toolgate","entityType":"gateway","observations":["hosts servers"]}]}}`))
	if got := text(t, s.call("tools/call", `{"name":"memory.read_graph","arguments":{}}`)); !strings.Contains(got, "hosts servers") {
		t.Errorf("memory.read_graph after create_entities: %q", got)
	}
	// A path outside the server's own allowed directory is the server's refusal, passed through.
	res := s.call("tools/call", `{"name":"filesystem.read_text_file","arguments":{"path":"/etc/passwd"}}`)
	if !strings.Contains(string(res), `"isError":true`) {
		t.Errorf("server-filesystem read outside its directory: %s", res)
	}
	// The management commands see them running.
	ls := tg(t, data, "ls", "--json")
	for _, ns := range []string{"everything", "memory", "filesystem"} {
		if !strings.Contains(ls, `"name":"`+ns+`"`) && !strings.Contains(ls, `"name": "`+ns+`"`) {
			t.Errorf("ls does not list %s: %s", ns, ls)
		}
	}
	if n := len(upstreamtest.Processes(t, marker)); n != 2 {
		t.Errorf("%d processes carry the marker; want 2 (everything and memory)", n)
	}
	if err := srv.Stop(t, syscall.SIGTERM); err != nil {
		t.Errorf("serve: %v", err)
	}
	upstreamtest.WaitGone(t, marker, 10*time.Second)
	upstreamtest.WaitGone(t, ws, 10*time.Second)
}

// The same servers through `toolgate mcp` over stdio, under its toolgate_<server>_<tool>
// names.
func TestNPMServersThroughToolgateMCP(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, "hello.txt"), []byte("hello over stdio\n"), 0o644)
	marker := upstreamtest.Marker(t)
	tg(t, data, "install", servers(t, marker, ws, filepath.Join(t.TempDir(), "memory.jsonl")), "--allow-implicit-invocation=true")
	tg(t, data, "grant", "add", "--principal", "default", "--tool", "everything.*", "--action", "execute")
	tg(t, data, "grant", "add", "--principal", "default", "--tool", "filesystem.*", "--action", "execute")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, testenv.Binary(t), "mcp", "--workspace", ws)
	cmd.Env = testenv.Env(data)
	in, _ := cmd.StdinPipe()
	outp, _ := cmd.StdoutPipe()
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { in.Close(); cmd.Wait() }()
	rd := bufio.NewReader(outp)
	id := 0
	call := func(method, params string) json.RawMessage {
		id++
		fmt.Fprintf(in, `{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`+"\n", id, method, params)
		for {
			line, err := rd.ReadBytes('\n')
			if err != nil {
				t.Fatalf("%s: %v", method, err)
			}
			var m struct {
				ID     *int
				Result json.RawMessage
				Error  json.RawMessage
			}
			if json.Unmarshal(line, &m) == nil && m.ID != nil && *m.ID == id {
				if m.Error != nil {
					t.Fatalf("%s: %s", method, line)
				}
				return m.Result
			}
		}
	}
	call("initialize", `{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"npm-e2e","version":"1"}}`)
	fmt.Fprintln(in, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	names := toolNames(t, call("tools/list", `{}`))
	if !names["toolgate_everything_echo"] || !names["toolgate_filesystem_read_text_file"] || names["toolgate_memory_read_graph"] {
		t.Fatalf("tools over stdio: %v", names)
	}
	if got := text(t, call("tools/call", `{"name":"toolgate_everything_echo","arguments":{"message":"over stdio"}}`)); !strings.Contains(got, "over stdio") {
		t.Errorf("echo: %q", got)
	}
	if got := text(t, call("tools/call", fmt.Sprintf(`{"name":"toolgate_filesystem_read_text_file","arguments":{"path":%q}}`, filepath.Join(ws, "hello.txt")))); !strings.Contains(got, "hello over stdio") {
		t.Errorf("read_text_file: %q", got)
	}
	in.Close()
	cmd.Wait()
	upstreamtest.WaitGone(t, marker, 10*time.Second)
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
