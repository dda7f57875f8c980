package keystore_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/toolgate/toolgate/internal/keystore"
	"github.com/toolgate/toolgate/internal/keystore/keystoretest"
)

func TestKeyFileCreatedOwnerOnly(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "fresh", "data")
	mem := &keystoretest.Mem{}
	ks, err := keystore.Open(dir, mem)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, keystore.KeyFile)
	if ks.KeyPath() != path {
		t.Errorf("KeyPath = %q, want %q", ks.KeyPath(), path)
	}
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o600 || fi.Size() != keystore.KeySize {
		t.Errorf("key file: mode %v, %d bytes; want a regular 0600 file of %d bytes", fi.Mode(), fi.Size(), keystore.KeySize)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("the data directory holds %d entries, want the key file alone (no temporary left)", len(entries))
	}
	ref := keystore.Ref{Scope: "user", Server: "s", Name: "env.A"}
	if err := ks.Put(ctx, ref, keystore.NewSecretString(canary)); err != nil {
		t.Fatal(err)
	}
	key, _ := os.ReadFile(path)
	// Reopening reads the same key: what was sealed opens.
	again, err := keystore.Open(dir, mem)
	if err != nil {
		t.Fatal(err)
	}
	if s, err := again.Get(ctx, ref); err != nil || s.RevealString() != canary {
		t.Errorf("after reopening: %v", err)
	}
	if now, _ := os.ReadFile(path); !bytes.Equal(now, key) {
		t.Error("reopening rewrote the key")
	}
}

// TestKeyFileConcurrentCreate: many openers of a fresh directory at once agree on one
// key, so a secret any of them sealed opens in every other.
func TestKeyFileConcurrentCreate(t *testing.T) {
	ctx := context.Background()
	for round := range 5 {
		dir := t.TempDir()
		mem := &keystoretest.Mem{}
		const n = 16
		stores := make([]*keystore.Keystore, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				ks, err := keystore.Open(dir, mem)
				if err != nil {
					t.Errorf("round %d opener %d: %v", round, i, err)
				}
				stores[i] = ks
			})
		}
		wg.Wait()
		if t.Failed() {
			return
		}
		ref := keystore.Ref{Scope: "user", Server: "s", Name: "env.A"}
		if err := stores[0].Put(ctx, ref, keystore.NewSecretString(canary)); err != nil {
			t.Fatal(err)
		}
		for i, ks := range stores {
			if _, err := ks.Get(ctx, ref); err != nil {
				t.Errorf("round %d: opener %d has another key: %v", round, i, err)
			}
		}
		entries, _ := os.ReadDir(dir)
		if len(entries) != 1 {
			t.Errorf("round %d: %d entries left in the directory, want the key file alone", round, len(entries))
		}
	}
}

// TestKeyFileRefused: each unsafe or damaged key file is refused with an error naming
// the file and the fix, and nothing is rewritten.
func TestKeyFileRefused(t *testing.T) {
	valid := func(t *testing.T) (dir, path string) {
		dir = t.TempDir()
		if _, err := keystore.Open(dir, &keystoretest.Mem{}); err != nil {
			t.Fatal(err)
		}
		return dir, filepath.Join(dir, keystore.KeyFile)
	}
	cases := []struct {
		name  string
		setup func(t *testing.T, dir, path string)
		want  []string
	}{
		{"group readable", func(t *testing.T, _, p string) { chmod(t, p, 0o640) }, []string{"accessible by group or others", "mode 0640", "chmod 600 "}},
		{"other readable", func(t *testing.T, _, p string) { chmod(t, p, 0o604) }, []string{"mode 0604", "chmod 600 "}},
		{"group writable", func(t *testing.T, _, p string) { chmod(t, p, 0o620) }, []string{"mode 0620", "chmod 600 "}},
		{"owned by another user", func(t *testing.T, _, p string) {
			if err := os.Chown(p, 65534, 65534); err != nil {
				t.Skipf("cannot chown (not root?): %v", err)
			}
		}, []string{"owned by uid 65534", "chown "}},
		{"symbolic link", func(t *testing.T, dir, p string) {
			real := filepath.Join(dir, "real.key")
			if err := os.Rename(p, real); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(real, p); err != nil {
				t.Fatal(err)
			}
		}, []string{"symbolic link"}},
		{"FIFO", func(t *testing.T, _, p string) {
			os.Remove(p)
			if err := syscall.Mkfifo(p, 0o600); err != nil {
				t.Fatal(err)
			}
		}, []string{"not a regular file"}},
		{"directory", func(t *testing.T, _, p string) {
			os.Remove(p)
			if err := os.Mkdir(p, 0o700); err != nil {
				t.Fatal(err)
			}
		}, []string{"not a regular file"}},
		{"short", func(t *testing.T, _, p string) { write(t, p, make([]byte, 31)) }, []string{"holds 31 bytes, want 32"}},
		{"empty", func(t *testing.T, _, p string) { write(t, p, nil) }, []string{"holds 0 bytes, want 32"}},
		{"long", func(t *testing.T, _, p string) { write(t, p, make([]byte, 33)) }, []string{"more than 32"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir, path := valid(t)
			c.setup(t, dir, path)
			before, _ := os.Lstat(path)
			_, err := keystore.Open(dir, &keystoretest.Mem{})
			if err == nil {
				t.Fatal("Open accepted it")
			}
			msg := err.Error()
			if !strings.Contains(msg, path) {
				t.Errorf("error %q does not name %s", msg, path)
			}
			for _, w := range c.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not say %q", msg, w)
				}
			}
			after, _ := os.Lstat(path)
			if before.Mode() != after.Mode() || before.ModTime() != after.ModTime() {
				t.Error("a refused key file was modified")
			}
		})
	}
	// The fix the message names works.
	dir, path := valid(t)
	chmod(t, path, 0o644)
	if _, err := keystore.Open(dir, &keystoretest.Mem{}); err == nil {
		t.Fatal("0644 accepted")
	}
	chmod(t, path, 0o600)
	if _, err := keystore.Open(dir, &keystoretest.Mem{}); err != nil {
		t.Errorf("after chmod 600: %v", err)
	}
}

func chmod(t *testing.T, p string, m os.FileMode) {
	t.Helper()
	if err := os.Chmod(p, m); err != nil {
		t.Fatal(err)
	}
}

func write(t *testing.T, p string, b []byte) {
	t.Helper()
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
}
