package mcpserver

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/toolgate/toolgate/internal/rpcwire"
)

// Defaults of HandlerOptions.
const (
	DefaultMaxSessions = 1024
	DefaultIdleTimeout = 30 * time.Minute
)

// HandlerOptions configures NewHandler.
type HandlerOptions struct {
	// Path is the one route served; default /mcp. Other paths get 404.
	Path string
	// Authenticate maps the bearer token (present=false when none was sent) to a
	// principal. Nil means no authentication and principal "".
	Authenticate func(token string, present bool) (principal string, ok bool)
	// OpenTurn opens the Turn of a new session (one per initialize that names no
	// session). It runs only after Host, Origin and authentication passed.
	OpenTurn     func(ctx context.Context, principal string) (Turn, error)
	ServerInfo   Implementation
	Instructions string
	// MaxSessions caps live sessions (default DefaultMaxSessions). At the cap a
	// new initialize ends the least recently used session with no request in
	// flight; if every session is busy it gets 503 too_many_sessions.
	MaxSessions int
	// IdleTimeout ends sessions unused this long (default DefaultIdleTimeout).
	IdleTimeout time.Duration
	// MaxBodyBytes caps a POST body, 413 above it (default DefaultMaxBodyBytes).
	MaxBodyBytes int64
	// AllowedHosts are Host/Origin values accepted beyond the loopback names.
	AllowedHosts []string
	// NoStateless turns off the stateless 2026-07-28 revision, which the handler
	// otherwise serves beside the session-based versions (each such request runs
	// on a Turn of its own; see StdioOptions.Stateless for what a client that
	// picks it gives up). Unlike a bridge, the daemon's endpoint is reached by
	// stateless clients, so it is on by default.
	NoStateless bool
	// Logger receives failures; nil discards.
	Logger *slog.Logger
}

// Handler serves MCP over Streamable HTTP with a session per initialize, each
// bound to the principal that created it and served by its own Turn.
type Handler struct {
	core *httpCore
	reg  *registry
}

// NewHandler returns a Handler; call Close to end its sessions.
func NewHandler(opts HandlerOptions) *Handler {
	if opts.Path == "" {
		opts.Path = "/mcp"
	}
	if opts.MaxSessions <= 0 {
		opts.MaxSessions = DefaultMaxSessions
	}
	if opts.IdleTimeout <= 0 {
		opts.IdleTimeout = DefaultIdleTimeout
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	reg := &registry{
		opts:     opts,
		sessions: map[string]*httpSession{},
		stop:     make(chan struct{}),
		stopped:  make(chan struct{}),
	}
	go reg.reap()
	return &Handler{
		reg: reg,
		core: &httpCore{
			path:         opts.Path,
			guard:        newGuard(opts.AllowedHosts),
			authenticate: opts.Authenticate,
			limits:       rpcwire.Limits{MaxBytes: int(opts.MaxBodyBytes)},
			maxBody:      opts.MaxBodyBytes,
			store:        reg,
			log:          opts.Logger,
			stateless:    !opts.NoStateless,
		},
	}
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.core.ServeHTTP(w, r) }

// Sessions returns the number of live sessions.
func (h *Handler) Sessions() int {
	h.reg.mu.Lock()
	defer h.reg.mu.Unlock()
	return len(h.reg.sessions)
}

// Close ends every session and stops the idle reaper. Later initializes fail.
func (h *Handler) Close() error {
	h.reg.mu.Lock()
	if h.reg.closed {
		h.reg.mu.Unlock()
		return nil
	}
	h.reg.closed = true
	all := h.reg.sessions
	h.reg.sessions = map[string]*httpSession{}
	h.reg.mu.Unlock()
	close(h.reg.stop)
	<-h.reg.stopped
	for _, s := range all {
		s.end()
	}
	return nil
}

type registry struct {
	opts     HandlerOptions
	mu       sync.Mutex
	sessions map[string]*httpSession
	reserved int
	closed   bool
	stop     chan struct{}
	stopped  chan struct{}
}

func (g *registry) lookup(id, principal string) *httpSession {
	g.mu.Lock()
	s := g.sessions[id]
	g.mu.Unlock()
	if s == nil || s.principal != principal || s.isEnded() {
		return nil
	}
	return s
}

func (g *registry) implicit(string) *httpSession { return nil }

func (g *registry) creates() bool { return true }

// stateless opens a Turn for one 2026-07-28 request and closes it afterwards:
// that era has no sessions, so nothing is kept between requests.
func (g *registry) stateless(ctx context.Context, principal string) (*conn, func(), refusal) {
	g.mu.Lock()
	closed := g.closed
	g.mu.Unlock()
	if closed || g.opts.OpenTurn == nil {
		return nil, nil, refuseInternal
	}
	turn, err := g.opts.OpenTurn(ctx, principal)
	if err != nil || turn == nil {
		g.opts.Logger.Error("opening a turn for a stateless request", "err", err)
		return nil, nil, refuseInternal
	}
	c := newConn(turn, g.opts.ServerInfo, g.opts.Instructions, g.opts.Logger, true)
	return c, func() {
		c.close()
		_ = closeTurn(turn)
	}, refuseNone
}

func (g *registry) create(ctx context.Context, principal string) (*httpSession, refusal) {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return nil, refuseUnknownSession
	}
	var victim *httpSession
	if len(g.sessions)+g.reserved >= g.opts.MaxSessions {
		for _, s := range g.sessions {
			if s.active.Load() == 0 && (victim == nil || s.lastUsed.Load() < victim.lastUsed.Load()) {
				victim = s
			}
		}
		if victim == nil {
			g.mu.Unlock()
			return nil, refuseTooManySessions
		}
		delete(g.sessions, victim.id)
	}
	g.reserved++
	g.mu.Unlock()
	if victim != nil {
		g.opts.Logger.Info("session cap reached: ending the least recently used idle session")
		victim.end()
	}

	var turn Turn
	err := errors.New("HandlerOptions.OpenTurn is nil")
	if g.opts.OpenTurn != nil {
		turn, err = g.opts.OpenTurn(ctx, principal)
	}
	g.mu.Lock()
	g.reserved--
	closed := g.closed
	if err != nil || turn == nil || closed {
		g.mu.Unlock()
		if err != nil || turn == nil {
			g.opts.Logger.Error("opening a turn for a new session", "err", err)
			return nil, refuseInternal
		}
		_ = closeTurn(turn)
		return nil, refuseUnknownSession
	}
	s := newHTTPSession(turn, principal, g.opts.ServerInfo, g.opts.Instructions, g.opts.Logger, !g.opts.NoStateless)
	g.sessions[s.id] = s
	g.mu.Unlock()
	return s, refuseNone
}

func closeTurn(t Turn) error {
	if c, ok := t.(interface{ Close() error }); ok {
		return c.Close()
	}
	return nil
}

func (g *registry) remove(s *httpSession) {
	g.mu.Lock()
	if g.sessions[s.id] == s {
		delete(g.sessions, s.id)
	}
	g.mu.Unlock()
}

// reap ends sessions idle longer than IdleTimeout, checking every quarter of it.
func (g *registry) reap() {
	defer close(g.stopped)
	t := time.NewTicker(g.opts.IdleTimeout / 4)
	defer t.Stop()
	for {
		select {
		case <-g.stop:
			return
		case now := <-t.C:
			cutoff := now.Add(-g.opts.IdleTimeout).UnixNano()
			var idle []*httpSession
			g.mu.Lock()
			for id, s := range g.sessions {
				if s.active.Load() == 0 && s.lastUsed.Load() <= cutoff {
					idle = append(idle, s)
					delete(g.sessions, id)
				}
			}
			g.mu.Unlock()
			for _, s := range idle {
				s.end()
			}
		}
	}
}
