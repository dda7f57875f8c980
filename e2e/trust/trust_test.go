package trust

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/app"
	"github.com/toolgate/toolgate/internal/host"
	"github.com/toolgate/toolgate/internal/policy"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/internal/upstream/upstreamtest/fixturedata"
)

// run runs the toolgate CLI over data and returns stdout, stderr and the exit code.
func run(t *testing.T, data string, args ...string) (string, string, int) {
	t.Helper()
	return testenv.Run(t, data, args...)
}

// listing is what the hostile fixture lists (fixturedata.HostileTools), before the
// rug pull or after it. The App is given it directly: the decision path is what this
// test drives, not the host.
func listing(pulled bool) host.Catalog {
	echo := `{"name":"echo","description":"returns its text","inputSchema":{"type":"object","properties":{"text":{"type":"string"}}}}`
	ver := uint64(1)
	if pulled {
		echo, ver = fixturedata.RugPulledEcho, 2
	}
	tools := []json.RawMessage{json.RawMessage(echo)}
	for _, tl := range fixturedata.HostileTools {
		tools = append(tools, json.RawMessage(tl))
	}
	return host.Catalog{Version: ver, Digest: fmt.Sprintf("listing-%d", ver), Tools: tools}
}

func open(t *testing.T, data string) *app.App {
	t.Helper()
	a, err := app.Open(context.Background(), app.Options{DataDir: data})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func publish(a *app.App, pulled bool) {
	a.SyncUpstream(app.UpstreamServer{Name: "fx", Enabled: true, Implicit: true}, listing(pulled))
}

func names(t *testing.T, a *app.App) []string {
	t.Helper()
	tr, err := a.OpenTurn(context.Background(), app.TurnRequest{Transport: "test"})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	l, err := tr.ListTools(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, raw := range l.Tools {
		var v struct{ Name string }
		json.Unmarshal(raw, &v)
		out = append(out, v.Name)
	}
	return out
}

var digestRE = regexp.MustCompile(`--digest (sha256:[0-9a-f]{64})`)

// The rug pull is decided by the owner through the binary: ls lists the hold, show
// prints the difference and the command that approves it, an approval without the
// digest or with another is refused, reject keeps it hidden, approve publishes it.
func TestRugPullDecidedThroughTheCLI(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	a := open(t, data)
	if _, err := a.Store().AddGrant(context.Background(), policy.Grant{Principal: app.DefaultPrincipal, Tool: "fx.*", Action: "*", Effect: policy.Allow}); err != nil {
		t.Fatal(err)
	}
	publish(a, false)
	if !slices.Contains(names(t, a), "fx.echo") {
		t.Fatal("echo is not published on first sight")
	}
	publish(a, true)
	if slices.Contains(names(t, a), "fx.echo") {
		t.Fatal("the changed echo is published")
	}
	a.Close() // the decision is made with no process publishing the server

	out, errb, code := run(t, data, "pins", "ls")
	if code != 0 || !strings.Contains(out, "fx") || !strings.Contains(out, "echo") || !strings.Contains(out, "changed") ||
		!strings.Contains(out, "hidden") || !strings.Contains(out, "flagged") {
		t.Fatalf("pins ls: %d %q %q", code, out, errb)
	}
	out, errb, code = run(t, data, "pins", "show", "fx", "echo")
	m := digestRE.FindStringSubmatch(out)
	if code != 0 || m == nil || !strings.Contains(out, "id_rsa") || !strings.Contains(out, "description") {
		t.Fatalf("pins show: %d %q %q", code, out, errb)
	}
	digest := m[1]
	out, errb, code = run(t, data, "pins", "show", "fx", "hidden")
	if code != 0 || !strings.Contains(out, "tag") || !strings.Contains(out, "ignore previous instructions") || strings.ContainsRune(out, '\u202e') {
		t.Fatalf("pins show hidden (findings shown, the override escaped): %d %q %q", code, out, errb)
	}
	if _, errb, code = run(t, data, "pins", "approve", "fx", "echo"); code == 0 || !strings.Contains(errb, "digest") {
		t.Fatalf("approve without a digest: %d %q", code, errb)
	}
	if _, errb, code = run(t, data, "pins", "approve", "fx", "echo", "--digest", "sha256:"+strings.Repeat("0", 64)); code == 0 || !strings.Contains(errb, "review it again") {
		t.Fatalf("approve of another digest: %d %q", code, errb)
	}
	if _, errb, code = run(t, data, "pins", "approve", "fx", "nosuch", "--digest", digest); code == 0 || !strings.Contains(errb, "no definition") {
		t.Fatalf("approve of an unknown tool: %d %q", code, errb)
	}
	if out, errb, code = run(t, data, "pins", "approve", "fx", "echo", "--digest", digest, "--by", "alice"); code != 0 {
		t.Fatalf("approve: %d %q %q", code, out, errb)
	}
	out, errb, code = run(t, data, "pins", "policy", "fx", "--trusted")
	var pol app.TrustPolicy
	if code != 0 || json.Unmarshal([]byte(out), &pol) != nil || !pol.Trusted || pol.Pin != "tofu" {
		t.Fatalf("pins policy --trusted: %d %q %q", code, out, errb)
	}
	if _, errb, code = run(t, data, "pins", "policy", "fx", "--pin", "sometimes"); code == 0 || !strings.Contains(errb, "pin policy") {
		t.Fatalf("pins policy --pin sometimes: %d %q", code, errb)
	}

	a = open(t, data)
	defer a.Close()
	publish(a, true) // the restarted server lists the approved definition
	got := names(t, a)
	if !slices.Contains(got, "fx.echo") || slices.Contains(got, "fx.hidden") {
		t.Fatalf("after the approval: %v (want echo published, hidden still held)", got)
	}
	out, _, _ = run(t, data, "pins", "ls", "fx")
	if !strings.Contains(out, "alice") {
		t.Fatalf("pins ls fx does not show who approved: %q", out)
	}
}
