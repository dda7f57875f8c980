// Package testenv finds the real peers tests drive (Node.js 22, npm packages installed by
// scripts/deps.sh) and builds the toolgate binary once per test process. When
// TOOLGATE_REQUIRE_PEERS is set (as `make test` does) a missing peer fails the test
// instead of skipping it, so CI can never pass by not running an interop test.
package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
)

// RequirePeers reports whether missing peers are failures.
func RequirePeers() bool { return os.Getenv("TOOLGATE_REQUIRE_PEERS") != "" }

func missing(t testing.TB, format string, args ...any) {
	t.Helper()
	if RequirePeers() {
		t.Fatalf(format, args...)
	}
	t.Skipf(format+" (run `make test` to install peers)", args...)
}

// NPMDir returns the folder holding the npm peers' node_modules.
func NPMDir(t testing.TB) string {
	t.Helper()
	d := os.Getenv("TOOLGATE_NPM_DIR")
	if d == "" {
		d = filepath.Join(RepoRoot(t), ".cache", "npm")
	}
	if _, err := os.Stat(filepath.Join(d, "node_modules")); err != nil {
		missing(t, "npm peers not installed in %s", d)
	}
	return d
}

// Node returns the path of a Node.js 22 binary.
func Node(t testing.TB) string {
	t.Helper()
	p := filepath.Join(RepoRoot(t), ".cache", "node22", "node_modules", ".bin", "node")
	if _, err := os.Stat(p); err == nil {
		return p
	}
	missing(t, "node 22 not installed at %s", p)
	return ""
}

// NPMBin returns the path of an executable installed by an npm peer (node_modules/.bin/NAME).
func NPMBin(t testing.TB, name string) string {
	t.Helper()
	p := filepath.Join(NPMDir(t), "node_modules", ".bin", name)
	if _, err := os.Stat(p); err != nil {
		missing(t, "npm peer binary %s not installed", name)
	}
	return p
}

// NPMPackageFile returns the path of file rel inside the npm peer pkg
// (node_modules/PKG/REL): for a package installed under an npm alias, whose
// executable shares its name with another package's and so has no
// node_modules/.bin entry of its own.
func NPMPackageFile(t testing.TB, pkg, rel string) string {
	t.Helper()
	p := filepath.Join(NPMDir(t), "node_modules", filepath.FromSlash(pkg), filepath.FromSlash(rel))
	if _, err := os.Stat(p); err != nil {
		missing(t, "npm peer %s has no %s", pkg, rel)
	}
	return p
}

// NodeEnv returns os.Environ with Node 22 and the npm peers' bin folder first on PATH.
func NodeEnv(t testing.TB) []string {
	t.Helper()
	node := Node(t)
	path := filepath.Dir(node) + string(os.PathListSeparator) +
		filepath.Join(NPMDir(t), "node_modules", ".bin") + string(os.PathListSeparator) + os.Getenv("PATH")
	env := []string{}
	for _, kv := range os.Environ() {
		if len(kv) >= 5 && kv[:5] == "PATH=" {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "PATH="+path)
}

// RepoRoot returns the module root.
func RepoRoot(t testing.TB) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("testenv: cannot locate source")
	}
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

var (
	buildOnce sync.Once
	buildPath string
	buildErr  error
	buildOut  []byte
)

// Binary builds ./cmd/toolgate once per test process and returns its path.
func Binary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "toolgate-bin-")
		if err != nil {
			buildErr = err
			return
		}
		buildPath = filepath.Join(dir, "toolgate")
		cmd := exec.Command("go", "build", "-o", buildPath, "./cmd/toolgate")
		cmd.Dir = RepoRoot(t)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		buildOut, buildErr = cmd.CombinedOutput()
	})
	if buildErr != nil {
		t.Fatalf("building toolgate: %v\n%s", buildErr, buildOut)
	}
	return buildPath
}

// PrivateDir returns a fresh t.TempDir() made 0700: a directory toolgate accepts as a
// data directory (t.TempDir gives 0755 under the usual umask, which toolgate refuses:
// docs/storage.md, "Permissions").
func PrivateDir(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	return dir
}
