package bridge_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/internal/upstream/upstreamtest"
)

// TestConformanceThroughTheBinary runs the official suites through the real binary:
// one `toolgate bridge --no-auth --server everything` on a temporary data directory
// where the go-sdk's conformance server is installed as upstream "everything" (over
// stdio, hosted by the bridge), beside the same server served directly in the same
// run. Every scenario whose checks all pass directly must pass through the bridge;
// none is excused (internal/app's TestConformanceThroughTheGateway names none either).
func TestConformanceThroughTheBinary(t *testing.T) {
	node := testenv.Node(t)
	env := append(testenv.NodeEnv(t), "NO_COLOR=1", "FORCE_COLOR=0")
	dir := testenv.PrivateDir(t)
	marker := upstreamtest.Marker(t)
	// After the bridge stopped (cleanups run last first): no upstream process is left,
	// the legacy connection's and its stateless twin's alike.
	t.Cleanup(func() { upstreamtest.WaitGone(t, marker, 15*time.Second) })
	doc, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{
		"everything": map[string]any{"command": upstreamtest.EverythingServer(t), "args": []string{marker}},
	}})
	cfg := filepath.Join(t.TempDir(), "mcp.json")
	if err := os.WriteFile(cfg, doc, 0o600); err != nil {
		t.Fatal(err)
	}
	toolgate := func(args ...string) {
		t.Helper()
		out, err := exec.Command(testenv.Binary(t), append(args, "--data-dir", dir)...).CombinedOutput()
		if err != nil {
			t.Fatalf("toolgate %v: %v\n%s", args, err, out)
		}
	}
	toolgate("install", cfg)
	toolgate("grant", "add", "--principal", "default", "--tool", "everything.*", "--action", "*")
	// The fixture's input rounds and requests ask the caller for elicitation, sampling
	// and roots: grants decide them (docs/trust.md, "Requests from servers").
	for _, tool := range []string{"mcp.request.elicitation", "mcp.request.sampling", "mcp.request.roots"} {
		toolgate("grant", "add", "--principal", "default", "--tool", tool, "--action", "execute", "--resource", "mcp:everything")
	}
	p := startBridgeIn(t, dir, "--no-auth", "--server", "everything")
	direct := map[bool]string{false: upstreamtest.ServeEverything(t, false), true: upstreamtest.ServeEverything(t, true)}
	for _, run := range testenv.ConformanceRuns {
		t.Run(run.Name, func(t *testing.T) {
			main := testenv.NPMPackageFile(t, run.Pkg, "dist/index.js")
			want := testenv.RunConformanceSuite(t, node, env, main, direct[run.Stateless], run.Args, "direct")
			got := testenv.RunConformanceSuite(t, node, env, main, p.url, run.Args, "toolgate bridge")
			testenv.CompareConformance(t, want, got, nil)
		})
	}
}
