package hostrelay

import (
	"context"
	"encoding/json"
	"time"

	"github.com/toolgate/toolgate/internal/host"
	"github.com/toolgate/toolgate/internal/upstream"
)

// fixtureDialer is the smallest host.Dialer over internal/upstream, for tests only:
// DialRequest.Config is the upstream.Spec to start. onRequest answers the fixture's
// requests to the client (the "ask" tool), nil for the default.
type fixtureDialer struct {
	onRequest upstream.RequestHandler
}

func (d fixtureDialer) Dial(ctx context.Context, req host.DialRequest) (host.Session, error) {
	spec := req.Config.(upstream.Spec)
	p, err := upstream.Start(spec)
	if err != nil {
		return nil, err
	}
	c, err := upstream.DialStdio(ctx, p, upstream.Options{
		OnNotification: func(n upstream.Notification) { req.Notify(n.Method, n.Params) },
		OnRequest:      d.onRequest,
	})
	if err != nil {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		p.Stop(sctx)
		return nil, err
	}
	return &fixtureSession{p: p, c: c}, nil
}

type fixtureSession struct {
	p *upstream.Process
	c *upstream.Conn
}

func (s *fixtureSession) Info() host.SessionInfo {
	hs := s.c.Handshake()
	return host.SessionInfo{ProtocolVersion: hs.ProtocolVersion, ServerInfo: hs.ServerInfo, Capabilities: hs.Capabilities, Instructions: hs.Instructions}
}

func (s *fixtureSession) Call(ctx context.Context, method string, params json.RawMessage, opts host.CallOptions) (json.RawMessage, error) {
	if opts.Progress != nil {
		return s.c.CallWithProgress(ctx, method, params, opts.Progress)
	}
	return s.c.Call(ctx, method, params)
}

func (s *fixtureSession) Ping(ctx context.Context) error { return s.c.Ping(ctx) }

func (s *fixtureSession) Close(ctx context.Context) error {
	s.c.Close()
	return s.p.Stop(ctx)
}

func (s *fixtureSession) Done() <-chan struct{} { return s.c.Done() }
func (s *fixtureSession) Err() error            { return s.c.Err() }
func (s *fixtureSession) StderrTail() string    { return s.p.StderrTail() }

// fixtureHost is a NewHostFunc hosting one server, "fx": the fixture with marker.
func fixtureHost(fixture, marker string, onRequest upstream.RequestHandler) NewHostFunc {
	spec := upstream.Spec{Name: "fx", Command: fixture, Args: []string{"-marker", marker}, StopGrace: 300 * time.Millisecond}
	return func(ctx context.Context, obs host.Observer) (*host.Host, error) {
		return host.New(host.Options{
			Dialer:      fixtureDialer{onRequest: onRequest},
			Observer:    obs,
			Servers:     []host.Definition{{Name: "fx", Fingerprint: "sha256:fx", Config: spec}},
			IdleTimeout: -1,
			Health:      host.HealthPolicy{Interval: -1},
		})
	}
}
