package app_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/host"
	"github.com/toolgate/toolgate/internal/mcpspec"
	"github.com/toolgate/toolgate/internal/upstream/upstreamtest"
)

// A turn whose catalogue publishes an upstream server's tools starts that server in
// the background (real fixture processes): its first call finds it running. A turn
// that does not publish them starts nothing.
func TestOpeningATurnWarmsItsServers(t *testing.T) {
	spec, marker := upstreamtest.Spec(t)
	spec.Name = "fx"
	w := &upstreamWorld{markers: map[string]string{"fx": marker}}
	w.open(t, func(ctx context.Context, obs host.Observer) (*host.Host, error) {
		return host.New(host.Options{Dialer: upstreamtest.Dialer{}, Observer: obs, IdleTimeout: 300 * time.Millisecond,
			Health:  host.HealthPolicy{Interval: -1},
			Servers: []host.Definition{{Name: "fx", Fingerprint: "sha256:fx", Config: spec}}})
	}, nil)
	w.sync(t, "fx", true, true) // starts fx to fetch its catalogue
	waitProcesses(t, marker, 0) // then it stops for idleness

	w.turn(t) // no grant covers fx: nothing to warm
	time.Sleep(500 * time.Millisecond)
	if n := len(upstreamtest.Processes(t, marker)); n != 0 {
		t.Fatalf("a turn that publishes no fx tool started %d fx processes", n)
	}

	w.grant(t, "fx.*")
	tr := w.turn(t)
	waitProcesses(t, marker, 1) // started without a call
	r, err := tr.CallTool(context.Background(), &mcpspec.CallRequest{Name: "fx.echo", Arguments: json.RawMessage(`{"text":"w"}`)})
	if err != nil || r.IsError {
		t.Fatalf("call after the warm: %v %+v", err, r)
	}
	if n := len(upstreamtest.Processes(t, marker)); n != 1 {
		t.Fatalf("%d fx processes after the call, want the warmed one", n)
	}
}

func waitProcesses(t *testing.T, marker string, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for len(upstreamtest.Processes(t, marker)) != n {
		if time.Now().After(deadline) {
			t.Fatalf("fx processes %v, want %d", upstreamtest.Processes(t, marker), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
