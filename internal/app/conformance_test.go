package app_test

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/app"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/internal/upstream/upstreamtest"
)

// conformanceRun is one run of an official conformance suite.
type conformanceRun struct {
	name, pkg string
	args      []string
	// stateless serves the direct fixture statelessly (the 2026-07-28 era: the
	// go-sdk's stateful handler does not serve it) rather than with sessions (which
	// sampling and elicitation need).
	stateless bool
}

var conformanceRuns = []conformanceRun{
	{"0.1.16 --suite all", "@modelcontextprotocol/conformance", []string{"--suite", "all"}, false},
	{"0.2.0-alpha.12 --requirements 2025-11-25", "@modelcontextprotocol/conformance-next", []string{"--requirements", "2025-11-25"}, false},
	{"0.2.0-alpha.12 --requirements 2026-07-28", "@modelcontextprotocol/conformance-next", []string{"--requirements", "2026-07-28"}, true},
}

// openGaps are the scored scenarios that pass directly and do not yet pass through
// toolgate, each with the failure it must show (docs/host.md, "What is not relayed
// yet"). None is open: every scored scenario of every suite passes through toolgate as
// directly. A gap named here must fail exactly as given; any other failure fails the
// test.
var openGaps = map[string]string{}

// TestConformanceThroughTheGateway runs the official suites against the go-sdk's
// conformance server twice in one run: served directly over HTTP, and hosted over
// stdio behind ONE long-lived bridge of an App (what `toolgate bridge --no-auth
// --server everything` serves: one turn narrowed to the server, raw names). Every
// scenario whose checks all pass directly must pass through toolgate, but for the
// named open gaps (openGaps), each of which must fail only as described.
func TestConformanceThroughTheGateway(t *testing.T) {
	node := testenv.Node(t)
	env := append(testenv.NodeEnv(t), "NO_COLOR=1", "FORCE_COLOR=0")
	w := everythingWorld(t)
	w.grant(t, "everything.*")
	// The fixture's input rounds ask the caller for elicitation, sampling and roots:
	// the grants decide those as they do a server's requests mid-call (docs/trust.md).
	for _, tool := range []string{app.RequestElicitation, app.RequestSampling, app.RequestRoots} {
		w.grant(t, tool)
	}
	b := serverBridge(t, w, "everything")
	direct := map[bool]string{false: serveEverything(t, false), true: serveEverything(t, true)}
	for _, run := range conformanceRuns {
		t.Run(run.name, func(t *testing.T) {
			main := testenv.NPMPackageFile(t, run.pkg, "dist/index.js")
			want := runSuite(t, node, env, main, direct[run.stateless], run.args, "direct")
			got := runSuite(t, node, env, main, b.URL(), run.args, "toolgate")
			names := make([]string, 0, len(want))
			for n := range want {
				names = append(names, n)
			}
			sort.Strings(names)
			for _, n := range names {
				if want[n] != "" {
					continue // fails directly: reported, not required
				}
				if why, ran := got[n]; !ran {
					t.Errorf("%s: passes directly, did not run through toolgate", n)
				} else if why != "" {
					if gap, ok := openGaps[n]; ok && strings.Contains(why, gap) {
						t.Logf("%s: open gap (passes directly, not through toolgate): %s", n, why)
						continue
					}
					t.Errorf("%s: passes directly, fails through toolgate: %s", n, why)
				}
			}
		})
	}
}

// runSuite runs one suite against url and returns each scenario's failing checks
// ("" when none failed).
func runSuite(t *testing.T, node string, env []string, main, url string, args []string, label string) map[string]string {
	t.Helper()
	results := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, append([]string{main, "server", "--url", url, "-o", results}, args...)...)
	cmd.Env = env
	cmd.Dir = t.TempDir()
	out, err := cmd.CombinedOutput()
	_, summary, found := strings.Cut(string(out), "=== SUMMARY ===")
	if !found || !strings.Contains(summary, "Total:") {
		t.Fatalf("%s: the suite did not run to its end (%v):\n%s", label, err, out)
	}
	t.Logf("%s %s:%s", label, strings.Join(args, " "), summary)
	res := map[string]string{}
	for n, checks := range testenv.ConformanceResults(t, results) {
		var failed []string
		for _, c := range checks {
			if c.Status == "FAILURE" {
				failed = append(failed, fmt.Sprintf("check %s: %s", c.ID, c.ErrorMessage))
			}
		}
		res[n] = strings.Join(failed, "; ")
	}
	return res
}

// serveEverything serves the conformance server directly over Streamable HTTP on a
// loopback port and returns its URL.
func serveEverything(t *testing.T, stateless bool) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	marker := upstreamtest.Marker(t)
	cmd := exec.Command(upstreamtest.EverythingServer(t), "-http", addr, fmt.Sprintf("-stateless=%t", stateless), marker)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	for i := 0; ; i++ {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			break
		}
		if i > 500 {
			t.Fatalf("the conformance server did not listen on %s", addr)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return "http://" + addr + "/mcp"
}
