package app_test

import (
	"testing"

	"github.com/toolgate/toolgate/internal/app"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/internal/upstream/upstreamtest"
)

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
	direct := map[bool]string{false: upstreamtest.ServeEverything(t, false), true: upstreamtest.ServeEverything(t, true)}
	for _, run := range testenv.ConformanceRuns {
		t.Run(run.Name, func(t *testing.T) {
			main := testenv.NPMPackageFile(t, run.Pkg, "dist/index.js")
			want := testenv.RunConformanceSuite(t, node, env, main, direct[run.Stateless], run.Args, "direct")
			got := testenv.RunConformanceSuite(t, node, env, main, b.URL(), run.Args, "toolgate")
			testenv.CompareConformance(t, want, got, openGaps)
		})
	}
}
