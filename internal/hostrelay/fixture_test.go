package hostrelay

import (
	"context"
	"time"

	"github.com/toolgate/toolgate/internal/host"
	"github.com/toolgate/toolgate/internal/upstream"
	"github.com/toolgate/toolgate/internal/upstream/upstreamtest"
)

// fixtureHost is a NewHostFunc hosting one server, "fx": the fixture with marker.
func fixtureHost(fixture, marker string, onRequest upstream.RequestHandler) NewHostFunc {
	spec := upstream.Spec{Name: "fx", Command: fixture, Args: []string{"-marker", marker}, StopGrace: 300 * time.Millisecond}
	return func(ctx context.Context, obs host.Observer) (*host.Host, error) {
		return host.New(host.Options{
			Dialer:      upstreamtest.Dialer{OnRequest: onRequest},
			Observer:    obs,
			Servers:     []host.Definition{{Name: "fx", Fingerprint: "sha256:fx", Config: spec}},
			IdleTimeout: -1,
			Health:      host.HealthPolicy{Interval: -1},
		})
	}
}
