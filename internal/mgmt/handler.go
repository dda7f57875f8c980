package mgmt

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/toolgate/toolgate/internal/httpwire"
	"github.com/toolgate/toolgate/internal/rpcwire"
)

// Path is where toolgate serve mounts the management protocol.
const Path = "/v1/rpc"

// Defaults of Options.
const (
	DefaultMaxBodyBytes = rpcwire.MaxMessageBytes // a POST body or one WebSocket message
	DefaultMaxSockets   = 64
	DefaultSendQueue    = 256 // messages queued for one socket before it counts as not reading
	DefaultPingInterval = 30 * time.Second
	DefaultPongTimeout  = 10 * time.Second
	DefaultWriteTimeout = 10 * time.Second // one WebSocket message
)

// Authenticator maps a bearer token to its caller. ok is false for a token that is not
// valid (unknown, expired, revoked): 401 unauthorized. A valid token of a caller who is
// not an administrator — neither the owner token nor a principal holding an allow grant
// on toolgate.admin — is ok with admin false: 403 forbidden. It is asked on every POST,
// on every request a socket sends and at every keepalive ping of a socket, so revoking a
// token or the grant takes effect on a socket within PingInterval.
type Authenticator func(ctx context.Context, token string) (c Caller, admin, ok bool)

// Options configures a Handler.
type Options struct {
	// Manager serves the methods (wrapped in Checked by the Handler). Required.
	Manager Manager
	// Authenticate decides every request. Required: the protocol has no anonymous caller.
	Authenticate Authenticator
	// Path is the one path served (default Path); any other is 404.
	Path string
	// MaxBodyBytes caps a POST body and a WebSocket message (default
	// DefaultMaxBodyBytes). A larger POST is 413; a larger message closes its socket
	// with status 1009 (message too big).
	MaxBodyBytes int64
	// OriginPatterns are the extra browser origins (host patterns, path.Match syntax, as
	// websocket.AcceptOptions takes them) allowed to open a socket; a request without
	// Origin, or whose Origin's host is the request's Host, is always allowed.
	OriginPatterns []string
	// MaxSockets bounds open WebSockets (default DefaultMaxSockets); beyond it an
	// upgrade is 503 too_many_connections.
	MaxSockets int
	// SendQueue is how many messages (answers and notifications) may wait for one
	// socket (default DefaultSendQueue). A socket whose queue is full is dropped.
	SendQueue int
	// PingInterval and PongTimeout are the keepalive: a socket is pinged every
	// PingInterval and dropped when the pong does not come within PongTimeout.
	PingInterval, PongTimeout time.Duration
	// WriteTimeout bounds writing one message to a socket (default DefaultWriteTimeout).
	WriteTimeout time.Duration
	// Logger receives failures and dropped sockets; nil discards.
	Logger *slog.Logger
}

// Handler serves the management protocol on one path: POST for one request per body,
// GET with a WebSocket upgrade for a socket carrying requests, answers and pushed
// notifications. docs/management.md is its contract. It relies on being mounted behind
// toolgate serve's Host/Origin guard (mcpserver.Guard), as every route is.
type Handler struct {
	opts Options
	d    dispatcher
	log  *slog.Logger

	unsubscribe func()

	mu      sync.Mutex
	sockets map[*socket]struct{} // registered from before the upgrade is answered
	closed  bool

	dropped atomic.Uint64
	wg      sync.WaitGroup
}

// NewHandler returns a Handler over opts.Manager, subscribed to its notifications
// until Close.
func NewHandler(opts Options) (*Handler, error) {
	if opts.Manager == nil || opts.Authenticate == nil {
		return nil, errors.New("mgmt: Manager and Authenticate are required")
	}
	if opts.Path == "" {
		opts.Path = Path
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if opts.MaxSockets <= 0 {
		opts.MaxSockets = DefaultMaxSockets
	}
	if opts.SendQueue <= 0 {
		opts.SendQueue = DefaultSendQueue
	}
	if opts.PingInterval <= 0 {
		opts.PingInterval = DefaultPingInterval
	}
	if opts.PongTimeout <= 0 {
		opts.PongTimeout = DefaultPongTimeout
	}
	if opts.WriteTimeout <= 0 {
		opts.WriteTimeout = DefaultWriteTimeout
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	h := &Handler{opts: opts, log: log, sockets: map[*socket]struct{}{}}
	h.d = dispatcher{m: Checked(opts.Manager), log: log}
	stop, err := opts.Manager.Subscribe(h.publish)
	if err != nil {
		return nil, err
	}
	h.unsubscribe = stop
	return h, nil
}

// Stats reports the open sockets and how many were dropped for not reading.
type Stats struct {
	Sockets int
	Dropped uint64
}

// Stats returns the Handler's current counts.
func (h *Handler) Stats() Stats {
	h.mu.Lock()
	n := len(h.sockets)
	h.mu.Unlock()
	return Stats{Sockets: n, Dropped: h.dropped.Load()}
}

// Close stops the notification feed and closes every socket (status 1001, going
// away), waiting for their goroutines. WebSockets are hijacked connections, which
// http.Server.Shutdown does not track: serve calls Close after Shutdown. Later upgrades
// are refused.
func (h *Handler) Close() error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil
	}
	h.closed = true
	socks := make([]*socket, 0, len(h.sockets))
	for s := range h.sockets {
		socks = append(socks, s)
	}
	h.mu.Unlock()
	h.unsubscribe()
	for _, s := range socks {
		s.end(endGoingAway)
	}
	h.wg.Wait()
	return nil
}

// publish queues n for every socket, never waiting: a socket whose queue is full is
// dropped (its writer closes it), so one socket that does not read costs the others,
// and the Manager publishing, nothing.
func (h *Handler) publish(n Notification) {
	b, err := encodeNotification(n)
	if err != nil {
		h.log.Error("encoding a management notification", "method", n.Method(), "err", err)
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.sockets {
		s.send(b)
	}
}

// countDrop records a socket dropped for not reading.
func (h *Handler) countDrop(s *socket) {
	n := h.dropped.Add(1)
	h.log.Warn("dropped a management socket that did not read its messages",
		"principal", s.caller.Principal, "queue", h.opts.SendQueue, "dropped_total", n)
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != h.opts.Path {
		refuse(w, Errorf(CodeNotFound, "not found: the management protocol is served at %s", h.opts.Path))
		return
	}
	upgrade := r.Method == http.MethodGet && isWebSocketUpgrade(r)
	if r.Method != http.MethodPost && !upgrade {
		w.Header().Set("Allow", "GET, POST")
		refuse(w, Errorf(CodeMethodNotAllowed, "method not allowed: POST one request, or GET with a WebSocket upgrade"))
		return
	}
	token, present := bearer(r)
	if !present {
		refuse(w, Errorf(CodeUnauthorized, "unauthorized: send Authorization: Bearer TOKEN (the owner token or an admin principal's token)"))
		return
	}
	caller, admin, ok := h.opts.Authenticate(r.Context(), token)
	if !ok {
		refuse(w, Errorf(CodeUnauthorized, "unauthorized: the token is not valid"))
		return
	}
	if !admin {
		refuse(w, Errorf(CodeForbidden, "forbidden: principal %q is not an administrator (the owner token, or an allow grant on toolgate.admin)", caller.Principal))
		return
	}
	if upgrade {
		h.serveSocket(w, r, token, caller)
		return
	}
	h.servePost(w, r, caller)
}

func (h *Handler) servePost(w http.ResponseWriter, r *http.Request, caller Caller) {
	data, err := readBody(w, r, h.opts.MaxBodyBytes)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			refuse(w, Errorf(CodeTooLarge, "request too large: a body holds at most %d bytes", h.opts.MaxBodyBytes))
			return
		}
		h.log.Debug("reading a management request body", "err", err)
		refuse(w, Errorf(CodeParseError, "parse error: body could not be read"))
		return
	}
	msg, id, e := decodeOne(data, h.opts.MaxBodyBytes)
	if e != nil {
		writeAnswer(w, httpStatus(e.Code), errorAnswer(id, e))
		return
	}
	writeAnswer(w, http.StatusOK, h.d.answer(r.Context(), caller, msg))
}

// decodeOne reads one request strictly. A batch is refused (-32600): management
// changes are applied and audited one at a time, and a batch would make one body
// stand for several of them with no order the client can rely on. A message without
// an id is refused too, with an answer: a change must never happen unanswered.
func decodeOne(data []byte, max int64) (*rpcwire.Message, jsonrpc.ID, *Error) {
	body, rpcErr := rpcwire.Limits{MaxBytes: int(max)}.Decode(data)
	if rpcErr != nil {
		return nil, jsonrpc.ID{}, wireError(rpcErr)
	}
	if body.Batch {
		return nil, jsonrpc.ID{}, Errorf(CodeInvalidRequest, "invalid request: batches are not accepted; send one request per message")
	}
	it := body.Items[0]
	if it.Err != nil {
		return nil, it.ID, wireError(it.Err)
	}
	switch m := it.Msg; {
	case m.IsNotification():
		return nil, jsonrpc.ID{}, Errorf(CodeInvalidRequest, "invalid request: a request needs an id (the protocol has no client notifications)")
	case m.IsResponse():
		return nil, jsonrpc.ID{}, Errorf(CodeInvalidRequest, "invalid request: the server sends no requests, so there is nothing to answer")
	}
	return it.Msg, it.Msg.ID, nil
}

// refuse answers a request turned away before it was read: the status httpStatus
// gives its code, a JSON-RPC error with a null id as the body.
func refuse(w http.ResponseWriter, e *Error) {
	if e.Code == CodeUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="toolgate"`)
	}
	writeAnswer(w, httpStatus(e.Code), errorAnswer(jsonrpc.ID{}, e))
}

func writeAnswer(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// bearer reads the bearer token the one way every HTTP surface does (httpwire.Bearer:
// the Authorization header only, never the URL; exactly one, scheme Bearer).
func bearer(r *http.Request) (string, bool) {
	tok, present, ok := httpwire.Bearer(r)
	return tok, present && ok
}

// readBody reads at most max bytes; a declared length over max is refused before any
// of the body is read.
func readBody(w http.ResponseWriter, r *http.Request, max int64) ([]byte, error) {
	if r.ContentLength > max {
		return nil, &http.MaxBytesError{Limit: max}
	}
	return io.ReadAll(http.MaxBytesReader(w, r.Body, max))
}

// isWebSocketUpgrade reports whether r asks for a WebSocket (Connection: upgrade and
// Upgrade: websocket, each token matched case-insensitively).
func isWebSocketUpgrade(r *http.Request) bool {
	return headerHasToken(r.Header, "Connection", "upgrade") && headerHasToken(r.Header, "Upgrade", "websocket")
}

func headerHasToken(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}
