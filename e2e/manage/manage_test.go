package manage

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/app"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/internal/upstream/upstreamtest"
)

var update = flag.Bool("update", false, "rewrite the golden answers")

// tg runs the toolgate CLI over data and returns stdout, stderr and the exit code.
func tg(t *testing.T, data string, args ...string) (string, string, int) {
	t.Helper()
	return testenv.Run(t, data, args...)
}

// tgOK is tg that must succeed.
func tgOK(t *testing.T, data string, args ...string) string {
	t.Helper()
	out, errs, code := tg(t, data, args...)
	if code != 0 {
		t.Fatalf("toolgate %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, out, errs)
	}
	return out
}

type serve = testenv.Serve

func startServe(t *testing.T, data string) *serve {
	t.Helper()
	return testenv.StartServe(t, data, "--listen", "127.0.0.1:0")
}

// writeConfig writes an mcpServers file running the fixture as fx with marker in its
// argv, and returns its path.
func writeConfig(t *testing.T, marker string) string {
	t.Helper()
	doc := map[string]any{"mcpServers": map[string]any{"fx": map[string]any{
		"command": upstreamtest.Fixture(t), "args": []string{"-marker", marker},
		"env": map[string]string{"FIXTURE_TOKEN": "tok-" + marker},
	}}}
	b, _ := json.MarshalIndent(doc, "", "  ")
	p := filepath.Join(t.TempDir(), "mcp.json")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// volatile are members whose values differ between runs: they are replaced in golden
// comparisons by a placeholder naming their kind (and whether they were set).
var volatile = map[string]string{
	"generated_at": "<time>", "at": "<time>", "last_seen_at": "<time>", "since": "<time>",
	"catalog_fetched_at": "<time>", "first_seen_at": "<time>", "next_attempt_at": "<time>",
	"first_seen": "<time>", "last_seen": "<time>", "approved_at": "<time>", "decided_at": "<time>",
	"snapshot_version": "<version>", "seq": "<seq>", "fingerprint": "<fingerprint>",
	"command": "<fixture>", "stderr_tail": "<stderr>",
}

// normalize replaces volatile values (and the marker) so answers compare across runs.
func normalize(t *testing.T, raw, marker string, extra ...string) string {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(raw), &v); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, raw)
	}
	skip := map[string]string{}
	for k, p := range volatile {
		skip[k] = p
	}
	for _, k := range extra {
		skip[k] = "<runtime>"
	}
	var walk func(any) any
	walk = func(x any) any {
		switch x := x.(type) {
		case map[string]any:
			for k, val := range x {
				if p, ok := skip[k]; ok {
					x[k] = p
					continue
				}
				x[k] = walk(val)
			}
		case []any:
			for i := range x {
				x[i] = walk(x[i])
			}
		case string:
			return strings.ReplaceAll(x, marker, "<marker>")
		}
		return x
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	enc.Encode(walk(v))
	return b.String()
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	p := filepath.Join("testdata", "golden", name+".json")
	if *update {
		if err := os.WriteFile(p, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if string(want) != got {
		t.Errorf("%s differs from %s:\n%s", name, p, got)
	}
}

func noChild(t *testing.T, marker, after string) {
	t.Helper()
	if pids := upstreamtest.Processes(t, marker); len(pids) != 0 {
		t.Fatalf("upstream processes left after %s: %v", after, pids)
	}
}

// lifecycle runs the management commands over data in order and checks each answer
// against the golden shapes; it is the same with and without a daemon.
func lifecycle(t *testing.T, data, marker string, daemon bool) {
	cfg := writeConfig(t, marker)
	out := tgOK(t, data, "install", cfg, "--json")
	// A daemon fetches a new server's first catalogue at once (docs/management.md,
	// "First catalogue"), so the runtime in the answer may already have moved.
	golden(t, "install", normalize(t, out, marker, "runtime", "status", "tools_count", "prompts_count", "resources_count", "resource_templates_count"))
	// The same config again: unchanged, nothing written.
	if out := tgOK(t, data, "install", cfg); !strings.Contains(out, "unchanged") || !strings.Contains(out, "0 audit events written") {
		t.Fatalf("re-install:\n%s", out)
	}
	// In-process commands never start a server; the daemon has started it by now, or
	// soon: its answers are compared once it is ready.
	mode := ""
	if daemon {
		mode = "_daemon"
		waitReady(t, data)
	}
	golden(t, "ls"+mode, normalize(t, tgOK(t, data, "ls", "--json"), marker))
	if out := tgOK(t, data, "ls"); !strings.Contains(out, "NAME") || !strings.Contains(out, "fx") || !strings.Contains(out, "mcp_000000000000000001") {
		t.Fatalf("ls table:\n%s", out)
	}
	golden(t, "details"+mode, normalize(t, tgOK(t, data, "details", "fx", "--json"), marker))
	out = tgOK(t, data, "restart", "fx", "--json")
	golden(t, "restart", normalize(t, out, marker, "runtime", "status", "tools_count", "prompts_count", "resources_count", "resource_templates_count"))
	if daemon {
		// The daemon hosts the server: its process outlives the command.
		waitReady(t, data)
		if n := len(upstreamtest.Processes(t, marker)); n != 1 {
			t.Fatalf("%d upstream processes under the daemon, want 1", n)
		}
		det := tgOK(t, data, "details", "fx")
		for _, want := range []string{"Tools (", "echo", "fx.echo", "toolgate.mcp_restart", "ready (started"} {
			if !strings.Contains(det, want) {
				t.Errorf("details lacks %q:\n%s", want, det)
			}
		}
	} else {
		noChild(t, marker, "an in-process restart")
	}
	out = tgOK(t, data, "policy", "set", "fx", "--enabled=false", "--json")
	golden(t, "policy_set", normalize(t, out, marker, "runtime", "status", "tools_count", "prompts_count", "resources_count", "resource_templates_count"))
	if daemon {
		upstreamtest.WaitGone(t, marker, 20*time.Second)
	}
	if _, errs, code := tg(t, data, "restart", "fx"); code == 0 || !strings.Contains(errs, "disabled") {
		t.Fatalf("restart of a disabled server: exit %d, %s", code, errs)
	}
	if _, errs, code := tg(t, data, "details", "nope"); code == 0 || !strings.Contains(errs, "no server") {
		t.Fatalf("details of an unknown server: exit %d, %s", code, errs)
	}
	out = tgOK(t, data, "uninstall", "fx", "--json")
	golden(t, "uninstall", normalize(t, out, marker, "runtime", "status", "tools_count", "prompts_count", "resources_count", "resource_templates_count"))
	if out := tgOK(t, data, "ls"); !strings.Contains(out, "no MCP servers installed") {
		t.Fatalf("ls after uninstall:\n%s", out)
	}
	noChild(t, marker, "uninstall")
	// Hostile input: a config with one broken entry is partial, exit status 1.
	bad := filepath.Join(t.TempDir(), "bad.json")
	os.WriteFile(bad, []byte(`{"mcpServers":{"ok":{"command":"/bin/true"},"broken":{"args":["x"]}}}`), 0o600)
	out, _, code := tg(t, data, "install", bad, "--json")
	if code != 1 || !strings.Contains(out, `"status":"partial"`) || !strings.Contains(out, "mcpServers.broken") {
		t.Fatalf("partial install: exit %d\n%s", code, out)
	}
	if out, _, code := tg(t, data, "install", "-", "--json"); code != 1 || !strings.Contains(out, `"validation_error"`) {
		t.Fatalf("empty stdin: exit %d\n%s", code, out)
	}
}

// waitReady waits until ls shows the one server ready with tools.
func waitReady(t *testing.T, data string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var ls struct {
			Servers []struct {
				Runtime    struct{ State string }
				ToolsCount int `json:"tools_count"`
			}
		}
		json.Unmarshal([]byte(tgOK(t, data, "ls", "--json")), &ls)
		if len(ls.Servers) == 1 && ls.Servers[0].Runtime.State == "ready" && ls.Servers[0].ToolsCount > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("never ready with tools: %+v", ls)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestWithoutDaemon: each command opens the data directory itself and leaves no
// process behind.
func TestWithoutDaemon(t *testing.T) {
	data := testenv.PrivateDir(t)
	lifecycle(t, data, upstreamtest.Marker(t), false)
}

// TestWithDaemon: each command finds the running daemon through its daemon.json and
// is served by it; the daemon hosts the server; a SIGTERM leaves no child.
func TestWithDaemon(t *testing.T) {
	data := testenv.PrivateDir(t)
	s := startServe(t, data)
	info, ok, err := app.FindDaemon(data)
	if err != nil || !ok || info.URL != s.URL {
		t.Fatalf("daemon file: %+v %v %v", info, ok, err)
	}
	marker := upstreamtest.Marker(t)
	lifecycle(t, data, marker, true)
	// Install again and start it, then stop the daemon: nothing survives.
	tgOK(t, data, "install", writeConfig(t, marker))
	tgOK(t, data, "restart", "fx")
	deadline := time.Now().Add(20 * time.Second)
	for len(upstreamtest.Processes(t, marker)) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the server never started")
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.Stop(t, syscall.SIGTERM)
	noChild(t, marker, "the daemon's SIGTERM")
	if _, err := os.Stat(filepath.Join(data, app.DaemonFile)); !os.IsNotExist(err) {
		t.Fatalf("daemon.json after a clean stop: %v", err)
	}
}

// TestStaleDaemonFile: a daemon killed with SIGKILL leaves its daemon.json; the next
// command sees its process is gone, removes the file and serves itself.
func TestStaleDaemonFile(t *testing.T) {
	data := testenv.PrivateDir(t)
	s := startServe(t, data)
	s.Stop(t, syscall.SIGKILL)
	if _, err := os.Stat(filepath.Join(data, app.DaemonFile)); err != nil {
		t.Fatalf("the killed daemon left no daemon.json: %v", err)
	}
	out := tgOK(t, data, "ls", "--json")
	if !strings.Contains(out, `"servers":[]`) {
		t.Fatalf("ls: %s", out)
	}
	if _, err := os.Stat(filepath.Join(data, app.DaemonFile)); !os.IsNotExist(err) {
		t.Fatalf("stale daemon.json kept: %v", err)
	}
	// A daemon file that is not private is refused, not trusted.
	os.WriteFile(filepath.Join(data, app.DaemonFile), []byte(fmt.Sprintf(`{"url":"http://127.0.0.1:1","pid":%d}`, os.Getpid())), 0o644)
	os.Chmod(filepath.Join(data, app.DaemonFile), 0o644)
	if _, errs, code := tg(t, data, "ls"); code == 0 || !strings.Contains(errs, "chmod") {
		t.Fatalf("loose daemon.json: exit %d, %s", code, errs)
	}
}
