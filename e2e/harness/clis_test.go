package harness

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/testenv"
)

// TestClaudeCodeConnectsFromGeneratedFiles adds toolgate to Claude Code from each form
// of the generated .mcp.json (stdio and HTTP) and requires `claude mcp list`, which
// health-checks every server, to report it connected. A copy with a wrong token must
// not connect, so the check is a real one.
func TestClaudeCodeConnectsFromGeneratedFiles(t *testing.T) {
	w := newWorld(t)
	url := w.serve()
	stdioFile, _ := w.toolgate("config", "claude-code", "--workspace", w.ws)
	httpFile, _ := w.toolgate("config", "claude-code", "--http", url)
	for name, file := range map[string]string{"toolgate": stdioFile, "toolgate-http": httpFile} {
		block, _ := json.Marshal(serverBlock(t, file))
		if o, e, code := w.peer("claude", "mcp", "add-json", "-s", "user", name, string(block)); code != 0 {
			t.Fatalf("claude mcp add-json %s: %d\n%s%s", name, code, o, e)
		}
	}
	bad := serverBlock(t, httpFile)
	bad["headers"] = map[string]any{"Authorization": "Bearer not-a-token"}
	bb, _ := json.Marshal(bad)
	if _, e, code := w.peer("claude", "mcp", "add-json", "-s", "user", "toolgate-badtoken", string(bb)); code != 0 {
		t.Fatal(e)
	}
	out, errOut, _ := w.peer("claude", "mcp", "list")
	for _, name := range []string{"toolgate:", "toolgate-http:"} {
		if l := lineWith(out, name); !strings.Contains(l, "Connected") {
			t.Errorf("claude mcp list: %s not connected (line %q)\n%s%s", name, l, out, errOut)
		}
	}
	if l := lineWith(out, "toolgate-badtoken:"); l == "" || strings.Contains(l, "✔ Connected") {
		t.Errorf("a wrong token still connected: %q\n%s", l, out)
	}
}

// TestCodexAcceptsConnectedConfig connects toolgate into a Codex config.toml that already
// holds another server and comments, has Codex's own `mcp list`/`mcp get` read it, and
// undoes the change byte for byte.
func TestCodexAcceptsConnectedConfig(t *testing.T) {
	w := newWorld(t)
	url := w.serve()
	cfg := filepath.Join(w.home, ".codex", "config.toml")
	orig := "# my Codex settings\nmodel = \"o3\" # keep\n\n[mcp_servers.memory]\ncommand = \"npx\"\nargs = [\"-y\", \"@modelcontextprotocol/server-memory\"]\n"
	w.write(cfg, orig)

	_, e := w.toolgate("connect", "codex", "--workspace", w.ws)
	if !strings.Contains(e, cfg) {
		t.Errorf("connect did not name the default file %s: %s", cfg, e)
	}
	list, _, code := w.peer("codex", "mcp", "list")
	if code != 0 || lineWith(list, "toolgate", w.bin) == "" || lineWith(list, "memory", "npx") == "" {
		t.Fatalf("codex mcp list (exit %d):\n%s", code, list)
	}
	got, _, _ := w.peer("codex", "mcp", "get", "toolgate", "--json")
	var entry struct {
		Transport struct {
			Type        string            `json:"type"`
			Command     string            `json:"command"`
			Args        []string          `json:"args"`
			URL         string            `json:"url"`
			HTTPHeaders map[string]string `json:"http_headers"`
		} `json:"transport"`
	}
	if err := json.Unmarshal([]byte(got), &entry); err != nil {
		t.Fatalf("codex mcp get: %v\n%s", err, got)
	}
	if entry.Transport.Command != w.bin || strings.Join(entry.Transport.Args[:3], " ") != "mcp --workspace "+w.ws {
		t.Errorf("codex reads toolgate as %+v", entry.Transport)
	}
	// Reconnect over HTTP: the table is replaced in place.
	w.toolgate("connect", "codex", "--http", url)
	got, _, _ = w.peer("codex", "mcp", "get", "toolgate", "--json")
	if err := json.Unmarshal([]byte(got), &entry); err != nil {
		t.Fatal(err)
	}
	if entry.Transport.Type != "streamable_http" || entry.Transport.URL != url || !strings.HasPrefix(entry.Transport.HTTPHeaders["Authorization"], "Bearer tg") {
		t.Errorf("codex reads the HTTP entry as %+v", entry.Transport)
	}
	content := w.read(cfg)
	for _, keep := range []string{"# my Codex settings", `model = "o3" # keep`, "[mcp_servers.memory]"} {
		if !strings.Contains(content, keep) {
			t.Errorf("connect lost %q:\n%s", keep, content)
		}
	}
	w.toolgate("connect", "codex", "--undo")
	if after := w.read(cfg); after != orig {
		t.Errorf("undo is not byte-identical:\n%q\nwant\n%q", after, orig)
	}
}

// TestGeminiConnects connects toolgate into ~/.gemini/settings.json (stdio, then HTTP)
// and requires `gemini mcp list`, which connects to each server, to report it connected.
func TestGeminiConnects(t *testing.T) {
	w := newWorld(t)
	url := w.serve()
	settings := filepath.Join(w.home, ".gemini", "settings.json")
	orig := "{\n  // my settings\n  \"ui\": {\"theme\": \"GitHub\"}\n}\n"
	w.write(settings, orig)
	for _, args := range [][]string{{"--workspace", w.ws}, {"--http", url}} {
		w.toolgate(append([]string{"connect", "gemini"}, args...)...)
		out, e, _ := w.peer("gemini", "mcp", "list")
		if l := lineWith(out+e, "toolgate"); !strings.Contains(l, "Connected") {
			t.Errorf("gemini mcp list with %v: toolgate not connected (%q)\n%s%s", args, l, out, e)
		}
	}
	if !strings.Contains(w.read(settings), "// my settings") {
		t.Error("connect lost the comment")
	}
	w.toolgate("connect", "gemini", "--undo")
	if w.read(settings) != orig {
		t.Error("undo is not byte-identical")
	}
}

// TestOpencodeConnects connects toolgate into opencode.json and requires `opencode mcp
// list` to report it connected, for both forms.
func TestOpencodeConnects(t *testing.T) {
	w := newWorld(t)
	url := w.serve()
	for _, args := range [][]string{{"--workspace", w.ws}, {"--http", url}} {
		w.toolgate(append([]string{"connect", "opencode"}, args...)...)
		out, e, _ := w.peer("opencode", "mcp", "list")
		if l := lineWith(out, "toolgate"); !strings.Contains(l, "connected") {
			t.Errorf("opencode mcp list with %v: %q\n%s%s", args, l, out, e)
		}
	}
	cfg := filepath.Join(w.home, ".config", "opencode", "opencode.json")
	w.toolgate("connect", "opencode", "--undo")
	if _, err := os.Stat(cfg); !os.IsNotExist(err) {
		t.Errorf("undo did not remove the file connect created: %v", err)
	}
}

// piProbe loads a connection file with pi-mcp-adapter's own config loader and connects
// to every server in it with the adapter's server manager, printing the tool names.
const piProbe = `
const [dir, file] = process.argv.slice(2);
const { loadMcpConfig } = await import(dir + "/dist/config.js");
const { McpServerManager } = await import(dir + "/dist/server-manager.js");
const cfg = loadMcpConfig(file);
const out = {};
const m = new McpServerManager(process.cwd());
for (const [name, def] of Object.entries(cfg.mcpServers)) {
  try {
    const c = await m.connect(name, def);
    out[name] = { ok: true, tools: (c.tools || []).map((t) => t.name) };
  } catch (e) {
    out[name] = { ok: false, error: String(e) };
  }
}
console.log(JSON.stringify(out));
process.exit(0);
`

// TestPiAdapterConnects has pi-mcp-adapter (Pi's MCP client) read each generated file
// and list toolgate's tools through it.
func TestPiAdapterConnects(t *testing.T) {
	w := newWorld(t)
	url := w.serve()
	script := filepath.Join(t.TempDir(), "probe.mjs")
	w.write(script, piProbe)
	adapter := filepath.Join(testenv.NPMDir(t), "node_modules", "pi-mcp-adapter")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--workspace", w.ws}, "toolgate_local_read_file"},
		{[]string{"--http", url}, "local.read_file"},
	} {
		file, _ := w.toolgate(append([]string{"config", "pi"}, c.args...)...)
		path := filepath.Join(t.TempDir(), "mcp.json")
		w.write(path, file)
		w.env = append(w.env, "PI_MCP_CONFIG_MODE=exclusive")
		out, e, code := w.run(testenv.Node(t), script, adapter, path)
		var res map[string]struct {
			OK    bool     `json:"ok"`
			Tools []string `json:"tools"`
			Error string   `json:"error"`
		}
		if err := json.Unmarshal([]byte(lastLine(out)), &res); err != nil || code != 0 {
			t.Fatalf("probe (exit %d): %v\n%s%s", code, err, out, e)
		}
		r := res["toolgate"]
		if !r.OK || !contains(r.Tools, c.want) {
			t.Errorf("pi-mcp-adapter with %v: %+v", c.args, r)
		}
	}
}

// inspector runs the MCP Inspector CLI. Its build reads ../package.json relative to the
// working directory, so it runs from its own build folder.
func (w *world) inspector(args ...string) (string, string, int) {
	w.t.Helper()
	dir := filepath.Join(testenv.NPMDir(w.t), "node_modules", "@modelcontextprotocol", "inspector-cli", "build")
	cmd := exec.Command(testenv.Node(w.t), append([]string{filepath.Join(dir, "index.js")}, args...)...)
	cmd.Env = w.env
	cmd.Dir = dir
	var o, e strings.Builder
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		w.t.Fatal(err)
	}
	return o.String(), e.String(), code
}

// TestInspectorListsAndCalls drives the MCP Inspector CLI with the command and the URL
// from the generated Claude Code file: it lists toolgate's tools and calls one.
func TestInspectorListsAndCalls(t *testing.T) {
	w := newWorld(t)
	url := w.serve()
	stdio := serverBlock(t, mustOut(w.toolgate("config", "claude-code", "--workspace", w.ws)))
	http := serverBlock(t, mustOut(w.toolgate("config", "claude-code", "--http", url)))
	target := []string{stdio["command"].(string)}
	for _, a := range stdio["args"].([]any) {
		target = append(target, a.(string))
	}
	auth := http["headers"].(map[string]any)["Authorization"].(string)
	for _, c := range []struct {
		target []string
		tool   string
	}{
		{target, "toolgate_local_read_file"},
		{[]string{http["url"].(string), "--transport", "http", "--header", "Authorization: " + auth}, "local.read_file"},
	} {
		out, e, code := w.inspector(append(c.target, "--method", "tools/list")...)
		if code != 0 || !strings.Contains(out, `"`+c.tool+`"`) {
			t.Fatalf("inspector tools/list (exit %d) lacks %s:\n%s%s", code, c.tool, out, e)
		}
		out, e, code = w.inspector(append(c.target, "--method", "tools/call", "--tool-name", c.tool, "--tool-arg", "path=hello.txt")...)
		if code != 0 || !strings.Contains(out, "hello from the workspace") {
			t.Errorf("inspector tools/call %s (exit %d):\n%s%s", c.tool, code, out, e)
		}
	}
}

func mustOut(stdout, _ string) string { return stdout }

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestStdioFormPublishesShortForms starts `toolgate mcp` as a generated Cursor file
// does, with a server name long enough that a control-plane tool breaks Cursor's
// combined-length rule: it is listed under its short form, and calling that name
// reaches the tool (no tool_unavailable).
func TestStdioFormPublishesShortForms(t *testing.T) {
	w := newWorld(t)
	name := strings.Repeat("s", 32)
	file := mustOut(w.toolgate("config", "cursor", "--workspace", w.ws, "--name", name))
	var v struct {
		MCPServers map[string]struct {
			Command string   `json:"command"`
			Args    []string `json:"args"`
		} `json:"mcpServers"`
	}
	if err := json.Unmarshal([]byte(file), &v); err != nil {
		t.Fatal(err)
	}
	s := v.MCPServers[name]
	if !contains(s.Args, "--harness") || !contains(s.Args, "--server-name") {
		t.Fatalf("stdio args %q lack --harness/--server-name", s.Args)
	}
	target := append([]string{s.Command}, s.Args...)
	out, e, code := w.inspector(append(target, "--method", "tools/list")...)
	if code != 0 {
		t.Fatalf("tools/list: %d\n%s%s", code, out, e)
	}
	var list struct {
		Tools []struct{ Name string } `json:"tools"`
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	short := ""
	for _, tl := range list.Tools {
		if len(name)+len(tl.Name) >= 60 || strings.ContainsAny(tl.Name, ".") {
			t.Errorf("%s breaks Cursor's rule", tl.Name)
		}
		if regexp.MustCompile(`_[0-9a-f]{8}$`).MatchString(tl.Name) {
			short = tl.Name
		}
	}
	if short == "" {
		t.Fatalf("no short form among %+v", list.Tools)
	}
	out, e, _ = w.inspector(append(target, "--method", "tools/call", "--tool-name", short)...)
	if strings.Contains(out+e, "tool_unavailable") || !strings.Contains(out, "content") {
		t.Errorf("calling %s by its short form:\n%s%s", short, out, e)
	}
}
