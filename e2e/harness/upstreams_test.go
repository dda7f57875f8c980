package harness

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/internal/upstream/upstreamtest"
)

// TestHarnessesReachInstalledServers installs two npm servers (server-everything and
// server-memory) in toolgate's data directory, then lets real clients in through the
// generated connection files: Claude Code's `claude mcp list` health-checks toolgate
// connected over stdio and HTTP, and the MCP Inspector CLI lists the upstream tools and
// calls one through toolgate over both. Killing one server's process leaves the
// other's tools working.
func TestHarnessesReachInstalledServers(t *testing.T) {
	w := newWorld(t)
	node := testenv.Node(t)
	pkg := func(name string) string {
		return testenv.NPMPackageFile(t, "@modelcontextprotocol/"+name, "dist/index.js")
	}
	// A marker of this test's own in server-everything's argv (it ignores what follows
	// "stdio"): other tests run the same package at the same time.
	marker := upstreamtest.Marker(t)
	doc, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{
		"everything": map[string]any{"command": node, "args": []string{pkg("server-everything"), "stdio", marker}},
		"memory": map[string]any{"command": node, "args": []string{pkg("server-memory")},
			"env": map[string]string{"MEMORY_FILE_PATH": filepath.Join(t.TempDir(), "memory.jsonl")}},
	}})
	cfg := filepath.Join(t.TempDir(), "mcp.json")
	if err := os.WriteFile(cfg, doc, 0o600); err != nil {
		t.Fatal(err)
	}
	w.toolgate("install", cfg, "--allow-implicit-invocation=true")
	for _, ns := range []string{"everything", "memory"} {
		w.toolgate("grant", "add", "--principal", "default", "--tool", ns+".*", "--action", "execute")
	}
	url := w.serve()
	stdio := serverBlock(t, mustOut(w.toolgate("config", "claude-code", "--workspace", w.ws)))
	http := serverBlock(t, mustOut(w.toolgate("config", "claude-code", "--http", url)))
	for name, b := range map[string]map[string]any{"toolgate": stdio, "toolgate-http": http} {
		block, _ := json.Marshal(b)
		if o, e, code := w.peer("claude", "mcp", "add-json", "-s", "user", name, string(block)); code != 0 {
			t.Fatalf("claude mcp add-json %s: %d\n%s%s", name, code, o, e)
		}
	}
	out, errOut, _ := w.peer("claude", "mcp", "list")
	for _, name := range []string{"toolgate:", "toolgate-http:"} {
		if l := lineWith(out, name); !strings.Contains(l, "Connected") {
			t.Errorf("claude mcp list: %s not connected (line %q)\n%s%s", name, l, out, errOut)
		}
	}
	target := []string{stdio["command"].(string)}
	for _, a := range stdio["args"].([]any) {
		target = append(target, a.(string))
	}
	auth := http["headers"].(map[string]any)["Authorization"].(string)
	httpTarget := []string{http["url"].(string), "--transport", "http", "--header", "Authorization: " + auth}
	for _, c := range []struct {
		target      []string
		echo, graph string
	}{
		{target, "toolgate_everything_echo", "toolgate_memory_read_graph"},
		{httpTarget, "everything.echo", "memory.read_graph"},
	} {
		out, e, code := w.inspector(append(c.target, "--method", "tools/list")...)
		if code != 0 || !strings.Contains(out, `"`+c.echo+`"`) || !strings.Contains(out, `"`+c.graph+`"`) {
			t.Fatalf("inspector tools/list (exit %d) lacks the upstream tools:\n%s%s", code, out, e)
		}
		out, e, code = w.inspector(append(c.target, "--method", "tools/call", "--tool-name", c.echo, "--tool-arg", "message=through toolgate")...)
		if code != 0 || !strings.Contains(out, "through toolgate") {
			t.Errorf("inspector tools/call %s (exit %d):\n%s%s", c.echo, code, out, e)
		}
	}
	// Kill server-everything's process under the daemon: memory's tools keep working.
	killed := 0
	for _, pid := range upstreamtest.Processes(t, marker) {
		if err := syscall.Kill(pid, syscall.SIGKILL); err == nil {
			killed++
		}
	}
	if killed == 0 {
		t.Fatal("server-everything was not running under the daemon")
	}
	out, e, code := w.inspector(append(httpTarget, "--method", "tools/call", "--tool-name", "memory.read_graph")...)
	if code != 0 || !strings.Contains(out, "entities") {
		t.Errorf("memory after everything was killed (exit %d):\n%s%s", code, out, e)
	}
}
