package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/toolgate/toolgate/internal/host"
	"github.com/toolgate/toolgate/internal/keystore"
	"github.com/toolgate/toolgate/internal/mcpconfig"
	"github.com/toolgate/toolgate/internal/netguard"
	"github.com/toolgate/toolgate/internal/upstream"
)

// dialConfig is what a host.Definition's Config holds for an installed server: its
// normalised definition (secret names and digests, never a value) and the keystore
// scope its secrets are sealed under. The host hands it to upstreamDialer unchanged.
type dialConfig struct {
	server  mcpconfig.Server
	ksScope string
}

// upstreamDialer is the host's Dialer over internal/upstream: a stdio server is started
// as its literal argv with its declared environment over upstream.BaseEnv (never
// toolgate's own), an HTTP or SSE one is reached through netguard's guarded transport.
// Secrets are opened from the keystore here, at the moment of the dial, and nowhere
// else (docs/keystore.md): an argv and environment are handed to the process and
// dropped; header values stay inside the connection's header source.
type upstreamDialer struct {
	ks  *keystore.Keystore
	log *slog.Logger
	// stopGrace bounds each stage of a process's stop (0: upstream's default).
	stopGrace time.Duration
	// requests answers what a server asks of the client (sampling, elicitation,
	// roots) on a connection: App.UpstreamRequests, which refuses unless a grant lets
	// that server ask that principal (docs/trust.md). Nil answers with upstream's
	// default (every request refused).
	requests func(server, sessionKey string, deliver upstream.RequestHandler) upstream.RequestHandler
	// auths signs in to remote servers with OAuth (oauth.go); nil dials them with
	// their configured headers only.
	auths *upstreamAuths
	// resolver resolves remote servers' names (nil: net.DefaultResolver; testhosts.go).
	resolver netguard.Resolver
}

// clientCapabilities are what toolgate declares to an upstream when it routes the
// server's requests to the caller (the grants decide each one).
var clientCapabilities = json.RawMessage(`{"sampling":{},"elicitation":{},"roots":{}}`)

func (d *upstreamDialer) Dial(ctx context.Context, req host.DialRequest) (host.Session, error) {
	cfg, ok := req.Config.(dialConfig)
	if !ok {
		return nil, fmt.Errorf("dialing %q: the definition is not an installed server's", req.Server)
	}
	src := d.ks.Server(cfg.ksScope, cfg.server.Name)
	opts := upstream.Options{
		Name:   cfg.server.Name,
		Logger: d.log,
		// Declared only with a handler that answers them.
		Capabilities: declaredCapabilities(d.requests != nil),
		OnNotification: func(n upstream.Notification) {
			if req.Notify != nil {
				req.Notify(n.Method, n.Params)
			}
		},
	}
	if req.Stateless {
		// The stateless twin (docs/host.md, "Eras"): each request declares its own
		// caller's capabilities; the revision has no server→client request, and its
		// log messages go, in order with the answers, to the call they belong to.
		opts.Era = upstream.EraStateless
		opts.Capabilities = nil
		opts.OnMessage = opts.OnNotification
		if cfg.server.Transport.Kind == mcpconfig.SSE {
			return nil, fmt.Errorf("dialing %q statelessly: %w", req.Server, host.ErrNotStateless)
		}
	} else if d.requests != nil {
		var deliver upstream.RequestHandler
		if req.Request != nil {
			deliver = upstream.RequestHandler(req.Request)
		}
		opts.OnRequest = d.requests(req.Server, req.SessionKey, deliver)
		// Log messages go, in order with the answers, to the call they belong to.
		opts.OnMessage = func(n upstream.Notification) {
			if req.Notify != nil {
				req.Notify(n.Method, n.Params)
			}
		}
	}
	t := &cfg.server.Transport
	switch t.Kind {
	case mcpconfig.Stdio:
		return d.dialStdio(ctx, cfg.server.Name, t, src, opts)
	case mcpconfig.HTTP, mcpconfig.SSE:
		return d.dialHTTP(ctx, cfg, src, opts)
	}
	return nil, fmt.Errorf("dialing %q: unknown transport %q", req.Server, t.Kind)
}

func (d *upstreamDialer) dialStdio(ctx context.Context, name string, t *mcpconfig.Transport, src mcpconfig.SecretSource, opts upstream.Options) (host.Session, error) {
	argv, err := t.Argv(ctx, src)
	if err != nil {
		return nil, fmt.Errorf("starting %q: %w", name, err)
	}
	environ, err := t.Environ(ctx, src)
	if err != nil {
		return nil, fmt.Errorf("starting %q: %w", name, err)
	}
	env := make(map[string]string, len(environ))
	for _, kv := range environ {
		for i := 0; i < len(kv); i++ {
			if kv[i] == '=' {
				env[kv[:i]] = kv[i+1:]
				break
			}
		}
	}
	p, err := upstream.Start(upstream.Spec{Name: name, Command: argv[0], Args: argv[1:], Env: env, Dir: t.Cwd,
		StopGrace: d.stopGrace, Logger: d.log})
	if err != nil {
		return nil, err // names the server and the program, never an argument or a value
	}
	c, err := upstream.DialStdio(ctx, p, opts)
	if err != nil {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), host.DefaultStopTimeout)
		defer cancel()
		_ = p.Stop(sctx)
		return nil, eraErr(authErr(err))
	}
	return &upstreamSession{c: c, p: p}, nil
}

func (d *upstreamDialer) dialHTTP(ctx context.Context, cfg dialConfig, src mcpconfig.SecretSource, opts upstream.Options) (host.Session, error) {
	t := &cfg.server.Transport
	// The server's reach: its network member over netguard's defaults — loopback only
	// when its URL names loopback, plain http only to loopback, the default denied
	// ranges (metadata endpoints, …) never (docs/trust.md, "Reach").
	pol, err := t.Network.Policy()
	if err != nil {
		return nil, fmt.Errorf("dialing %q: %w", cfg.server.Name, err)
	}
	guard := netguard.NewGuard(pol, d.resolver)
	if _, err := netguard.ValidateURL(t.URL, guard.Policy()); err != nil {
		return nil, fmt.Errorf("connecting to %s: %w", t.DisplayURL(), err)
	}
	endpoint, err := t.Endpoint(ctx, src)
	if err != nil {
		return nil, err
	}
	hs, err := t.HeaderValues(ctx, src)
	if err != nil {
		return nil, err
	}
	kind := upstream.HTTPAuto
	if t.Kind == mcpconfig.SSE {
		kind = upstream.HTTPSSE
	}
	if opts.Era != upstream.EraStateless { // the stateless twin is dialled as one, never probed
		opts.Era = remoteEra(t.Kind)
	}
	spec := upstream.HTTPSpec{URL: endpoint.RevealString(), Kind: kind, Headers: sealedHeaders(hs)}
	// Redirects are netguard's: within the server's origin only (docs/trust.md,
	// "Headers and redirects"); net/http's default would follow one anywhere.
	rc, err := netguard.NewClient(guard, netguard.ClientOptions{URL: t.URL})
	if err != nil {
		return nil, fmt.Errorf("connecting to %s: %w", t.DisplayURL(), err)
	}
	spec.CheckRedirect = rc.CheckRedirect
	if d.auths != nil && usesOAuth(t) {
		// The server's OAuth sign-in owns its Authorization header and answers its
		// challenges; without usable credentials the dial fails with an
		// *upstream.AuthRequiredError at once (authErr parks the server).
		a, err := d.auths.get(ctx, cfg, true)
		if err != nil {
			return nil, err
		}
		spec.Auth = a
	}
	tr := netguard.NewTransport(guard)
	spec.Transport = tr
	c, err := upstream.DialHTTP(ctx, spec, opts)
	if err != nil {
		tr.CloseIdleConnections()
		return nil, eraErr(authErr(err))
	}
	return &upstreamSession{c: c, tr: tr}, nil
}

// sealedHeaders is an upstream.HeaderSource over header values opened at the dial:
// each request gets them, to the server's origin only (upstream's header transport);
// they are never logged (keystore.Secret prints redacted).
type sealedHeaders []mcpconfig.Header

func (s sealedHeaders) Header(context.Context) (http.Header, error) {
	h := make(http.Header, len(s))
	for _, v := range s {
		h.Set(v.Name, v.Value.RevealString())
	}
	return h, nil
}

// authErr makes an upstream's refusal of our credentials host.ErrAuthRequired, which
// parks the server in auth_required rather than retrying it (no retry storm).
func authErr(err error) error {
	var ae *upstream.AuthRequiredError
	if errors.As(err, &ae) && !ae.InsufficientScope() {
		return fmt.Errorf("%w: %w", host.ErrAuthRequired, err)
	}
	return err
}

// eraErr makes a stateless dial's "the server does not speak 2026-07-28" the host's
// host.ErrNotStateless, which it remembers (no further stateless dial).
func eraErr(err error) error {
	if errors.Is(err, upstream.ErrNotStateless) {
		return fmt.Errorf("%w: %w", host.ErrNotStateless, err)
	}
	return err
}

// upstreamSession is a host.Session over one upstream connection and, for stdio, its
// process.
type upstreamSession struct {
	c  *upstream.Conn
	p  *upstream.Process // nil for HTTP
	tr *http.Transport   // nil for stdio
}

func (s *upstreamSession) Info() host.SessionInfo {
	hs := s.c.Handshake()
	return host.SessionInfo{ProtocolVersion: hs.ProtocolVersion, ServerInfo: hs.ServerInfo,
		Capabilities: hs.Capabilities, Instructions: hs.Instructions}
}

func (s *upstreamSession) Call(ctx context.Context, method string, params json.RawMessage, opts host.CallOptions) (json.RawMessage, error) {
	if opts.Stateless != nil {
		ctx = upstream.WithClientCapabilities(ctx, opts.Stateless.Capabilities)
	}
	var res json.RawMessage
	var err error
	if opts.Progress != nil {
		res, err = s.c.CallWithProgress(ctx, method, params, opts.Progress)
	} else {
		res, err = s.c.Call(ctx, method, params)
	}
	if err != nil {
		return nil, authErr(err)
	}
	return res, nil
}

func (s *upstreamSession) Ping(ctx context.Context) error { return s.c.Ping(ctx) }

// Close ends the connection, then stops the process: stdin closed, SIGTERM, SIGKILL to
// its group (upstream.Process.Stop), by ctx's deadline.
func (s *upstreamSession) Close(ctx context.Context) error {
	err := s.c.Close()
	if s.p != nil {
		if perr := s.p.Stop(ctx); perr != nil {
			return perr
		}
		return nil
	}
	s.tr.CloseIdleConnections()
	return err
}

func (s *upstreamSession) Done() <-chan struct{} { return s.c.Done() }
func (s *upstreamSession) Err() error            { return s.c.Err() }

// StderrTail is the process's stderr tail with its declared secret values replaced
// (upstream.Process redacts them); HTTP servers have none.
func (s *upstreamSession) StderrTail() string {
	if s.p == nil {
		return ""
	}
	return s.p.StderrTail()
}

func declaredCapabilities(routed bool) json.RawMessage {
	if routed {
		return clientCapabilities
	}
	return nil
}
