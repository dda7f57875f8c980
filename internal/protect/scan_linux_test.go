package protect

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// tree builds files (path → content; a trailing "/" makes a directory, "->x" a link).
func tree(t *testing.T, files map[string]string) string {
	t.Helper()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for p, c := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		switch {
		case strings.HasSuffix(p, "/"):
			err = os.MkdirAll(full, 0o755)
		case strings.HasPrefix(c, "->"):
			err = os.Symlink(strings.TrimPrefix(c, "->"), full)
		default:
			err = os.WriteFile(full, []byte(c), 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func rels(dir string, abs []string) []string {
	var out []string
	for _, a := range abs {
		r, _ := filepath.Rel(dir, a)
		out = append(out, filepath.ToSlash(r))
	}
	slices.Sort(out)
	return out
}

func TestScanFindsWhatBashMustNotChange(t *testing.T) {
	dir := tree(t, map[string]string{
		".git/config": "[core]\n", ".git/HEAD": "ref: refs/heads/main\n", ".mcp.json": "{}", ".VSCode/settings.json": "{}",
		".agents/tools/main/x.json": "{}", ".agents/skills/s.md": "s", "src/main.go": "package main",
		"vendor/lib/.git/config": "x", "a/b/c/.GIT/HEAD": "x", "src/.vscode/settings.json": "{}",
		"node_modules/p/.gitattributes": "* text", ".claude": "->shared/claude", "shared/claude/settings.json": "{}",
		".config/mise/config.toml": "x", "README.md": "r", "node_modules/q/.git/HEAD": "x", "node_modules/q/.vscode/x": "x",
		"pkgs/web/.config/mise.toml": "x", "node_modules/.agents/tools/x": "x",
	})
	s, err := Scan(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Inside node_modules only .git counts (packages ship .gitattributes and .vscode).
	want := []string{".VSCode", ".agents/tools", ".config/mise", ".git", ".mcp.json", "a/b/c/.GIT", "node_modules/q/.git",
		"pkgs/web/.config/mise.toml", "shared/claude", "src/.vscode", "vendor/lib/.git"}
	if got := rels(dir, s.ReadOnlyPaths()); !slices.Equal(got, want) {
		t.Errorf("read-only paths = %v\nwant %v", got, want)
	}
	// Nothing changed: nothing to report.
	if ch, err := s.Changes(); err != nil || len(ch) != 0 {
		t.Errorf("changes of an untouched workspace = %v, %v", ch, err)
	}
}

func TestChangesAndRemove(t *testing.T) {
	dir := tree(t, map[string]string{".git/config": "x", ".envrc": "old", "src/a.go": "a", ".vscode": "->vs"})
	s, err := Scan(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	put := func(p, c string) {
		full := filepath.Join(dir, p)
		os.MkdirAll(filepath.Dir(full), 0o755)
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// What a command might do: plant harness configs, a repository in a new directory, a
	// hook hidden in a directory it then makes unreadable, replace a protected file, and
	// fill the target of a dangling protected link.
	put(".mcp.json", `{"mcpServers":{"x":{"command":"sh"}}}`)
	put(".CLAUDE/settings.json", "{}")
	put("deep/er/.git/config", "[core]\nfsmonitor = evil\n")
	put("hidden/x/.git/hooks/pre-commit", "evil")
	os.Chmod(filepath.Join(dir, "hidden", "x"), 0)
	os.Rename(filepath.Join(dir, ".envrc"), filepath.Join(dir, "old-envrc"))
	put(".envrc", "evil")
	put("vs/tasks.json", "{}")
	put("src/b.go", "b") // an ordinary change stays
	ch, err := s.Changes()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range ch {
		got = append(got, c.Path)
	}
	want := []string{".CLAUDE", ".envrc", ".mcp.json", "deep/er/.git", "hidden/x/.git", "vs"}
	if !slices.Equal(got, want) {
		t.Fatalf("changes = %v; want %v", got, want)
	}
	for _, c := range ch {
		if c.Created == (c.Path == ".envrc") {
			t.Errorf("%s: created = %v", c.Path, c.Created)
		}
	}
	s.Remove(ch)
	for _, c := range ch {
		if !c.Removed || c.Err != nil {
			t.Errorf("%s not removed: %v", c.Path, c.Err)
		}
		if _, err := os.Lstat(filepath.Join(dir, c.Path)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s still there", c.Path)
		}
	}
	for _, keep := range []string{"src/b.go", "old-envrc", "deep/er", "hidden/x", ".git/config", ".vscode"} {
		if _, err := os.Lstat(filepath.Join(dir, keep)); err != nil {
			t.Errorf("%s was removed: %v", keep, err)
		}
	}
	if ch, _ := s.Changes(); len(ch) != 0 {
		t.Errorf("changes after removal = %v", ch)
	}
}

// A removal never follows a link: a directory swapped for a link to the outside after
// the scan does not redirect it.
func TestRemoveDoesNotFollowLinks(t *testing.T) {
	dir := tree(t, map[string]string{"sub/.git/config": "x"})
	outside := tree(t, map[string]string{".git/config": "outside"})
	s, err := Scan(filepath.Join(dir), nil)
	if err != nil {
		t.Fatal(err)
	}
	os.RemoveAll(filepath.Join(dir, "sub"))
	os.Symlink(outside, filepath.Join(dir, "sub"))
	ch := []Change{{Path: "sub/.git"}}
	s.Remove(ch)
	if ch[0].Removed {
		t.Errorf("removed through a link")
	}
	if b, err := os.ReadFile(filepath.Join(outside, ".git", "config")); err != nil || string(b) != "outside" {
		t.Errorf("outside file changed: %q %v", b, err)
	}
}

// The other names of a protected file's inode are kept read-only too (a person's hard
// link; bash cannot make one across the read-only mount).
func TestHardLinkedProtectedFile(t *testing.T) {
	dir := tree(t, map[string]string{".envrc": "x", ".vscode/settings.json": "{}", ".git/objects/ab/cd": "obj"})
	if err := os.Link(filepath.Join(dir, ".envrc"), filepath.Join(dir, "notes.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(filepath.Join(dir, ".vscode", "settings.json"), filepath.Join(dir, "src-settings.json")); err != nil {
		t.Fatal(err)
	}
	os.Link(filepath.Join(dir, ".git", "objects", "ab", "cd"), filepath.Join(dir, "obj-copy"))
	s, err := Scan(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := rels(dir, s.ReadOnlyPaths())
	for _, p := range []string{"notes.txt", "src-settings.json"} {
		if !slices.Contains(got, p) {
			t.Errorf("%s (a hard link of a protected file) is not read-only: %v", p, got)
		}
	}
	if slices.Contains(got, "obj-copy") {
		t.Errorf("object files are not followed, yet obj-copy is listed: %v", got)
	}
}

// A .git file pointing at a repository directory inside the workspace, and a
// repository's commondir, protect what they point at.
func TestGitPointers(t *testing.T) {
	dir := tree(t, map[string]string{".git": "gitdir: repo.git\n", "repo.git/config": "x", "repo.git/commondir": "../common.git\n",
		"common.git/hooks/x": "h", "sub/.git/commondir": "../../shared.git", "shared.git/config": "x",
		"elsewhere/.git": "gitdir: /nonexistent/outside\n"})
	s, err := Scan(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := rels(dir, s.ReadOnlyPaths())
	for _, p := range []string{".git", "repo.git", "common.git", "sub/.git", "shared.git"} {
		if !slices.Contains(got, p) {
			t.Errorf("%s is not read-only: %v", p, got)
		}
	}
}

// A protected link to the workspace itself would need the whole workspace read-only:
// bash refuses instead. One to a directory above it is harmless (what it names there is
// outside, where a command cannot write) and refuses nothing.
func TestAliasOfTheWholeWorkspaceRefused(t *testing.T) {
	dir := tree(t, map[string]string{".vscode": "->."})
	if _, err := Scan(dir, nil); err == nil || !strings.Contains(err.Error(), "whole writable root") {
		t.Errorf("Scan = %v", err)
	}
	dir = tree(t, map[string]string{".vscode": "->.."})
	if s, err := Scan(dir, nil); err != nil || len(s.ReadOnlyPaths()) != 0 {
		t.Errorf("Scan with a link above = %v, %v", s, err)
	}
}

// Link loops among protected names end (a bounded number of hops) instead of hanging.
func TestAliasLoops(t *testing.T) {
	dir := tree(t, map[string]string{".vscode": "->.vscode", ".claude": "->loop-a", "loop-a": "->.claude"})
	s, err := Scan(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ch, err := s.Changes(); err != nil || len(ch) != 0 {
		t.Errorf("changes = %v, %v", ch, err)
	}
}

func BenchmarkScan(b *testing.B) {
	dir := b.TempDir()
	for i := 0; i < 1000; i++ {
		d := filepath.Join(dir, "pkg", string(rune('a'+i%26)), "m"+strings.Repeat("x", i%7), "d"+string(rune('a'+i/26)))
		os.MkdirAll(d, 0o755)
		for j := 0; j < 10; j++ {
			os.WriteFile(filepath.Join(d, "f"+string(rune('a'+j))+".go"), nil, 0o644)
		}
	}
	os.MkdirAll(filepath.Join(dir, ".git", "objects"), 0o755)
	b.ResetTimer()
	for b.Loop() {
		s, err := Scan(dir, nil)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := s.Changes(); err != nil {
			b.Fatal(err)
		}
	}
}

// As an unprivileged user (toolgate should not run as root), a command can chmod 000 a
// directory to hide a repository it made there from the check; the check reads it
// anyway (the directory is the user's own) and puts its mode back. Run as root, the
// test re-runs itself as nobody.
func TestHiddenUnderUnreadableDirectory(t *testing.T) {
	if os.Getuid() == 0 {
		if os.Getenv("TOOLGATE_PROTECT_CHILD") != "" {
			t.Fatal("still root in the child")
		}
		dir, err := os.MkdirTemp("", "toolgate-protect-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		exe, _ := os.Executable()
		data, err := os.ReadFile(exe)
		if err != nil {
			t.Fatal(err)
		}
		bin := filepath.Join(dir, "protect.test")
		os.WriteFile(bin, data, 0o755)
		ws := filepath.Join(dir, "ws")
		os.Mkdir(ws, 0o755)
		for _, p := range []string{dir, ws} {
			os.Chmod(p, 0o755)
		}
		if err := os.Chown(ws, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, "-test.run=^TestHiddenUnderUnreadableDirectory$", "-test.v", "-test.count=1")
		cmd.Dir = "/"
		cmd.Env = append(os.Environ(), "TOOLGATE_PROTECT_CHILD="+ws)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{}}}
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "--- PASS: TestHiddenUnderUnreadableDirectory") {
			t.Fatalf("as nobody: %v\n%s", err, out)
		}
		return
	}
	dir := os.Getenv("TOOLGATE_PROTECT_CHILD")
	if dir == "" {
		dir = tree(t, map[string]string{})
	}
	os.MkdirAll(filepath.Join(dir, "perm", "keep"), 0o755)
	os.Chmod(filepath.Join(dir, "perm"), 0)
	s, err := Scan(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(filepath.Join(dir, "perm")); err != nil || fi.Mode().Perm() != 0 {
		t.Errorf("the scan changed perm's mode: %v %v", fi.Mode(), err)
	}
	os.MkdirAll(filepath.Join(dir, "hidden", "x", ".git", "hooks"), 0o755)
	os.WriteFile(filepath.Join(dir, "hidden", "x", ".git", "config"), []byte("[core]\n\tfsmonitor = evil\n"), 0o644)
	os.Chmod(filepath.Join(dir, "hidden", "x"), 0)
	os.Chmod(filepath.Join(dir, "hidden"), 0o100)
	ch, err := s.Changes()
	if err != nil || len(ch) != 1 || ch[0].Path != "hidden/x/.git" {
		t.Fatalf("changes = %v, %v", ch, err)
	}
	for p, want := range map[string]fs.FileMode{"hidden": 0o100, "hidden/x": 0} {
		if fi, err := os.Lstat(filepath.Join(dir, p)); err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s mode = %v, %v; want %v", p, fi.Mode(), err, want)
		}
	}
	s.Remove(ch)
	if !ch[0].Removed {
		t.Fatalf("not removed: %v", ch[0].Err)
	}
	os.Chmod(filepath.Join(dir, "hidden"), 0o755)
	os.Chmod(filepath.Join(dir, "hidden", "x"), 0o755)
	os.Chmod(filepath.Join(dir, "perm"), 0o755)
	if _, err := os.Lstat(filepath.Join(dir, "hidden", "x", ".git")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf(".git still there: %v", err)
	}
}

// A planted tree too deep to remove is renamed aside, where it no longer acts as a
// protected path, and the change says so.
func TestTooDeepToRemoveIsRenamedAside(t *testing.T) {
	dir := tree(t, map[string]string{})
	s, err := Scan(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range append([]string{".vscode"}, slices.Repeat([]string{"d"}, 4200)...) {
		if err := unix.Mkdirat(fd, name, 0o755); err != nil {
			t.Fatal(err)
		}
		next, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		unix.Close(fd)
		if err != nil {
			t.Fatal(err)
		}
		fd = next
	}
	unix.Close(fd)
	ch, err := s.Changes()
	if err != nil || len(ch) != 1 {
		t.Fatalf("changes = %v, %v", ch, err)
	}
	s.Remove(ch)
	if ch[0].Removed || ch[0].Err == nil || !strings.Contains(ch[0].Err.Error(), "renamed to") {
		t.Errorf("change = %+v", ch[0])
	}
	if _, err := os.Lstat(filepath.Join(dir, ".vscode")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf(".vscode is still there")
	}
	if ch, _ := s.Changes(); len(ch) != 0 {
		t.Errorf("the renamed tree still counts: %v", ch)
	}
	// t.TempDir cannot remove a tree that deep by path; take it down from the inside.
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.Contains(e.Name(), unremovedSuffix) {
			removeDeep(t, dir, e.Name())
		}
	}
}

func removeDeep(t *testing.T, dir, name string) {
	t.Helper()
	var fds []int
	fd, _ := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	fds = append(fds, fd)
	names := []string{name}
	for {
		next, err := unix.Openat(fd, names[len(names)-1], unix.O_RDONLY|unix.O_DIRECTORY, 0)
		if err != nil {
			break
		}
		fds, fd = append(fds, next), next
		names = append(names, "d")
	}
	for i := len(fds) - 1; i >= 0; i-- {
		unix.Unlinkat(fds[i], names[i], unix.AT_REMOVEDIR)
		unix.Close(fds[i])
	}
}
