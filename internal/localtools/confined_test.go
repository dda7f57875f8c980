package localtools

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/kernel"
	"github.com/toolgate/toolgate/internal/sandbox"
)

// With a workspace, Build adds bash (always) and runs declarative tools in the real
// sandbox when the machine provides it.
func TestBuildConfinedTools(t *testing.T) {
	f := newFixture(t)
	writeDecl(t, f, "echo.json", `{"name":"say","description":"Echo a word","inputSchema":{"type":"object","additionalProperties":false,
	 "required":["word"],"properties":{"word":{"type":"string"}}},"command":["echo","{{word}}"],"readOnly":true}`)
	writeDecl(t, f, "escape.json", `{"name":"touch_out","description":"Try to write outside","inputSchema":{"type":"object","additionalProperties":false,
	 "required":["p"],"properties":{"p":{"type":"string"}}},"command":["touch","{{p}}"]}`)
	var warn bytes.Buffer
	tools, err := Build(Config{Workspace: f.ws, Warn: &warn})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	byID := map[string]*kernel.Tool{}
	for _, tl := range tools {
		ids = append(ids, tl.ID)
		byID[tl.ID] = tl
	}
	for _, want := range []string{"local.bash", "local.git_status", "local.git_diff", "local.git_log", "local.git_show",
		"local.git_add", "local.git_commit", "local.git_branch", "local.git_checkout"} {
		if !slices.Contains(ids, want) {
			t.Errorf("no %s: %v", want, ids)
		}
	}
	caps := sandbox.Probe()
	if !caps.Available {
		if slices.Contains(ids, "local.say") {
			t.Errorf("declarative tool registered without a sandbox")
		}
		if !strings.Contains(warn.String(), "sandbox is unavailable") {
			t.Errorf("no warning: %q", warn.String())
		}
		t.Skipf("sandbox unavailable here (%s): declarative tools not run", caps.Reason)
	}
	_, out, err := call(t, byID["local.say"], map[string]any{"word": "hello; id"})
	if err != nil || out.IsError || !strings.Contains(out.Text, "--- stdout ---\nhello; id\n") {
		t.Errorf("say = %+v, %v", out, err)
	}
	target := filepath.Join(f.parent, "pwned-by-declarative")
	_, out, err = call(t, byID["local.touch_out"], map[string]any{"p": target})
	if err == nil && !out.IsError {
		t.Errorf("touch outside succeeded: %+v", out)
	}
	if _, err := os.Stat(target); err == nil {
		t.Errorf("declarative tool wrote outside the workspace")
	}
	_, out, _ = call(t, byID["server.status"], map[string]any{})
	if !strings.Contains(out.Text, `"confinement"`) || !strings.Contains(out.Text, `"landlock_abi"`) {
		t.Errorf("status lacks confinement: %s", out.Text)
	}
}
