package tsclient

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/mcpspec"
	"github.com/toolgate/toolgate/internal/testenv"
)

// sdkVersion is the TypeScript SDK version testdata/npm/package.json pins; the
// tests refuse to pass against another one, so a bump is a deliberate change here.
const sdkVersion = "1.32.2"

// session is the JSON line testdata/tsclient.mjs prints.
type session struct {
	OK              bool
	Error           string
	SDKLatest       string `json:"sdkLatest"`
	ProtocolVersion string `json:"protocolVersion"`
	SessionID       string `json:"sessionId"`
	ServerInfo      struct{ Name, Version string }
	Capabilities    struct {
		Tools *struct {
			ListChanged *bool `json:"listChanged"`
		}
	}
	Instructions    string
	Asked           []string
	TransportErrors []string `json:"transportErrors"`
	CloseErrors     []string `json:"closeErrors"`
	Steps           []step

	stderr string // what the command wrote on stderr
}

// step is one scripted step's outcome.
type step struct {
	Op string
	// list
	Names            []string
	WithOutputSchema []string `json:"withOutputSchema"`
	Meta             map[string]any
	NextCursor       *string `json:"nextCursor"`
	// call
	Name   string
	Result *toolResult
	Thrown string
	// close
	Terminated bool
	ExitCode   *int    `json:"exitCode"`
	SignalCode *string `json:"signalCode"`
	// probe
	Status        int
	Body          string
	SessionHeader *string `json:"sessionHeader"`
}

// toolResult is a CallToolResult as the TypeScript SDK parsed it.
type toolResult struct {
	Content []struct {
		Type, Text string
	}
	IsError           bool           `json:"isError"`
	Meta              map[string]any `json:"_meta"`
	StructuredContent map[string]any `json:"structuredContent"`
}

func (r *toolResult) text() string {
	var b strings.Builder
	for _, c := range r.Content {
		b.WriteString(c.Text)
	}
	return b.String()
}

// spec is the scripted session handed to tsclient.mjs (see its header).
type spec struct {
	Transport map[string]any   `json:"transport"`
	Elicit    *elicit          `json:"elicit,omitempty"`
	Steps     []map[string]any `json:"steps"`
}

type elicit struct {
	Prefix string `json:"prefix"`
}

func list() map[string]any    { return map[string]any{"op": "list"} }
func closeOp() map[string]any { return map[string]any{"op": "close"} }
func probe() map[string]any   { return map[string]any{"op": "probe"} }
func call(name string, args map[string]any) map[string]any {
	return map[string]any{"op": "call", "name": name, "arguments": args}
}

// tsClient is tsclient.mjs placed next to the npm peers' node_modules.
type tsClient struct {
	node   string
	script string
	env    []string
}

// newTSClient copies the script into a fresh folder with a node_modules symlink to
// the peers' (Node resolves an ESM import from the importing file's folder and
// ignores NODE_PATH), and checks the installed SDK is the pinned one.
func newTSClient(t *testing.T) *tsClient {
	t.Helper()
	node := testenv.Node(t)
	env := testenv.NodeEnv(t)
	modules := filepath.Join(testenv.NPMDir(t), "node_modules")
	pkg, err := os.ReadFile(filepath.Join(modules, "@modelcontextprotocol", "sdk", "package.json"))
	if err != nil {
		if testenv.RequirePeers() {
			t.Fatalf("the TypeScript SDK is not installed: %v", err)
		}
		t.Skipf("the TypeScript SDK is not installed (%v); run `make test` to install peers", err)
	}
	var meta struct{ Version string }
	if err := json.Unmarshal(pkg, &meta); err != nil || meta.Version != sdkVersion {
		t.Fatalf("@modelcontextprotocol/sdk version %q (%v), want %s", meta.Version, err, sdkVersion)
	}
	src, err := os.ReadFile(filepath.Join("testdata", "tsclient.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	script := filepath.Join(dir, "tsclient.mjs")
	if err := os.WriteFile(script, src, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(modules, filepath.Join(dir, "node_modules")); err != nil {
		t.Fatal(err)
	}
	return &tsClient{node: node, script: script, env: env}
}

// writeSpec stores sp in a private file (it may hold a bearer token) and returns
// its path.
func writeSpec(t *testing.T, sp spec) string {
	t.Helper()
	b, err := json.Marshal(sp)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "spec.json")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// argv is the command line that runs one scripted session.
func (c *tsClient) argv(t *testing.T, sp spec) []string {
	return []string{c.node, c.script, writeSpec(t, sp)}
}

// run runs one scripted session directly under Node.
func (c *tsClient) run(t *testing.T, sp spec) *session {
	t.Helper()
	s, _ := runCommand(t, c.env, c.argv(t, sp)...)
	return s
}

// runCommand runs argv (Node, or a toolgate command that starts Node) and decodes
// the session line from its stdout; stderr is returned and logged on failure. A
// run that cannot finish is killed, so a hang fails the test instead of stalling it.
func runCommand(t *testing.T, env []string, argv ...string) (*session, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = env
	// SIGTERM first: Node then exits (closing the stdin of a toolgate mcp it
	// spawned) and toolgate run forwards it to the harness; SIGKILL after 10 s.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	var stdout bytes.Buffer
	stderr := &testenv.SyncBuffer{}
	cmd.Stdout, cmd.Stderr = &stdout, stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("%s did not finish: %v\nstderr:\n%s", filepath.Base(argv[0]), err, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	if len(lines) != 1 {
		t.Fatalf("want exactly one line on stdout, got %q (exit %v)\nstderr:\n%s", stdout.String(), err, stderr)
	}
	var s session
	if jerr := json.Unmarshal([]byte(lines[0]), &s); jerr != nil {
		t.Fatalf("session line %q: %v\nstderr:\n%s", lines[0], jerr, stderr)
	}
	if s.OK != (err == nil) {
		t.Errorf("session ok=%v but the command ended with %v", s.OK, err)
	}
	s.stderr = stderr.String()
	if t.Failed() {
		t.Logf("stderr of %s:\n%s", filepath.Base(argv[0]), s.stderr)
	}
	return &s, s.stderr
}

// mustOK fails the test unless the session ran all its steps.
func mustOK(t *testing.T, s *session, want int) {
	t.Helper()
	if !s.OK {
		t.Fatalf("TypeScript session failed: %s\nstderr:\n%s", s.Error, s.stderr)
	}
	if len(s.Steps) != want {
		t.Fatalf("%d steps reported, want %d: %+v", len(s.Steps), want, s.Steps)
	}
	if len(s.TransportErrors) != 0 {
		t.Errorf("the SDK reported transport errors: %q", s.TransportErrors)
	}
	if len(s.CloseErrors) != 0 {
		t.Logf("the SDK reported while closing (its own aborted reads): %q", s.CloseErrors)
	}
}

// checkNegotiated: the SDK asked for its latest version (it speaks up to
// 2025-11-25 and always sends initialize), toolgate supports that version and so
// answered with it, and toolgate introduced itself with tools.listChanged stated:
// true on toolgate serve (its sessions' GET streams carry tools/list_changed),
// false on a bridge and stdio (one catalogue for the turn's life).
func checkNegotiated(t *testing.T, s *session, listChanged bool) {
	t.Helper()
	t.Logf("TypeScript SDK %s (latest %s) negotiated protocol version %s with %s %s",
		sdkVersion, s.SDKLatest, s.ProtocolVersion, s.ServerInfo.Name, s.ServerInfo.Version)
	supported := s.ProtocolVersion == mcpspec.ModernVersion || slices.Contains(mcpspec.SessionVersions, s.ProtocolVersion)
	if !supported {
		t.Errorf("negotiated %q, which toolgate does not support (%v, %s)", s.ProtocolVersion, mcpspec.SessionVersions, mcpspec.ModernVersion)
	}
	if s.ProtocolVersion != s.SDKLatest {
		t.Errorf("negotiated %q although toolgate supports the SDK's own %q", s.ProtocolVersion, s.SDKLatest)
	}
	if s.ServerInfo.Name != "toolgate" || s.ServerInfo.Version == "" {
		t.Errorf("serverInfo = %+v", s.ServerInfo)
	}
	if s.Capabilities.Tools == nil || s.Capabilities.Tools.ListChanged == nil || *s.Capabilities.Tools.ListChanged != listChanged {
		t.Errorf("capabilities.tools = %+v, want listChanged stated %v", s.Capabilities.Tools, listChanged)
	}
	if !strings.Contains(s.Instructions, `_meta["toolgate/status"]`) {
		t.Errorf("instructions = %q", s.Instructions)
	}
}

var hex64 = regexp.MustCompile(`^[0-9a-f]{64}$`)

// checkList checks a tools/list step: exactly wantNames (sorted), served whole, and
// a catalogHash of 64 hex that equals goHash when one is given. It returns the hash.
func checkList(t *testing.T, st step, wantNames []string, goHash string) string {
	t.Helper()
	if st.Op != "list" {
		t.Fatalf("step %+v is not a list", st)
	}
	got := slices.Clone(st.Names)
	slices.Sort(got)
	if wantNames != nil && !slices.Equal(got, wantNames) {
		t.Errorf("tools/list names %q, want %q", got, wantNames)
	}
	if st.NextCursor != nil {
		t.Errorf("tools/list paginated (nextCursor %q); it is served whole", *st.NextCursor)
	}
	h, _ := st.Meta["toolgate/catalogHash"].(string)
	if !hex64.MatchString(h) {
		t.Errorf(`_meta["toolgate/catalogHash"] = %q, want 64 hex characters`, h)
	}
	if goHash != "" && h != goHash {
		t.Errorf("catalogHash seen by the TypeScript SDK %q, by the Go side %q", h, goHash)
	}
	return h
}

// checkAllowed checks a call step that succeeded with the given text.
func checkAllowed(t *testing.T, st step, wantText string) {
	t.Helper()
	if st.Op != "call" || st.Thrown != "" || st.Result == nil {
		t.Fatalf("call step %+v", st)
	}
	if st.Result.IsError || st.Result.text() != wantText {
		t.Errorf("%s = isError %v %q, want %q", st.Name, st.Result.IsError, st.Result.text(), wantText)
	}
	if _, ok := st.Result.Meta["toolgate/status"]; ok {
		t.Errorf("%s: an allowed result carries toolgate/status: %v", st.Name, st.Result.Meta)
	}
}

// checkRefused checks a call step refused as a tool result (never a JSON-RPC error
// or a thrown exception) with the status and reason code in _meta and in the body.
func checkRefused(t *testing.T, st step, status, code string) {
	t.Helper()
	if st.Op != "call" || st.Thrown != "" || st.Result == nil {
		t.Fatalf("call step %+v: want a %s result, not an exception", st, code)
	}
	r := st.Result
	if !r.IsError || r.Meta["toolgate/status"] != status || r.Meta["toolgate/code"] != code {
		t.Errorf("%s = isError %v _meta %v %q, want %s %s", st.Name, r.IsError, r.Meta, r.text(), status, code)
	}
	var body struct{ Status, Code, Message string }
	if err := json.Unmarshal([]byte(r.text()), &body); err != nil || body.Status != status || body.Code != code || body.Message == "" {
		t.Errorf("%s body %q (%v)", st.Name, r.text(), err)
	}
}

// checkClosedHTTP checks a close step that sent DELETE, and the probe after it: the
// session id is answered 404 unknown_session and no session id comes back.
func checkClosedHTTP(t *testing.T, closeStep, probeStep step) {
	t.Helper()
	if closeStep.Op != "close" || !closeStep.Terminated {
		t.Errorf("DELETE of the session: %+v", closeStep)
	}
	if probeStep.Op != "probe" || probeStep.Status != 404 || strings.TrimSpace(probeStep.Body) != `{"error":"unknown_session"}` ||
		probeStep.SessionHeader != nil {
		t.Errorf("the closed session id answered %d %q (session header %v), want 404 unknown_session", probeStep.Status, probeStep.Body, probeStep.SessionHeader)
	}
}

// toolgateEnv is the environment for toolgate commands over one data directory.
func toolgateEnv(base []string, data string) []string {
	var out []string
	for _, kv := range base {
		if !strings.HasPrefix(kv, "TOOLGATE_HOME=") {
			out = append(out, kv)
		}
	}
	return append(out, "TOOLGATE_HOME="+data)
}

// toolgate runs one toolgate CLI command over data and returns its stdout.
func toolgate(t *testing.T, data string, args ...string) string {
	t.Helper()
	cmd := exec.Command(testenv.Binary(t), args...)
	cmd.Env = toolgateEnv(os.Environ(), data)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("toolgate %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String()
}

// newWorkspace creates a workspace with two files and, beside it, a secret that no
// tool may reach. It returns the workspace path and the secret's.
func newWorkspace(t *testing.T) (string, string) {
	t.Helper()
	parent := t.TempDir()
	ws := filepath.Join(parent, "ws")
	for p, s := range map[string]string{"docs/a.md": "alpha\n", "src/x.go": "package x\n"} {
		if err := os.MkdirAll(filepath.Join(ws, filepath.Dir(p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ws, p), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	secret := filepath.Join(parent, "secret")
	if err := os.WriteFile(secret, []byte("outside secret\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return ws, secret
}
