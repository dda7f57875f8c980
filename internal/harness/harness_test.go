package harness

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/pelletier/go-toml/v2"
	"go.yaml.in/yaml/v3"

	"github.com/toolgate/toolgate/internal/protect"
)

var (
	stdioServer = Server{Command: "/opt/toolgate/bin/toolgate", Args: []string{"mcp", "--workspace", "/home/u/my project"}}
	httpServer  = Server{URL: "http://127.0.0.1:43123/mcp", Headers: map[string]string{"Authorization": "Bearer tok.en-1"}}
)

// parseWithLibrary decodes a generated file with the format's own library, as the
// harness would, and fails on anything that does not parse.
func parseWithLibrary(t *testing.T, h *Harness, b []byte) any {
	t.Helper()
	var v any
	switch h.Format {
	case FormatJSON:
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatalf("%s: generated JSON does not parse: %v\n%s", h.ID, err, b)
		}
	case FormatJSONC:
		clean, err := blankComments(b)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(clean, &v); err != nil {
			t.Fatalf("%s: generated JSON does not parse: %v\n%s", h.ID, err, b)
		}
	case FormatTOML:
		if err := toml.Unmarshal(b, &v); err != nil {
			t.Fatalf("%s: generated TOML does not parse: %v\n%s", h.ID, err, b)
		}
	case FormatYAML:
		if err := yaml.Unmarshal(b, &v); err != nil {
			t.Fatalf("%s: generated YAML does not parse: %v\n%s", h.ID, err, b)
		}
	}
	return v
}

func TestRenderEveryHarnessParsesBack(t *testing.T) {
	for _, h := range All() {
		for _, s := range []Server{stdioServer, httpServer} {
			form := "stdio"
			if s.IsHTTP() {
				form = "http"
			}
			t.Run(h.ID+"/"+form, func(t *testing.T) {
				b, err := h.Render(s)
				if h.StdioOnly && s.IsHTTP() {
					if err == nil {
						t.Fatalf("%s accepted an HTTP server it cannot read", h.ID)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				parseWithLibrary(t, h, b)
				e, err := h.Entry(b, "toolgate")
				if err != nil {
					t.Fatalf("entry: %v\n%s", err, b)
				}
				flat, _ := json.Marshal(e)
				want := []string{s.Command, "my project"}
				if s.IsHTTP() {
					want = []string{s.URL, "tok.en-1"}
				}
				for _, w := range want {
					if !bytes.Contains(flat, []byte(w)) {
						t.Errorf("entry %s lacks %q", flat, w)
					}
				}
			})
		}
	}
}

func TestGeneratedShapes(t *testing.T) {
	get := func(id string, s Server) map[string]any {
		t.Helper()
		h, err := Lookup(id)
		if err != nil {
			t.Fatal(err)
		}
		b, err := h.Render(s)
		if err != nil {
			t.Fatal(err)
		}
		e, err := h.Entry(b, "toolgate")
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	if e := get("claude-code", httpServer); e["type"] != "http" || e["url"] != httpServer.URL {
		t.Errorf("claude-code http entry = %v", e)
	}
	if e := get("claude-code", stdioServer); e["type"] != "stdio" || e["command"] != stdioServer.Command {
		t.Errorf("claude-code stdio entry = %v", e)
	}
	if e := get("gemini", httpServer); e["httpUrl"] != httpServer.URL {
		t.Errorf("gemini http entry = %v", e)
	}
	if e := get("opencode", stdioServer); e["type"] != "local" {
		t.Errorf("opencode stdio entry = %v", e)
	}
	if e := get("pi", httpServer); e["auth"] != "bearer" || e["bearerToken"] != "tok.en-1" || e["lifecycle"] != "eager" {
		t.Errorf("pi http entry = %v", e)
	}
	if e := get("goose", stdioServer); e["type"] != "stdio" || e["cmd"] != stdioServer.Command || e["enabled"] != true {
		t.Errorf("goose stdio entry = %v", e)
	}
	if e := get("deepseek", httpServer); e["name"] != "@deepseek-ai/dsh-mcp-client" {
		t.Errorf("deepseek entry = %v", e)
	}
	// Codex: strict decode into the fields Codex documents.
	h, _ := Lookup("codex")
	b, _ := h.Render(httpServer)
	var cfg struct {
		MCPServers map[string]struct {
			URL         string            `toml:"url"`
			HTTPHeaders map[string]string `toml:"http_headers"`
		} `toml:"mcp_servers"`
	}
	dec := toml.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cfg); err != nil {
		t.Fatalf("codex strict decode: %v\n%s", err, b)
	}
	if cfg.MCPServers["toolgate"].HTTPHeaders["Authorization"] != "Bearer tok.en-1" {
		t.Errorf("codex http = %+v", cfg)
	}
	sdk, _ := Lookup("claude-agent-sdk")
	b, _ = sdk.Render(httpServer)
	if !bytes.Contains(b, []byte(`"mcp__toolgate__*"`)) {
		t.Errorf("agent sdk options lack allowedTools: %s", b)
	}
}

func TestServerValidation(t *testing.T) {
	h, _ := Lookup("claude-code")
	bad := []Server{
		{},
		{Command: "x", URL: "http://a"},
		{URL: "file:///etc/passwd"},
		{Command: "x", Name: "a.b"},
		{Command: "x", Name: "a__b"},
		{Command: "x", Name: strings.Repeat("a", 33)},
		{URL: "http://a", Headers: map[string]string{"X\r\nY": "1"}},
		{URL: "http://a", Headers: map[string]string{"X": "1\r\nInjected: 2"}},
	}
	for _, s := range bad {
		if _, err := h.Render(s); err == nil {
			t.Errorf("Render(%+v) accepted an invalid server", s)
		}
	}
	if _, err := Lookup("nope"); err == nil || !strings.Contains(err.Error(), "claude-code") {
		t.Errorf("Lookup(nope) = %v; want an error listing the known harnesses", err)
	}
}

// fixture returns the existing-file fixture for a harness and the names of the other
// servers and comments it holds.
func fixture(t *testing.T, h *Harness) (content []byte, keep []string) {
	t.Helper()
	var name string
	switch h.Format {
	case FormatJSON:
		name, keep = "json.json", []string{`{"command": "npx", "args": ["-y", "@modelcontextprotocol/server-memory"]}`, `"headers": {"X-Team": "a\u00e9b"}`, `[1.50, 2e10]`}
	case FormatJSONC:
		name, keep = "jsonc.json", []string{"// user settings, keep this comment", "/* block comment before servers */", "// trailing", `"http://x//y"`}
	case FormatTOML:
		name, keep = "config.toml", []string{"# Codex settings — keep this comment", `model = "o3"   # inline comment`, "[mcp_servers.memory.env]", "# a comment before the profiles", "this is text, not a table"}
	case FormatYAML:
		if h.ID == "goose" {
			name, keep = "goose.yaml", []string{"# goose config — keep this comment", "# provider comment", "# memory server below", "developer:"}
		} else {
			name, keep = "cordis.patch.yml", []string{"# dsh overlay — keep this comment", "# plugin comment", "existing-override"}
		}
	}
	b, err := os.ReadFile(filepath.Join("testdata", "existing", name))
	if err != nil {
		t.Fatal(err)
	}
	return b, keep
}

func TestConnectRoundTripKeepsOthersAndUndoIsByteIdentical(t *testing.T) {
	for _, h := range All() {
		if h.NoConnect {
			continue
		}
		for _, s := range []Server{stdioServer, httpServer} {
			if h.StdioOnly && s.IsHTTP() {
				continue
			}
			t.Run(h.ID+"/"+map[bool]string{true: "http", false: "stdio"}[s.IsHTTP()], func(t *testing.T) {
				orig, keep := fixture(t, h)
				dir := t.TempDir()
				path := filepath.Join(dir, h.FileName)
				if err := os.WriteFile(path, orig, 0o640); err != nil {
					t.Fatal(err)
				}
				p, err := h.PlanConnect(path, s)
				if err != nil {
					t.Fatal(err)
				}
				if !strings.Contains(p.Diff(), "+") {
					t.Errorf("diff shows no addition:\n%s", p.Diff())
				}
				if err := p.Apply(); err != nil {
					t.Fatal(err)
				}
				after, _ := os.ReadFile(path)
				for _, k := range keep {
					if !bytes.Contains(after, []byte(k)) {
						t.Errorf("connect lost %q:\n%s", k, after)
					}
				}
				parseWithLibrary(t, h, after)
				if _, err := h.Entry(after, "toolgate"); err != nil {
					t.Errorf("entry after connect: %v\n%s", err, after)
				}
				if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o640 {
					t.Errorf("mode changed to %v", fi.Mode().Perm())
				}
				// A second connect (new token, say) replaces toolgate's entry in place.
				s2 := s
				if s2.IsHTTP() {
					s2.Headers = map[string]string{"Authorization": "Bearer second"}
				} else {
					s2.Args = []string{"mcp", "--workspace", "/elsewhere"}
				}
				p2, err := h.PlanConnect(path, s2)
				if err != nil {
					t.Fatal(err)
				}
				if err := p2.Apply(); err != nil {
					t.Fatal(err)
				}
				again, _ := os.ReadFile(path)
				if n := bytes.Count(again, []byte(`toolgate`)); n == 0 {
					t.Errorf("no toolgate entry after reconnect:\n%s", again)
				}
				e, err := h.Entry(again, "toolgate")
				if err != nil {
					t.Fatal(err)
				}
				flat, _ := json.Marshal(e)
				if !bytes.Contains(flat, []byte("second")) && !bytes.Contains(flat, []byte("elsewhere")) {
					t.Errorf("reconnect did not replace the entry: %s", flat)
				}
				msg, err := Undo(path, false)
				if err != nil {
					t.Fatal(err)
				}
				if !strings.Contains(msg, "restored") {
					t.Errorf("undo said %q", msg)
				}
				restored, _ := os.ReadFile(path)
				if !bytes.Equal(restored, orig) {
					t.Errorf("undo is not byte-identical:\n%s", LineDiff("orig", "restored", orig, restored))
				}
				for _, leftover := range []string{BackupSuffix, StateSuffix} {
					if _, err := os.Stat(path + leftover); err == nil {
						t.Errorf("%s left behind after undo", leftover)
					}
				}
				if _, err := Undo(path, false); err == nil {
					t.Error("a second undo succeeded")
				}
			})
		}
	}
}

func TestConnectCreatesAndUndoRemoves(t *testing.T) {
	h, _ := Lookup("cursor")
	path := filepath.Join(t.TempDir(), "sub", "mcp.json")
	p, err := h.PlanConnect(path, stdioServer)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(p.Diff(), "--- /dev/null") {
		t.Errorf("diff for a new file:\n%s", p.Diff())
	}
	if err := p.Apply(); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("new file: %v %v", fi, err)
	}
	if _, err := Undo(path, false); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("undo left the file it should remove: %v", err)
	}
}

func TestUndoRefusesAfterUserEdit(t *testing.T) {
	h, _ := Lookup("claude-code")
	path := filepath.Join(t.TempDir(), ".mcp.json")
	orig := []byte("{\"mcpServers\": {}}\n")
	os.WriteFile(path, orig, 0o600)
	p, err := h.PlanConnect(path, stdioServer)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Apply(); err != nil {
		t.Fatal(err)
	}
	edited := []byte("{\"mcpServers\": {}, \"mine\": true}\n")
	os.WriteFile(path, edited, 0o600)
	if _, err := Undo(path, false); err == nil || !strings.Contains(err.Error(), "--force") {
		t.Fatalf("undo over a user edit = %v", err)
	}
	if b, _ := os.ReadFile(path); !bytes.Equal(b, edited) {
		t.Error("refused undo still changed the file")
	}
	// A new connect also refuses rather than bury the edit under a stale backup.
	if p, err := h.PlanConnect(path, stdioServer); err == nil {
		if err := p.Apply(); err == nil {
			t.Error("connect over an edited, connected file succeeded")
		}
	}
	if _, err := Undo(path, true); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); !bytes.Equal(b, orig) {
		t.Errorf("forced undo = %s", b)
	}
}

func TestConnectHostileFilesAreLeftUntouched(t *testing.T) {
	cases := []struct {
		harness, name, content, want string
	}{
		{"claude-code", "trunc.json", `{"mcpServers": {"a": `, "invalid JSON"},
		{"claude-code", "array.json", `[1,2]`, "top level must be an object"},
		{"claude-code", "two.json", `{} {}`, "more than one value"},
		{"claude-code", "comment.json", "// no comments in .mcp.json\n{}", "invalid JSON"},
		{"claude-code", "notobj.json", `{"mcpServers": [1]}`, "not an object"},
		{"claude-code", "dupkey.json", `{"mcpServers": {"toolgate": {}, "toolgate": {}}}`, "twice"},
		{"vscode", "unterminated.json", "{ /* open", "invalid JSON"},
		{"codex", "bad.toml", "[mcp_servers\ncommand = 1", "invalid TOML"},
		{"codex", "inline.toml", "[mcp_servers]\ntoolgate = { command = \"x\" }\n", "inline table"},
		{"codex", "dotted.toml", "mcp_servers.toolgate.command = \"x\"\n", "dotted keys"},
		{"goose", "bad.yaml", "extensions: [unclosed", "invalid YAML"},
		{"goose", "list.yaml", "- a\n- b\n", "must be a mapping"},
		{"goose", "multi.yaml", "a: 1\n---\nb: 2\n", "more than one document"},
		{"goose", "extscalar.yaml", "extensions: 3\n", "not a mapping"},
		{"deepseek", "map.yml", "a: 1\n", "must be a list"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h, _ := Lookup(c.harness)
			path := filepath.Join(t.TempDir(), c.name)
			os.WriteFile(path, []byte(c.content), 0o600)
			p, err := h.PlanConnect(path, stdioServer)
			if err == nil {
				err = p.Apply()
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error = %v; want one mentioning %q", err, c.want)
			}
			if b, _ := os.ReadFile(path); string(b) != c.content {
				t.Errorf("file changed to %q", b)
			}
			entries, _ := os.ReadDir(filepath.Dir(path))
			if len(entries) != 1 {
				t.Errorf("extra files left: %v", entries)
			}
		})
	}
}

func TestConnectRefusesSymlinkAndDirectory(t *testing.T) {
	h, _ := Lookup("claude-code")
	dir := t.TempDir()
	target := filepath.Join(dir, "real.json")
	os.WriteFile(target, []byte("{}\n"), 0o600)
	link := filepath.Join(dir, ".mcp.json")
	if err := os.Symlink(target, link); err != nil {
		t.Skip(err)
	}
	if _, err := h.PlanConnect(link, stdioServer); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("symlink: %v", err)
	}
	if b, _ := os.ReadFile(target); string(b) != "{}\n" {
		t.Error("symlink target changed")
	}
	d := filepath.Join(dir, "isdir")
	os.Mkdir(d, 0o700)
	if _, err := h.PlanConnect(d, stdioServer); err == nil || !strings.Contains(err.Error(), "directory") {
		t.Errorf("directory: %v", err)
	}
	fileAsDir := filepath.Join(target, "x.json")
	if _, err := h.PlanConnect(fileAsDir, stdioServer); err == nil {
		t.Error("a path under a regular file was accepted")
	}
	if _, err := Undo(link, false); err == nil {
		t.Error("undo with no record succeeded")
	}
}

func TestApplyRefusesConcurrentChange(t *testing.T) {
	h, _ := Lookup("cursor")
	path := filepath.Join(t.TempDir(), "mcp.json")
	os.WriteFile(path, []byte("{}\n"), 0o600)
	p, err := h.PlanConnect(path, stdioServer)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(path, []byte("{\"x\": 1}\n"), 0o600)
	if err := p.Apply(); err == nil || !strings.Contains(err.Error(), "changed") {
		t.Fatalf("apply after a concurrent edit = %v", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "{\"x\": 1}\n" {
		t.Errorf("file = %s", b)
	}
}

func TestJSONInsertIntoEmptyAndInline(t *testing.T) {
	h, _ := Lookup("claude-code")
	for _, in := range []string{"{}", "{\n}\n", `{"mcpServers": {}}`, `{"a": 1, "mcpServers": {"x": {"command": "y"}}}`, "\t{\n\t\"mcpServers\": {\n\t\t\"x\": {}\n\t}\n}\n"} {
		out, err := h.Merge([]byte(in), stdioServer)
		if err != nil {
			t.Fatalf("%q: %v", in, err)
		}
		var v struct {
			MCPServers map[string]any `json:"mcpServers"`
		}
		if err := json.Unmarshal(out, &v); err != nil {
			t.Fatalf("%q -> invalid %s: %v", in, out, err)
		}
		if v.MCPServers["toolgate"] == nil {
			t.Errorf("%q -> %s", in, out)
		}
		if strings.Contains(in, `"x"`) && v.MCPServers["x"] == nil {
			t.Errorf("%q lost x: %s", in, out)
		}
	}
}

func TestLaunch(t *testing.T) {
	cases := []struct {
		id       string
		s        Server
		wantArgs []string
		wantEnv  []string
	}{
		{"claude-code", httpServer, []string{"claude", "--mcp-config=/t/f", "-p", "hi"}, nil},
		{"pi", stdioServer, []string{"claude", "--mcp-config", "/t/f", "-p", "hi"}, nil},
		{"deepseek", stdioServer, []string{"claude", "--patch", "/t/f", "-p", "hi"}, nil},
		{"gemini", httpServer, []string{"claude", "-p", "hi"}, []string{"GEMINI_CLI_SYSTEM_SETTINGS_PATH=/t/f"}},
		{"opencode", httpServer, []string{"claude", "-p", "hi"}, []string{"OPENCODE_CONFIG=/t/f"}},
		{"codex", httpServer, []string{"claude", "-c", `mcp_servers.toolgate.url='http://127.0.0.1:43123/mcp'`, "-c", `mcp_servers.toolgate.bearer_token_env_var='TOOLGATE_EXECUTION_TOKEN'`, "-p", "hi"}, []string{"TOOLGATE_EXECUTION_TOKEN=tok.en-1"}},
		{"codex", stdioServer, []string{"claude", "-c", `mcp_servers.toolgate.command='/opt/toolgate/bin/toolgate'`, "-c", `mcp_servers.toolgate.args=['mcp', '--workspace', '/home/u/my project']`, "-p", "hi"}, nil},
	}
	for _, c := range cases {
		h, _ := Lookup(c.id)
		l, err := h.Launch([]string{"claude", "-p", "hi"}, "/t/f", c.s)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Join(l.Args, "\x00") != strings.Join(c.wantArgs, "\x00") || strings.Join(l.Env, "\x00") != strings.Join(c.wantEnv, "\x00") {
			t.Errorf("%s: launch = %q %q; want %q %q", c.id, l.Args, l.Env, c.wantArgs, c.wantEnv)
		}
		for _, a := range l.Args {
			if strings.Contains(a, "tok.en-1") {
				t.Errorf("%s: token on the command line: %q", c.id, a)
			}
		}
	}
	for _, id := range []string{"cursor", "claude-desktop", "vscode", "goose", "claude-agent-sdk"} {
		h, _ := Lookup(id)
		if _, err := h.Launch([]string{"x"}, "/t/f", stdioServer); err == nil {
			t.Errorf("%s: launch should be refused", id)
		}
	}
	h, _ := Lookup("claude-code")
	if _, err := h.Launch(nil, "/t/f", stdioServer); err == nil {
		t.Error("empty argv accepted")
	}
}

func TestLineDiff(t *testing.T) {
	a := []byte("a\nb\nc\nd\ne\nf\ng\n")
	b := []byte("a\nb\nc\nd\nX\nY\nf\ng\n")
	got := LineDiff("x", "y", a, b)
	want := "--- x\n+++ y\n@@ -2,6 +2,7 @@\n b\n c\n d\n-e\n+X\n+Y\n f\n g\n"
	if got != want {
		t.Errorf("diff =\n%s\nwant\n%s", got, want)
	}
	if LineDiff("x", "y", a, a) != "" {
		t.Error("diff of equal texts is not empty")
	}
}

func TestTOMLReplaceKeepsCommentsOfTheNextTable(t *testing.T) {
	h, _ := Lookup("codex")
	in := "[mcp_servers.toolgate] # old\ncommand = \"old\"\n\n[mcp_servers.toolgate.env]\nA = \"1\"\n\n# profiles follow\n[profiles.x]\nmodel = \"m\"\n"
	out, err := h.Merge([]byte(in), stdioServer)
	if err != nil {
		t.Fatal(err)
	}
	s := string(out)
	if !strings.Contains(s, "# profiles follow\n[profiles.x]") || strings.Contains(s, "old") || strings.Contains(s, "A = ") {
		t.Errorf("merge =\n%s", s)
	}
	e, err := h.Entry(out, "toolgate")
	if err != nil || e["command"] != stdioServer.Command {
		t.Errorf("entry %v %v", e, err)
	}
}

func TestConnectRefusesFIFOAndHugeFiles(t *testing.T) {
	h, _ := Lookup("claude-code")
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.json")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skip(err)
	}
	if _, err := h.PlanConnect(fifo, stdioServer); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("fifo: %v", err)
	}
	huge := filepath.Join(dir, "huge.json")
	f, _ := os.Create(huge)
	f.Truncate(maxConfigBytes + 1)
	f.Close()
	if _, err := h.PlanConnect(huge, stdioServer); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("huge: %v", err)
	}
	if _, err := Undo(fifo, true); err == nil {
		t.Error("undo on a fifo with no record succeeded")
	}
}

// Every project-level file a harness reads is protected (internal/protect), and so are
// the backup and state files connect keeps beside it (undo copies the backup back). A
// harness whose default file lies in the current directory names it as its project
// file, so a new harness cannot be added without the list knowing.
func TestProjectFilesAreProtected(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range IDs() {
		h, _ := Lookup(id)
		if h.DefaultPath != nil {
			if p, err := h.DefaultPath(); err == nil {
				if rel, err := filepath.Rel(wd, p); err == nil && !strings.HasPrefix(rel, "..") && filepath.ToSlash(rel) != h.ProjectFile {
					t.Errorf("%s: the default file %s is in the project, but ProjectFile is %q", id, rel, h.ProjectFile)
				}
			}
		}
		if h.ProjectFile == "" {
			continue
		}
		for _, p := range []string{h.ProjectFile, h.ProjectFile + BackupSuffix, h.ProjectFile + StateSuffix} {
			if !protect.IsProtected(p) {
				t.Errorf("%s: %s is not protected", id, p)
			}
		}
	}
}
