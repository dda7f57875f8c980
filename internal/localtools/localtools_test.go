package localtools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/kernel"
	"github.com/toolgate/toolgate/internal/workspace"
)

// fixture is parent/{W, W_evil/x, secret} with hostile links inside W.
type fixture struct {
	ws     *workspace.Workspace
	dir    string // W
	parent string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	parent := t.TempDir()
	w := filepath.Join(parent, "W")
	write := func(p, s string) {
		t.Helper()
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(w, "src", "main.go"), "package main\n\nfunc main() {}\n")
	write(filepath.Join(w, "README.md"), "line1\nline2\nline3\n")
	write(filepath.Join(parent, "W_evil", "x"), "evil\n")
	write(filepath.Join(parent, "secret"), "s3cret\n")
	for name, target := range map[string]string{
		"abs": "/etc/passwd", "rel": "../secret", "d": "/", "inlink": "README.md", "srclink": "src",
	} {
		if err := os.Symlink(target, filepath.Join(w, name)); err != nil {
			t.Fatal(err)
		}
	}
	ws, err := workspace.Open(w)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	return &fixture{ws: ws, dir: w, parent: parent}
}

func (f *fixture) tool(t *testing.T, name string) *kernel.Tool {
	t.Helper()
	tools, err := Build(Config{NoConfined: true, Workspace: f.ws})
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range tools {
		if tl.ID == name {
			return tl
		}
	}
	t.Fatalf("no tool %s", name)
	return nil
}

type fakePeer struct {
	caps   string
	answer string
	err    error
	got    any
}

func (p *fakePeer) ClientCapabilities() json.RawMessage {
	if p.caps == "" {
		return nil
	}
	return json.RawMessage(p.caps)
}

func (p *fakePeer) Request(ctx context.Context, method string, params any) (json.RawMessage, error) {
	p.got = params
	if p.err != nil {
		return nil, p.err
	}
	return json.RawMessage(p.answer), nil
}

// call runs a tool the way the kernel does: Access first (a refusal stops it), then Run.
func call(t *testing.T, tl *kernel.Tool, args map[string]any) (kernel.Access, *kernel.Output, error) {
	t.Helper()
	return callPeer(t, tl, args, &fakePeer{})
}

func callPeer(t *testing.T, tl *kernel.Tool, args map[string]any, peer *fakePeer) (kernel.Access, *kernel.Output, error) {
	t.Helper()
	var a kernel.Access
	if tl.Access != nil {
		var err error
		a, err = tl.Access(args)
		if err != nil {
			return a, nil, err
		}
	}
	out, err := tl.Run(context.Background(), &kernel.Call{ID: "c1", Principal: "p", Tool: tl, Args: args, Access: a, Peer: peer})
	return a, out, err
}

// codeOf is the reason code the kernel reports for a tool's error.
func codeOf(err error) kernel.Code {
	if ke, ok := kernel.AsError(err); ok {
		return ke.Code
	}
	return ""
}

func TestReadFile(t *testing.T) {
	f := newFixture(t)
	rf := f.tool(t, "local.read_file")
	a, out, err := call(t, rf, map[string]any{"path": "README.md"})
	if err != nil || out.Text != "line1\nline2\nline3\n" {
		t.Fatalf("read = %+v, %v", out, err)
	}
	if a.Action != kernel.ActionRead || a.Resource != "path:README.md" || a.Protected {
		t.Errorf("access = %+v", a)
	}
	_, out, _ = call(t, rf, map[string]any{"path": "README.md", "offset": 2.0, "limit": 1.0})
	if !strings.HasPrefix(out.Text, "line2\n[truncated: showed lines 2–2") || !strings.Contains(out.Text, "offset=3") {
		t.Errorf("line range = %q", out.Text)
	}
	_, out, _ = call(t, rf, map[string]any{"path": "README.md", "byte_offset": 6.0, "byte_length": 5.0})
	if !strings.HasPrefix(out.Text, "line2\n[truncated: showed bytes 6–11 of 18") {
		t.Errorf("byte range = %q", out.Text)
	}
	_, out, _ = call(t, rf, map[string]any{"path": "README.md", "offset": 9.0})
	if !strings.Contains(out.Text, "past its end") {
		t.Errorf("offset past end = %q", out.Text)
	}
	// An in-workspace link reads its target, and Access names the target.
	a, out, err = call(t, rf, map[string]any{"path": "inlink"})
	if err != nil || a.Resource != "path:README.md" || !strings.HasPrefix(out.Text, "line1") {
		t.Errorf("inlink = %+v %+v %v", a, out, err)
	}
	_, _, err = call(t, rf, map[string]any{"path": "README.md", "offset": 1.0, "byte_offset": 0.0})
	if codeOf(err) != kernel.CodeInvalidArguments {
		t.Errorf("mixed modes: %v", err)
	}
}

func TestReadFileSizeCap(t *testing.T) {
	f := newFixture(t)
	big := strings.Repeat(strings.Repeat("x", 99)+"\n", 5000) // 500,000 bytes
	os.WriteFile(filepath.Join(f.dir, "big.txt"), []byte(big), 0o644)
	_, out, err := call(t, f.tool(t, "local.read_file"), map[string]any{"path": "big.txt", "limit": 100000.0})
	if err != nil {
		t.Fatal(err)
	}
	body, marker, ok := strings.Cut(out.Text, "\n[truncated:")
	if !ok || len(body) > MaxReadBytes || !strings.Contains(marker, "offset=2622") {
		t.Errorf("cap: body %d bytes, marker %q", len(body), marker)
	}
	oneLine := strings.Repeat("y", MaxReadBytes+10)
	os.WriteFile(filepath.Join(f.dir, "long.txt"), []byte(oneLine), 0o644)
	_, out, _ = call(t, f.tool(t, "local.read_file"), map[string]any{"path": "long.txt"})
	if !strings.Contains(out.Text, "byte_offset=262144") {
		t.Errorf("long line marker missing: %q", out.Text[len(out.Text)-120:])
	}
}

func TestReadFileRefusals(t *testing.T) {
	f := newFixture(t)
	rf := f.tool(t, "local.read_file")
	for _, p := range []string{"../secret", "../W_evil/x", "/etc/passwd", f.dir + "/README.md", "abs", "rel", "d/etc/passwd", "README.md\x00", "src/../README.md"} {
		_, out, err := call(t, rf, map[string]any{"path": p})
		if codeOf(err) != kernel.CodePathOutsideWorkspace || out != nil {
			t.Errorf("read %q = %v, %v; want path_outside_workspace", p, out, err)
		}
	}
	_, _, err := call(t, rf, map[string]any{"path": "src"})
	if err == nil || !strings.Contains(err.Error(), "directory") {
		t.Errorf("read dir: %v", err)
	}
}

// FIFOs and devices answer at once: O_NONBLOCK, then fstat refuses them.
func TestReadFileNeverBlocks(t *testing.T) {
	f := newFixture(t)
	if err := syscall.Mkfifo(filepath.Join(f.dir, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	paths := []string{"fifo"}
	if err := syscall.Mknod(filepath.Join(f.dir, "zero"), syscall.S_IFCHR|0o666, int(1<<8|5)); err == nil {
		paths = append(paths, "zero")
	} else {
		t.Logf("mknod /dev/zero copy: %v (device case not covered here)", err)
	}
	rf := f.tool(t, "local.read_file")
	for _, p := range paths {
		done := make(chan error, 1)
		go func() { _, _, err := call(t, rf, map[string]any{"path": p}); done <- err }()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), "only regular files") {
				t.Errorf("read %s: %v", p, err)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("read_file on %s blocked", p)
		}
	}
}

func TestWriteFile(t *testing.T) {
	f := newFixture(t)
	wf := f.tool(t, "local.write_file")
	a, out, err := call(t, wf, map[string]any{"path": "new/dir/a.txt", "content": "hello"})
	if err != nil || !strings.Contains(out.Text, "created new/dir/a.txt (5 bytes)") {
		t.Fatalf("write = %+v, %v", out, err)
	}
	if a.Action != kernel.ActionWrite || a.Resource != "path:new/dir/a.txt" || a.Protected {
		t.Errorf("access = %+v", a)
	}
	if b, _ := os.ReadFile(filepath.Join(f.dir, "new/dir/a.txt")); string(b) != "hello" {
		t.Errorf("content = %q", b)
	}
	os.Chmod(filepath.Join(f.dir, "README.md"), 0o600)
	_, out, err = call(t, wf, map[string]any{"path": "README.md", "content": "new"})
	if err != nil || !strings.Contains(out.Text, "replaced") {
		t.Fatalf("replace: %+v %v", out, err)
	}
	if fi, _ := os.Stat(filepath.Join(f.dir, "README.md")); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode not kept: %v", fi.Mode())
	}
	// No temporary file is left behind.
	ents, _ := os.ReadDir(f.dir)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".toolgate-tmp-") {
			t.Errorf("left %s", e.Name())
		}
	}
	for p, root := range map[string]string{".git/hooks/pre-commit": ".git", ".gitattributes": ".gitattributes",
		"sub/.gitattributes": "sub/.gitattributes", ".git/config": ".git", ".mcp.json": ".mcp.json",
		".claude/settings.local.json": ".claude", ".VSCode/tasks.json": ".VSCode", "ok.txt": ""} {
		a, err := wf.Access(map[string]any{"path": p, "content": "x"})
		if err != nil || a.Protected != (root != "") || (root != "" && a.ProtectedRoot != "path:"+root) {
			t.Errorf("Access(%s) = %+v, %v; want protected root %q", p, a, err, root)
		}
	}
}

// A file inside that shares its inode with a file outside (a hard link someone else
// made; os.Root cannot see where the other name is) used to be read. Now read_file
// refuses every file with more than one link, and says why; a file with one name is
// read (the control).
func TestReadFileRefusesHardLinks(t *testing.T) {
	f := newFixture(t)
	rf := f.tool(t, "local.read_file")
	outside := filepath.Join(f.parent, "private.key")
	os.WriteFile(outside, []byte("PRIVATE-KEY-7f3a\n"), 0o600)
	if err := os.Link(outside, filepath.Join(f.dir, "key-link")); err != nil {
		t.Fatal(err)
	}
	for _, args := range []map[string]any{{"path": "key-link"}, {"path": "key-link", "byte_offset": 0}} {
		_, out, err := call(t, rf, args)
		if codeOf(err) != kernel.CodePathOutsideWorkspace || out != nil || !strings.Contains(err.Error(), "2 hard links") {
			t.Errorf("read %v = %v, %v; want path_outside_workspace", args, out, err)
		}
		if err != nil && strings.Contains(err.Error(), "PRIVATE-KEY") {
			t.Errorf("the refusal leaks the content: %v", err)
		}
	}
	os.Remove(outside)
	if _, out, err := call(t, rf, map[string]any{"path": "key-link"}); err != nil || out.Text != "PRIVATE-KEY-7f3a\n" {
		t.Errorf("read of a file with one name = %v, %v", out, err)
	}
}

func TestWriteFileRefusals(t *testing.T) {
	f := newFixture(t)
	wf := f.tool(t, "local.write_file")
	outside := filepath.Join(f.parent, "outside.txt")
	os.WriteFile(outside, []byte("original"), 0o644)
	if err := os.Link(outside, filepath.Join(f.dir, "hard")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"../secret", "../W_evil/x", "/tmp/x", "abs", "rel", "d/tmp/pwned", "inlink", "srclink/new.go", "hard", "a\x00b", "x/../../secret"} {
		_, out, err := call(t, wf, map[string]any{"path": p, "content": "pwned"})
		if codeOf(err) != kernel.CodePathOutsideWorkspace || out != nil {
			t.Errorf("write %q = %v, %v; want path_outside_workspace", p, out, err)
		}
	}
	for file, want := range map[string]string{outside: "original", filepath.Join(f.parent, "secret"): "s3cret\n",
		filepath.Join(f.parent, "W_evil", "x"): "evil\n", filepath.Join(f.dir, "README.md"): "line1\nline2\nline3\n"} {
		if b, _ := os.ReadFile(file); string(b) != want {
			t.Errorf("%s changed to %q", file, b)
		}
	}
	if _, err := os.Stat("/tmp/pwned"); err == nil {
		t.Errorf("/tmp/pwned exists")
	}
	if _, err := os.Stat(filepath.Join(f.dir, "src", "new.go")); err == nil {
		t.Errorf("wrote through srclink")
	}
	_, _, err := call(t, wf, map[string]any{"path": "src", "content": "x"})
	if err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("write over dir: %v", err)
	}
}

func TestPatchFile(t *testing.T) {
	f := newFixture(t)
	pf := f.tool(t, "local.patch_file")
	patch := `diff --git a/README.md b/README.md
--- a/README.md
+++ b/README.md
@@ -1,3 +1,3 @@
 line1
-line2
+LINE2
 line3
--- /dev/null
+++ b/src/new.go
@@ -0,0 +1,2 @@
+package main
+// new
`
	a, out, err := call(t, pf, map[string]any{"patch": patch})
	if err != nil {
		t.Fatalf("patch: %v", err)
	}
	if a.Resource != "path:." || a.Action != kernel.ActionWrite {
		t.Errorf("access = %+v", a)
	}
	if !strings.Contains(out.Text, "2 files") {
		t.Errorf("out = %q", out.Text)
	}
	if b, _ := os.ReadFile(filepath.Join(f.dir, "README.md")); string(b) != "line1\nLINE2\nline3\n" {
		t.Errorf("README = %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(f.dir, "src/new.go")); string(b) != "package main\n// new\n" {
		t.Errorf("new.go = %q", b)
	}
	// Several files: their deepest common directory (it used to be one level above).
	for p, want := range map[string]string{
		"--- /dev/null\n+++ b/src/a.go\n@@ -0,0 +1 @@\n+x\n--- /dev/null\n+++ b/src/b/c.go\n@@ -0,0 +1 @@\n+x\n": "path:src",
		"--- /dev/null\n+++ b/src/a.go\n@@ -0,0 +1 @@\n+x\n--- /dev/null\n+++ b/src/b.go\n@@ -0,0 +1 @@\n+x\n":   "path:src",
		"--- /dev/null\n+++ b/src/a.go\n@@ -0,0 +1 @@\n+x\n--- /dev/null\n+++ b/srcx/b.go\n@@ -0,0 +1 @@\n+x\n":  "path:.",
	} {
		if a, err := pf.Access(map[string]any{"patch": p}); err != nil || a.Resource != want {
			t.Errorf("access of a patch of several files = %+v %v; want %s", a, err, want)
		}
	}
	// Single file: the resource is that file.
	a, err = pf.Access(map[string]any{"patch": "--- a/src/main.go\n+++ b/src/main.go\n@@ -1 +1 @@\n-package main\n+package x\n"})
	if err != nil || a.Resource != "path:src/main.go" {
		t.Errorf("single access = %+v %v", a, err)
	}
	// Deleting a file.
	_, _, err = call(t, pf, map[string]any{"patch": "--- a/src/new.go\n+++ /dev/null\n@@ -1,2 +0,0 @@\n-package main\n-// new\n"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(f.dir, "src/new.go")); err == nil {
		t.Errorf("not deleted")
	}
}

// A mismatch in the second file leaves the first one untouched.
func TestPatchFileAllOrNothing(t *testing.T) {
	f := newFixture(t)
	pf := f.tool(t, "local.patch_file")
	patch := "--- a/README.md\n+++ b/README.md\n@@ -1,2 +1,2 @@\n-line1\n+CHANGED\n line2\n" +
		"--- a/src/main.go\n+++ b/src/main.go\n@@ -1 +1 @@\n-package nomatch\n+package x\n"
	_, _, err := call(t, pf, map[string]any{"patch": patch})
	if err == nil || !strings.Contains(err.Error(), `hunk 1 of src/main.go does not apply: expected "package nomatch" at line 1, found "package main"`) ||
		!strings.Contains(err.Error(), "nothing was changed") {
		t.Fatalf("mismatch: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(f.dir, "README.md")); string(b) != "line1\nline2\nline3\n" {
		t.Errorf("README changed: %q", b)
	}
	for _, p := range []string{
		"--- a/../secret\n+++ b/../secret\n@@ -1 +1 @@\n-s3cret\n+pwned\n",
		"--- a/rel\n+++ b/rel\n@@ -1 +1 @@\n-s3cret\n+pwned\n",
		"--- a/README.md\n+++ b/README.md\n@@ -1 +1 @@\n-line1\n+x\n--- /dev/null\n+++ b//etc/x\n@@ -0,0 +1 @@\n+x\n",
	} {
		_, _, err := call(t, pf, map[string]any{"patch": p})
		if codeOf(err) != kernel.CodePathOutsideWorkspace {
			t.Errorf("patch escaping = %v", err)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(f.parent, "secret")); string(b) != "s3cret\n" {
		t.Errorf("secret changed")
	}
	for _, p := range []string{"", "not a diff", "--- a/x\n+++ b/x\n@@ -1,5 +1,5 @@\n line\n", "@@ -1 +1 @@\n-a\n+b\n",
		"--- a/x\n+++ b/y\n@@ -1 +1 @@\n-a\n+b\n", "rename from a\nrename to b\n"} {
		_, _, err := call(t, pf, map[string]any{"patch": p})
		if err == nil {
			t.Errorf("patch %q accepted", p)
		}
	}
	// A protected file in a multi-file patch: the patch must touch only that protected
	// path, which it is then marked with (a grant on a common directory above it, such
	// as path:src/ for src/.gitattributes and src/a.go, used to cover the whole patch).
	for _, p := range []string{
		"--- /dev/null\n+++ b/.git/hooks/pre-commit\n@@ -0,0 +1 @@\n+x\n--- /dev/null\n+++ b/ok\n@@ -0,0 +1 @@\n+x\n",
		"--- /dev/null\n+++ b/src/.gitattributes\n@@ -0,0 +1 @@\n+x\n--- /dev/null\n+++ b/src/a.go\n@@ -0,0 +1 @@\n+x\n",
		"--- /dev/null\n+++ b/.vscode/tasks.json\n@@ -0,0 +1 @@\n+x\n--- /dev/null\n+++ b/.claude/settings.json\n@@ -0,0 +1 @@\n+x\n",
	} {
		if a, err := pf.Access(map[string]any{"patch": p}); codeOf(err) != kernel.CodeProtectedPath {
			t.Errorf("mixed protected patch = %+v %v; want protected_path", a, err)
		}
	}
	a, err := pf.Access(map[string]any{"patch": "--- /dev/null\n+++ b/.vscode/tasks.json\n@@ -0,0 +1 @@\n+x\n--- /dev/null\n+++ b/.vscode/sub/mcp.json\n@@ -0,0 +1 @@\n+x\n"})
	if err != nil || !a.Protected || a.Resource != "path:.vscode" || a.ProtectedRoot != "path:.vscode" {
		t.Errorf("patch inside one protected path = %+v %v", a, err)
	}
}

// A hunk header far past the end of the file is answered at once (mismatch), not after
// scanning a billion candidate positions.
func TestApplyHugeLineNumber(t *testing.T) {
	hs, err := parsePatch("--- a/f\n+++ b/f\n@@ -1000000000,1 +1000000000,1 @@\n-zzz\n+y\n")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := apply("f", splitText("a\nb\n"), hs[0].hunks); done <- err }()
	select {
	case err := <-done:
		if err == nil {
			t.Errorf("applied a hunk whose context is absent")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("apply with a huge line number did not return")
	}
}

func TestApplyOffsetAndNoNewline(t *testing.T) {
	in := splitText("a\nb\nc\nd\ne")
	hs, err := parsePatch("--- a/f\n+++ b/f\n@@ -3,3 +3,3 @@\n c\n d\n-e\n\\ No newline at end of file\n+E\n")
	if err != nil {
		t.Fatal(err)
	}
	out, err := apply("f", in, hs[0].hunks)
	if err != nil || out.String() != "a\nb\nc\nd\nE\n" {
		t.Errorf("apply = %q, %v", out.String(), err)
	}
	// Hunk header off by two lines still applies at the nearest exact match.
	hs, _ = parsePatch("--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n c\n-d\n+D\n")
	out, err = apply("f", in, hs[0].hunks)
	if err != nil || out.String() != "a\nb\nc\nD\ne" {
		t.Errorf("offset apply = %q, %v", out.String(), err)
	}
}

func TestListFiles(t *testing.T) {
	f := newFixture(t)
	os.MkdirAll(filepath.Join(f.dir, "a/b/c/d"), 0o755)
	os.WriteFile(filepath.Join(f.dir, "a/b/c/d/deep.go"), nil, 0o644)
	lf := f.tool(t, "local.list_files")
	_, out, err := call(t, lf, map[string]any{})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"README.md\n", "src/\n", "src/main.go\n", "d -> /\n", "rel -> ../secret\n", "a/b/c/\n", "[depth limit"} {
		if !strings.Contains(out.Text, want) {
			t.Errorf("listing lacks %q:\n%s", want, out.Text)
		}
	}
	if strings.Contains(out.Text, "\nd/") || strings.Contains(out.Text, "srclink/") || strings.Contains(out.Text, "deep.go") {
		t.Errorf("listing followed a link or ignored depth:\n%s", out.Text)
	}
	_, out, _ = call(t, lf, map[string]any{"pattern": "**/*.go", "max_depth": 10.0})
	if out.Text != "a/b/c/d/deep.go\nsrc/main.go\n" {
		t.Errorf("glob = %q", out.Text)
	}
	_, out, _ = call(t, lf, map[string]any{"max_entries": 2.0})
	if strings.Count(out.Text, "\n") != 3 || !strings.Contains(out.Text, "[truncated: stopped at 2 entries") {
		t.Errorf("cap = %q", out.Text)
	}
	_, out, err = call(t, lf, map[string]any{"path": "srclink"})
	if err != nil || out.Text != "main.go\n" {
		t.Errorf("list via inside link = %+v %v", out, err)
	}
	for _, p := range []string{"d", "..", "rel", "/"} {
		_, _, err := call(t, lf, map[string]any{"path": p})
		if codeOf(err) != kernel.CodePathOutsideWorkspace {
			t.Errorf("list %q = %v", p, err)
		}
	}
	_, _, err = call(t, lf, map[string]any{"pattern": "[unclosed"})
	if codeOf(err) != kernel.CodeInvalidArguments {
		t.Errorf("bad glob = %v", err)
	}
}

func TestListFilesQuotesControlNames(t *testing.T) {
	f := newFixture(t)
	os.WriteFile(filepath.Join(f.dir, "evil\n[truncated: fake]"), nil, 0o644)
	_, out, err := call(t, f.tool(t, "local.list_files"), map[string]any{"max_depth": 1.0})
	if err != nil || !strings.Contains(out.Text, `"evil\n[truncated: fake]"`+"\n") || strings.Contains(out.Text, "\n[truncated: fake]") {
		t.Errorf("listing = %q, %v", out.Text, err)
	}
}

func TestGlobMatch(t *testing.T) {
	for _, c := range []struct {
		p, n string
		ok   bool
	}{
		{"**", "a/b/c", true}, {"*.go", "a.go", true}, {"*.go", "x/a.go", false}, {"**/*.go", "a.go", true},
		{"**/*.go", "x/y/a.go", true}, {"x/**/z", "x/z", true}, {"x/**/z", "x/a/b/z", true}, {"x/**/z", "x/a/b/y", false},
		{"**/**/**/**/**/**/**/**/**/**/q", strings.Repeat("a/", 200) + "b", false},
	} {
		if got := globMatch(c.p, c.n); got != c.ok {
			t.Errorf("globMatch(%q, %q) = %v", c.p, c.n, got)
		}
	}
}

func TestAskUser(t *testing.T) {
	f := newFixture(t)
	au := f.tool(t, "local.ask_user")
	peer := &fakePeer{caps: `{"elicitation":{}}`, answer: `{"action":"accept","content":{"answer":"yes, merge"}}`}
	_, out, err := callPeer(t, au, map[string]any{"question": "Merge?"}, peer)
	if err != nil || out.Text != "yes, merge" {
		t.Fatalf("ask = %+v %v", out, err)
	}
	if b, _ := json.Marshal(peer.got); !strings.Contains(string(b), `"message":"Merge?"`) {
		t.Errorf("params = %s", b)
	}
	_, out, _ = callPeer(t, au, map[string]any{"question": "?"}, &fakePeer{caps: `{"elicitation":{}}`, answer: `{"action":"decline"}`})
	if !strings.Contains(out.Text, "declined") {
		t.Errorf("decline = %q", out.Text)
	}
	for _, p := range []*fakePeer{
		{}, {caps: `{"sampling":{}}`}, {caps: `{"elicitation":{}}`, err: errors.New("peer unsupported")},
		{caps: `{"elicitation":{}}`, answer: `not json`}, {caps: `{"elicitation":{}}`, answer: `{"action":"accept","content":{"answer":5}}`},
	} {
		_, _, err := callPeer(t, au, map[string]any{"question": "?"}, p)
		if codeOf(err) != kernel.CodeToolFailed {
			t.Errorf("ask with %+v = %v; want tool_failed", p, err)
		}
	}
}

func TestBuildFiltersAndNamer(t *testing.T) {
	f := newFixture(t)
	ids := func(cfg Config) []string {
		t.Helper()
		cfg.Workspace = f.ws
		cfg.NoConfined = true
		tools, err := Build(cfg)
		if err != nil {
			t.Fatal(err)
		}
		var s []string
		for _, tl := range tools {
			s = append(s, tl.ID)
		}
		return s
	}
	got := strings.Join(ids(Config{Profile: "minimal"}), ",")
	if got != "local.read_file,local.list_files,server.status,server.version,server.list_servers,server.read_state,server.list_clients,server.manage_backup" {
		t.Errorf("minimal = %s", got)
	}
	got = strings.Join(ids(Config{Tools: []string{"write_file", " read_file"}, Profile: "chat"}), ",")
	if got != "local.read_file,server.status,server.version,server.list_servers,server.read_state,server.list_clients,server.manage_backup" {
		t.Errorf("chat ∧ tools = %s", got)
	}
	if _, err := Build(Config{Workspace: f.ws, Profile: "bogus"}); err == nil {
		t.Errorf("bogus profile accepted")
	}
	if _, err := Build(Config{Workspace: f.ws, Tools: []string{"rm_rf"}}); err == nil || !strings.Contains(err.Error(), "available: ") {
		t.Errorf("unknown tool: %v", err)
	}
	tools, _ := Build(Config{})
	if len(tools) != 6 {
		t.Errorf("no workspace: %d tools", len(tools))
	}
	n := Namer(DefaultPrefix)
	for id, want := range map[string]string{"local.read_file": "toolgate_local_read_file", "server.status": "toolgate_server_status",
		"toolgate.escalate": "toolgate_escalate", "github.create_issue": "toolgate_github_create_issue"} {
		if got := n(id); got != want {
			t.Errorf("Namer(%s) = %s", id, got)
		}
	}
	if got := Namer("")("local.bash"); got != "bash" {
		t.Errorf("unprefixed = %s", got)
	}
	if got := Namer("")("github.create_issue"); got != "github.create_issue" {
		t.Errorf("unprefixed upstream tool = %s", got)
	}
	for in, want := range map[string]string{"none": "", "NONE": "", "my_": "my_", DefaultPrefix: DefaultPrefix} {
		if got, err := ParsePrefix(in); err != nil || got != want {
			t.Errorf("ParsePrefix(%q) = %q %v", in, got, err)
		}
	}
	for _, bad := range []string{"", "a b", "x/", strings.Repeat("a", 65),
		// Prefixes under which a declarative tool could take a control-plane name.
		"toolgate_", "t", "toolgate_server_", "toolgate_server_list_", "toolgate_e", "toolgate_server_x_",
		// Prefixes upstream servers' tools are published under.
		"toolgate_escalate_", "toolgate_github_"} {
		if _, err := ParsePrefix(bad); err == nil {
			t.Errorf("ParsePrefix(%q) accepted", bad)
		}
	}
}

func TestServerTools(t *testing.T) {
	tools, err := Build(Config{Version: "v1.2.3", DisabledReason: "no workspace", Status: func() map[string]any {
		return map[string]any{"confinement": "test"}
	}})
	if err != nil {
		t.Fatal(err)
	}
	// Without a control plane: no servers, no clients, no backups.
	for _, tl := range tools {
		args := map[string]any{}
		switch tl.ID {
		case "server.read_state":
			args["server"] = "fx"
		case "server.manage_backup":
			args["action"] = "list"
		}
		_, out, err := call(t, tl, args)
		switch tl.ID {
		case "server.read_state", "server.manage_backup":
			if err == nil {
				t.Errorf("%s answered without a control plane: %s", tl.ID, out.Text)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tl.ID, err)
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(out.Text), &m); err != nil {
			t.Fatalf("%s: %v", tl.ID, err)
		}
		if tl.ID == "server.status" && (m["confinement"] != "test" || m["local_tools_disabled"] != "no workspace" || m["version"] != "v1.2.3" ||
			fmt.Sprint(m["servers"]) != "[]") {
			t.Errorf("status = %v", m)
		}
		if tl.ID == "server.list_clients" && fmt.Sprint(m["clients"]) != "[]" {
			t.Errorf("list_clients = %v", m)
		}
	}
	// Every control-plane tool is read-only but manage_backup, a write.
	for _, tl := range tools {
		if ro := tl.Annotations.ReadOnly; ro == (tl.ID == "server.manage_backup") {
			t.Errorf("%s: read-only %v", tl.ID, ro)
		}
	}
	for _, tl := range tools {
		if tl.ID == "server.manage_backup" {
			if acc, err := tl.Access(map[string]any{"action": "list"}); err != nil || acc.Action != kernel.ActionWrite {
				t.Errorf("manage_backup access %+v %v", acc, err)
			}
		}
	}
}

// BenchmarkReadFile measures one read_file of a small file (resolution, open with
// O_NONBLOCK, fstat, read), without the kernel.
func BenchmarkReadFile(b *testing.B) {
	parent := b.TempDir()
	os.WriteFile(filepath.Join(parent, "f.txt"), []byte(strings.Repeat("line\n", 100)), 0o644)
	ws, err := workspace.Open(parent)
	if err != nil {
		b.Fatal(err)
	}
	defer ws.Close()
	args := map[string]any{"path": "f.txt"}
	for b.Loop() {
		if _, err := readFile(context.Background(), ws, args); err != nil {
			b.Fatal(err)
		}
	}
}

// A hunk whose long context ends in a line found nowhere, against a long file of
// identical lines, used to cost lines × context comparisons (86 s for 20k × 1M through
// the binary; hours for larger hunks). The search budget refuses it, and a patch whose
// context sits at its stated line still applies in the same large file.
func TestApplyPathologicalSearchBounded(t *testing.T) {
	in := splitText(strings.Repeat("a\n", 1_000_000))
	const k = 20000
	hs, err := parsePatch("--- a/f\n+++ b/f\n@@ -1,20001 +1,20001 @@\n" + strings.Repeat(" a\n", k) + "-b\n+c\n")
	if err != nil {
		t.Fatal(err)
	}
	_, err = apply("f", in, hs[0].hunks)
	if err == nil || !strings.Contains(err.Error(), "line comparisons") {
		t.Fatalf("apply = %v; want the search-budget refusal", err)
	}
	hs, err = parsePatch("--- a/f\n+++ b/f\n@@ -999990,3 +999990,3 @@\n a\n-a\n+b\n a\n")
	if err != nil {
		t.Fatal(err)
	}
	out, err := apply("f", in, hs[0].hunks)
	if err != nil || len(out.lines) != 1_000_000 || out.lines[999990] != "b" {
		t.Errorf("exact-position hunk in a large file: %v", err)
	}
}

// A file of millions of empty lines is refused before it is split into lines (a
// 64 MiB one cost 2.3 GB of memory), and left unchanged.
func TestPatchManyLinesRefused(t *testing.T) {
	f := newFixture(t)
	content := strings.Repeat("\n", maxPatchLines+1)
	p := filepath.Join(f.dir, "nl")
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err := call(t, f.tool(t, "local.patch_file"), map[string]any{"patch": "--- a/nl\n+++ b/nl\n@@ -1,1 +1,1 @@\n-\n+x\n"})
	if err == nil || !strings.Contains(err.Error(), "lines are not patched") {
		t.Errorf("patch of a %d-line file = %v; want a refusal", maxPatchLines+1, err)
	}
	if b, _ := os.ReadFile(p); string(b) != content {
		t.Errorf("the file changed")
	}
}

// A data directory inside the workspace (as with a workspace at $HOME and the default
// data directory under it) is refused: the file tools could read its keys and rewrite
// grants. Outside it, the same workspace builds.
func TestBuildRefusesDataDirInsideWorkspace(t *testing.T) {
	f := newFixture(t)
	for _, dd := range []string{f.dir, filepath.Join(f.dir, ".local", "share", "toolgate"), filepath.Join(f.dir, "src")} {
		if _, err := Build(Config{NoConfined: true, Workspace: f.ws, DataDir: dd}); err == nil || !strings.Contains(err.Error(), "inside the workspace") {
			t.Errorf("Build with data directory %s = %v; want a refusal", dd, err)
		}
	}
	if _, err := os.Stat(filepath.Join(f.dir, ".local")); err == nil {
		t.Errorf("the refusal created the data directory")
	}
	if _, err := Build(Config{NoConfined: true, Workspace: f.ws, DataDir: filepath.Join(f.parent, "data")}); err != nil {
		t.Errorf("data directory outside the workspace refused: %v", err)
	}
}

// A huge file without a newline (sparse, so a hostile repository can ship terabytes
// of it) is read in bounded memory: the answer is the first 256 KiB and the marker. It
// used to be read as one line, costing twice the file's size.
func TestReadHugeLineBoundedMemory(t *testing.T) {
	f := newFixture(t)
	p := filepath.Join(f.dir, "sparse")
	fh, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := fh.Truncate(256 << 20); err != nil {
		t.Fatal(err)
	}
	fh.Close()
	tl := f.tool(t, "local.read_file")
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, out, err := call(t, tl, map[string]any{"path": "sparse"})
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 16<<20 {
		t.Errorf("reading a 256 MiB one-line file allocated %d MiB", alloc>>20)
	}
	if !strings.Contains(out.Text, "[truncated: line 1 is longer than 262144 bytes; call read_file with byte_offset=262144 to continue]") ||
		len(out.Text) < MaxReadBytes {
		t.Errorf("answer: %d bytes, ends %q", len(out.Text), out.Text[max(0, len(out.Text)-120):])
	}
	// A later line past a huge one is still found, and skipping costs no memory either.
	if err := os.WriteFile(p, append(make([]byte, 8<<20), []byte("\nsecond\n")...), 0o644); err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, out, err = call(t, tl, map[string]any{"path": "sparse", "offset": 2})
	runtime.ReadMemStats(&after)
	if err != nil || out.Text != "second\n" {
		t.Errorf("offset past a long line = %v, %v", out, err)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 4<<20 {
		t.Errorf("skipping an 8 MiB line allocated %d MiB", alloc>>20)
	}
}

// A pattern of long literal runs between ** segments, against deep paths of long
// names, used to cost milliseconds per entry (a quarter of an hour over a full walk).
// The matching budget stops the listing and says so; an ordinary pattern over the same
// tree still lists every match.
func TestListFilesCostlyGlobBounded(t *testing.T) {
	f := newFixture(t)
	deep := f.dir
	for i := 0; i < 16; i++ { // under PATH_MAX, so the fixture can be made by absolute path
		deep = filepath.Join(deep, strings.Repeat("a", 200)+string(rune('a'+i)))
	}
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	const files = 6000
	for i := 0; i < files; i++ {
		if err := os.WriteFile(filepath.Join(deep, fmt.Sprintf("%s%05d.go", strings.Repeat("a", 200), i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tl := f.tool(t, "local.list_files")
	costly := strings.Repeat("**/*"+strings.Repeat("a", 200)+"b/", 4) + "**/x"
	_, out, err := call(t, tl, map[string]any{"pattern": costly, "max_depth": 32, "max_entries": 10000})
	if err != nil || !strings.Contains(out.Text, "matching the pattern became too costly") {
		t.Errorf("costly pattern: %v, %v", out, err)
	}
	_, out, err = call(t, tl, map[string]any{"pattern": "**/*.go", "max_depth": 32, "max_entries": 10000})
	if err != nil || strings.Count(out.Text, ".go\n") != files+1 || strings.Contains(out.Text, "truncated") {
		t.Errorf("ordinary pattern: %d matches (want %d), %v", strings.Count(out.Text, ".go\n"), files+1, err)
	}
}

// Reading by lines never scans more than maxLineScan bytes to reach its offset (a
// sparse file can be terabytes and file tools have no deadline); the answer says to
// use byte_offset. Lines before the bound are still reached.
func TestReadFarOffsetBounded(t *testing.T) {
	f := newFixture(t)
	old := maxLineScan
	maxLineScan = 1 << 20
	t.Cleanup(func() { maxLineScan = old })
	p := filepath.Join(f.dir, "big")
	if err := os.WriteFile(p, []byte(strings.Repeat("x\n", 1<<20)), 0o644); err != nil {
		t.Fatal(err)
	}
	tl := f.tool(t, "local.read_file")
	_, out, err := call(t, tl, map[string]any{"path": "big", "offset": 900000, "limit": 1})
	if err != nil || !strings.HasPrefix(out.Text, "[not read: line 900000 lies more than 1048576 bytes into big") {
		t.Errorf("far offset = %v, %v", out, err)
	}
	_, out, err = call(t, tl, map[string]any{"path": "big", "offset": 500000, "limit": 1})
	if err != nil || !strings.HasPrefix(out.Text, "x\n[truncated: showed lines 500000–500000") {
		t.Errorf("offset within the bound = %v, %v", out, err)
	}
}
