package serve

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/app"
	"github.com/toolgate/toolgate/internal/store"
	"github.com/toolgate/toolgate/internal/testenv"
)

// storeCommands are the commands that open the data directory, each as a person
// would run it; none of them may start on a directory that leaks.
var storeCommands = [][]string{
	{"serve", "--listen", "127.0.0.1:0"},
	{"mcp", "--no-local-tools"},
	{"mcp", "--no-local-tools", "--database-dir", "DATA"},
	{"bridge", "--no-auth"},
	{"bridge", "--stdio"},
	{"run", "--harness", "claude-code", "--", "/bin/true"},
	{"grant", "ls"},
	{"grant", "add", "--principal", "p", "--tool", "local.read_file"},
	{"token", "mint"},
	{"audit"},
	{"audit", "--verify"},
	{"escalations", "ls"},
	{"namespaces", "ls"},
	{"config", "claude-code"},
	{"config", "claude-code", "--http", "http://127.0.0.1:7077/mcp"},
}

// commandTimeout bounds one command of TestLeakyDataDirectoryRefused: a refusal is
// immediate; a command still running has started.
const commandTimeout = 30 * time.Second

// leak is one way a data directory can stop being private. apply makes it on a
// healthy directory and returns the path the refusal must name and the fix it must
// suggest.
type leak struct {
	name  string
	root  bool // needs root (chown)
	apply func(t *testing.T, data string) (path, fix string)
}

func chmodLeak(file string, mode os.FileMode) leak {
	return leak{name: fmt.Sprintf("%s %04o", file, mode), apply: func(t *testing.T, data string) (string, string) {
		p, want := filepath.Join(data, file), "chmod 600 "
		if file == "." {
			p, want = data, "chmod 700 "
		}
		if _, err := os.Lstat(p); err != nil {
			// -wal and -shm exist only while a store is open (or after a crash).
			if err := os.WriteFile(p, nil, mode); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p, want + p
	}}
}

func chownLeak(file string) leak {
	return leak{name: file + " owned by nobody", root: true, apply: func(t *testing.T, data string) (string, string) {
		p := filepath.Join(data, file)
		if file == "." {
			p = data
		}
		if err := os.Lchown(p, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		return p, "chown 0 " + p
	}}
}

func symlinkLeak(file string) leak {
	return leak{name: file + " a symbolic link", apply: func(t *testing.T, data string) (string, string) {
		p := filepath.Join(data, file)
		real := filepath.Join(testenv.PrivateDir(t), file)
		if err := os.Rename(p, real); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(real, p); err != nil {
			t.Fatal(err)
		}
		return p, "replace the link with the file itself"
	}}
}

// TestLeakyDataDirectoryRefused runs every command that opens the data directory
// against every way of making the directory or a secret in it readable by others
// (group/other mode bits, another owner, a symbolic link, a data directory that is a
// link to an open directory): each exits non-zero, names the file and the command
// that fixes it, and leaves every file exactly as it was (contents and modes: a loose
// file is never silently tightened, nothing is reset).
func TestLeakyDataDirectoryRefused(t *testing.T) {
	leaks := []leak{
		chmodLeak(".", 0o755), chmodLeak(".", 0o750), chmodLeak(".", 0o701),
		chmodLeak(store.DBFile, 0o644), chmodLeak(store.DBFile, 0o640), chmodLeak(store.DBFile, 0o604),
		chmodLeak(store.DBFile+"-wal", 0o644), chmodLeak(store.DBFile+"-shm", 0o644), chmodLeak(store.DBFile+"-journal", 0o640),
		chmodLeak(app.OwnerTokenFile, 0o644), chmodLeak(app.OwnerTokenFile, 0o640), chmodLeak(app.OwnerTokenFile, 0o604),
		chmodLeak("keystore.key", 0o644),
		symlinkLeak(store.DBFile), symlinkLeak(app.OwnerTokenFile),
		chownLeak("."), chownLeak(store.DBFile), chownLeak(app.OwnerTokenFile),
		{name: "data directory a link to a 0755 directory", apply: func(t *testing.T, data string) (string, string) {
			moved := filepath.Join(t.TempDir(), "elsewhere")
			if err := os.Rename(data, moved); err != nil {
				t.Fatal(err)
			}
			os.Chmod(moved, 0o755)
			if err := os.Symlink(moved, data); err != nil {
				t.Fatal(err)
			}
			return moved, "chmod 700 " + moved
		}},
	}
	bin := testenv.Binary(t)
	for _, l := range leaks {
		t.Run(l.name, func(t *testing.T) {
			if l.root && os.Geteuid() != 0 {
				t.Skip("needs root to chown")
			}
			data := healthyDataDir(t)
			path, fix := l.apply(t, data)
			before := snapshot(t, data)
			for _, args := range storeCommands {
				args = append([]string(nil), args...)
				env := env(data)
				for i, a := range args {
					if a == "DATA" {
						args[i] = data
						env = envHome(testenv.PrivateDir(t)) // only --database-dir names it
					}
				}
				ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
				cmd := exec.CommandContext(ctx, bin, args...)
				cmd.Env = env
				cmd.Stdin = strings.NewReader("")
				var stderr bytes.Buffer
				cmd.Stdout, cmd.Stderr = &bytes.Buffer{}, &stderr
				err := cmd.Run()
				timedOut := ctx.Err() != nil
				cancel()
				if timedOut {
					t.Errorf("%v: still running after %s: it started on a leaky data directory", args, commandTimeout)
					continue
				}
				if err == nil {
					t.Errorf("%v: exit 0 on a leaky data directory\n%s", args, stderr.String())
					continue
				}
				if msg := stderr.String(); !strings.Contains(msg, path) || !strings.Contains(msg, fix) {
					t.Errorf("%v: stderr does not name %s and %q:\n%s", args, path, fix, msg)
				}
			}
			if after := snapshot(t, data); after != before {
				t.Errorf("the data directory changed:\nbefore %s\nafter  %s", before, after)
			}
		})
	}
}

// healthyDataDir is a data directory as a first `toolgate serve` leaves it: store,
// keys, default grants and owner token, all private.
func healthyDataDir(t *testing.T) string {
	t.Helper()
	data := filepath.Join(t.TempDir(), "data")
	a, err := app.Open(context.Background(), app.Options{DataDir: data})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.OwnerToken(); err != nil {
		t.Fatal(err)
	}
	a.Close()
	return data
}

// envHome is the environment of a command whose TOOLGATE_HOME is home.
func envHome(home string) []string { return env(home) }

func statOwner(fi fs.FileInfo) (uint32, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return st.Uid, true
}

// snapshot describes every entry under dir (following a data directory that is a
// link): name, type, mode, owner and a hash of the contents.
func snapshot(t *testing.T, dir string) string {
	t.Helper()
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	err = filepath.WalkDir(real, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s %v", strings.TrimPrefix(p, real), fi.Mode())
		if st, ok := statOwner(fi); ok {
			fmt.Fprintf(&b, " uid=%d", st)
		}
		if fi.Mode().IsRegular() {
			c, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			fmt.Fprintf(&b, " %x", sha256.Sum256(c))
		}
		b.WriteString("; ")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestFirstStartPrivateWhateverTheUmask: a first `toolgate serve` under any umask
// (0 would make files 0666, 0777 would make them 0000) creates the data directory and
// its missing parents 0700 and the database, its -wal and -shm, and the owner token
// 0600, and a second command accepts what it made.
func TestFirstStartPrivateWhateverTheUmask(t *testing.T) {
	bin := testenv.Binary(t)
	for _, um := range []string{"000", "022", "077", "777"} {
		t.Run("umask "+um, func(t *testing.T) {
			base := testenv.PrivateDir(t)
			data := filepath.Join(base, "parent", "data")
			cmd := exec.Command("/bin/sh", "-c", "umask "+um+"; exec \"$0\" \"$@\"", bin, "serve", "--listen", "127.0.0.1:0")
			cmd.Env = env(data)
			stderr := &testenv.SyncBuffer{}
			cmd.Stderr = stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			defer func() { cmd.Process.Kill(); <-done }()
			deadline := time.Now().Add(60 * time.Second)
			for !strings.Contains(stderr.String(), "toolgate: listening on") {
				select {
				case err := <-done:
					done <- err
					t.Fatalf("serve exited: %v\n%s", err, stderr.String())
				case <-time.After(20 * time.Millisecond):
				}
				if time.Now().After(deadline) {
					t.Fatalf("serve did not start:\n%s", stderr.String())
				}
			}
			// While it runs, so that SQLite's -wal and -shm exist.
			want := map[string]os.FileMode{filepath.Join(base, "parent"): 0o700, data: 0o700}
			for _, f := range []string{store.DBFile, store.DBFile + "-wal", store.DBFile + "-shm", app.OwnerTokenFile} {
				want[filepath.Join(data, f)] = 0o600
			}
			for p, m := range want {
				fi, err := os.Stat(p)
				if err != nil {
					t.Errorf("%s: %v", p, err)
				} else if fi.Mode().Perm() != m {
					t.Errorf("umask %s: %s has mode %04o, want %04o", um, p, fi.Mode().Perm(), m)
				}
			}
			if out, errOut, code := run(t, data, "grant", "ls"); code != 0 {
				t.Errorf("grant ls after the first start: exit %d %s %s", code, out, errOut)
			}
		})
	}
}
