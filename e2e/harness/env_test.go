package harness

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/testenv"
)

// world is one test's private setup: the toolgate binary, a data directory, a
// workspace with a known file, and a HOME no harness has seen before.
type world struct {
	t    *testing.T
	bin  string
	data string
	ws   string
	home string
	env  []string
}

// secureDir returns a fresh 0700 directory none of whose ancestors is writable by group
// or others: Gemini CLI ignores settings files below such a directory (for example /tmp,
// where a clean clone may live), so HOME (and the cache toolgate run writes into) must
// live elsewhere. It tries the repository's .cache first, then the user's cache folder.
func secureDir(t *testing.T) string {
	t.Helper()
	candidates := []string{filepath.Join(testenv.RepoRoot(t), ".cache", "e2e-harness")}
	if c, err := os.UserCacheDir(); err == nil {
		candidates = append(candidates, filepath.Join(c, "toolgate-e2e-harness"))
	}
	for _, base := range candidates {
		if insecureAncestor(base) != "" {
			continue
		}
		if err := os.MkdirAll(base, 0o700); err != nil {
			continue
		}
		d, err := os.MkdirTemp(base, "home-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(d) })
		return d
	}
	t.Fatalf("no folder without a group- or world-writable ancestor among %v (first: %s)", candidates, insecureAncestor(candidates[0]))
	return ""
}

// insecureAncestor returns the first existing ancestor of p (or p itself) that is
// writable by group or others, or "".
func insecureAncestor(p string) string {
	for ; ; p = filepath.Dir(p) {
		if fi, err := os.Stat(p); err == nil && fi.Mode().Perm()&0o022 != 0 {
			return p
		}
		if p == filepath.Dir(p) {
			return ""
		}
	}
}

func newWorld(t *testing.T) *world {
	t.Helper()
	w := &world{t: t, bin: testenv.Binary(t), data: testenv.PrivateDir(t), ws: t.TempDir(), home: secureDir(t)}
	if err := os.WriteFile(filepath.Join(w.ws, "hello.txt"), []byte("hello from the workspace\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(w.home, ".codex"), 0o700); err != nil {
		t.Fatal(err)
	}
	var env []string
	for _, kv := range testenv.NodeEnv(t) {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME", "TOOLGATE_HOME", "CODEX_HOME",
			"OPENCODE_CONFIG", "OPENCODE_CONFIG_CONTENT", "GEMINI_CLI_SYSTEM_SETTINGS_PATH", "GEMINI_API_KEY",
			"ANTHROPIC_API_KEY", "OPENAI_API_KEY":
			continue
		}
		env = append(env, kv)
	}
	w.env = append(env,
		"HOME="+w.home,
		"XDG_CONFIG_HOME="+filepath.Join(w.home, ".config"),
		"XDG_CACHE_HOME="+filepath.Join(w.home, ".cache"),
		"XDG_DATA_HOME="+filepath.Join(w.home, ".local", "share"),
		"TOOLGATE_HOME="+w.data,
		"CODEX_HOME="+filepath.Join(w.home, ".codex"),
		"GEMINI_CLI_TRUST_WORKSPACE=true",
		"DISABLE_AUTOUPDATER=1",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"OPENCODE_DISABLE_AUTOUPDATE=true",
		"NO_COLOR=1",
	)
	return w
}

// run runs a command in the world (cwd = the workspace) and returns its output.
func (w *world) run(name string, args ...string) (stdout, stderr string, code int) {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = w.env
	cmd.Dir = w.ws
	cmd.WaitDelay = 10 * time.Second
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	code = 0
	if err != nil {
		var ee *exec.ExitError
		if !asExit(err, &ee) {
			w.t.Fatalf("%s %q: %v\n%s", name, args, err, e.String())
		}
		code = ee.ExitCode()
	}
	if ctx.Err() != nil {
		w.t.Fatalf("%s %q timed out\nstdout: %s\nstderr: %s", name, args, o.String(), e.String())
	}
	return o.String(), e.String(), code
}

func asExit(err error, target **exec.ExitError) bool {
	ee, ok := err.(*exec.ExitError)
	if ok {
		*target = ee
	}
	return ok
}

// toolgate runs the binary and fails the test on a non-zero exit.
func (w *world) toolgate(args ...string) (stdout, stderr string) {
	w.t.Helper()
	o, e, code := w.run(w.bin, args...)
	if code != 0 {
		w.t.Fatalf("toolgate %q exited %d\nstdout: %s\nstderr: %s", args, code, o, e)
	}
	return o, e
}

// peer runs an npm-installed CLI.
func (w *world) peer(bin string, args ...string) (stdout, stderr string, code int) {
	w.t.Helper()
	return w.run(testenv.NPMBin(w.t, bin), args...)
}

var endpointRE = regexp.MustCompile(`MCP endpoint (http://\S+/mcp)`)

// serve starts `toolgate serve` on a free loopback port with the workspace's local tools
// and returns its MCP URL; the server is stopped when the test ends.
func (w *world) serve() string {
	w.t.Helper()
	cmd := exec.Command(w.bin, "serve", "--listen", "127.0.0.1:0", "--workspace", w.ws)
	cmd.Env = w.env
	cmd.Dir = w.ws
	cmd.WaitDelay = 10 * time.Second
	pr, err := cmd.StderrPipe()
	if err != nil {
		w.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		w.t.Fatal(err)
	}
	w.t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
	})
	found := make(chan string, 1)
	var mu sync.Mutex
	var seen strings.Builder
	go func() {
		sc := bufio.NewScanner(pr)
		sent := false
		for sc.Scan() {
			mu.Lock()
			seen.WriteString(sc.Text() + "\n")
			mu.Unlock()
			if m := endpointRE.FindStringSubmatch(sc.Text()); m != nil && !sent {
				found <- m[1]
				sent = true
			}
		}
		_, _ = io.Copy(io.Discard, pr)
		if !sent {
			close(found)
		}
	}()
	select {
	case u, ok := <-found:
		if !ok {
			mu.Lock()
			defer mu.Unlock()
			w.t.Fatalf("toolgate serve exited without an endpoint:\n%s", seen.String())
		}
		return u
	case <-time.After(time.Minute):
		w.t.Fatal("toolgate serve printed no endpoint within a minute")
	}
	return ""
}

// write creates a file (and its parents) in the world.
func (w *world) write(path, content string) {
	w.t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		w.t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		w.t.Fatal(err)
	}
}

func (w *world) read(path string) string {
	w.t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		w.t.Fatal(err)
	}
	return string(b)
}

// serverBlock returns mcpServers.toolgate of a JSON connection file.
func serverBlock(t *testing.T, file string) map[string]any {
	t.Helper()
	var v struct {
		MCPServers map[string]map[string]any `json:"mcpServers"`
	}
	if err := json.Unmarshal([]byte(file), &v); err != nil {
		t.Fatalf("connection file is not JSON: %v\n%s", err, file)
	}
	b := v.MCPServers["toolgate"]
	if b == nil {
		t.Fatalf("no mcpServers.toolgate in\n%s", file)
	}
	return b
}

// lineWith returns the first output line containing every needle, or "".
func lineWith(out string, needles ...string) string {
	for _, l := range strings.Split(out, "\n") {
		ok := true
		for _, n := range needles {
			if !strings.Contains(l, n) {
				ok = false
				break
			}
		}
		if ok {
			return l
		}
	}
	return ""
}
