package tsclient

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/app"
	"github.com/toolgate/toolgate/internal/localtools"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/internal/workspace"
)

func httpTransport(url, token string) map[string]any {
	return map[string]any{"kind": "http", "url": url, "headers": map[string]string{"Authorization": "Bearer " + token}}
}

// bridgeProc is one running `toolgate bridge`.
type bridgeProc struct {
	url, token string
	cmd        *exec.Cmd
	stderr     *testenv.SyncBuffer
	exited     chan error
}

// startBridge runs `toolgate bridge --data-dir data ARGS` and reads the URL and the
// token it prints.
func startBridge(t *testing.T, data string, args ...string) *bridgeProc {
	t.Helper()
	cmd := exec.Command(testenv.Binary(t), append([]string{"bridge", "--data-dir", data}, args...)...)
	p := &bridgeProc{cmd: cmd, stderr: &testenv.SyncBuffer{}, exited: make(chan error, 1)}
	cmd.Stderr = p.stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(out)
	lines := make(chan []string, 1)
	go func() {
		var l []string
		for range 2 {
			s, err := r.ReadString('\n')
			if err != nil {
				break
			}
			l = append(l, strings.TrimSpace(s))
		}
		lines <- l
		rest, _ := io.ReadAll(r)
		if len(rest) != 0 {
			t.Errorf("bridge printed more than its URL and token: %q", rest)
		}
		p.exited <- cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-p.exited:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-p.exited
			t.Errorf("bridge did not exit on SIGINT; stderr:\n%s", p.stderr)
		}
	})
	select {
	case l := <-lines:
		if len(l) != 2 {
			t.Fatalf("bridge printed %q; stderr:\n%s", l, p.stderr)
		}
		p.url, p.token = l[0], l[1]
	case <-time.After(60 * time.Second):
		t.Fatalf("bridge printed no URL; stderr:\n%s", p.stderr)
	}
	return p
}

// goHashOverStdioBridge is the Go side of the catalogHash comparison for a
// bridge: the official Go SDK lists the same principal's catalogue through
// `toolgate bridge --stdio` over the same data directory.
func goHashOverStdioBridge(t *testing.T, data, principal string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.Command(testenv.Binary(t), "bridge", "--stdio", "--principal", principal, "--data-dir", data)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "tsclient-go-side", Version: "1"}, nil).
		Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 10 * time.Second}, nil)
	if err != nil {
		t.Fatalf("Go SDK over bridge --stdio: %v", err)
	}
	defer cs.Close()
	lt, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatalf("Go SDK tools/list: %v", err)
	}
	h, _ := lt.Meta["toolgate/catalogHash"].(string)
	return h
}

// TestBridge: the TypeScript SDK over Streamable HTTP against `toolgate bridge`,
// with the printed token sent through requestInit headers. A bridge has no
// workspace, so its one allowed tool is toolgate.escalate: the session lists it
// with the catalogHash the Go SDK sees for the same principal, is refused a tool
// it may not use (tool_unavailable) and a schema-invalid call (invalid_arguments),
// escalates (and is refused escalation_pending after), then DELETEs the session.
// The bridge lives for its turn: the deleted id answers 404 unknown_session, a
// second TypeScript client gets the bridge's next session on the same catalogue,
// and SIGINT ends the command cleanly. A client with a wrong token or another
// principal's token never gets in.
func TestBridge(t *testing.T) {
	c := newTSClient(t)
	data := filepath.Join(t.TempDir(), "data")
	toolgate(t, data, "grant", "add", "--principal", "alice", "--tool", "toolgate.escalate", "--action", "execute")
	goHash := goHashOverStdioBridge(t, data, "alice")
	b := startBridge(t, data, "--principal", "alice")

	for name, tok := range map[string]string{
		"wrong token":             b.token + "x",
		"other principal's token": strings.TrimSpace(toolgate(t, data, "token", "mint", "--principal", "mallory")),
	} {
		s := c.run(t, spec{Transport: httpTransport(b.url, tok), Steps: []map[string]any{list()}})
		if s.OK || !strings.Contains(s.Error, "401") || len(s.Steps) != 0 {
			t.Errorf("%s: the SDK got in (ok %v, error %q, steps %+v)", name, s.OK, s.Error, s.Steps)
		}
	}

	s := c.run(t, spec{Transport: httpTransport(b.url, b.token), Steps: []map[string]any{
		list(),
		call("local.read_file", map[string]any{"path": "docs/a.md"}),
		call("toolgate.escalate", map[string]any{"reason": 7}),
		call("toolgate.escalate", map[string]any{"reason": "need a person"}),
		call("toolgate.escalate", map[string]any{"reason": "again"}),
		closeOp(),
	}})
	mustOK(t, s, 6)
	checkNegotiated(t, s, false)
	if s.SessionID == "" {
		t.Errorf("no session id after initialize")
	}
	checkList(t, s.Steps[0], []string{"toolgate.escalate"}, goHash)
	// escalate declares an outputSchema, so the SDK validated its
	// structuredContent below (a mismatch would have thrown).
	if !slices.Equal(s.Steps[0].WithOutputSchema, []string{"toolgate.escalate"}) {
		t.Errorf("tools with an outputSchema: %q", s.Steps[0].WithOutputSchema)
	}
	checkRefused(t, s.Steps[1], "denied", "tool_unavailable")
	checkRefused(t, s.Steps[2], "failed", "invalid_arguments")
	esc := s.Steps[3]
	if esc.Thrown != "" || esc.Result == nil || esc.Result.IsError || esc.Result.StructuredContent["escalated"] != true ||
		esc.Result.StructuredContent["reason"] != "need a person" || !strings.Contains(esc.Result.text(), "need a person") {
		t.Errorf("toolgate.escalate = %+v", esc)
	}
	checkRefused(t, s.Steps[4], "denied", "escalation_pending")
	if !s.Steps[5].Terminated {
		t.Errorf("DELETE: %+v", s.Steps[5])
	}
	// A bridge serves one turn, to every session a client opens on it: the DELETE
	// ended the session, not the bridge.
	req, _ := http.NewRequest(http.MethodPost, b.url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+b.token)
	req.Header.Set("Mcp-Session-Id", s.SessionID)
	if res, err := http.DefaultClient.Do(req); err != nil {
		t.Errorf("the deleted session: %v; bridge stderr:\n%s", err, b.stderr)
	} else {
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusNotFound || !strings.Contains(string(body), "unknown_session") {
			t.Errorf("the deleted session answers %d %s, want 404 unknown_session", res.StatusCode, body)
		}
	}
	again := c.run(t, spec{Transport: httpTransport(b.url, b.token), Steps: []map[string]any{list(), closeOp()}})
	mustOK(t, again, 2)
	if again.SessionID == "" || again.SessionID == s.SessionID {
		t.Errorf("the next session's id %q (the first was %q)", again.SessionID, s.SessionID)
	}
	checkList(t, again.Steps[0], []string{"toolgate.escalate"}, goHash)
	if err := b.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-b.exited:
		if err != nil {
			t.Errorf("bridge exited with %v on SIGINT; stderr:\n%s", err, b.stderr)
		}
		b.exited <- err
	case <-time.After(30 * time.Second):
		t.Fatalf("bridge still running 30 s after SIGINT")
	}
	out := toolgate(t, data, "escalations", "ls", "--json")
	if !strings.Contains(out, `"need a person"`) || !strings.Contains(out, `"alice"`) {
		t.Errorf("escalations ls after the TypeScript session: %s", out)
	}
}

// goHashInProcess is the Go side of the catalogHash comparison for `toolgate run`'s
// bridge: the same workspace tools registered in an app over the same data
// directory, and the principal's turn listed by the kernel itself.
func goHashInProcess(t *testing.T, data, ws, principal string) string {
	t.Helper()
	ctx := context.Background()
	w, err := workspace.Open(ws)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	// bash and git (NoConfined leaves them out, and the sandbox probe with them)
	// are not in bob's catalogue, so the published tools, and the hash, are
	// those of the command's full set.
	tools, err := localtools.Build(localtools.Config{Workspace: w, Warn: io.Discard, NoConfined: true})
	if err != nil {
		t.Fatal(err)
	}
	a, err := app.Open(ctx, app.Options{DataDir: data, Tools: tools})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	turn, err := a.OpenTurn(ctx, app.TurnRequest{Principal: principal, Transport: "http"})
	if err != nil {
		t.Fatal(err)
	}
	defer turn.Close()
	l, err := turn.ListTools(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return l.CatalogHash
}

// TestRunHarness: the TypeScript client is the harness `toolgate run --harness
// gemini --workspace DIR` starts. It finds the bridge the way Gemini CLI does, in
// the settings file named by GEMINI_CLI_SYSTEM_SETTINGS_PATH (httpUrl and the
// Authorization header), lists the two tools bob is granted with the kernel's
// catalogHash, reads an allowed file, is refused a tool he lacks
// (tool_unavailable), a schema-invalid call (invalid_arguments) and a file outside
// his grant (no_matching_grant), answers ask_user through the SDK's elicitation
// handler (a server-to-client request on the POST's SSE stream), then DELETEs the
// session: while the harness still runs, the bridge answers that session id 404
// unknown_session. toolgate run exits with the harness's code and summarizes the
// turn.
func TestRunHarness(t *testing.T) {
	c := newTSClient(t)
	data := filepath.Join(t.TempDir(), "data")
	ws, _ := newWorkspace(t)
	toolgate(t, data, "grant", "add", "--principal", "bob", "--tool", "local.read_file", "--action", "read", "--resource", "path:docs/")
	toolgate(t, data, "grant", "add", "--principal", "bob", "--tool", "local.ask_user")
	goHash := goHashInProcess(t, data, ws, "bob")

	sp := spec{
		Transport: map[string]any{"kind": "http", "settingsEnv": "GEMINI_CLI_SYSTEM_SETTINGS_PATH", "server": "toolgate"},
		Elicit:    &elicit{Prefix: "answer to: "},
		Steps: []map[string]any{
			list(),
			call("local.read_file", map[string]any{"path": "docs/a.md"}),
			call("local.write_file", map[string]any{"path": "docs/b.md", "content": "x"}),
			call("local.read_file", map[string]any{"path": 5}),
			call("local.read_file", map[string]any{"path": "src/x.go"}),
			call("local.ask_user", map[string]any{"question": "Merge the branch?"}),
			call("local.ask_user", map[string]any{"question": "Delete it? [decline]"}),
			call("local.ask_user", map[string]any{"question": "Anyone? [throw]"}),
			closeOp(),
			probe(),
		},
	}
	argv := append([]string{testenv.Binary(t), "run", "--harness", "gemini", "--principal", "bob", "--workspace", ws, "--"}, c.argv(t, sp)...)
	s, stderr := runCommand(t, toolgateEnv(c.env, data), argv...)
	mustOK(t, s, 10)
	checkNegotiated(t, s, false)
	checkList(t, s.Steps[0], []string{"local.ask_user", "local.read_file"}, goHash)
	checkAllowed(t, s.Steps[1], "alpha\n")
	checkRefused(t, s.Steps[2], "denied", "tool_unavailable")
	checkRefused(t, s.Steps[3], "failed", "invalid_arguments")
	checkRefused(t, s.Steps[4], "denied", "no_matching_grant")
	if strings.Contains(s.Steps[4].Result.text(), "package x") {
		t.Errorf("a refused read leaked the file: %q", s.Steps[4].Result.text())
	}
	checkAllowed(t, s.Steps[5], "answer to: Merge the branch?")
	checkAllowed(t, s.Steps[6], "[the user declined to answer]")
	checkRefused(t, s.Steps[7], "failed", "tool_failed")
	if !strings.Contains(s.Steps[7].Result.text(), "the person is away") {
		t.Errorf("the handler's error is not in the result: %q", s.Steps[7].Result.text())
	}
	if strings.Join(s.Asked, "|") != "Merge the branch?|Delete it? [decline]|Anyone? [throw]" {
		t.Errorf("the elicitation handler was asked %q", s.Asked)
	}
	checkClosedHTTP(t, s.Steps[8], s.Steps[9])
	if _, err := os.Stat(filepath.Join(ws, "docs", "b.md")); err == nil {
		t.Errorf("a refused write_file created the file")
	}
	// The turn's audit summary counts each decision: the throwing elicitation was
	// authorized (allowed) and then failed, so ask_user has three allowed events
	// and one failed.
	for _, want := range []string{
		" completed: 8 audit event(s): 4 allowed, 2 denied, 2 failed, 0 escalated\n",
		"  local.ask_user: 3 allowed, 1 failed\n",
		"  local.read_file: 1 allowed, 1 denied, 1 failed\n",
		"  local.write_file: 1 denied\n",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("toolgate run summary lacks %q:\n%s", want, stderr)
		}
	}
}

var listenLine = regexp.MustCompile(`toolgate: listening on (http://\S+)`)

// startServe runs `toolgate serve --listen 127.0.0.1:0 --workspace ws` over data
// and returns its base URL once it listens.
func startServe(t *testing.T, data, ws string) string {
	t.Helper()
	cmd := exec.Command(testenv.Binary(t), "serve", "--listen", "127.0.0.1:0", "--workspace", ws)
	cmd.Env = toolgateEnv(os.Environ(), data)
	stderr := &testenv.SyncBuffer{}
	pr, pw := io.Pipe()
	cmd.Stderr = io.MultiWriter(stderr, pw)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		err := cmd.Wait()
		pw.Close()
		done <- err
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("serve exited with %v on SIGTERM\n%s", err, stderr)
			}
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
			t.Errorf("serve did not exit on SIGTERM\n%s", stderr)
		}
	})
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			if m := listenLine.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case found <- m[1]:
				default:
				}
			}
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	select {
	case u := <-found:
		return u
	case err := <-done:
		done <- err
		t.Fatalf("serve exited before listening: %v\n%s", err, stderr)
	case <-time.After(60 * time.Second):
		t.Fatalf("serve did not start\n%s", stderr)
	}
	return ""
}

// apiHash is the Go side of the comparison for the daemon: GET /v1/tools with the
// same token.
func apiHash(t *testing.T, base, token string) string {
	t.Helper()
	req, _ := http.NewRequest("GET", base+"/v1/tools", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var l struct {
		Meta map[string]string `json:"_meta"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&l); err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /v1/tools: %d %v", resp.StatusCode, err)
	}
	return l.Meta["toolgate/catalogHash"]
}

// TestServe: the TypeScript SDK against `toolgate serve`'s /mcp with the owner
// token (the default principal's full workspace catalogue) and with a token minted
// by `toolgate token mint` for carol, who may read docs/ only. Each session lists
// the catalogue with the hash GET /v1/tools gives the same token, reads a file,
// is refused a tool it may not use and a schema-invalid call, then DELETEs its
// session, whose id then answers 404 unknown_session; the two principals'
// catalogues differ and so do their hashes.
func TestServe(t *testing.T) {
	c := newTSClient(t)
	data := filepath.Join(t.TempDir(), "data")
	ws, _ := newWorkspace(t)
	toolgate(t, data, "grant", "add", "--principal", "carol", "--tool", "local.read_file", "--action", "read", "--resource", "path:docs/")
	base := startServe(t, data, ws)
	owner, err := os.ReadFile(filepath.Join(data, app.OwnerTokenFile))
	if err != nil {
		t.Fatal(err)
	}
	minted := strings.TrimSpace(toolgate(t, data, "token", "mint", "--principal", "carol", "--ttl", "10m"))

	hashes := map[string]string{}
	for _, tc := range []struct {
		name, token string
		names       []string // nil: checked separately
		refusedTool string
	}{
		{"owner", strings.TrimSpace(string(owner)), nil, "github.create_issue"},
		{"minted", minted, []string{"local.read_file"}, "local.write_file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := c.run(t, spec{Transport: httpTransport(base+"/mcp", tc.token), Steps: []map[string]any{
				list(),
				call("local.read_file", map[string]any{"path": "docs/a.md"}),
				call(tc.refusedTool, map[string]any{"path": "docs/b.md", "content": "x"}),
				call("local.read_file", map[string]any{"path": []string{"docs", "a.md"}}),
				closeOp(),
				probe(),
			}})
			mustOK(t, s, 6)
			checkNegotiated(t, s, true)
			h := checkList(t, s.Steps[0], tc.names, apiHash(t, base, tc.token))
			hashes[tc.name] = h
			if tc.names == nil {
				for _, want := range []string{"local.read_file", "local.write_file", "local.ask_user", "toolgate.escalate"} {
					if !slices.Contains(s.Steps[0].Names, want) {
						t.Errorf("the owner's catalogue %q lacks %s", s.Steps[0].Names, want)
					}
				}
			}
			checkAllowed(t, s.Steps[1], "alpha\n")
			checkRefused(t, s.Steps[2], "denied", "tool_unavailable")
			checkRefused(t, s.Steps[3], "failed", "invalid_arguments")
			checkClosedHTTP(t, s.Steps[4], s.Steps[5])
		})
	}
	if hashes["owner"] == hashes["minted"] {
		t.Errorf("two different catalogues share the hash %q", hashes["owner"])
	}
	if _, err := os.Stat(filepath.Join(ws, "docs", "b.md")); err == nil {
		t.Errorf("a refused call wrote a file")
	}
}
