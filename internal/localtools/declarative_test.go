package localtools

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/kernel"
)

type fakeRunner struct{ got []RunRequest }

func (r *fakeRunner) Run(ctx context.Context, req RunRequest) (*RunResult, error) {
	r.got = append(r.got, req)
	return &RunResult{Stdout: strings.Join(req.Argv, "|"), ExitCode: 0}, nil
}

func writeDecl(t *testing.T, f *fixture, name, body string) {
	t.Helper()
	p := filepath.Join(f.dir, DeclarativeDir, name)
	os.MkdirAll(filepath.Dir(p), 0o755)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

const grepDecl = `{"name":"grep_word","description":"Search for a word","inputSchema":{"type":"object",
 "additionalProperties":false,"required":["word","file"],"properties":{"word":{"type":"string"},"file":{"type":"string"}}},
 "command":["grep","-n","{{word}}","--","{{file}}"]}`

func TestDeclarativeTools(t *testing.T) {
	f := newFixture(t)
	writeDecl(t, f, "grep.json", grepDecl)
	writeDecl(t, f, "sub/dash.json", `{"name":"echo_opt","description":"d","inputSchema":{"type":"object","additionalProperties":false,
	 "required":["v"],"properties":{"v":{"type":"string"}}},"command":["echo","{{v}}"],"allowLeadingDash":["v"],"readOnly":true}`)
	bad := map[string]string{
		"notjson.json":  `{`,
		"builtin.json":  `{"name":"read_file","description":"d","inputSchema":{"type":"object","additionalProperties":false},"command":["cat"]}`,
		"reserved.json": `{"name":"toolgate_x","description":"d","inputSchema":{"type":"object","additionalProperties":false},"command":["x"]}`,
		"shell.json":    `{"name":"sh1","description":"d","inputSchema":{"type":"object","additionalProperties":false,"required":["c"],"properties":{"c":{"type":"string"}}},"command":["sh","-c","echo {{c}}"]}`,
		"prog.json":     `{"name":"prog1","description":"d","inputSchema":{"type":"object","additionalProperties":false,"required":["c"],"properties":{"c":{"type":"string"}}},"command":["{{c}}"]}`,
		"open.json":     `{"name":"open1","description":"d","inputSchema":{"type":"object"},"command":["x"]}`,
		"undecl.json":   `{"name":"undecl","description":"d","inputSchema":{"type":"object","additionalProperties":false},"command":["x","{{y}}"]}`,
		"optional.json": `{"name":"opt1","description":"d","inputSchema":{"type":"object","additionalProperties":false,"properties":{"y":{"type":"string"}}},"command":["x","{{y}}"]}`,
		"ref.json":      `{"name":"ref1","description":"d","inputSchema":{"type":"object","additionalProperties":false,"properties":{"y":{"$ref":"file:///etc/passwd"}}},"command":["x"]}`,
		"extra.json":    `{"name":"extra1","description":"d","inputSchema":{"type":"object","additionalProperties":false},"command":["x"],"shell":true}`,
		"dup.json":      strings.Replace(grepDecl, `"Search`, `"Dup`, 1),
		"BadName.json":  `{"name":"Bad-Name","description":"d","inputSchema":{"type":"object","additionalProperties":false},"command":["x"]}`,
	}
	for n, b := range bad {
		writeDecl(t, f, n, b)
	}
	os.Symlink("/etc", filepath.Join(f.dir, DeclarativeDir, "linked"))
	var warn bytes.Buffer
	run := &fakeRunner{}
	tools, err := Build(Config{NoConfined: true, Workspace: f.ws, Runner: run, Warn: &warn})
	if err != nil {
		t.Fatal(err)
	}
	var decl []*kernel.Tool
	for _, tl := range tools {
		if tl.Source == "workspace" {
			decl = append(decl, tl)
		}
	}
	if len(decl) != 2 {
		t.Fatalf("declarative tools = %d; warnings:\n%s", len(decl), warn.String())
	}
	// One warning per bad file (dup.json or grep.json loses, whichever is walked second).
	if got := strings.Count(warn.String(), "skipping"); got != len(bad) {
		t.Errorf("%d warnings for %d bad files:\n%s", got, len(bad), warn.String())
	}
	var grep, echo *kernel.Tool
	for _, tl := range decl {
		switch tl.ID {
		case "local.grep_word":
			grep = tl
		case "local.echo_opt":
			echo = tl
		}
	}
	if grep == nil || echo == nil {
		t.Fatalf("missing tools: %v", decl)
	}
	a, out, err := call(t, grep, map[string]any{"word": "a b; rm -rf /", "file": "-rf"})
	if err != nil {
		t.Fatalf("grep after --: %v", err)
	}
	if a.Action != kernel.ActionExecute || a.Resource != "path:." {
		t.Errorf("access = %+v", a)
	}
	if want := "grep|-n|a b; rm -rf /|--|-rf"; !strings.Contains(out.Text, want) {
		t.Errorf("argv = %q; want %q", out.Text, want)
	}
	_, _, err = call(t, grep, map[string]any{"word": "--include=x", "file": "f"})
	if codeOf(err) != kernel.CodeInvalidArguments {
		t.Errorf("dash value before -- = %v", err)
	}
	if _, _, err := call(t, echo, map[string]any{"v": "-n"}); err != nil {
		t.Errorf("allowLeadingDash: %v", err)
	}
	if !echo.Annotations.ReadOnly || grep.Annotations.ReadOnly {
		t.Errorf("annotations: echo %+v grep %+v", echo.Annotations, grep.Annotations)
	}
	// Without a runner nothing is registered: declarative tools never run unconfined.
	tools, _ = Build(Config{NoConfined: true, Workspace: f.ws, Warn: &warn})
	for _, tl := range tools {
		if tl.Source == "workspace" {
			t.Errorf("%s registered without a runner", tl.ID)
		}
	}
	// Profiles: coding keeps them, review drops them.
	for profile, want := range map[string]bool{"coding": true, "review": false} {
		tools, _ = Build(Config{NoConfined: true, Workspace: f.ws, Runner: run, Profile: profile, Warn: &bytes.Buffer{}})
		has := false
		for _, tl := range tools {
			has = has || tl.ID == "local.grep_word"
		}
		if has != want {
			t.Errorf("profile %s: grep_word present = %v", profile, has)
		}
	}
}

// .agents pointing elsewhere (a link the repository ships, or a person made): the
// definitions used to be read from its target, which the protected-path rules do not
// cover (write_file could fill it under the default grants). No tool is loaded then.
func TestDeclarativeToolsNotReadThroughALink(t *testing.T) {
	f := newFixture(t)
	p := filepath.Join(f.dir, "defs", "tools", "main", "grep.json")
	os.MkdirAll(filepath.Dir(p), 0o755)
	os.WriteFile(p, []byte(grepDecl), 0o644)
	if err := os.Symlink("defs", filepath.Join(f.dir, ".agents")); err != nil {
		t.Fatal(err)
	}
	var warn bytes.Buffer
	tools, err := Build(Config{NoConfined: true, Workspace: f.ws, Runner: &fakeRunner{}, Warn: &warn})
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range tools {
		if tl.ID == "local.grep_word" {
			t.Errorf("a definition was loaded through the link")
		}
	}
	if !strings.Contains(warn.String(), "symbolic link") {
		t.Errorf("warning = %q", warn.String())
	}
	// Control: the same definition in place is loaded.
	os.Remove(filepath.Join(f.dir, ".agents"))
	os.MkdirAll(filepath.Join(f.dir, ".agents"), 0o755)
	os.Rename(filepath.Join(f.dir, "defs", "tools"), filepath.Join(f.dir, ".agents", "tools"))
	tools, _ = Build(Config{NoConfined: true, Workspace: f.ws, Runner: &fakeRunner{}, Warn: &warn})
	found := false
	for _, tl := range tools {
		found = found || tl.ID == "local.grep_word"
	}
	if !found {
		t.Errorf("the control definition was not loaded")
	}
}
