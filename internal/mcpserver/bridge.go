package mcpserver

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/toolgate/toolgate/internal/listenaddr"
	"github.com/toolgate/toolgate/internal/mcpspec"
	"github.com/toolgate/toolgate/internal/rpcwire"
)

// BridgeOptions configures NewBridge. The zero value is a loopback bridge on a
// free port at /mcp with no authorization.
type BridgeOptions struct {
	// Host to listen on, an IP address or a name; default 127.0.0.1. URL names
	// the address actually bound (for a wildcard, 0.0.0.0 or ::, the loopback
	// address of that family), and a specific address beyond loopback is
	// accepted as Host/Origin together with the name given for it.
	Host string
	// Port to listen on; default 0 (the OS picks a free one).
	Port int
	// Path of the one MCP route; default /mcp.
	Path string
	// Authorize validates the bearer token on every request: token is the
	// Authorization header's bearer value, present is false when none was sent.
	// Nil means no authorization, which NewBridge accepts only on a loopback
	// host: a loopback name or address that is also bound to a loopback
	// address.
	Authorize func(token string, present bool) bool
	// AllowedHosts are Host/Origin values accepted beyond the loopback names, for
	// a deliberate non-loopback bind.
	AllowedHosts []string
	ServerInfo   mcpspec.Implementation
	Instructions string
	// MaxBodyBytes caps a POST body (413 above it); default DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// NoStateless turns off the stateless 2026-07-28 revision, which is
	// otherwise served on the same endpoint beside the bridge's sessions (see
	// StdioOptions.NoStateless); off, a 2026-07-28 MCP-Protocol-Version header
	// is 400 and clients fall back to initialize.
	NoStateless bool
	// KeepAliveInterval is how often a running POST's SSE answer carries a
	// ": keep-alive" comment line (default DefaultKeepAliveInterval; negative
	// sends none).
	KeepAliveInterval time.Duration
	// WriteTimeout bounds each write of an answer, as HandlerOptions.WriteTimeout
	// (default DefaultWriteTimeout; negative sets none).
	WriteTimeout time.Duration
	// ReadHeaderTimeout bounds how long a client may take to send its request
	// headers (slowloris); default 10s.
	ReadHeaderTimeout time.Duration
	// ReadBodyTimeout bounds how long a client may take to send a request body
	// after its headers (a slow body); default DefaultBodyTimeout.
	ReadBodyTimeout time.Duration
	// Logger receives failures (never tokens or arguments); nil discards.
	Logger *slog.Logger
}

// BridgeMaxSessions caps a bridge's live sessions. A bridge serves one harness
// run, which opens one session (a harness that reconnects, or a test suite,
// opens a few in turn, each ending the last with DELETE); 16 at once is far
// beyond that, yet bounds what a client holding the token can make the bridge
// keep. An initialize at the cap ends the least recently used session with no
// request in flight; with every session busy it is refused 503
// too_many_sessions (docs/http-contract.md, "Bridge sessions").
const BridgeMaxSessions = 16

// Bridge is one turn's Streamable HTTP server: a listener serving the Turn it
// was opened with until Close, to any number of sessions over its life and at
// most BridgeMaxSessions at once, every one of them on that Turn (one
// catalogue, one catalogHash, one executionId, one outcome).
//
// The bridge opens its first session when it starts (SessionID); requests that
// name no session are served by its current session, which is that one until
// an initialize naming no session opens another. The first such initialize is
// the first session's own; every later one opens the bridge's next session,
// which becomes the current one, while the sessions opened before stay live
// for the clients that name them. A DELETE ends one session (its id then
// answers 404 unknown_session) and leaves the bridge serving; a second
// initialize naming a live session is refused. Stateless 2026-07-28 requests
// are served on the same Turn without a session (unless NoStateless).
type Bridge struct {
	core    *httpCore
	store   *bridgeStore
	turn    Turn
	id      string
	first   string
	srv     *http.Server
	url     string
	port    int
	addr    *net.TCPAddr
	served  chan struct{}
	closeMu sync.Mutex
	closed  bool
}

// NewBridge starts listening and returns once the listener is open.
func NewBridge(turn Turn, opts BridgeOptions) (*Bridge, error) {
	if turn == nil {
		return nil, errors.New("mcpserver: NewBridge needs a Turn")
	}
	host := opts.Host
	if host == "" {
		host = "127.0.0.1"
	}
	path := opts.Path
	if path == "" {
		path = "/mcp"
	}
	if opts.Authorize == nil && !listenaddr.IsLoopback(host) {
		return nil, fmt.Errorf("mcpserver: a bridge without Authorize must listen on loopback, not %q", host)
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	maxBody := opts.MaxBodyBytes
	if maxBody <= 0 {
		maxBody = DefaultMaxBodyBytes
	}
	keepAlive := opts.KeepAliveInterval
	if keepAlive == 0 {
		keepAlive = DefaultKeepAliveInterval
	}
	writeTimeout := opts.WriteTimeout
	if writeTimeout == 0 {
		writeTimeout = DefaultWriteTimeout
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(opts.Port)))
	if err != nil {
		return nil, fmt.Errorf("opening the bridge listener: %w", err)
	}
	addr := ln.Addr().(*net.TCPAddr)
	if opts.Authorize == nil && !addr.IP.IsLoopback() {
		// The name passed (localhost, say) resolved to an address beyond
		// loopback: what is bound decides, not what was asked.
		_ = ln.Close()
		return nil, fmt.Errorf("mcpserver: a bridge without Authorize must listen on loopback, but %q is %s", host, addr.IP)
	}
	port := addr.Port
	allowed := slices.Clone(opts.AllowedHosts)
	if !addr.IP.IsLoopback() && !addr.IP.IsUnspecified() {
		// A deliberate bind to one address: requests naming it (or the name
		// given for it) are meant for this bridge. A browser page elsewhere
		// still cannot send them: its Origin is refused.
		allowed = append(allowed, addr.IP.String(), host)
	}
	store, err := newBridgeStore(turn, HandlerOptions{
		ServerInfo: opts.ServerInfo, Instructions: opts.Instructions, Logger: logger, NoStateless: opts.NoStateless,
	})
	if err != nil {
		_ = ln.Close()
		return nil, err
	}
	var authn func(string, bool) (string, bool)
	if opts.Authorize != nil {
		authorize := opts.Authorize
		authn = func(token string, present bool) (string, bool) { return "", authorize(token, present) }
	}
	b := &Bridge{
		store: store,
		turn:  turn,
		id:    newSessionID(),
		first: store.current.id,
		port:  port,
		core: &httpCore{
			path:         path,
			guard:        newGuard(allowed),
			authenticate: authn,
			limits:       rpcwire.Limits{MaxBytes: int(maxBody)},
			maxBody:      maxBody,
			store:        store,
			log:          logger,
			stateless:    !opts.NoStateless,
			retryAfter:   store.reg.retryAfter,
			inflight:     newInflightLimit(bridgeMaxInFlight),
			keepAlive:    keepAlive,
			writeTimeout: writeTimeout,
		},
		served: make(chan struct{}),
	}
	b.addr = addr
	b.url = listenaddr.BaseURL(host, addr) + (&url.URL{Path: path}).EscapedPath()
	readHeader := opts.ReadHeaderTimeout
	if readHeader <= 0 {
		readHeader = 10 * time.Second
	}
	readBody := opts.ReadBodyTimeout
	if readBody <= 0 {
		readBody = DefaultBodyTimeout
	}
	b.srv = &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			withBodyDeadline(w, r, readBody)
			b.core.ServeHTTP(w, r)
		}),
		ReadHeaderTimeout: readHeader,
		MaxHeaderBytes:    64 << 10,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          log.New(discardWriter{}, "", 0),
	}
	go func() {
		defer close(b.served)
		_ = b.srv.Serve(ln)
	}()
	return b, nil
}

type discardWriter struct{}

func (discardWriter) Write(p []byte) (int, error) { return len(p), nil }

// URL is the MCP endpoint, e.g. http://127.0.0.1:53124/mcp.
func (b *Bridge) URL() string { return b.url }

// Port is the port the bridge listens on.
func (b *Bridge) Port() int { return b.port }

// Addr is the address the bridge listens on, as bound (0.0.0.0 or :: for every
// interface).
func (b *Bridge) Addr() *net.TCPAddr { return b.addr }

// Loopback reports whether the bridge accepts connections from this machine
// only.
func (b *Bridge) Loopback() bool { return b.addr.IP.IsLoopback() }

// ID identifies the bridge for its whole life, whatever sessions it serves:
// what a token minted for this bridge alone names. It is never sent on the
// wire.
func (b *Bridge) ID() string { return b.id }

// SessionID is the id of the bridge's first session, opened when the bridge
// started; it answers 404 unknown_session once that session ended.
func (b *Bridge) SessionID() string { return b.first }

// Sessions returns the number of live sessions.
func (b *Bridge) Sessions() int { return b.store.reg.live() }

// Done is closed once the bridge stopped serving its listener: Close, or the
// listener failed.
func (b *Bridge) Done() <-chan struct{} { return b.served }

// ServeHTTP serves the bridge's route on another server too; after Close it
// keeps answering 404 unknown_session.
func (b *Bridge) ServeHTTP(w http.ResponseWriter, r *http.Request) { b.core.ServeHTTP(w, r) }

// Close ends every session (cancelling the calls in flight), closes the Turn
// when it is an io.Closer, and stops the listener, waiting up to five seconds
// for requests in flight to write their answers. To have the calls recorded as
// cut by a shutdown rather than by their session, shut the kernel down first
// (toolgate bridge and toolgate run do).
func (b *Bridge) Close() error {
	b.closeMu.Lock()
	if b.closed {
		b.closeMu.Unlock()
		return nil
	}
	b.closed = true
	b.closeMu.Unlock()
	b.store.close()
	if err := closeTurn(b.turn); err != nil {
		b.core.log.Warn("closing a turn", "err", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := b.srv.Shutdown(ctx)
	if err != nil {
		err = b.srv.Close()
	}
	<-b.served
	if err != nil {
		return fmt.Errorf("closing the bridge: %w", err)
	}
	return nil
}

// sharedTurn is the bridge's Turn as each of its sessions holds it: neither an
// io.Closer (ending a session leaves the turn to the others; Bridge.Close
// closes it) nor a StaleTurn (a bridge's sessions serve the one turn they were
// opened for; the kernel still decides every call by the current grants).
type sharedTurn struct{ Turn }

// NoteClient passes the handshake on to the bridge's turn when it wants it.
func (s sharedTurn) NoteClient(version string, info json.RawMessage) {
	if n, ok := s.Turn.(ClientNoter); ok {
		n.NoteClient(version, info)
	}
}

// bridgeStore is a Bridge's sessions: a registry whose every session is served
// by the bridge's one Turn, plus the current session that serves requests
// naming none.
type bridgeStore struct {
	reg *registry
	// modern serves the 2026-07-28 requests that name no session.
	modern *conn

	mu      sync.Mutex
	current *httpSession // nil once it ended, until an initialize opens another
	given   bool         // an initialize has been given to current
}

// newBridgeStore returns the sessions of a bridge serving turn, with its first
// session open and current.
func newBridgeStore(turn Turn, opts HandlerOptions) (*bridgeStore, error) {
	shared := sharedTurn{turn}
	opts.MaxSessions = BridgeMaxSessions
	opts.MaxSessionsPerPrincipal = BridgeMaxSessions
	opts.MaxSessionsWithoutTools = BridgeMaxSessions
	opts.OpenTurn = func(context.Context, string) (Turn, error) { return shared, nil }
	s := &bridgeStore{
		reg:    newRegistry(opts, false),
		modern: newConn(shared, opts.ServerInfo, opts.Instructions, opts.Logger, !opts.NoStateless),
	}
	first, ref := s.reg.create(context.Background(), "")
	if ref != refuseNone {
		return nil, errors.New("mcpserver: opening the bridge's first session")
	}
	first.release()
	s.current = first
	return s, nil
}

func (s *bridgeStore) lookup(ctx context.Context, id, principal string) *httpSession {
	return s.reg.lookup(ctx, id, principal)
}

func (s *bridgeStore) implicit(_ string, initialize bool) *httpSession {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := s.current
	if cur == nil || cur.isEnded() {
		s.current = nil
		return nil
	}
	if initialize {
		if s.given || cur.conn.isInitialized() {
			return nil // the initialize opens the next session
		}
		s.given = true
	}
	return cur
}

func (s *bridgeStore) create(ctx context.Context, principal string) (*httpSession, refusal) {
	sess, ref := s.reg.create(ctx, principal)
	if ref == refuseNone {
		s.mu.Lock()
		s.current, s.given = sess, true
		s.mu.Unlock()
	}
	return sess, ref
}

func (s *bridgeStore) remove(sess *httpSession) {
	s.reg.remove(sess)
	s.mu.Lock()
	if s.current == sess {
		s.current = nil
	}
	s.mu.Unlock()
}

func (s *bridgeStore) stateless(context.Context, string) (*conn, func(), refusal) {
	s.reg.mu.Lock()
	closed := s.reg.closed
	s.reg.mu.Unlock()
	if closed {
		return nil, nil, refuseUnknownSession
	}
	return s.modern, func() {}, refuseNone
}

// close ends every session and the stateless requests in flight.
func (s *bridgeStore) close() {
	s.reg.close()
	s.modern.close()
	s.mu.Lock()
	s.current = nil
	s.mu.Unlock()
}

// StaticToken returns an Authorize function accepting exactly token, compared in
// constant time. An empty token accepts nothing.
func StaticToken(token string) func(string, bool) bool {
	want := []byte(token)
	return func(got string, present bool) bool {
		if !present || len(want) == 0 {
			return false
		}
		return subtle.ConstantTimeCompare([]byte(got), want) == 1
	}
}
