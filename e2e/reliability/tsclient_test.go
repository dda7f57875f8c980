package reliability

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/testenv"
)

// tsRunner runs scripted TypeScript SDK sessions: e2e/tsclient's tsclient.mjs next
// to the npm peers' node_modules (see that package for the script's spec).
type tsRunner struct {
	node, script string
	env          []string
}

// newTSRunner returns nil when the TypeScript SDK is not installed (and the peers
// are not required).
func newTSRunner(t *testing.T) *tsRunner {
	t.Helper()
	modules := filepath.Join(testenv.NPMDir(t), "node_modules")
	if _, err := os.Stat(filepath.Join(modules, "@modelcontextprotocol", "sdk", "package.json")); err != nil {
		if testenv.RequirePeers() {
			t.Fatalf("the TypeScript SDK is not installed: %v", err)
		}
		t.Logf("the TypeScript SDK is not installed (%v): Go SDK sessions only", err)
		return nil
	}
	src, err := os.ReadFile(filepath.Join(testenv.RepoRoot(t), "e2e", "tsclient", "testdata", "tsclient.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	script := filepath.Join(dir, "tsclient.mjs")
	if err := os.WriteFile(script, src, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(modules, filepath.Join(dir, "node_modules")); err != nil {
		t.Fatal(err)
	}
	return &tsRunner{node: testenv.Node(t), script: script, env: testenv.NodeEnv(t)}
}

// tsStep is one call step's outcome as the script reports it.
type tsStep struct {
	Op, Name, Thrown string
	Result           *struct {
		Content []struct{ Text string }
		IsError bool              `json:"isError"`
		Meta    map[string]string `json:"_meta"`
	}
}

// session runs one TypeScript session making calls (tool name, arguments) over
// Streamable HTTP with token, and returns each call's outcome, or an error when
// the session itself failed.
func (ts *tsRunner) session(ctx context.Context, dir, url, token string, calls [][2]string) ([]tsStep, error) {
	var steps []map[string]any
	for _, c := range calls {
		var args map[string]any
		json.Unmarshal([]byte(c[1]), &args)
		steps = append(steps, map[string]any{"op": "call", "name": c[0], "arguments": args})
	}
	steps = append(steps, map[string]any{"op": "close"})
	spec, _ := json.Marshal(map[string]any{
		"transport": map[string]any{"kind": "http", "url": url + "/mcp", "headers": map[string]string{"Authorization": "Bearer " + token}},
		"steps":     steps,
	})
	f, err := os.CreateTemp(dir, "spec-*.json")
	if err != nil {
		return nil, err
	}
	defer os.Remove(f.Name())
	f.Write(spec)
	f.Close()
	cctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(cctx, ts.node, ts.script, f.Name())
	cmd.Env = ts.env
	out, err := cmd.Output()
	var res struct {
		OK    bool
		Error string
		Steps []tsStep
	}
	if jerr := json.Unmarshal([]byte(strings.TrimSpace(string(out))), &res); jerr != nil {
		return nil, fmt.Errorf("tsclient: %v (%v): %.300s", jerr, err, out)
	}
	if !res.OK {
		return res.Steps, fmt.Errorf("tsclient: %s", res.Error)
	}
	return res.Steps, nil
}
