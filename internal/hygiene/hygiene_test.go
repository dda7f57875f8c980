package hygiene

import (
	"bufio"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/testenv"
)

// TestEveryPackageHasADocComment keeps package docs from silently disappearing: each
// non-test package must explain its role in at least one file's package comment.
func TestEveryPackageHasADocComment(t *testing.T) {
	root := testenv.RepoRoot(t)
	docs := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		dir := filepath.Dir(path)
		if _, seen := docs[dir]; !seen {
			docs[dir] = false
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.PackageClauseOnly|parser.ParseComments)
		if err != nil {
			t.Errorf("parse %s: %v", path, err)
			return nil
		}
		if f.Doc != nil && strings.TrimSpace(f.Doc.Text()) != "" {
			docs[dir] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for dir, ok := range docs {
		if !ok {
			rel, _ := filepath.Rel(root, dir)
			t.Errorf("package %s has no package doc comment", rel)
		}
	}
}

// TestSQLiteRuntimePinned guards the fragile modernc.org/libc pin: sqlite v1.62.0 must be
// built with exactly the libc its own go.mod names, and a dependency bump can raise it.
func TestSQLiteRuntimePinned(t *testing.T) {
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Version}}", "modernc.org/sqlite", "modernc.org/libc")
	cmd.Dir = testenv.RepoRoot(t)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	got := strings.Fields(string(out))
	if len(got) != 2 || got[0] != "v1.62.0" || got[1] != "v1.80.1" {
		t.Fatalf("modernc.org/sqlite, modernc.org/libc = %v; want [v1.62.0 v1.80.1] (sqlite pins its libc)", got)
	}
}

// TestMainStaysTiny keeps cmd/toolgate a thin adapter over internal/cli.
func TestMainStaysTiny(t *testing.T) {
	f, err := os.Open(filepath.Join(testenv.RepoRoot(t), "cmd", "toolgate", "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := 0
	for s := bufio.NewScanner(f); s.Scan(); {
		n++
	}
	if n > 40 {
		t.Errorf("cmd/toolgate/main.go has %d lines; keep behaviour in internal/cli", n)
	}
}
