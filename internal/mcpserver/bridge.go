package mcpserver

import (
	"context"
	"crypto/subtle"
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
	// otherwise served on the same endpoint beside the bridge's session (see
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

// Bridge is one turn's Streamable HTTP server: a loopback listener serving one
// session whose id is fixed when the bridge is created. Requests that name no
// session are served by it too (a client driven by hand with curl sends none); a
// request naming any other id, or this one after the session ended, gets 404
// unknown_session. Stateless 2026-07-28 requests are served by the same turn
// without a session (unless NoStateless); such a client never sends DELETE, so
// the bridge then lives until Close.
type Bridge struct {
	core    *httpCore
	sess    *httpSession
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
	sess := newHTTPSession(turn, "", opts.ServerInfo, opts.Instructions, logger, !opts.NoStateless)
	// Every client holding the token shares the one session, and a harness that
	// reconnects initializes again: a later initialize renegotiates.
	sess.conn.reinitialize = true
	var authn func(string, bool) (string, bool)
	if opts.Authorize != nil {
		authorize := opts.Authorize
		authn = func(token string, present bool) (string, bool) { return "", authorize(token, present) }
	}
	b := &Bridge{
		sess: sess,
		port: port,
		core: &httpCore{
			path:         path,
			guard:        newGuard(allowed),
			authenticate: authn,
			limits:       rpcwire.Limits{MaxBytes: int(maxBody)},
			maxBody:      maxBody,
			store:        &bridgeStore{sess: sess},
			log:          logger,
			stateless:    !opts.NoStateless,
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

// SessionID is the bridge's one session id, sent as mcp-session-id.
func (b *Bridge) SessionID() string { return b.sess.id }

// Done is closed once the session ended (a DELETE, or Close).
func (b *Bridge) Done() <-chan struct{} { return b.sess.ended }

// ServeHTTP serves the bridge's route on another server too; after the session
// ended it keeps answering 404 unknown_session.
func (b *Bridge) ServeHTTP(w http.ResponseWriter, r *http.Request) { b.core.ServeHTTP(w, r) }

// Close ends the session (cancelling calls in flight and closing the Turn when it
// is an io.Closer) and stops the listener, waiting up to five seconds for
// requests in flight to finish.
func (b *Bridge) Close() error {
	b.closeMu.Lock()
	if b.closed {
		b.closeMu.Unlock()
		return nil
	}
	b.closed = true
	b.closeMu.Unlock()
	b.sess.end()
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

type bridgeStore struct{ sess *httpSession }

func (s *bridgeStore) lookup(_ context.Context, id, principal string) *httpSession {
	if id != s.sess.id || s.sess.isEnded() || principal != s.sess.principal {
		return nil
	}
	return s.sess
}

func (s *bridgeStore) implicit(string) *httpSession {
	if s.sess.isEnded() {
		return nil
	}
	return s.sess
}

func (s *bridgeStore) create(context.Context, string) (*httpSession, refusal) {
	return nil, refuseUnknownSession
}

func (s *bridgeStore) remove(*httpSession) {}

func (s *bridgeStore) creates() bool { return false }

func (s *bridgeStore) stateless(context.Context, string) (*conn, func(), refusal) {
	if s.sess.isEnded() {
		return nil, nil, refuseUnknownSession
	}
	return s.sess.conn, func() {}, refuseNone
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
