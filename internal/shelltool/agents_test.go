package shelltool_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/shelltool"
)

// Declarative tool definitions cannot be planted by a command, whether .agents/tools
// existed or not: it is made (empty) and mounted read-only before the command runs.
// Beside it, .agents stays writable for other files.
func TestCannotPlantDeclarativeTools(t *testing.T) {
	requireSandbox(t)
	ws := openWS(t)
	tool := bashTool(t, ws, shelltool.Options{})
	text, _ := mustRun(t, tool, `mkdir -p .agents/tools/main; echo '{}' > .agents/tools/main/p.json; echo '{}' > .agents/tools/p.json; `+
		`mv .agents .agents-old; rm -rf .agents/tools; echo notes > .agents/notes.txt && echo NOTES-OK`)
	for _, p := range []string{".agents/tools/main/p.json", ".agents/tools/p.json", ".agents/tools/main"} {
		if _, err := os.Lstat(filepath.Join(ws.Dir(), p)); err == nil {
			t.Errorf("the command created %s: %s", p, text)
		}
	}
	if _, err := os.Lstat(filepath.Join(ws.Dir(), ".agents-old")); err == nil {
		t.Errorf(".agents was renamed away: %s", text)
	}
	if fi, err := os.Stat(filepath.Join(ws.Dir(), ".agents", "tools")); err != nil || !fi.IsDir() {
		t.Errorf(".agents/tools is not a directory after the call: %v", err)
	}
	if !strings.Contains(text, "NOTES-OK") {
		t.Errorf("other files under .agents are not writable: %s", text)
	}
}

// A file named .agents is pinned, so it cannot be swapped for a directory of tools.
func TestAgentsFilePinned(t *testing.T) {
	requireSandbox(t)
	ws := openWS(t)
	if err := os.WriteFile(filepath.Join(ws.Dir(), ".agents"), []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tool := bashTool(t, ws, shelltool.Options{})
	text, _ := mustRun(t, tool, `rm -f .agents; mkdir -p .agents/tools/main && echo '{}' > .agents/tools/main/p.json; echo done`)
	if b, err := os.ReadFile(filepath.Join(ws.Dir(), ".agents")); err != nil || string(b) != "x\n" {
		t.Errorf(".agents changed (%q, %v): %s", b, err, text)
	}
}
