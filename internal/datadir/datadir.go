// Package datadir owns toolgate's data directory as a private place: it creates the
// directory and its secret files owner-only whatever the umask, and refuses — as ssh
// refuses a private key others can read — a directory or secret file that is open to
// group or others, belongs to another user, or (for a file) is a symbolic link. Every
// command opens the data directory through Prepare (via store.Open), so each one
// refuses to run on a directory that leaks; the message names the file and the
// chmod or chown that fixes it (docs/storage.md, "Permissions").
package datadir

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// File names inside the data directory.
const (
	// DBFile is the SQLite database; SQLite adds DBFile+"-wal", "-shm" and, briefly,
	// "-journal" beside it.
	DBFile = "toolgate.db"
	// OwnerTokenFile holds the owner token of `toolgate serve`.
	OwnerTokenFile = "owner-token"
)

// Secrets are the files of a data directory that hold keys or could reveal them, with
// what a message calls each. Prepare checks every one that exists.
var Secrets = []struct{ Name, What string }{
	{DBFile, "database"},
	{DBFile + "-wal", "database write-ahead log"},
	{DBFile + "-shm", "database shared-memory file"},
	{DBFile + "-journal", "database journal"},
	{OwnerTokenFile, "owner token"},
	// The keystore's master key, which opens the sealed secrets of installed servers;
	// the keystore checks it again when it loads it.
	{"keystore.key", "keystore key"},
}

// ErrUnsafe is wrapped by every refusal of a directory or file that is not private.
var ErrUnsafe = errors.New("not private")

// UnsafeError names a directory or file that is not private, why, and the command
// that makes it so.
type UnsafeError struct {
	What, Path string
	Problem    string // e.g. "can be accessed by group or others (mode 0644)"
	Fix        string // e.g. "chmod 600 /home/me/.local/share/toolgate/owner-token"
}

func (e *UnsafeError) Error() string {
	return fmt.Sprintf("%s %s %s; toolgate refuses to use it until it is private: %s", e.What, e.Path, e.Problem, e.Fix)
}

// Is makes errors.Is(err, ErrUnsafe) true.
func (e *UnsafeError) Is(target error) bool { return target == ErrUnsafe }

// Prepare makes sure dir is a private directory and returns its absolute, resolved
// path, which callers use from then on. A missing directory is created, with any
// missing parents, mode 0700 exactly (umask notwithstanding). A symbolic link to a
// directory is followed once, here: the directory it leads to must pass the checks.
// The directory must belong to the effective user and grant nothing to group or
// others, and so must every secret file present in it (Secrets).
func Prepare(dir string) (string, error) {
	if dir == "" {
		return "", errors.New("data directory: empty path")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("data directory: %w", err)
	}
	if err := mkdirPrivate(abs); err != nil {
		return "", err
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", fmt.Errorf("data directory %s: %w", abs, err)
	}
	fi, err := os.Stat(real)
	if err != nil {
		return "", fmt.Errorf("data directory %s: %w", real, err)
	}
	what := "data directory"
	if real != abs {
		what = fmt.Sprintf("data directory (%s leads to)", abs)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("%s %s is not a directory", what, real)
	}
	if err := checkPrivate(what, real, fi, "700"); err != nil {
		return "", err
	}
	for _, s := range Secrets {
		if err := CheckFile(s.What, filepath.Join(real, s.Name)); err != nil {
			return "", err
		}
	}
	return real, nil
}

// mkdirPrivate creates abs and any missing parents with mode 0700, chmodding each
// directory it made so a umask cannot change that. Directories that exist are left
// as they are (Prepare checks the data directory itself).
func mkdirPrivate(abs string) error {
	if _, err := os.Stat(abs); err == nil {
		return nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("data directory %s: %w", abs, err)
	}
	if parent := filepath.Dir(abs); parent != abs {
		if err := mkdirPrivate(parent); err != nil {
			return err
		}
	}
	if err := os.Mkdir(abs, 0o700); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil // another process made it first; Prepare checks it
		}
		return fmt.Errorf("creating data directory %s: %w", abs, err)
	}
	if err := os.Chmod(abs, 0o700); err != nil {
		return fmt.Errorf("creating data directory %s: %w", abs, err)
	}
	return nil
}

// CheckFile checks a secret file by path: absent is fine; present, it must be a
// regular file (not a symbolic link), belong to the effective user and grant nothing
// to group or others. what names it in the message ("owner token").
func CheckFile(what, path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("checking %s %s: %w", what, path, err)
	}
	return checkFileInfo(what, path, fi)
}

func checkFileInfo(what, path string, fi fs.FileInfo) error {
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return &UnsafeError{What: what, Path: path, Problem: "is a symbolic link",
			Fix: "replace the link with the file itself (toolgate reads only a regular file it owns)"}
	case !fi.Mode().IsRegular():
		return fmt.Errorf("%s %s is not a regular file (%s)", what, path, fi.Mode().Type())
	}
	return checkPrivate(what, path, fi, "600")
}

// checkPrivate refuses fi when it belongs to another user or its mode grants group
// or others anything; chmodTo is the mode the fix suggests.
func checkPrivate(what, path string, fi fs.FileInfo, chmodTo string) error {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		if uid := os.Geteuid(); int(st.Uid) != uid {
			return &UnsafeError{What: what, Path: path,
				Problem: fmt.Sprintf("belongs to uid %d, not to uid %d that runs toolgate", st.Uid, uid),
				Fix:     fmt.Sprintf("chown %d %s, or run toolgate as uid %d", uid, path, st.Uid)}
		}
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return &UnsafeError{What: what, Path: path,
			Problem: fmt.Sprintf("can be accessed by group or others (mode %04o)", perm),
			Fix:     fmt.Sprintf("chmod %s %s", chmodTo, path)}
	}
	return nil
}

// OpenFile opens the secret file path with flag (os.O_RDONLY, os.O_RDWR|os.O_CREATE,
// os.O_WRONLY|os.O_CREATE|os.O_EXCL…), never following a symbolic link. A file it
// creates is made 0600 exactly (umask notwithstanding); one that already existed is
// checked through the open descriptor, so what is checked is what is read. created
// reports which. what names the file in messages.
func OpenFile(what, path string, flag int) (f *os.File, created bool, err error) {
	if flag&os.O_CREATE != 0 && flag&os.O_EXCL == 0 {
		// Find out whether this open creates the file: try exclusively first.
		f, created, err = OpenFile(what, path, flag|os.O_EXCL)
		if !errors.Is(err, fs.ErrExist) {
			return f, created, err
		}
		flag &^= os.O_CREATE
	}
	// O_NONBLOCK: a FIFO planted under the name must not block the open (it is then
	// refused as not a regular file); on a regular file it changes nothing.
	f, err = os.OpenFile(path, flag|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, false, &UnsafeError{What: what, Path: path, Problem: "is a symbolic link",
				Fix: "replace the link with the file itself (toolgate reads only a regular file it owns)"}
		}
		return nil, false, fmt.Errorf("opening %s %s: %w", what, path, err)
	}
	if flag&os.O_EXCL != 0 {
		if err := f.Chmod(0o600); err != nil {
			f.Close()
			return nil, false, fmt.Errorf("creating %s %s: %w", what, path, err)
		}
		return f, true, nil
	}
	fi, err := f.Stat()
	if err == nil {
		err = checkFileInfo(what, path, fi)
	}
	if err != nil {
		f.Close()
		return nil, false, err
	}
	return f, false, nil
}
