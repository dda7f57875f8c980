package workspace

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// layout builds parent/{W, W_evil/x, secret} and the links of security.md §1.1 inside W.
func layout(t testing.TB) (ws *Workspace, parent string) {
	t.Helper()
	parent = t.TempDir()
	w := filepath.Join(parent, "W")
	mk := func(p, content string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mk(filepath.Join(w, "src", "main.go"), "package main\n")
	mk(filepath.Join(w, "README.md"), "hi\n")
	mk(filepath.Join(parent, "W_evil", "x"), "evil\n")
	mk(filepath.Join(parent, "secret"), "s3cret\n")
	links := map[string]string{
		"abs":       "/etc/passwd",
		"rel":       "../secret",
		"d":         "/",
		"selfabs":   w,
		"inside":    "src/main.go",
		"srclink":   "src",
		"deep":      "src/../../secret",
		"loop1":     "loop2",
		"loop2":     "loop1",
		"src/up":    "..",
		"src/upup":  "../..",
		"dotdot":    "src/up/README.md",
		"chain":     "srclink/up/inside",
		"hooks":     ".git/hooks",
		"sib":       "../W_evil/x",
		"emptydir2": "nonexistent/dir",
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(w, name)); err != nil {
			t.Fatal(err)
		}
	}
	ws, err := Open(w)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	return ws, parent
}

// outsideErr reports whether err is the workspace's refusal of a path outside it.
func outsideErr(err error) bool {
	var oe *OutsideError
	return errors.As(err, &oe)
}

func TestRelRefusesEscapes(t *testing.T) {
	ws, _ := layout(t)
	for _, p := range []string{
		"", "..", "../W_evil/x", "src/../../secret", "a/../b", "/etc/passwd", ws.Dir() + "/README.md",
		"abs", "rel", "d", "d/etc/passwd", "selfabs", "selfabs/README.md", "deep", "src/upup",
		"src/upup/secret", "sib", "README.md\x00", "\x00", "src/\x00/x", strings.Repeat("a/", 3000),
	} {
		got, err := ws.Rel(p)
		if !outsideErr(err) {
			t.Errorf("Rel(%q) = %q, %v; want an *OutsideError", p, got, err)
		}
	}
}

func TestRelResolvesInside(t *testing.T) {
	ws, _ := layout(t)
	for p, want := range map[string]string{
		".":                 ".",
		"./":                ".",
		"README.md":         "README.md",
		"./src//main.go":    "src/main.go",
		"inside":            "src/main.go",
		"srclink/main.go":   "src/main.go",
		"src/up":            ".",
		"src/up/README.md":  "README.md",
		"dotdot":            "README.md",
		"chain":             "src/main.go",
		"new/file.txt":      "new/file.txt",
		"srclink/new/x":     "src/new/x",
		"hooks/pre-commit":  ".git/hooks/pre-commit",
		"emptydir2/x":       "nonexistent/dir/x",
		"README.md/x/y":     "README.md/x/y",
		"src/main.go/../..": "", // refused below
	} {
		if want == "" {
			continue
		}
		got, err := ws.Rel(p)
		if err != nil || got != want {
			t.Errorf("Rel(%q) = %q, %v; want %q", p, got, err, want)
		}
	}
}

func TestRelLinkLoop(t *testing.T) {
	ws, _ := layout(t)
	_, err := ws.Rel("loop1")
	if !errors.Is(err, ErrTooManyLinks) || !strings.Contains(err.Error(), "too many levels") {
		t.Errorf("Rel(loop1) = %v; want a loop error", err)
	}
}

func TestHasLink(t *testing.T) {
	ws, _ := layout(t)
	for p, want := range map[string]bool{
		"README.md": false, "src/main.go": false, "srclink/main.go": true, "inside": true,
		"new/x": false, ".": false, "src/new/deeper": false,
	} {
		got, err := ws.HasLink(p)
		if err != nil || got != want {
			t.Errorf("HasLink(%q) = %v, %v; want %v", p, got, err, want)
		}
	}
}

func TestIsProtected(t *testing.T) {
	for p, want := range map[string]bool{
		".git/hooks/pre-commit": true, ".git/hooks": true, ".git/config": true, ".gitattributes": true,
		"sub/.gitattributes": true, "sub/.git/hooks/x": true, ".git": true, ".git/info/attributes": true,
		".agents/tools/main/x.json": true, ".agents": false, ".toolgate/x": true, ".gitmodules": true,
		".git/objects/ab/cd": true, ".git/HEAD": true, ".mcp.json": true, ".vscode/settings.json": true,
		".GIT/config": true, "README.md": false, ".github/workflows/x.yml": false,
		"src/.agents/tools": false, ".agents/skills/x.md": false, ".": false, "gitattributes": false,
	} {
		if got := IsProtected(p); got != want {
			t.Errorf("IsProtected(%q) = %v; want %v", p, got, want)
		}
	}
}

func TestOpenErrors(t *testing.T) {
	f := filepath.Join(t.TempDir(), "file")
	os.WriteFile(f, nil, 0o644)
	for _, d := range []string{"", f, filepath.Join(t.TempDir(), "missing")} {
		if ws, err := Open(d); err == nil {
			ws.Close()
			t.Errorf("Open(%q) succeeded", d)
		}
	}
}

func TestOpenResolvesOwnLink(t *testing.T) {
	parent := t.TempDir()
	real := filepath.Join(parent, "real")
	os.Mkdir(real, 0o755)
	os.Symlink(real, filepath.Join(parent, "link"))
	ws, err := Open(filepath.Join(parent, "link"))
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	if ws.Dir() != real {
		t.Errorf("Dir() = %q; want %q", ws.Dir(), real)
	}
}

// FuzzRel checks the invariant that matters: whatever the input, Rel either refuses or
// returns a clean relative path that os.Root also resolves inside the workspace, and it
// never panics.
func FuzzRel(f *testing.F) {
	for _, s := range []string{".", "a", "../x", "/etc", "a/../b", "src/up/README.md", "d/etc/passwd",
		"rel", "abs", "chain", "x\x00y", "srclink/../..", "./././a", "a//b/", "loop1", "hooks/x"} {
		f.Add(s)
	}
	ws, _ := layout(f)
	f.Fuzz(func(t *testing.T, p string) {
		got, err := ws.Rel(p)
		if err != nil {
			return
		}
		if got == "" || strings.HasPrefix(got, "/") || got == ".." || strings.HasPrefix(got, "../") ||
			strings.Contains(got, "/../") || strings.HasSuffix(got, "/..") || strings.IndexByte(got, 0) >= 0 {
			t.Fatalf("Rel(%q) = %q: not a clean inside path", p, got)
		}
		// The resolved path must not escape when os.Root opens it either.
		if _, err := ws.Root().Lstat(got); err != nil && isEscape(err) {
			t.Fatalf("Rel(%q) = %q but os.Root says it escapes", p, got)
		}
	})
}

// BenchmarkRel measures resolving a four-component path with one link in it, the work
// every file-tool call does before touching the file.
func BenchmarkRel(b *testing.B) {
	ws, _ := layout(b)
	for b.Loop() {
		if _, err := ws.Rel("srclink/new/deeper/file.go"); err != nil {
			b.Fatal(err)
		}
	}
}

func TestEncloses(t *testing.T) {
	ws, parent := layout(t)
	w := ws.Dir()
	outLink := filepath.Join(parent, "tow")
	if err := os.Symlink(filepath.Join(w, "src"), outLink); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]bool{
		w:                                       true,
		filepath.Join(w, "src"):                 true,
		filepath.Join(w, "new", "deeper", "db"): true,  // not there yet
		filepath.Join(outLink, "data"):          true,  // a link outside leading in
		filepath.Join(w, "d", "tmp"):            false, // a link inside leading out: the real place is /tmp
		filepath.Join(parent, "W_evil"):         false,
		parent:                                  false,
		filepath.Join(parent, "other", "db"):    false,
		"/":                                     false,
	} {
		got, err := ws.Encloses(p)
		if err != nil || got != want {
			t.Errorf("Encloses(%s) = %v, %v; want %v", p, got, err, want)
		}
	}
}
