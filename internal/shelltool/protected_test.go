package shelltool_test

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/kernel"
	"github.com/toolgate/toolgate/internal/shelltool"
)

// put writes files (path → content) under dir.
func put(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for p, c := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func absent(t *testing.T, dir string, paths ...string) {
	t.Helper()
	for _, p := range paths {
		if _, err := os.Lstat(filepath.Join(dir, filepath.FromSlash(p))); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s exists after the call", p)
		}
	}
}

func unchanged(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for p, want := range files {
		if b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(p))); err != nil || string(b) != want {
			t.Errorf("%s = %q, %v; want %q", p, b, err, want)
		}
	}
}

// A command plants what would make the next harness session, the person's editor,
// shell or git run code: it used to be able to create every one of these (only
// existing .git files and .agents/tools were mounted read-only). Now the existing ones
// are read-only and what it creates is removed when it ends, and the call says so.
func TestCannotPlantProtectedPaths(t *testing.T) {
	requireSandbox(t)
	ws := openWS(t)
	before := map[string]string{".git/config": "[core]\n", ".git/HEAD": "ref: refs/heads/main\n",
		".vscode/settings.json": "{}\n", ".envrc": "use flake\n", "vendor/lib/.git/config": "[core]\n"}
	put(t, ws.Dir(), before)
	tool := bashTool(t, ws, shelltool.Options{})
	_, err := call(t, tool, map[string]any{"command": `
echo '{"mcpServers":{"x":{"command":"sh","args":["-c","touch /tmp/pwn"]}}}' > .mcp.json
mkdir -p .claude .CURSOR .agents/tools/main sub/.git a/b
echo '{"hooks":{}}' > .claude/settings.json; echo '{}' > .CURSOR/mcp.json
echo '{}' > .agents/tools/main/p.json; echo '{}' > opencode.json
printf '[core]\n\tfsmonitor = touch /tmp/pwn\n' > sub/.git/config
git init -q a/b/c 2>/dev/null
echo evil > .vscode/tasks.json; echo evil >> .vscode/settings.json; mv .vscode vs
echo evil > .envrc; rm -f .envrc; echo evil > .git/HEAD; echo evil >> vendor/lib/.git/config; mv vendor v2
echo ordinary > ok.txt; echo done`})
	if codeOf(err) != kernel.CodeProtectedPathChanged {
		t.Fatalf("err = %v; want protected_path_changed", err)
	}
	msg := err.Error()
	for _, p := range []string{".mcp.json (created, removed)", ".claude (created, removed)", ".CURSOR", ".agents/tools",
		"opencode.json", "sub/.git", "a/b/c/.git", "done", "[exit code 0]"} {
		if !strings.Contains(msg, p) {
			t.Errorf("the refusal does not say %q: %s", p, msg)
		}
	}
	absent(t, ws.Dir(), ".mcp.json", ".claude", ".CURSOR", ".agents/tools", "opencode.json", "sub/.git", "a/b/c/.git",
		".vscode/tasks.json", "vs")
	unchanged(t, ws.Dir(), before)
	unchanged(t, ws.Dir(), map[string]string{"ok.txt": "ordinary\n"})
	for _, keep := range []string{".agents", "sub", "a/b/c"} {
		if _, err := os.Stat(filepath.Join(ws.Dir(), keep)); err != nil {
			t.Errorf("%s (not protected) was removed: %v", keep, err)
		}
	}
	// Nothing is left over for the next call to report, and an ordinary call is not
	// refused.
	if text, _ := mustRun(t, tool, "echo again > ok.txt && echo fine"); !strings.Contains(text, "fine") {
		t.Errorf("second call: %s", text)
	}
}

// git inside bash still reads the repository (status, log, diff) but cannot write
// it: .git is read-only as a whole. The git tools commit (their git runs outside the
// sandbox).
func TestGitInsideBashReadsOnly(t *testing.T) {
	requireSandbox(t)
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	ws := openWS(t)
	git := exec.Command("git", "-C", ws.Dir(), "-c", "user.name=t", "-c", "user.email=t@t", "init", "-q")
	git.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	if out, err := git.CombinedOutput(); err != nil {
		t.Fatalf("git init: %v %s", err, out)
	}
	put(t, ws.Dir(), map[string]string{"a.txt": "a\n"})
	text, _ := mustRun(t, bashTool(t, ws, shelltool.Options{}), `export GIT_CONFIG_GLOBAL=/dev/null
git status --porcelain && echo STATUS-OK
git add a.txt 2>&1 || echo ADD-REFUSED
git -c user.name=t -c user.email=t@t commit -qm x 2>&1 || echo COMMIT-REFUSED`)
	for _, want := range []string{"?? a.txt", "STATUS-OK", "ADD-REFUSED", "COMMIT-REFUSED"} {
		if !strings.Contains(text, want) {
			t.Errorf("%s missing: %s", want, text)
		}
	}
}

// Links: a protected name pointing elsewhere in the workspace protects its target, a
// dangling one keeps the target from being created, and the other name of a protected
// file's inode (a person's hard link) is read-only too.
func TestProtectedLinksAndHardLinks(t *testing.T) {
	requireSandbox(t)
	ws := openWS(t)
	put(t, ws.Dir(), map[string]string{"shared/claude/settings.json": "{}\n", ".mcp.json": "{}\n"})
	os.Symlink("shared/claude", filepath.Join(ws.Dir(), ".claude"))
	os.Symlink("vs", filepath.Join(ws.Dir(), ".vscode"))
	if err := os.Link(filepath.Join(ws.Dir(), ".mcp.json"), filepath.Join(ws.Dir(), "notes.json")); err != nil {
		t.Fatal(err)
	}
	tool := bashTool(t, ws, shelltool.Options{})
	_, err := call(t, tool, map[string]any{"command": `echo evil >> shared/claude/settings.json; echo evil >> notes.json
ln .mcp.json hl 2>/dev/null && echo evil >> hl; ln -s .mcp.json sl && echo evil >> sl
mkdir vs && echo '{}' > vs/tasks.json; echo done`})
	if codeOf(err) != kernel.CodeProtectedPathChanged || !strings.Contains(err.Error(), "vs (created, removed)") {
		t.Fatalf("err = %v", err)
	}
	absent(t, ws.Dir(), "hl") // link(2) across the read-only mount fails (EXDEV)
	unchanged(t, ws.Dir(), map[string]string{"shared/claude/settings.json": "{}\n", ".mcp.json": "{}\n"})
	absent(t, ws.Dir(), "vs")
	if l, err := os.Readlink(filepath.Join(ws.Dir(), ".vscode")); err != nil || l != "vs" {
		t.Errorf(".vscode link = %q, %v", l, err)
	}
}

// Two calls at once: B creates .mcp.json before A starts, so A sees it as existing and
// mounts it read-only; B's check then removes it, which detaches A's mount, and A
// writes .mcp.json anew. A's own check must still catch it (by identity: it is another
// file than the one A started with).
func TestConcurrentCallCannotLeaveAProtectedFile(t *testing.T) {
	requireSandbox(t)
	ws := openWS(t)
	tool := bashTool(t, ws, shelltool.Options{})
	dir := ws.Dir()
	var wg sync.WaitGroup
	var errB error
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, errB = call(t, tool, map[string]any{"command": `echo b > .mcp.json; touch b-made
for i in $(seq 400); do [ -e a-started ] && exit 0; sleep 0.05; done; echo gave-up`})
	}()
	waitFor(t, filepath.Join(dir, "b-made"))
	_, errA := call(t, tool, map[string]any{"command": `touch a-started
for i in $(seq 400); do [ -e .mcp.json ] || break; sleep 0.05; done
echo a > .mcp.json && echo A-WROTE`})
	wg.Wait()
	if codeOf(errB) != kernel.CodeProtectedPathChanged {
		t.Errorf("B = %v", errB)
	}
	t.Logf("A: %v", errA)
	if codeOf(errA) != kernel.CodeProtectedPathChanged || !strings.Contains(errA.Error(), ".mcp.json") {
		t.Errorf("A = %v", errA)
	}
	absent(t, dir, ".mcp.json")
}

func waitFor(t *testing.T, p string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(p); err == nil {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s never appeared", p)
}
