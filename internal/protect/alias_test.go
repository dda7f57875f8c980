package protect

import (
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
)

func TestRootAliases(t *testing.T) {
	dir, _ := filepath.EvalSymlinks(t.TempDir())
	os.MkdirAll(filepath.Join(dir, "shared", "vscode"), 0o755)
	os.MkdirAll(filepath.Join(dir, "repo.git"), 0o755)
	os.WriteFile(filepath.Join(dir, "repo.git", "commondir"), []byte("../main.git\n"), 0o644)
	os.WriteFile(filepath.Join(dir, ".git"), []byte("gitdir: repo.git\n"), 0o644)
	os.Symlink("shared/vscode", filepath.Join(dir, ".vscode"))
	os.Symlink("defs", filepath.Join(dir, ".agents"))                          // stands for .agents/tools
	os.Symlink(filepath.Join(dir, "abs-target"), filepath.Join(dir, ".envrc")) // absolute, inside
	os.Symlink("/etc/hostname", filepath.Join(dir, ".mcp.json"))               // outside: not an alias
	os.Symlink("docs", filepath.Join(dir, "plain"))                            // not protected
	got, err := RootAliases(dir)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	want := []string{"abs-target", "defs/tools", "main.git", "repo.git", "shared/vscode"}
	if !slices.Equal(got, want) {
		t.Errorf("RootAliases = %v; want %v", got, want)
	}
}

func TestUnder(t *testing.T) {
	for _, c := range []struct {
		rel, root string
		want      bool
	}{
		{"shared/vscode/tasks.json", "shared/vscode", true}, {"Shared/VSCode", "shared/vscode", true},
		{"shared/vscodex", "shared/vscode", false}, {"shared", "shared/vscode", false},
	} {
		if got := Under(c.rel, c.root); got != c.want {
			t.Errorf("Under(%q, %q) = %v", c.rel, c.root, got)
		}
	}
}

// A FIFO where a pointer file should be is not read (opening it would block until a
// writer came): the check returns at once.
func TestPointerFIFONeverBlocks(t *testing.T) {
	dir, _ := filepath.EvalSymlinks(t.TempDir())
	os.MkdirAll(filepath.Join(dir, ".git"), 0o755)
	if err := syscall.Mkfifo(filepath.Join(dir, ".git", "commondir"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo.git"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := RootAliases(dir); err != nil || len(got) != 0 {
		t.Errorf("RootAliases = %v, %v", got, err)
	}
}
