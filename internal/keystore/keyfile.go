package keystore

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// KeyFile is the master key's file name in the data directory.
const KeyFile = "keystore.key"

// KeySize is the master key's length: exactly this many random bytes are the whole
// file.
const KeySize = 32

// loadKey reads dir/keystore.key, creating it on first use. The file is the only copy of
// the key that opens every sealed secret, so it is checked before it is trusted: it
// must be a regular file (not a link, a FIFO or a device), owned by this process's user
// and accessible by nobody else. A file failing a check is refused with an error saying
// how to fix it, never repaired silently: a key someone else could read may already
// have been read.
func loadKey(dir string) ([]byte, error) {
	path := filepath.Join(dir, KeyFile)
	key, err := readKey(path)
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return key, err
	}
	if err := createKey(dir, path); err != nil {
		return nil, err
	}
	return readKey(path)
}

// readKey opens path without following a symbolic link and without blocking on a FIFO,
// then checks what it opened (fstat on the open descriptor, so the file checked is the
// file read).
func readKey(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, fmt.Errorf("keystore key %s is a symbolic link, not a regular file: replace it with the key file itself", path)
		}
		if errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		return nil, fmt.Errorf("opening keystore key: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("checking keystore key %s: %w", path, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("keystore key %s is not a regular file (%s): replace it with the key file itself", path, fi.Mode().Type())
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		if uid := os.Geteuid(); int(st.Uid) != uid {
			return nil, fmt.Errorf("keystore key %s is owned by uid %d, not by this user (uid %d): run toolgate as its owner, or run chown %d %s", path, st.Uid, uid, uid, path)
		}
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("keystore key %s is accessible by group or others (mode %04o): run chmod 600 %s", path, perm, path)
	}
	key := make([]byte, KeySize+1)
	n, err := io.ReadFull(f, key)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("reading keystore key %s: %w", path, err)
	}
	if n != KeySize {
		size := fmt.Sprint(fi.Size())
		if n > KeySize {
			size = "more than 32"
		}
		return nil, fmt.Errorf("keystore key %s holds %s bytes, want %d: it is damaged or not a toolgate key", path, size, KeySize)
	}
	return key[:KeySize], nil
}

// createKey writes a new random key to a temporary file (0600) in dir, flushes it, and
// links it into place. A link never replaces an existing file, so when several processes
// create the key at once exactly one key wins and every process then reads that one; no
// process ever sees a partly written key.
func createKey(dir, path string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("creating keystore key: %w", err)
	}
	tmp, err := os.CreateTemp(dir, "."+KeyFile+".tmp-*")
	if err != nil {
		return fmt.Errorf("creating keystore key: %w", err)
	}
	defer os.Remove(tmp.Name())
	key := make([]byte, KeySize)
	_, _ = rand.Read(key) // crypto/rand.Read never fails (it aborts the program instead)
	_, werr := tmp.Write(key)
	clear(key)
	if werr == nil {
		werr = tmp.Chmod(0o600)
	}
	if werr == nil {
		werr = tmp.Sync()
	}
	if cerr := tmp.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return fmt.Errorf("writing keystore key: %w", werr)
	}
	if err := os.Link(tmp.Name(), path); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("creating keystore key %s: %w", path, err)
	}
	// The new name must survive a crash too; a directory that cannot be synced (some
	// file systems refuse) still has the key, so that is not an error.
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}
