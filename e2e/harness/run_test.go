package harness

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/testenv"
)

// fakeHarness is an executable that toolgate run starts as a Claude Code stand-in: it
// reads the --mcp-config file it was pointed at, records the URL it found, has the MCP
// Inspector list tools and call toolgate.escalate through it, and exits with 7.
const fakeHarness = `#!/usr/bin/env node
const fs = require("node:fs");
const { execFileSync } = require("node:child_process");
const flag = process.argv[2] || "";
if (!flag.startsWith("--mcp-config=")) { console.error("no --mcp-config=FILE"); process.exit(90); }
const file = flag.slice("--mcp-config=".length);
const mode = fs.statSync(file).mode & 0o777;
const dirMode = fs.statSync(require("node:path").dirname(file)).mode & 0o777;
if (mode !== 0o600 || dirMode !== 0o700) { console.error("modes", mode.toString(8), dirMode.toString(8)); process.exit(91); }
const s = JSON.parse(fs.readFileSync(file, "utf8")).mcpServers.toolgate;
fs.writeFileSync(process.env.FAKE_OUT, JSON.stringify({ url: s.url, file }));
const dir = process.env.INSPECTOR_DIR;
const base = [dir + "/index.js", s.url, "--transport", "http", "--header", "Authorization: " + s.headers.Authorization];
const list = execFileSync(process.execPath, [...base, "--method", "tools/list"], { cwd: dir }).toString();
if (!list.includes('"toolgate.escalate"')) { console.error(list); process.exit(92); }
execFileSync(process.execPath, [...base, "--method", "tools/call", "--tool-name", "toolgate.escalate", "--tool-arg", "reason=needs a person"], { cwd: dir });
process.exit(7);
`

// TestRunOneTurn runs a harness stand-in under toolgate run: the connection file is
// private, the harness reaches the bridge with its token, its escalation ends the turn
// escalated, toolgate exits with the harness's code, prints the audit summary, and the
// bridge is gone afterwards.
func TestRunOneTurn(t *testing.T) {
	w := newWorld(t)
	script := filepath.Join(t.TempDir(), "fake-claude")
	w.write(script, fakeHarness)
	if err := os.Chmod(script, 0o755); err != nil {
		t.Fatal(err)
	}
	outFile := filepath.Join(t.TempDir(), "seen.json")
	w.env = append(w.env, "FAKE_OUT="+outFile,
		"INSPECTOR_DIR="+filepath.Join(testenv.NPMDir(t), "node_modules", "@modelcontextprotocol", "inspector-cli", "build"))
	_, stderr, code := w.run(w.bin, "run", "--harness", "claude-code", "--", script)
	if code != 7 {
		t.Fatalf("toolgate run exited %d, want the harness's 7\n%s", code, stderr)
	}
	if !regexp.MustCompile(`turn exec-\S+ escalated: 1 audit event\(s\): 0 allowed, 0 denied, 0 failed, 1 escalated`).MatchString(stderr) {
		t.Errorf("no outcome/audit summary in stderr:\n%s", stderr)
	}
	if !strings.Contains(stderr, "toolgate.escalate: 1 escalated") {
		t.Errorf("no per-tool summary:\n%s", stderr)
	}
	var seen struct{ URL, File string }
	if err := json.Unmarshal([]byte(w.read(outFile)), &seen); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(seen.URL, "http://127.0.0.1:") {
		t.Errorf("bridge URL %q is not loopback", seen.URL)
	}
	if _, err := os.Stat(filepath.Dir(seen.File)); !os.IsNotExist(err) {
		t.Errorf("the private connection folder outlived the run: %v", err)
	}
	if resp, err := http.Post(seen.URL, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`)); err == nil {
		resp.Body.Close()
		t.Errorf("the bridge still answers after the run: %s", resp.Status)
	}
	audit, _ := w.toolgate("audit", "--json", "--tool", "toolgate.escalate")
	var ev struct {
		Tool, Alias, Decision, Transport string
	}
	if err := json.Unmarshal([]byte(lastLine(audit)), &ev); err != nil {
		t.Fatalf("audit: %v\n%s", err, audit)
	}
	// The harness display name is recorded for diagnosis; the canonical id is what decided.
	if ev.Tool != "toolgate.escalate" || ev.Alias != "mcp__toolgate__toolgate_escalate" || ev.Decision != "escalated" || ev.Transport != "http" {
		t.Errorf("audit event = %+v", ev)
	}
}

// TestRunRealHarnesses starts real harness CLIs under toolgate run, each pointed at the
// turn's bridge through its own mechanism (OPENCODE_CONFIG, GEMINI_CLI_SYSTEM_SETTINGS_PATH,
// codex -c overrides), and checks they reached it.
func TestRunRealHarnesses(t *testing.T) {
	w := newWorld(t)
	out, stderr, code := w.run(w.bin, "run", "--harness", "opencode", "--", testenv.NPMBin(t, "opencode"), "mcp", "list")
	if code != 0 || !strings.Contains(lineWith(out, "toolgate"), "connected") || !strings.Contains(stderr, "completed") {
		t.Errorf("run opencode (exit %d):\n%s\n%s", code, out, stderr)
	}
	out, stderr, code = w.run(w.bin, "run", "--harness", "gemini", "--", testenv.NPMBin(t, "gemini"), "mcp", "list")
	if code != 0 || !strings.Contains(lineWith(out+stderr, "toolgate"), "Connected") {
		t.Errorf("run gemini (exit %d):\n%s\n%s", code, out, stderr)
	}
	out, stderr, code = w.run(w.bin, "run", "--harness", "codex", "--", testenv.NPMBin(t, "codex"), "mcp", "get", "toolgate", "--json")
	var got struct {
		Transport struct {
			URL string `json:"url"`
			Env string `json:"bearer_token_env_var"`
		} `json:"transport"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &got) != nil || !strings.HasPrefix(got.Transport.URL, "http://127.0.0.1:") || got.Transport.Env != "TOOLGATE_EXECUTION_TOKEN" {
		t.Errorf("run codex (exit %d): %+v\n%s\n%s", code, got, out, stderr)
	}
	// Claude Code takes the inserted --mcp-config=FILE without swallowing the subcommand.
	out, stderr, code = w.run(w.bin, "run", "--harness", "claude-code", "--", testenv.NPMBin(t, "claude"), "mcp", "list")
	if code != 0 || strings.Contains(out+stderr, "took \"mcp\" as its value") {
		t.Errorf("run claude mcp list (exit %d):\n%s\n%s", code, out, stderr)
	}
	if strings.Contains(stderr, "tgx1.") {
		t.Errorf("a token reached the terminal:\n%s", stderr)
	}
}

// TestRunStdioForm points the harness at a file that starts `toolgate mcp` itself.
func TestRunStdioForm(t *testing.T) {
	w := newWorld(t)
	out, stderr, code := w.run(w.bin, "run", "--harness", "opencode", "--stdio", "--workspace", w.ws, "--", testenv.NPMBin(t, "opencode"), "mcp", "list")
	if code != 0 || !strings.Contains(lineWith(out, "toolgate"), "connected") {
		t.Errorf("run --stdio opencode (exit %d):\n%s\n%s", code, out, stderr)
	}
	if !strings.Contains(stderr, "completed") {
		t.Errorf("no outcome line:\n%s", stderr)
	}
}

func TestRunRefusals(t *testing.T) {
	w := newWorld(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--harness", "cursor", "--", "true"}, "toolgate connect cursor"},
		{[]string{"run", "--harness", "nope", "--", "true"}, "unknown harness"},
		{[]string{"run", "--harness", "claude-code", "true"}, "after --"},
		{[]string{"run", "--harness", "claude-code", "--", "/nonexistent/harness"}, "starting the harness"},
		{[]string{"run", "--harness", "claude-code", "--name", "a.b", "--", "true"}, "server name"},
	} {
		_, stderr, code := w.run(w.bin, c.args...)
		if code == 0 || !strings.Contains(stderr, c.want) {
			t.Errorf("%q: exit %d, stderr %q; want a failure mentioning %q", c.args, code, stderr, c.want)
		}
	}
}

// TestConnectCLIRefusesHostileFiles checks the command-line surface: a symlinked config,
// a directory, and an unparseable file each give a clear error and stay untouched;
// --dry-run changes nothing.
func TestConnectCLIRefusesHostileFiles(t *testing.T) {
	w := newWorld(t)
	dir := t.TempDir()
	real := filepath.Join(dir, "real.json")
	w.write(real, "{\"mcpServers\": {}}\n")
	link := filepath.Join(dir, "link.json")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.json")
	w.write(bad, "{\"mcpServers\": {\"x\": ")
	sub := filepath.Join(dir, "sub")
	os.Mkdir(sub, 0o700)
	for _, c := range []struct{ file, want string }{
		{link, "symbolic link"}, {bad, "invalid JSON"}, {sub, "directory"},
	} {
		_, stderr, code := w.run(w.bin, "connect", "claude-code", "--file", c.file)
		if code == 0 || !strings.Contains(stderr, c.want) {
			t.Errorf("connect --file %s: exit %d, %q", c.file, code, stderr)
		}
	}
	if w.read(real) != "{\"mcpServers\": {}}\n" || w.read(bad) != "{\"mcpServers\": {\"x\": " {
		t.Error("a refused connect changed a file")
	}
	out, stderr, code := w.run(w.bin, "connect", "claude-code", "--file", real, "--dry-run")
	if code != 0 || !strings.Contains(out, "+") || !strings.Contains(stderr, "dry run") || w.read(real) != "{\"mcpServers\": {}}\n" {
		t.Errorf("dry run (exit %d): %s %s", code, out, stderr)
	}
	out, _, _ = w.run(w.bin, "connect", "claude-code", "--file", real, "--http", "http://127.0.0.1:1/mcp")
	if strings.Contains(out, "tgx1.") || !strings.Contains(out, "Bearer <token>") {
		t.Errorf("the diff shows the token:\n%s", out)
	}
	if !strings.Contains(w.read(real), "Bearer tgx1.") {
		t.Error("the file lacks the token")
	}
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if !contains(names, "real.json.toolgate-backup") {
		t.Errorf("no backup next to the file: %v", names)
	}
}

func TestAliasAndConfigCLI(t *testing.T) {
	w := newWorld(t)
	for _, c := range []struct{ harness, tool, want string }{
		{"claude-code", "files.read", "mcp__toolgate__files_read"},
		{"codex", "github.create_issue", "mcp__toolgate__github_create_issue"},
		{"deepseek", "files.read", "mcp__toolgate__files_read_"},
		{"gemini", "files.read", "mcp_toolgate_files.read"},
		{"opencode", "files.read", "toolgate_files_read"},
		{"pi", "files.read", "toolgate_files_read"},
		{"goose", "files.read", "toolgate__files_read_"},
		{"vscode", "files.read", "mcp_toolgate_files_read_"},
		{"cursor", "files.read", "files_read_"},
	} {
		out, _ := w.toolgate("alias", c.harness, c.tool)
		if !strings.HasPrefix(strings.TrimSpace(out), c.want) {
			t.Errorf("alias %s %s = %q; want prefix %q", c.harness, c.tool, out, c.want)
		}
	}
	long := "github." + strings.Repeat("very_long_tool_name_", 4)
	out, stderr := w.toolgate("alias", "claude-code", long)
	if a := strings.TrimSpace(out); len(a) > 64 || !strings.Contains(stderr, "short form") && !strings.Contains(stderr, "published") {
		t.Errorf("long id: alias %q (%d chars), stderr %q", a, len(a), stderr)
	}
	out2, _ := w.toolgate("alias", "claude-code", long)
	if out2 != out {
		t.Errorf("short form is not stable: %q then %q", out, out2)
	}
	// config for every harness prints a file and names where it goes.
	for _, h := range []string{"claude-code", "claude-agent-sdk", "claude-desktop", "codex", "cursor", "deepseek", "gemini", "goose", "opencode", "pi", "vscode"} {
		out, stderr := w.toolgate("config", h, "--workspace", w.ws)
		if !strings.Contains(out, w.bin) || !strings.Contains(stderr, "reads this from") && !strings.Contains(stderr, "none:") {
			t.Errorf("config %s:\n%s\n%s", h, out, stderr)
		}
	}
	_, stderr, code := w.run(w.bin, "config", "claude-desktop", "--http", "http://127.0.0.1:1/mcp")
	if code == 0 || !strings.Contains(stderr, "stdio") {
		t.Errorf("claude-desktop over HTTP: exit %d %s", code, stderr)
	}
}

// fakeDsh stands in for DeepSeek's dsh: it reads the --patch overlay toolgate run wrote,
// lists the tools through the MCP Inspector and calls the one named in CALL.
const fakeDsh = `#!/usr/bin/env node
const fs = require("node:fs");
const { execFileSync } = require("node:child_process");
if (process.argv[2] !== "--patch") process.exit(90);
const text = fs.readFileSync(process.argv[3], "utf8");
const url = /\burl: (\S+)/.exec(text)[1];
const auth = /Authorization: (Bearer \S+)/.exec(text)[1];
const dir = process.env.INSPECTOR_DIR;
const base = [dir + "/index.js", url, "--transport", "http", "--header", "Authorization: " + auth];
const list = execFileSync(process.execPath, [...base, "--method", "tools/list"], { cwd: dir }).toString();
fs.writeFileSync(process.env.FAKE_OUT, list);
execFileSync(process.execPath, [...base, "--method", "tools/call", "--tool-name", process.env.CALL, "--tool-arg", process.env.ARG || "reason=short form"], { cwd: dir });
`

// TestRunPublishesShortForms runs a DeepSeek stand-in: dsh rejects '.', so the bridge
// publishes toolgate.escalate under its stable short form, a call by that name reaches
// the canonical tool, and the audit event records the canonical id with the alias.
func TestRunPublishesShortForms(t *testing.T) {
	w := newWorld(t)
	short := strings.TrimSpace(mustOut(w.toolgate("alias", "deepseek", "toolgate.escalate")))
	if !regexp.MustCompile(`^mcp__toolgate__toolgate_escalate_[0-9a-f]{8}$`).MatchString(short) {
		t.Fatalf("alias = %q", short)
	}
	published := strings.TrimPrefix(short, "mcp__toolgate__")
	script := filepath.Join(t.TempDir(), "dsh")
	w.write(script, fakeDsh)
	if err := os.Chmod(script, 0o755); err != nil {
		t.Fatal(err)
	}
	outFile := filepath.Join(t.TempDir(), "list.json")
	w.env = append(w.env, "FAKE_OUT="+outFile, "CALL="+published,
		"INSPECTOR_DIR="+filepath.Join(testenv.NPMDir(t), "node_modules", "@modelcontextprotocol", "inspector-cli", "build"))
	_, stderr, code := w.run(w.bin, "run", "--harness", "deepseek", "--", script)
	if code != 0 {
		t.Fatalf("run exited %d\n%s", code, stderr)
	}
	if !strings.Contains(stderr, "short form: toolgate.escalate is published as "+published) {
		t.Errorf("the rename is not reported:\n%s", stderr)
	}
	if list := w.read(outFile); !strings.Contains(list, `"`+published+`"`) || strings.Contains(list, `"toolgate.escalate"`) {
		t.Errorf("published catalogue:\n%s", list)
	}
	if !strings.Contains(stderr, "escalated: 1 audit event(s)") {
		t.Errorf("the call by short form did not reach toolgate.escalate:\n%s", stderr)
	}
	audit, _ := w.toolgate("audit", "--json", "--tool", "toolgate.escalate")
	var ev struct{ Tool, Alias string }
	if err := json.Unmarshal([]byte(lastLine(audit)), &ev); err != nil || ev.Alias != short {
		t.Errorf("audit event %+v (%v); want alias %s", ev, err, short)
	}
}

// TestRunWithWorkspaceTools publishes the local tools of --workspace on the run's
// bridge; the stand-in reads a file through the short form of local.read_file.
func TestRunWithWorkspaceTools(t *testing.T) {
	w := newWorld(t)
	short := strings.TrimSpace(mustOut(w.toolgate("alias", "deepseek", "local.read_file")))
	script := filepath.Join(t.TempDir(), "dsh")
	w.write(script, fakeDsh)
	if err := os.Chmod(script, 0o755); err != nil {
		t.Fatal(err)
	}
	w.env = append(w.env, "FAKE_OUT="+filepath.Join(t.TempDir(), "list.json"), "CALL="+strings.TrimPrefix(short, "mcp__toolgate__"), "ARG=path=hello.txt",
		"INSPECTOR_DIR="+filepath.Join(testenv.NPMDir(t), "node_modules", "@modelcontextprotocol", "inspector-cli", "build"))
	_, stderr, code := w.run(w.bin, "run", "--harness", "deepseek", "--workspace", w.ws, "--", script)
	if code != 0 || !strings.Contains(stderr, "completed: 1 audit event(s): 1 allowed") || !strings.Contains(stderr, "local.read_file: 1 allowed") {
		t.Errorf("run with --workspace (exit %d):\n%s", code, stderr)
	}
}
