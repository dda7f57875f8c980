package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/app"
	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/host"
	"github.com/toolgate/toolgate/internal/kernel"
	"github.com/toolgate/toolgate/internal/mcpspec"
	"github.com/toolgate/toolgate/internal/mgmt"
	"github.com/toolgate/toolgate/internal/policy"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/internal/upstream/upstreamtest"
)

// openReplicas opens n Apps on one PostgreSQL database, each with its own data
// directory, pool and change listener: replicas that share nothing but the database.
func openReplicas(t testing.TB, n int) []*app.App {
	t.Helper()
	url := testenv.Postgres(t)
	var out []*app.App
	for i := range n {
		ran := 0
		a, err := app.Open(context.Background(), app.Options{DataDir: filepath.Join(t.TempDir(), "data"), DatabaseURL: url,
			Tools: []*kernel.Tool{localTool(&ran)}})
		if err != nil {
			t.Fatalf("replica %d: %v", i, err)
		}
		t.Cleanup(func() { a.Close() })
		out = append(out, a)
	}
	return out
}

func callEcho(t *testing.T, tr app.Turn) *mcpspec.CallResult {
	t.Helper()
	res, err := tr.CallTool(context.Background(), &mcpspec.CallRequest{Name: "local.echo", Arguments: json.RawMessage(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// A grant revoked through one replica stops a turn open on another at its next call,
// and grants made on one are enforced by the other; both replicas' calls land in one
// audit chain that either reads and verifies.
func TestRevocationReachesAnotherReplica(t *testing.T) {
	ctx := context.Background()
	rs := openReplicas(t, 2)
	a, b := rs[0], rs[1]
	g, err := a.Store().AddGrant(ctx, policy.Grant{Principal: "bob", Tool: "local.echo", Action: "execute", Effect: policy.Allow})
	if err != nil {
		t.Fatal(err)
	}
	tr := mustTurn(t, b, "bob")
	if res := callEcho(t, tr); res.IsError {
		t.Fatalf("call granted on the other replica refused: %+v", res.Meta)
	}
	if err := a.Store().RemoveGrant(ctx, g.ID); err != nil {
		t.Fatal(err)
	}
	if res := callEcho(t, tr); !res.IsError || res.Meta["toolgate/code"] != "no_matching_grant" {
		t.Errorf("call after the grant was revoked on the other replica: isError=%v meta=%v", res.IsError, res.Meta)
	}
	if _, err := a.Store().AddGrant(ctx, policy.Grant{Principal: "bob", Tool: "local.*", Action: "*", Effect: policy.Allow}); err != nil {
		t.Fatal(err)
	}
	if res := callEcho(t, mustTurn(t, a, "bob")); res.IsError {
		t.Errorf("call on the granting replica: %+v", res.Meta)
	}
	if res := callEcho(t, tr); res.IsError {
		t.Errorf("call after the grant came back on the other replica: %+v", res.Meta)
	}
	for i, r := range rs {
		evs, err := r.Store().ListAudit(ctx, audit.Filter{Principal: "bob"})
		if err != nil || len(evs) != 4 {
			t.Fatalf("replica %d reads %d events (%v), want 4", i, len(evs), err)
		}
		all, _ := r.Store().ListAudit(ctx, audit.Filter{})
		if err := audit.Verify(all); err != nil {
			t.Errorf("replica %d: %v", i, err)
		}
	}
}

// waitLoaded waits until a's kernel holds the policy at store version v or later. The
// bound only keeps a broken listener from hanging the test.
func waitLoaded(tb testing.TB, a *app.App, v int64) {
	tb.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for app.PolicyVersionLoaded(a) < v {
		if time.Now().After(deadline) {
			tb.Fatalf("policy version %d never loaded (at %d)", v, app.PolicyVersionLoaded(a))
		}
		time.Sleep(20 * time.Microsecond)
	}
}

// The change notification alone brings another replica's policy up to date, without
// any call there: its next call then finds the policy current and reloads nothing.
func TestChangeNotificationReloadsAnotherReplica(t *testing.T) {
	ctx := context.Background()
	rs := openReplicas(t, 2)
	a, b := rs[0], rs[1]
	start := time.Now()
	if _, err := a.Store().AddGrant(ctx, policy.Grant{Principal: "bob", Tool: "local.echo", Action: "execute", Effect: policy.Allow}); err != nil {
		t.Fatal(err)
	}
	committed := time.Since(start)
	v, err := a.Store().PolicyVersion(ctx)
	if err != nil {
		t.Fatal(err)
	}
	waitLoaded(t, b, v)
	t.Logf("grant committed in %v; loaded by the other replica %v after the commit returned", committed, time.Since(start)-committed)
	loads := app.PolicyLoads(b)
	if res := callEcho(t, mustTurn(t, b, "bob")); res.IsError {
		t.Fatalf("call refused: %+v", res.Meta)
	}
	if got := app.PolicyLoads(b); got != loads {
		t.Errorf("the call reloaded the policy (%d -> %d loads): the notification had not", loads, got)
	}
}

// BenchmarkGrantChangeReachesAnotherReplica measures, per change, the time from a
// namespace switch's commit returning on one replica to the other replica's kernel
// holding the new policy, with no call on the other replica: NOTIFY delivery, the
// listener's wake-up, the version read and the reload.
func BenchmarkGrantChangeReachesAnotherReplica(b *testing.B) {
	ctx := context.Background()
	rs := openReplicas(b, 2)
	src, dst := rs[0], rs[1]
	// Each switch flips the namespace, so it moves the version by exactly one.
	v0, err := src.Store().PolicyVersion(ctx)
	if err != nil {
		b.Fatal(err)
	}
	var total time.Duration
	i := 0
	for b.Loop() {
		i++
		if err := src.Store().SetNamespaceEnabled(ctx, "github", i%2 == 0); err != nil {
			b.Fatal(err)
		}
		committed := time.Now()
		waitLoaded(b, dst, v0+int64(i))
		total += time.Since(committed)
	}
	b.ReportMetric(float64(total.Microseconds())/float64(i), "µs/propagation")
}

// A server installed through one replica is hosted by another at its next request:
// replicas share the database, each hosts the servers itself.
func TestInstallReachesAnotherReplica(t *testing.T) {
	ctx := context.Background()
	rs := openReplicas(t, 2)
	marker := upstreamtest.Marker(t)
	doc := fmt.Sprintf(`{"mcpServers":{"fx":{"command":%q,"args":["-marker",%q]}}}`, upstreamtest.Fixture(t), marker)
	if res, err := mgmt.Checked(rs[0]).Install(ctx, mgmt.Caller{Principal: "default", Owner: true}, mgmt.InstallParams{ConfigJSON: doc}); err != nil || res.Status != mgmt.InstallOK {
		t.Fatalf("install: %+v %v", res, err)
	}
	tr, err := rs[1].OpenTurn(ctx, app.TurnRequest{})
	if err != nil {
		t.Fatal(err)
	}
	tr.Close()
	if _, ok, err := rs[1].Upstreams().Status(ctx, "fx"); err != nil || !ok {
		t.Fatalf("the other replica does not host the server: %v %v", ok, err)
	}
	out, err := rs[1].Upstreams().Call(ctx, "fx", "tools/call", json.RawMessage(`{"name":"echo","arguments":{"text":"r2"}}`), host.CallOptions{})
	if err != nil || !strings.Contains(string(out), "r2") {
		t.Fatalf("call on the other replica: %s %v", out, err)
	}
}

// Subscribers of one replica hear of an install made through another: the change
// notification wakes the replica, whose pass over the installed servers sends
// mcp/changed.
func TestInstallNotifiesAnotherReplica(t *testing.T) {
	ctx := context.Background()
	rs := openReplicas(t, 2)
	got := make(chan mgmt.Notification, 16)
	stop, _ := rs[1].Subscribe(func(n mgmt.Notification) { got <- n })
	defer stop()
	doc := fmt.Sprintf(`{"mcpServers":{"fx":{"command":%q,"args":["-marker",%q]}}}`, upstreamtest.Fixture(t), upstreamtest.Marker(t))
	if _, err := mgmt.Checked(rs[0]).Install(ctx, mgmt.Caller{Principal: "default", Owner: true}, mgmt.InstallParams{ConfigJSON: doc}); err != nil {
		t.Fatal(err)
	}
	// The replica also starts the server to fetch its first catalogue (status changes);
	// the install is what it must report.
	deadline := time.After(10 * time.Second)
	for {
		select {
		case n := <-got:
			if _, status := n.(*mgmt.StatusChanged); status {
				continue
			}
			if _, cat := n.(*mgmt.CatalogChanged); cat {
				continue
			}
			if c, ok := n.(*mgmt.Changed); !ok || c.Change != mgmt.ChangeInstalled || c.Name != "fx" {
				t.Fatalf("notification %#v", n)
			}
			return
		case <-deadline:
			t.Fatal("the other replica's subscribers heard nothing")
		}
	}
}
