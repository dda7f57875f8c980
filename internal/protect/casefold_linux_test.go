package protect

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// The case-insensitive and normalising spellings are not theoretical: on a file system
// that ignores case (an ext4 casefold directory, where the kernel has CONFIG_UNICODE
// and the file system the casefold feature), ".GIT/config" is ".git/config".
// The test shows it where it can, so the reason for folding stays visible; Match must
// protect both spellings everywhere regardless.
func TestCaseInsensitiveDirectoryAliases(t *testing.T) {
	dir := t.TempDir()
	ci := filepath.Join(dir, "ci")
	if err := os.Mkdir(ci, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := setCasefold(ci); err != nil {
		t.Skipf("no casefold directories here (%v); Match is checked on names alone in TestMatch", err)
	}
	if err := os.MkdirAll(filepath.Join(ci, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ci, ".GIT", "config"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(ci, ".git", "config")); err != nil || string(b) != "x" {
		t.Fatalf("the casefold directory did not alias .GIT to .git: %q %v", b, err)
	}
	for _, p := range []string{".GIT/config", ".git/config"} {
		if !IsProtected(p) {
			t.Errorf("%s is not protected", p)
		}
	}
}

// setCasefold makes the empty directory dir case-insensitive (chattr +F), where the
// kernel and the file system support it.
func setCasefold(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	flags, err := unix.IoctlGetUint32(int(f.Fd()), unix.FS_IOC_GETFLAGS)
	if err != nil {
		return err
	}
	const fsCasefoldFL = 0x40000000
	return unix.IoctlSetPointerInt(int(f.Fd()), unix.FS_IOC_SETFLAGS, int(flags|fsCasefoldFL))
}
