package mcpserver

import (
	"container/list"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/toolgate/toolgate/internal/mcpspec"
	"github.com/toolgate/toolgate/internal/rpcwire"
)

// Defaults of HandlerOptions.
const (
	DefaultMaxSessions             = 1024
	DefaultMaxSessionsPerPrincipal = 64
	DefaultMaxSessionsWithoutTools = 2
	DefaultIdleTimeout             = 30 * time.Minute
	// DefaultKeepAliveInterval is how often a running POST's SSE answer
	// carries a keep-alive comment: well inside the 30-60 s read-idle
	// timeouts common in clients and reverse proxies.
	DefaultKeepAliveInterval = 15 * time.Second
)

// maxRetryAfter bounds the Retry-After of a 503 too_many_sessions: a DELETE can
// free a slot at any moment, so a hint longer than this would only make a
// client wait past the point where a retry might succeed.
const maxRetryAfter = time.Minute

// HandlerOptions configures NewHandler.
type HandlerOptions struct {
	// Path is the one route served; default /mcp. Other paths get 404.
	Path string
	// Authenticate maps the bearer token (present=false when none was sent) to a
	// principal. Nil means no authentication and principal "".
	Authenticate func(token string, present bool) (principal string, ok bool)
	// OpenTurn opens the Turn of a new session (one per initialize that names no
	// session) or of one stateless request. It runs only after Host, Origin and
	// authentication passed. An error is answered 503 catalog_unavailable (the
	// cause is logged only), as the HTTP API answers a turn it cannot open.
	OpenTurn     func(ctx context.Context, principal string) (Turn, error)
	ServerInfo   mcpspec.Implementation
	Instructions string
	// MaxSessions caps live sessions across all principals (default
	// DefaultMaxSessions).
	MaxSessions int
	// MaxSessionsPerPrincipal caps one principal's live sessions (default
	// DefaultMaxSessionsPerPrincipal; never more than MaxSessions). When an
	// initialize finds its principal at this quota, or every one of the
	// MaxSessions slots taken, it ends that principal's own least recently used
	// session with no request in flight; when the principal has none, it gets
	// 503 too_many_sessions with Retry-After. A principal never ends another
	// principal's session, so one client's stream of initializes cannot
	// disconnect anyone else.
	MaxSessionsPerPrincipal int
	// MaxSessionsWithoutTools caps the live sessions of a principal that can
	// see no tool (the Turn opened for its initialize publishes none: no
	// grant, only denials, or grants to tools not served), default
	// DefaultMaxSessionsWithoutTools, never more than MaxSessionsPerPrincipal.
	// Such a principal gains nothing from a session but ping, and without the
	// cap a few of them could fill MaxSessions. At the cap its initialize ends
	// its own least recently used idle sessions, or with none idle gets 503
	// too_many_sessions.
	MaxSessionsWithoutTools int
	// IdleTimeout ends sessions unused this long (default DefaultIdleTimeout).
	IdleTimeout time.Duration
	// MaxInFlightPerPrincipal caps one principal's concurrently running
	// requests, across all its sessions and stateless requests (default
	// DefaultMaxInFlightPerPrincipal). A request counts from the moment it is
	// authenticated until its answer is written; one over the cap gets 429
	// too_many_requests with Retry-After: 1 before its body is read or any Turn
	// is touched. Other principals are unaffected.
	MaxInFlightPerPrincipal int
	// KeepAliveInterval is how often a running POST's SSE answer carries a
	// ": keep-alive" comment line (default DefaultKeepAliveInterval; negative
	// sends none).
	KeepAliveInterval time.Duration
	// WriteTimeout bounds each write of an answer: a client that takes none of
	// it in this time (it stopped reading) loses the answer, and the calls of
	// an SSE answer still running are cancelled (default DefaultWriteTimeout;
	// negative sets none).
	WriteTimeout time.Duration
	// MaxBodyBytes caps a POST body, 413 above it (default DefaultMaxBodyBytes).
	MaxBodyBytes int64
	// AllowedHosts are Host/Origin values accepted beyond the loopback names.
	AllowedHosts []string
	// NoStateless turns off the stateless 2026-07-28 revision, which the handler
	// otherwise serves beside the session-based versions (each such request runs
	// on a Turn of its own; see StdioOptions.NoStateless for what a client that
	// picks it gives up). It is on by default, as on bridges and stdio.
	NoStateless bool
	// Logger receives failures; nil discards.
	Logger *slog.Logger
	// Shared, when set, makes every session valid on each Handler sharing it (the
	// replicas of toolgate serve): signed session ids, served anywhere through
	// ResumeTurn (see SharedSessions, docs/deployment.md).
	Shared SharedSessions
	// ResumeTurn opens, from its SessionStater state, the Turn of a session this
	// Handler does not hold. An error means the state is stale (the principal's
	// grants give another catalogue now): the request is 404 unknown_session.
	ResumeTurn func(ctx context.Context, principal, state string) (Turn, error)
	// SessionLifetime bounds how long a signed session id is valid (default
	// DefaultSessionLifetime); only with Shared.
	SessionLifetime time.Duration
}

// StaleTurn is implemented by a Turn that can tell when the grants it was
// opened under have changed. The Handler asks on every request naming a session
// and ends a stale session (404 unknown_session; a client then initializes
// again, as the transport requires), so a session's catalogue and decisions
// follow grant changes instead of keeping the authority they opened with.
// Bridges, which serve one turn for one harness run, do not ask.
type StaleTurn interface {
	Stale(ctx context.Context) bool
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
	if opts.MaxSessionsPerPrincipal <= 0 {
		opts.MaxSessionsPerPrincipal = DefaultMaxSessionsPerPrincipal
	}
	opts.MaxSessionsPerPrincipal = min(opts.MaxSessionsPerPrincipal, opts.MaxSessions)
	if opts.MaxSessionsWithoutTools <= 0 {
		opts.MaxSessionsWithoutTools = DefaultMaxSessionsWithoutTools
	}
	opts.MaxSessionsWithoutTools = min(opts.MaxSessionsWithoutTools, opts.MaxSessionsPerPrincipal)
	if opts.IdleTimeout <= 0 {
		opts.IdleTimeout = DefaultIdleTimeout
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if opts.MaxInFlightPerPrincipal <= 0 {
		opts.MaxInFlightPerPrincipal = DefaultMaxInFlightPerPrincipal
	}
	if opts.KeepAliveInterval == 0 {
		opts.KeepAliveInterval = DefaultKeepAliveInterval
	}
	if opts.WriteTimeout == 0 {
		opts.WriteTimeout = DefaultWriteTimeout
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.SessionLifetime <= 0 {
		opts.SessionLifetime = DefaultSessionLifetime
	}
	reg := newRegistry(opts, true)
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
			retryAfter:   reg.retryAfter,
			inflight:     newInflightLimit(opts.MaxInFlightPerPrincipal),
			keepAlive:    opts.KeepAliveInterval,
			writeTimeout: opts.WriteTimeout,
		},
	}
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.core.ServeHTTP(w, r) }

// Sessions returns the number of live sessions.
func (h *Handler) Sessions() int { return h.reg.live() }

// Close ends every session and stops the idle reaper. Later initializes fail.
func (h *Handler) Close() error {
	h.reg.close()
	return nil
}

// registry holds a Handler's sessions, or a Bridge's. Every operation on it is O(1) apart from
// reaping, which touches only the sessions it ends: idle sessions sit in two
// least-recently-used lists (all of them, and their principal's), so neither
// the cap nor the reaper ever scans the whole table. The lock is never held
// across I/O: Turns are opened and sessions ended outside it.
type registry struct {
	opts     HandlerOptions
	mu       sync.Mutex
	sessions map[string]*httpSession
	// owners has an entry for every principal with a live session or an
	// initialize still opening its Turn.
	owners map[string]*principalSessions
	// idle holds every session with no request in flight, least recently used
	// first. Sessions join it at the back as their last request ends, so it is
	// also ordered by idle deadline, which is what the reaper relies on.
	idle     list.List
	reserved int // initializes between their admission and their Turn
	closed   bool
	// With opts.Shared: the signed sessions held, by id hash, and those ended here.
	byHash  map[string]*httpSession
	ended   endedSet
	stop    chan struct{}
	stopped chan struct{}
	// pushes are the lists whose changes its sessions' GET streams deliver.
	pushes ListKind
}

// newRegistry returns an empty registry; with reap, a goroutine ends sessions
// idle for opts.IdleTimeout until close (a Handler). A Bridge's sessions live
// until they are deleted, evicted at the cap, or the bridge closes.
func newRegistry(opts HandlerOptions, reap bool) *registry {
	g := &registry{
		opts:     opts,
		sessions: map[string]*httpSession{},
		owners:   map[string]*principalSessions{},
		byHash:   map[string]*httpSession{},
		stop:     make(chan struct{}),
		stopped:  make(chan struct{}),
	}
	// A Handler's sessions follow catalogue changes (StaleTurn), a Bridge's
	// serve one catalogue: only their relayed lists change.
	g.pushes = ResourcesList | PromptsList
	if reap {
		g.pushes |= ToolsList
		go g.reap()
	} else {
		close(g.stopped)
	}
	return g
}

// live returns the number of live sessions.
func (g *registry) live() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.sessions)
}

// close ends every session and stops the reaper; later initializes are
// refused. Safe to call more than once.
func (g *registry) close() {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return
	}
	g.closed = true
	all := make([]*httpSession, 0, len(g.sessions))
	for _, s := range g.sessions {
		s.slot.gone = true
		all = append(all, s)
	}
	g.sessions = map[string]*httpSession{}
	g.owners = map[string]*principalSessions{}
	g.byHash = map[string]*httpSession{}
	g.idle.Init()
	g.mu.Unlock()
	close(g.stop)
	<-g.stopped
	endAll(all)
}

// principalSessions is one principal's share of the registry.
type principalSessions struct {
	live int       // sessions plus reserved initializes, at most the quota
	idle list.List // its sessions with no request in flight, LRU first
}

// sessionSlot is a session's bookkeeping in its registry; every field is guarded by
// registry.mu.
type sessionSlot struct {
	reg       *registry
	principal string
	owner     *principalSessions
	busy      int       // requests in flight
	gone      bool      // no longer in the registry (evicted, reaped, deleted, closed)
	idleSince time.Time // when busy last dropped to 0
	inIdle    *list.Element
	inOwnIdle *list.Element
}

// acquire marks the session in use by one request, which keeps it from being
// evicted or reaped; false when it already left the registry.
func (sl *sessionSlot) acquire() bool {
	g := sl.reg
	g.mu.Lock()
	defer g.mu.Unlock()
	if sl.gone {
		return false
	}
	sl.busy++
	g.unlinkIdle(sl)
	return true
}

// release ends one request's use; the last one makes the session idle, the
// most recently used of its principal's and of all.
func (sl *sessionSlot) release(s *httpSession) {
	g := sl.reg
	g.mu.Lock()
	defer g.mu.Unlock()
	sl.busy--
	if sl.busy > 0 || sl.gone {
		return
	}
	sl.idleSince = time.Now()
	sl.inIdle = g.idle.PushBack(s)
	sl.inOwnIdle = sl.owner.idle.PushBack(s)
}

func (g *registry) unlinkIdle(sl *sessionSlot) {
	if sl.inIdle != nil {
		g.idle.Remove(sl.inIdle)
		sl.owner.idle.Remove(sl.inOwnIdle)
		sl.inIdle, sl.inOwnIdle = nil, nil
	}
}

// dropLocked takes s out of the registry; the caller ends it after unlocking.
func (g *registry) dropLocked(s *httpSession) {
	sl := s.slot
	if sl.gone {
		return
	}
	sl.gone = true
	g.unlinkIdle(sl)
	delete(g.sessions, s.id)
	if s.hash != "" {
		delete(g.byHash, s.hash)
		g.ended.add(s.hash, s.expires)
	}
	g.unreserveLocked(sl.principal, sl.owner)
}

// unreserveLocked gives back one of the principal's places, forgetting the
// principal once it holds none.
func (g *registry) unreserveLocked(principal string, own *principalSessions) {
	own.live--
	if own.live <= 0 && g.owners[principal] == own {
		delete(g.owners, principal)
	}
}

func (g *registry) lookup(ctx context.Context, id, principal string) *httpSession {
	g.mu.Lock()
	s := g.sessions[id]
	g.mu.Unlock()
	if s == nil {
		s = g.resume(ctx, id, principal) // opened on another replica, when shared
	}
	if s == nil || s.principal != principal || s.isEnded() {
		return nil
	}
	if st, ok := s.turn.(StaleTurn); ok && st.Stale(ctx) {
		// The session's Turn was decided under grants that have changed since
		// (a grant removed): end it, so the client's next initialize opens a
		// Turn under the grants as they are now. A revoked grant never keeps
		// working for a session that happens to stay busy.
		g.remove(s)
		s.end()
		return nil
	}
	return s
}

// implicit is nil: a Handler serves no request that names no session but the
// initialize that opens one.
func (g *registry) implicit(string, bool) *httpSession { return nil }

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
		return nil, nil, refuseTurnUnavailable
	}
	c := newConn(turn, g.opts.ServerInfo, g.opts.Instructions, g.opts.Logger, true)
	return c, func() {
		c.close()
		_ = closeTurn(turn)
	}, refuseNone
}

// create admits an initialize for principal and opens its session, returned
// already acquired (the caller releases it) so that it cannot be evicted
// before its first request is answered. At the principal's quota or the global
// cap it ends the principal's own least recently used idle session; with none,
// it refuses with refuseTooManySessions.
func (g *registry) create(ctx context.Context, principal string) (*httpSession, refusal) {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return nil, refuseUnknownSession
	}
	own := g.owners[principal]
	if own == nil {
		own = &principalSessions{}
		g.owners[principal] = own
	}
	var victim *httpSession
	if own.live >= g.opts.MaxSessionsPerPrincipal || len(g.sessions)+g.reserved >= g.opts.MaxSessions {
		if e := own.idle.Front(); e != nil {
			victim = e.Value.(*httpSession)
			g.dropLocked(victim)
		}
		if victim == nil {
			if own.live == 0 {
				delete(g.owners, principal)
			}
			g.mu.Unlock()
			return nil, refuseTooManySessions
		}
	}
	if own.live == 0 && g.owners[principal] == nil {
		// Dropping the victim forgot the principal; it holds a place again.
		g.owners[principal] = own
	}
	own.live++
	g.reserved++
	g.mu.Unlock()
	if victim != nil {
		g.opts.Logger.Info("session limit reached: ending the principal's least recently used idle session")
		victim.end()
	}

	var turn Turn
	err := errors.New("HandlerOptions.OpenTurn is nil")
	if g.opts.OpenTurn != nil {
		turn, err = g.opts.OpenTurn(ctx, principal)
	}
	toolless := err == nil && turn != nil && seesNoTool(ctx, turn)
	g.mu.Lock()
	g.reserved--
	if err != nil || turn == nil || g.closed {
		g.unreserveLocked(principal, own)
		g.mu.Unlock()
		if err != nil || turn == nil {
			g.opts.Logger.Error("opening a turn for a new session", "err", err)
			return nil, refuseTurnUnavailable
		}
		// The Handler closed while the Turn was opening.
		_ = closeTurn(turn)
		return nil, refuseUnknownSession
	}
	var ended []*httpSession
	if toolless {
		// A principal that can see no tool gains nothing from a session but
		// ping, so it may hold only a few: its own least recently used idle
		// ones make room, and with none idle it is refused like any
		// principal at its quota.
		for own.live > g.opts.MaxSessionsWithoutTools {
			e := own.idle.Front()
			if e == nil {
				break
			}
			v := e.Value.(*httpSession)
			g.dropLocked(v)
			ended = append(ended, v)
		}
		if own.live > g.opts.MaxSessionsWithoutTools {
			g.unreserveLocked(principal, own)
			g.mu.Unlock()
			endAll(ended)
			_ = closeTurn(turn)
			return nil, refuseTooManySessions
		}
	}
	s := newHTTPSession(turn, principal, g.opts.ServerInfo, g.opts.Instructions, g.opts.Logger, !g.opts.NoStateless)
	s.conn.pushes = g.pushes
	g.sealFor(s, principal)
	s.slot = &sessionSlot{reg: g, principal: principal, owner: own, busy: 1}
	g.sessions[s.id] = s
	if s.hash != "" {
		g.byHash[s.hash] = s
	}
	g.mu.Unlock()
	if len(ended) > 0 {
		g.opts.Logger.Info("a principal that can see no tool is at its session quota: ending its least recently used idle sessions", "ended", len(ended))
		endAll(ended)
	}
	return s, refuseNone
}

func endAll(ss []*httpSession) {
	for _, s := range ss {
		s.end()
	}
}

// seesNoTool reports whether turn publishes no tool: its principal has no
// grant, only denials, or grants to tools that are not served.
func seesNoTool(ctx context.Context, turn Turn) bool {
	list, err := turn.ListTools(ctx)
	return err == nil && list != nil && len(list.Tools) == 0
}

// retryAfter is the Retry-After of a 503 too_many_sessions for principal: a
// second when the principal has sessions of its own (one of them becomes
// evictable as soon as its request ends), otherwise the time until the next
// idle session is reaped, within [1s, maxRetryAfter].
func (g *registry) retryAfter(principal string) time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	if own := g.owners[principal]; own != nil && own.live > 0 {
		return time.Second
	}
	wait := g.opts.IdleTimeout
	if e := g.idle.Front(); e != nil {
		wait = time.Until(e.Value.(*httpSession).slot.idleSince.Add(g.opts.IdleTimeout))
	}
	return min(max(wait, time.Second), maxRetryAfter)
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
		g.dropLocked(s)
	}
	g.mu.Unlock()
}

// reap ends sessions idle for IdleTimeout. It sleeps until the least recently
// used idle session's deadline (sessions becoming idle later have later
// deadlines), so a session ends on time and a wake-up costs only the sessions
// it ends.
func (g *registry) reap() {
	defer close(g.stopped)
	t := time.NewTimer(g.opts.IdleTimeout)
	defer t.Stop()
	for {
		select {
		case <-g.stop:
			return
		case <-t.C:
		}
		now := time.Now()
		var expired []*httpSession
		g.mu.Lock()
		next := g.opts.IdleTimeout
		for e := g.idle.Front(); e != nil; e = g.idle.Front() {
			s := e.Value.(*httpSession)
			if left := s.slot.idleSince.Add(g.opts.IdleTimeout).Sub(now); left > 0 {
				next = left
				break
			}
			g.dropLocked(s)
			expired = append(expired, s)
		}
		g.mu.Unlock()
		t.Reset(next)
		for _, s := range expired {
			s.end()
		}
	}
}
