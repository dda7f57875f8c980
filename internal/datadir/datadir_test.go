package datadir_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/toolgate/toolgate/internal/datadir"
	"github.com/toolgate/toolgate/internal/testenv"
)

func mode(t *testing.T, p string) os.FileMode {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

// withUmask runs fn under umask m (the process's, restored after; these tests are
// not parallel).
func withUmask(m int, fn func()) {
	old := syscall.Umask(m)
	defer syscall.Umask(old)
	fn()
}

// First use creates the directory, its missing parents and a secret file with exactly
// 0700/0600 whatever the umask (0 would give 0777/0666, 0777 would give 0000).
func TestCreatesPrivateWhateverTheUmask(t *testing.T) {
	for _, um := range []int{0, 0o022, 0o077, 0o777} {
		base := testenv.PrivateDir(t)
		dir := filepath.Join(base, "a", "b", "data")
		withUmask(um, func() {
			got, err := datadir.Prepare(dir)
			if err != nil {
				t.Fatalf("umask %04o: %v", um, err)
			}
			if got != dir {
				t.Errorf("Prepare = %s, want %s", got, dir)
			}
			f, created, err := datadir.OpenFile("owner token", filepath.Join(dir, datadir.OwnerTokenFile), os.O_WRONLY|os.O_CREATE|os.O_EXCL)
			if err != nil || !created {
				t.Fatalf("umask %04o: create: %v %v", um, created, err)
			}
			f.Close()
		})
		for _, p := range []string{filepath.Join(base, "a"), filepath.Join(base, "a", "b"), dir} {
			if m := mode(t, p); m != 0o700 {
				t.Errorf("umask %04o: %s has mode %04o, want 0700", um, p, m)
			}
		}
		if m := mode(t, filepath.Join(dir, datadir.OwnerTokenFile)); m != 0o600 {
			t.Errorf("umask %04o: token mode %04o, want 0600", um, m)
		}
		// A second Prepare accepts what the first made.
		if _, err := datadir.Prepare(dir); err != nil {
			t.Errorf("umask %04o: second Prepare: %v", um, err)
		}
	}
}

// unsafe asserts err is an *UnsafeError naming path and a fix containing fix.
func unsafe(t *testing.T, what string, err error, path, fix string) {
	t.Helper()
	var ue *datadir.UnsafeError
	if !errors.As(err, &ue) || !errors.Is(err, datadir.ErrUnsafe) {
		t.Errorf("%s: err = %v, want an UnsafeError", what, err)
		return
	}
	if ue.Path != path || !strings.Contains(err.Error(), path) || !strings.Contains(ue.Fix, fix) {
		t.Errorf("%s: %v (path %q fix %q); want path %s and a fix with %q", what, err, ue.Path, ue.Fix, path, fix)
	}
}

// The directory and every secret file, each made loose in every way: readable by
// group, by others, writable by group, executable by others; each is refused with the
// chmod that fixes it, and the mode is left exactly as found (never silently reset).
func TestLooseModesRefused(t *testing.T) {
	for _, perm := range []os.FileMode{0o640, 0o604, 0o620, 0o601, 0o644, 0o666} {
		for _, s := range datadir.Secrets {
			dir := testenv.PrivateDir(t)
			p := filepath.Join(dir, s.Name)
			if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
				t.Fatal(err)
			}
			os.Chmod(p, perm)
			_, err := datadir.Prepare(dir)
			unsafe(t, s.Name+" "+perm.String(), err, p, "chmod 600 "+p)
			if m := mode(t, p); m != perm {
				t.Errorf("%s: mode changed to %04o", s.Name, m)
			}
			if s.Name == datadir.OwnerTokenFile {
				_, _, err := datadir.OpenFile(s.What, p, os.O_RDONLY)
				unsafe(t, "OpenFile "+perm.String(), err, p, "chmod 600")
			}
		}
	}
	for _, perm := range []os.FileMode{0o750, 0o705, 0o770, 0o701, 0o711, 0o755, 0o777} {
		dir := testenv.PrivateDir(t)
		os.Chmod(dir, perm)
		_, err := datadir.Prepare(dir)
		unsafe(t, "directory "+perm.String(), err, dir, "chmod 700 "+dir)
		if m := mode(t, dir); m != perm {
			t.Errorf("directory: mode changed to %04o", m)
		}
	}
}

func TestSymlinks(t *testing.T) {
	// A data directory that is a link to a private directory is followed, once.
	target := testenv.PrivateDir(t)
	link := filepath.Join(testenv.PrivateDir(t), "data")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	got, err := datadir.Prepare(link)
	if err != nil || got != target {
		t.Errorf("Prepare(link to private) = %q, %v; want %s", got, err, target)
	}
	// ... but the directory it leads to is checked.
	os.Chmod(target, 0o755)
	_, err = datadir.Prepare(link)
	unsafe(t, "link to a 0755 directory", err, target, "chmod 700 "+target)
	os.Chmod(target, 0o700)

	// A secret file that is a link is refused, even to a private file of ours.
	for _, s := range datadir.Secrets {
		dir := testenv.PrivateDir(t)
		real := filepath.Join(testenv.PrivateDir(t), "real")
		os.WriteFile(real, []byte("tgo_secret"), 0o600)
		p := filepath.Join(dir, s.Name)
		if err := os.Symlink(real, p); err != nil {
			t.Fatal(err)
		}
		_, err := datadir.Prepare(dir)
		unsafe(t, s.Name+" as a link", err, p, "replace the link")
		_, _, err = datadir.OpenFile(s.What, p, os.O_RDONLY)
		unsafe(t, "OpenFile "+s.Name+" as a link", err, p, "replace the link")
		_, _, err = datadir.OpenFile(s.What, p, os.O_RDWR|os.O_CREATE)
		unsafe(t, "OpenFile O_CREATE "+s.Name+" as a link", err, p, "replace the link")
		// A dangling link is not followed to create its target either.
		os.Remove(real)
		_, _, err = datadir.OpenFile(s.What, p, os.O_RDWR|os.O_CREATE)
		unsafe(t, "dangling link "+s.Name, err, p, "replace the link")
		if _, err := os.Lstat(real); err == nil {
			t.Errorf("%s: a dangling link's target was created", s.Name)
		}
	}
}

// Files and directories of another user are refused (root only: it needs chown).
func TestOtherOwnerRefused(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to chown")
	}
	const nobody = 65534
	dir := testenv.PrivateDir(t)
	os.Chown(dir, nobody, nobody)
	_, err := datadir.Prepare(dir)
	unsafe(t, "directory of nobody", err, dir, "chown 0 "+dir)
	if !strings.Contains(err.Error(), "belongs to uid 65534") {
		t.Errorf("message %q does not say whose it is", err)
	}
	for _, s := range datadir.Secrets {
		dir := testenv.PrivateDir(t)
		p := filepath.Join(dir, s.Name)
		os.WriteFile(p, []byte("x"), 0o600)
		os.Chown(p, nobody, nobody)
		_, err := datadir.Prepare(dir)
		unsafe(t, s.Name+" of nobody", err, p, "chown 0 "+p)
		_, _, err = datadir.OpenFile(s.What, p, os.O_RDONLY)
		unsafe(t, "OpenFile "+s.Name+" of nobody", err, p, "chown 0 "+p)
	}
}

func TestNotADirectoryOrFile(t *testing.T) {
	file := filepath.Join(testenv.PrivateDir(t), "f")
	os.WriteFile(file, nil, 0o600)
	if _, err := datadir.Prepare(file); err == nil || !strings.Contains(err.Error(), "is not a directory") {
		t.Errorf("Prepare(a file) = %v", err)
	}
	if _, err := datadir.Prepare(""); err == nil {
		t.Error("Prepare(\"\") succeeded")
	}
	dir := testenv.PrivateDir(t)
	if err := syscall.Mkfifo(filepath.Join(dir, datadir.OwnerTokenFile), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := datadir.Prepare(dir); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("Prepare with a FIFO token = %v", err)
	}
	// Opening it must not block waiting for a writer.
	if _, _, err := datadir.OpenFile("owner token", filepath.Join(dir, datadir.OwnerTokenFile), os.O_RDONLY); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("OpenFile of a FIFO = %v", err)
	}
}
