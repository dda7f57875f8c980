package upstreamtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/toolgate/toolgate/internal/host"
	"github.com/toolgate/toolgate/internal/upstream"
)

// Dialer is the smallest host.Dialer over internal/upstream, for tests of what is built
// on the host with real upstream processes: DialRequest.Config is the upstream.Spec to
// start (a Spec of this package). OnRequest answers the upstream's requests to the
// client (the fixture's "ask" tool); nil is upstream's default.
type Dialer struct {
	OnRequest upstream.RequestHandler
	// OnRequestFor, when set, makes each connection's handler from the server and
	// caller session it is dialled for (as the daemon's dialer does); it wins over
	// OnRequest.
	OnRequestFor func(server, sessionKey string) upstream.RequestHandler
	// ToClient, with no OnRequest, answers the upstream's requests through the host
	// (host.DialRequest.Request: the call in flight they belong to) and declares the
	// client capabilities sampling, elicitation and roots, as a gateway does.
	ToClient bool
}

// Dial starts the process and makes the handshake over its stdio.
func (d Dialer) Dial(ctx context.Context, req host.DialRequest) (host.Session, error) {
	spec := req.Config.(upstream.Spec)
	p, err := upstream.Start(spec)
	if err != nil {
		return nil, err
	}
	o := upstream.Options{
		OnNotification: func(n upstream.Notification) { req.Notify(n.Method, n.Params) },
		OnRequest:      d.OnRequest,
	}
	if d.OnRequestFor != nil {
		o.OnRequest = d.OnRequestFor(req.Server, req.SessionKey)
	}
	if req.Stateless {
		// A stateless twin (host, "Eras"): no requests to the client, capabilities
		// per request, log messages in order with the answers.
		o.Era, o.OnRequest = upstream.EraStateless, nil
		o.OnMessage = o.OnNotification
	} else if o.OnRequest == nil && d.ToClient && req.Request != nil {
		o.OnRequest = upstream.RequestHandler(req.Request)
		o.Capabilities = json.RawMessage(`{"elicitation":{},"roots":{},"sampling":{}}`)
		o.OnMessage = func(n upstream.Notification) { req.Notify(n.Method, n.Params) }
	}
	c, err := upstream.DialStdio(ctx, p, o)
	if err != nil {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		p.Stop(sctx)
		if errors.Is(err, upstream.ErrNotStateless) {
			return nil, fmt.Errorf("%w: %w", host.ErrNotStateless, err)
		}
		return nil, err
	}
	return &session{p: p, c: c}, nil
}

type session struct {
	p *upstream.Process
	c *upstream.Conn
}

func (s *session) Info() host.SessionInfo {
	hs := s.c.Handshake()
	return host.SessionInfo{ProtocolVersion: hs.ProtocolVersion, ServerInfo: hs.ServerInfo, Capabilities: hs.Capabilities, Instructions: hs.Instructions}
}

func (s *session) Call(ctx context.Context, method string, params json.RawMessage, opts host.CallOptions) (json.RawMessage, error) {
	if opts.Stateless != nil {
		ctx = upstream.WithClientCapabilities(ctx, opts.Stateless.Capabilities)
	}
	if opts.Progress != nil {
		return s.c.CallWithProgress(ctx, method, params, opts.Progress)
	}
	return s.c.Call(ctx, method, params)
}

func (s *session) Ping(ctx context.Context) error { return s.c.Ping(ctx) }

func (s *session) Close(ctx context.Context) error {
	s.c.Close()
	return s.p.Stop(ctx)
}

func (s *session) Done() <-chan struct{} { return s.c.Done() }
func (s *session) Err() error            { return s.c.Err() }
func (s *session) StderrTail() string    { return s.p.StderrTail() }

// NewHost returns a func building a host (hostrelay.NewHostFunc's shape) of the
// servers specs name, each dialed by Dialer{}, with no idle stop and no pings, so a
// test sees only what it does; restarts back off 50-100 ms. Give its result to
// hostrelay.NewLocal.
func NewHost(specs ...upstream.Spec) func(ctx context.Context, obs host.Observer) (*host.Host, error) {
	return Dialer{}.Host(specs...)
}

// Host is NewHost with d as the dialer.
func (d Dialer) Host(specs ...upstream.Spec) func(ctx context.Context, obs host.Observer) (*host.Host, error) {
	defs := make([]host.Definition, len(specs))
	for i, s := range specs {
		defs[i] = host.Definition{Name: s.Name, Fingerprint: "sha256:" + s.Name, Config: s}
	}
	return func(ctx context.Context, obs host.Observer) (*host.Host, error) {
		return host.New(host.Options{Dialer: d, Observer: obs, Servers: defs, IdleTimeout: -1,
			Health:  host.HealthPolicy{Interval: -1},
			Restart: host.RestartPolicy{InitialInterval: 50 * time.Millisecond, MaxInterval: 100 * time.Millisecond}})
	}
}

// HoldRequests returns a RequestHandler that reports each request an upstream sends
// its client (the method, on asked) and holds it unanswered until its context ends or
// release is called. With it the fixture's ask tool is a call known to be in flight
// upstream, which stays there until it is cancelled: what a test of cancellation
// waits for instead of sleeping.
func HoldRequests() (h upstream.RequestHandler, asked <-chan string, release func()) {
	ch := make(chan string, 16)
	stop := make(chan struct{})
	var once sync.Once
	h = func(ctx context.Context, method string, _ json.RawMessage) (json.RawMessage, error) {
		select {
		case ch <- method:
		default:
		}
		select {
		case <-ctx.Done():
		case <-stop:
		}
		return nil, errors.New("upstreamtest: request held, not answered")
	}
	return h, ch, func() { once.Do(func() { close(stop) }) }
}
