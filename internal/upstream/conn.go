package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolgate/toolgate/internal/mcpspec"
	"github.com/toolgate/toolgate/internal/rpcwire"
	"github.com/toolgate/toolgate/internal/telemetry"
	"github.com/toolgate/toolgate/internal/version"
)

// Defaults of Options.
const (
	DefaultMaxInboundRequests = 16
	// cancelNotifyTimeout bounds sending a notifications/cancelled or the answer
	// to a server's request; both are best effort.
	cancelNotifyTimeout = 5 * time.Second
	// maxBackground bounds the best-effort writes waiting at once.
	maxBackground = 32
)

// RequestHandler answers a request the upstream sends to the client (ping,
// roots/list, sampling/createMessage, elicitation/create…). It runs on its own
// goroutine; ctx ends when the upstream cancels the request or the connection
// ends. A nil result with a nil error answers {}. An *RPCError is sent as it
// is; any other error is sent as -32603 "internal error" (its text stays here).
type RequestHandler func(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error)

// DefaultRequestHandler answers ping and refuses everything else with -32601.
func DefaultRequestHandler(_ context.Context, method string, _ json.RawMessage) (json.RawMessage, error) {
	if method == "ping" {
		return json.RawMessage(`{}`), nil
	}
	return nil, &RPCError{Code: jsonrpc.CodeMethodNotFound, Message: "method not found: " + method}
}

// ProgressFunc receives the params of a notifications/progress for one call,
// with the caller's own progressToken restored. It is called on the goroutine
// that read the notification (the connection's reader, or over HTTP the
// standalone stream's), in order, and always before the call's answer is
// delivered; when the call is cancelled instead, one already under way may
// finish after Call returned. It must not block for long: it holds up this
// upstream's messages (no other upstream's).
type ProgressFunc func(params json.RawMessage)

// Options configures a connection. The zero value is usable.
type Options struct {
	// ClientInfo is initialize's clientInfo (default toolgate and its version).
	ClientInfo mcpspec.Implementation
	// Capabilities is initialize's capabilities, a raw JSON object (default {}).
	// Declare only what OnRequest answers.
	Capabilities json.RawMessage
	// OnNotification receives the upstream's notifications (list_changed,
	// notifications/message, resources/updated…) in order, on a goroutine of its
	// own, through a queue of NotificationQueue entries that drops the oldest
	// when full. Nil drops them.
	OnNotification func(Notification)
	// OnMessage, when set, receives the upstream's log messages
	// (notifications/message) instead of OnNotification: on the reader goroutine,
	// in order with the answers, like progress, so that the messages a server
	// logs during a call reach the call's caller before its answer. It must
	// return quickly (it holds up this upstream's messages).
	OnMessage func(Notification)
	// NotificationQueue is the queue's length (default DefaultNotificationQueue).
	NotificationQueue int
	// OnRequest answers the upstream's requests (default DefaultRequestHandler).
	OnRequest RequestHandler
	// MaxInboundRequests bounds the upstream's requests being answered at once;
	// one more is refused with -32603 at once (default DefaultMaxInboundRequests).
	MaxInboundRequests int
	// MaxMessageBytes caps one message from the upstream (default
	// DefaultMaxMessageBytes).
	MaxMessageBytes int
	// Name labels the server in logs and errors.
	Name string
	// Logger receives the connection's warnings. Nil discards.
	Logger *slog.Logger
	// Era is how the connection talks to the server (default EraLegacy:
	// initialize). It never changes once the handshake is done.
	Era Era
}

func (o Options) withDefaults() Options {
	if o.ClientInfo.Name == "" {
		o.ClientInfo = mcpspec.Implementation{Name: "toolgate", Version: version.String()}
	}
	if len(o.Capabilities) == 0 {
		o.Capabilities = json.RawMessage(`{}`)
	}
	if o.NotificationQueue <= 0 {
		o.NotificationQueue = DefaultNotificationQueue
	}
	if o.OnRequest == nil {
		o.OnRequest = DefaultRequestHandler
	}
	if o.MaxInboundRequests <= 0 {
		o.MaxInboundRequests = DefaultMaxInboundRequests
	}
	if o.MaxMessageBytes <= 0 {
		o.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// Handshake is what the server answered to initialize, or to server/discover
// on a stateless connection.
type Handshake struct {
	// Era is the connection's era: EraLegacy or EraStateless.
	Era             Era
	ProtocolVersion string
	ServerInfo      json.RawMessage
	Capabilities    json.RawMessage
	Instructions    string
	// Result is the whole initialize (or server/discover) result, as the
	// server sent it.
	Result json.RawMessage
}

// Capability returns the server's capability name (tools, resources, prompts,
// logging, completions…) as raw JSON, and whether it was declared.
func (h *Handshake) Capability(name string) (json.RawMessage, bool) {
	var caps map[string]json.RawMessage
	if json.Unmarshal(h.Capabilities, &caps) != nil {
		return nil, false
	}
	v, ok := caps[name]
	return v, ok
}

// Stats counts what a connection dropped or refused.
type Stats struct {
	DroppedLines         int64 // stdout lines that were not JSON objects or arrays
	OversizedMessages    int64 // messages over MaxMessageBytes
	BadMessages          int64 // JSON that was not a JSON-RPC message
	UnmatchedResponses   int64 // responses to no pending call (late, after a cancel, or bogus)
	DroppedNotifications int64 // dropped from a full notification queue
	DroppedProgress      int64 // progress for no live call
	RefusedRequests      int64 // upstream requests refused for MaxInboundRequests
	DroppedWrites        int64 // best-effort writes (cancellations, refusals) dropped under back-pressure
}

type counters struct {
	droppedLines, oversized, badMessages, unmatched, droppedNotes, droppedProgress, refused, droppedWrites atomic.Int64
}

// transport is what a Conn needs from the way it reaches the server.
type transport struct {
	conn mcp.Connection
	kind string
	// serial: writes go through one writer goroutine (stdio, where a write can
	// block on a full pipe and the go-sdk's write does not watch the context);
	// otherwise each write runs on the caller's goroutine (HTTP, where a write is
	// a whole POST and writes must run in parallel).
	serial bool
	// terminal reports whether a Read error ends the connection (as opposed to
	// one undecodable message).
	terminal func(error) bool
	// explain turns the error that ended reading or writing into the best
	// account of why (stdio: the process's exit status).
	explain func(error) error
	// redact removes secrets (URL query, userinfo) from transport errors.
	redact func(error) error
	// negotiated runs once initialize answered, before notifications/initialized.
	negotiated func(version string)
	// stateless runs before server/discover, when the connection takes the
	// 2026-07-28 era.
	stateless func()
	// ready runs once the handshake is complete, before the dial returns.
	ready func(context.Context, *Conn)
	// closed runs when the connection ends, after the go-sdk connection is closed.
	closed func()
}

const (
	stQueued int32 = iota
	stWritten
	stAbandoned
)

type pending struct {
	ch       chan reply // capacity 1: exactly one reply is ever sent
	state    atomic.Int32
	progress ProgressFunc
	token    json.RawMessage
}

type reply struct {
	result json.RawMessage
	err    error
}

type outMsg struct {
	msg jsonrpc.Message
	p   *pending
}

// Conn is one MCP connection to an upstream server, after the handshake. It is
// safe for concurrent use; calls run in parallel and are correlated by
// connection-local ids.
type Conn struct {
	opts Options
	log  *slog.Logger
	t    transport
	st   counters
	hs   Handshake

	// era is set by the handshake, before any other call: it is read without
	// a lock afterwards.
	era   Era
	meta  []byte    // the _meta members of a stateless request
	tools toolTable // x-mcp-header bindings learned from tools/list

	life   context.Context // ends when the connection does
	cancel context.CancelFunc
	outq   chan outMsg
	notes  *noteQueue
	reqSem chan struct{}
	bgSem  chan struct{}
	nextID atomic.Int64

	mu       sync.Mutex
	pending  map[int64]*pending
	inbound  map[string]context.CancelFunc
	closed   bool
	closeErr *ClosedError

	done     chan struct{} // closed when the connection ends
	shutdown chan struct{} // closed when the go-sdk connection is closed too
}

func newConn(opts Options) *Conn {
	opts = opts.withDefaults()
	life, cancel := context.WithCancel(context.Background())
	c := &Conn{
		opts:     opts,
		log:      opts.Logger,
		life:     life,
		cancel:   cancel,
		reqSem:   make(chan struct{}, opts.MaxInboundRequests),
		bgSem:    make(chan struct{}, maxBackground),
		pending:  make(map[int64]*pending),
		inbound:  make(map[string]context.CancelFunc),
		done:     make(chan struct{}),
		shutdown: make(chan struct{}),
	}
	if opts.Name != "" {
		c.log = c.log.With("server", opts.Name)
	}
	return c
}

// start wires the transport and runs the handshake; on failure the connection
// is closed and the error returned.
func (c *Conn) start(ctx context.Context, t transport) error {
	c.t = t
	c.log = c.log.With("transport", t.kind)
	if t.serial {
		c.outq = make(chan outMsg, 64)
		go c.writeLoop()
	}
	if c.opts.OnNotification != nil {
		c.notes = newNoteQueue(c.opts.NotificationQueue, &c.st.droppedNotes)
		go c.notes.run(c.opts.OnNotification, c.done)
	}
	go c.readLoop()
	if err := c.handshake(ctx); err != nil {
		c.closeWith(err)
		<-c.shutdown
		return err
	}
	return nil
}

type initializeParams struct {
	ProtocolVersion string                 `json:"protocolVersion"`
	Capabilities    json.RawMessage        `json:"capabilities"`
	ClientInfo      mcpspec.Implementation `json:"clientInfo"`
}

// probeTimeout bounds server/discover when probing a stdio server: an older
// server may ignore a method it does not know instead of refusing it.
const probeTimeout = 5 * time.Second

func (c *Conn) handshake(ctx context.Context) error {
	if !isObject(c.opts.Capabilities) {
		return errors.New("upstream: Options.Capabilities must be a JSON object")
	}
	switch c.opts.Era {
	case EraStateless:
		if c.t.kind != "stdio" {
			return c.statelessHandshake(ctx)
		}
		// Over stdio an older server may never answer server/discover: no answer
		// within the probe's wait is its verdict too.
		pctx, cancel := context.WithTimeout(ctx, probeTimeout)
		err := c.statelessHandshake(pctx)
		cancel()
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			return fmt.Errorf("upstream: server/discover: no answer within %s: %w", probeTimeout, errNotStateless)
		}
		return err
	case EraProbe:
		if c.t.kind != "stdio" {
			// Over HTTP the dialer falls back on a new connection, so the
			// two eras never share one.
			return c.statelessHandshake(ctx)
		}
		pctx, cancel := context.WithTimeout(ctx, probeTimeout)
		err := c.statelessHandshake(pctx)
		cancel()
		timedOut := errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil
		if err == nil || !(errors.Is(err, errNotStateless) || timedOut) {
			return err
		}
		c.log.Debug("upstream: server/discover refused; falling back to initialize", "error", c.redacted(err))
		c.era = EraLegacy
	}
	return c.legacyHandshake(ctx)
}

func (c *Conn) statelessHandshake(ctx context.Context) error {
	meta, err := c.metaMembers()
	if err != nil {
		return fmt.Errorf("upstream: encoding request metadata: %w", err)
	}
	c.era, c.meta = EraStateless, meta
	if c.t.stateless != nil {
		c.t.stateless()
	}
	if err := c.discover(ctx); err != nil {
		return err
	}
	if c.t.ready != nil {
		c.t.ready(ctx, c)
	}
	return nil
}

func (c *Conn) legacyHandshake(ctx context.Context) error {
	params, err := rpcwire.Encode(initializeParams{mcpspec.LatestVersion, c.opts.Capabilities, c.opts.ClientInfo})
	if err != nil {
		return fmt.Errorf("upstream: encoding initialize: %w", err)
	}
	res, err := c.call(ctx, "initialize", params, nil, true)
	if err != nil {
		return fmt.Errorf("upstream: initialize: %w", err)
	}
	var r struct {
		ProtocolVersion string          `json:"protocolVersion"`
		Capabilities    json.RawMessage `json:"capabilities"`
		ServerInfo      json.RawMessage `json:"serverInfo"`
		Instructions    string          `json:"instructions"`
	}
	if err := json.Unmarshal(res, &r); err != nil {
		return fmt.Errorf("upstream: initialize result is not an InitializeResult: %w", err)
	}
	// initialize offers mcpspec.LatestVersion, the newest revision that has the
	// handshake, and accepts an answer naming any session-based revision.
	if !mcpspec.IsSessionVersion(r.ProtocolVersion) {
		return &UnsupportedVersionError{Offered: mcpspec.LatestVersion, Answered: r.ProtocolVersion}
	}
	c.hs = Handshake{
		Era:             EraLegacy,
		ProtocolVersion: r.ProtocolVersion,
		ServerInfo:      r.ServerInfo,
		Capabilities:    r.Capabilities,
		Instructions:    r.Instructions,
		Result:          res,
	}
	if c.t.negotiated != nil {
		c.t.negotiated(r.ProtocolVersion)
	}
	if err := c.Notify(ctx, "notifications/initialized", nil); err != nil {
		return fmt.Errorf("upstream: notifications/initialized: %w", err)
	}
	if c.t.ready != nil {
		c.t.ready(ctx, c)
	}
	return nil
}

func isObject(b json.RawMessage) bool {
	var m map[string]json.RawMessage
	return json.Unmarshal(b, &m) == nil && m != nil
}

// Handshake returns what the server answered to initialize (or, on a
// stateless connection, to server/discover).
func (c *Conn) Handshake() *Handshake { return &c.hs }

// Era returns the connection's era: EraLegacy or EraStateless.
func (c *Conn) Era() Era { return c.era }

// Transport names the transport: "stdio", "streamable-http" or "sse".
func (c *Conn) Transport() string { return c.t.kind }

// Call sends a request and returns the raw result. A JSON-RPC error answer is
// an *RPCError; a connection that ends first is a *ClosedError (errors.Is
// ErrClosed). When ctx ends first Call returns ctx's error at once and tells
// the server with notifications/cancelled (unless the request was never
// written). params must be a JSON object or nil.
func (c *Conn) Call(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
	return c.call(ctx, method, params, nil, false)
}

// CallWithProgress is Call with progress: when params carry
// _meta.progressToken, the token sent upstream is replaced by this call's own,
// and each notifications/progress for it reaches onProgress with the original
// token back in place.
func (c *Conn) CallWithProgress(ctx context.Context, method string, params json.RawMessage, onProgress ProgressFunc) (json.RawMessage, error) {
	return c.call(ctx, method, params, onProgress, false)
}

func (c *Conn) call(ctx context.Context, method string, params json.RawMessage, onProgress ProgressFunc, noCancel bool) (json.RawMessage, error) {
	if err := c.wrongEra(method); err != nil {
		return nil, err
	}
	ctx, span := telemetry.StartUpstream(ctx, method, c.opts.Name, c.t.kind)
	res, err := c.tracedCall(ctx, method, params, onProgress, noCancel)
	span.End(err)
	return res, err
}

// tracedCall sends one request with the call's trace context in params._meta
// (withTrace) and, over HTTP, in its headers (headerTransport).
func (c *Conn) tracedCall(ctx context.Context, method string, params json.RawMessage, onProgress ProgressFunc, noCancel bool) (json.RawMessage, error) {
	params, err := withTrace(ctx, params)
	if err != nil {
		return nil, err
	}
	if c.era != EraStateless {
		return c.roundTrip(ctx, method, params, onProgress, noCancel)
	}
	ctx, params, err = c.stateless(ctx, method, params)
	if err != nil {
		return nil, err
	}
	res, err := c.roundTrip(ctx, method, params, onProgress, noCancel)
	if err == nil && method == "tools/list" {
		c.tools.learn(params, res)
	}
	return res, err
}

// roundTrip sends one request and waits for its answer.
func (c *Conn) roundTrip(ctx context.Context, method string, params json.RawMessage, onProgress ProgressFunc, noCancel bool) (json.RawMessage, error) {
	id := c.nextID.Add(1)
	p := &pending{ch: make(chan reply, 1)}
	if out, tok, ok := rewriteProgressToken(params, id); ok {
		params, p.token, p.progress = out, tok, onProgress
	}
	c.mu.Lock()
	if c.closed {
		err := c.closeErr
		c.mu.Unlock()
		return nil, err
	}
	c.pending[id] = p
	c.mu.Unlock()

	req := &jsonrpc.Request{ID: intID(id), Method: method, Params: params}
	if err := c.send(ctx, req, p); err != nil {
		if !c.forget(id) {
			r := <-p.ch // answered (or failed) while the write was returning
			return r.result, r.err
		}
		if ctx.Err() != nil {
			if !noCancel && p.state.Load() == stWritten {
				c.cancelUpstream(id, context.Cause(ctx))
			}
			return nil, ctx.Err()
		}
		return nil, c.sendError(method, err)
	}
	select {
	case r := <-p.ch:
		return r.result, r.err
	case <-ctx.Done():
		if !c.forget(id) {
			r := <-p.ch
			return r.result, r.err
		}
		if !p.state.CompareAndSwap(stQueued, stAbandoned) && !noCancel {
			c.cancelUpstream(id, context.Cause(ctx))
		}
		return nil, ctx.Err()
	}
}

// intID makes a JSON-RPC id of a connection-local number (the jsonrpc package
// builds integer ids only from their decoded float64 form; ours stay far below
// 2^53).
func intID(n int64) jsonrpc.ID {
	id, _ := jsonrpc.MakeID(float64(n))
	return id
}

// forget removes a pending call; false means a reply was already sent to it.
func (c *Conn) forget(id int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.pending[id]; !ok {
		return false
	}
	delete(c.pending, id)
	return true
}

// send writes a message: through the writer goroutine (serial transports) or
// on the caller's goroutine.
func (c *Conn) send(ctx context.Context, msg jsonrpc.Message, p *pending) error {
	if c.t.serial {
		select {
		case c.outq <- outMsg{msg: msg, p: p}:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-c.done:
			return c.closedError()
		}
	}
	select {
	case <-c.done:
		return c.closedError()
	default:
	}
	if p != nil {
		p.state.Store(stWritten)
	}
	return c.t.conn.Write(ctx, msg)
}

// sendError turns a failed write into the error a caller sees.
func (c *Conn) sendError(method string, err error) error {
	var auth *AuthRequiredError
	if errors.As(err, &auth) {
		if !auth.InsufficientScope() {
			// The credentials are gone: so is the connection (the host parks
			// the server). A missing scope fails only this request.
			c.closeWith(auth)
		}
		return auth
	}
	var big *MessageTooLargeError
	if errors.As(err, &big) {
		return big
	}
	if we := findWireError(err); we != nil {
		return &RPCError{Code: we.Code, Message: we.Message, Data: we.Data}
	}
	var closed *ClosedError
	if errors.As(err, &closed) {
		return closed
	}
	if c.t.redact != nil {
		err = c.t.redact(err)
	}
	return fmt.Errorf("upstream: sending %s: %w", method, err)
}

// codeRejected is the go-sdk's own "rejected by transport" wire error, which
// wraps a failed POST: it is not the server's answer.
const codeRejected = -32005

// findWireError finds a JSON-RPC error the server sent in a write's error (the
// go-sdk surfaces a 4xx body holding a JSON-RPC error that way).
func findWireError(err error) *jsonrpc.Error {
	switch e := err.(type) {
	case nil:
		return nil
	case *jsonrpc.Error:
		if e.Code != codeRejected {
			return e
		}
		return nil
	case interface{ Unwrap() []error }:
		for _, inner := range e.Unwrap() {
			if we := findWireError(inner); we != nil {
				return we
			}
		}
		return nil
	case interface{ Unwrap() error }:
		return findWireError(e.Unwrap())
	}
	return nil
}

// Notify sends a notification. A stateless connection over HTTP has none to
// send (the revision defines no client notification there) and refuses.
func (c *Conn) Notify(ctx context.Context, method string, params json.RawMessage) error {
	if err := c.wrongEra(method); err != nil {
		return err
	}
	if c.era == EraStateless && c.t.kind != "stdio" {
		return &EraError{Method: method, Era: c.era}
	}
	if err := c.send(ctx, &jsonrpc.Request{Method: method, Params: params}, nil); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return c.sendError(method, err)
	}
	return nil
}

// Ping sends a ping and waits for its answer. Any answer, a JSON-RPC error
// included (a server that does not implement ping is still alive), is a
// success; only no answer (ctx ended, connection ended) is an error.
//
// The stateless revision has no ping: there server/discover is asked instead.
func (c *Conn) Ping(ctx context.Context) error {
	method := "ping"
	if c.era == EraStateless {
		method = "server/discover"
	}
	_, err := c.Call(ctx, method, nil)
	var rpcErr *RPCError
	if errors.As(err, &rpcErr) {
		return nil
	}
	return err
}

// cancelUpstream tells the server a call was abandoned, without waiting.
//
// Over stateless HTTP closing the request's stream is the cancellation (the
// go-sdk ends the POST with the call's context), so nothing is sent.
func (c *Conn) cancelUpstream(id int64, cause error) {
	if c.era == EraStateless && c.t.kind != "stdio" {
		return
	}
	reason := "cancelled"
	if errors.Is(cause, context.DeadlineExceeded) {
		reason = "timed out"
	}
	params, _ := rpcwire.Encode(struct {
		RequestID int64  `json:"requestId"`
		Reason    string `json:"reason"`
	}{id, reason})
	c.sendBackground(&jsonrpc.Request{Method: "notifications/cancelled", Params: params})
}

// sendBackground writes a best-effort message (a cancellation, a refusal)
// without holding up the caller. At most maxBackground such writes wait at
// once; past that they are dropped and counted, so a server that stops reading
// while it floods requests cannot make goroutines pile up.
func (c *Conn) sendBackground(msg jsonrpc.Message) {
	if c.t.serial {
		select {
		case c.outq <- outMsg{msg: msg}:
			return
		case <-c.done:
			return
		default:
		}
	}
	select {
	case c.bgSem <- struct{}{}:
	default:
		c.st.droppedWrites.Add(1)
		return
	}
	go func() {
		defer func() { <-c.bgSem }()
		ctx, cancel := context.WithTimeout(c.life, cancelNotifyTimeout)
		defer cancel()
		if err := c.send(ctx, msg, nil); err != nil && ctx.Err() == nil {
			c.log.Debug("upstream: best-effort write failed", "error", c.redacted(err))
		}
	}()
}

func (c *Conn) redacted(err error) error {
	if c.t.redact != nil {
		return c.t.redact(err)
	}
	return err
}

func (c *Conn) writeLoop() {
	for {
		select {
		case m := <-c.outq:
			if m.p != nil && !m.p.state.CompareAndSwap(stQueued, stWritten) {
				continue // its caller gave up before it was written
			}
			if err := c.t.conn.Write(c.life, m.msg); err != nil {
				if c.life.Err() == nil {
					c.closeWith(c.explain(fmt.Errorf("writing to the server: %w", err)))
				}
				return
			}
		case <-c.done:
			return
		}
	}
}

func (c *Conn) explain(err error) error {
	if c.t.explain != nil {
		return c.t.explain(err)
	}
	return c.redacted(err)
}

func (c *Conn) readLoop() {
	for {
		msg, err := c.t.conn.Read(c.life)
		if err != nil {
			if c.life.Err() != nil {
				return
			}
			if c.t.terminal != nil && !c.t.terminal(err) {
				n := c.st.badMessages.Add(1)
				if logWorthy(n) {
					c.log.Warn("upstream sent a message that is not JSON-RPC; dropped", "error", err, "bad_total", n)
				}
				continue
			}
			c.closeWith(c.explain(err))
			return
		}
		c.dispatch(msg)
	}
}

// dispatch routes one message from the server. It runs on a reader goroutine
// (the connection's, or the standalone HTTP stream's).
func (c *Conn) dispatch(msg jsonrpc.Message) {
	switch m := msg.(type) {
	case *jsonrpc.Response:
		c.deliver(m)
	case *jsonrpc.Request:
		switch {
		case m.IsCall():
			c.serveRequest(m)
		case m.Method == "notifications/progress":
			c.progress(m.Params)
		case m.Method == "notifications/cancelled":
			c.cancelled(m.Params)
		case m.Method == "notifications/message" && c.opts.OnMessage != nil:
			c.opts.OnMessage(Notification{Method: m.Method, Params: m.Params})
		case c.notes != nil:
			c.notes.push(Notification{Method: m.Method, Params: m.Params})
		}
	}
}

func (c *Conn) deliver(m *jsonrpc.Response) {
	id, ok := m.ID.Raw().(int64)
	if s, isString := m.ID.Raw().(string); isString {
		// Some servers echo ids as strings; ours are integers.
		n, err := strconv.ParseInt(s, 10, 64)
		id, ok = n, err == nil
	}
	var p *pending
	if ok {
		c.mu.Lock()
		p = c.pending[id]
		delete(c.pending, id)
		c.mu.Unlock()
	}
	if p == nil {
		c.st.unmatched.Add(1)
		return
	}
	var r reply
	switch {
	case m.Error != nil:
		var we *jsonrpc.Error
		if errors.As(m.Error, &we) {
			r.err = &RPCError{Code: we.Code, Message: we.Message, Data: we.Data}
		} else {
			// The go-sdk's own account, e.g. a response stream that ended first.
			r.err = fmt.Errorf("upstream: %w", c.redacted(m.Error))
		}
	case m.Result == nil:
		r.err = errors.New("upstream: response has neither result nor error")
	default:
		r.result = m.Result
	}
	p.ch <- r
}

func (c *Conn) progress(params json.RawMessage) {
	id, ok := progressID(params)
	var p *pending
	if ok {
		c.mu.Lock()
		p = c.pending[id]
		c.mu.Unlock()
	}
	if p == nil || p.progress == nil {
		c.st.droppedProgress.Add(1)
		return
	}
	out, ok := restoreProgressToken(params, p.token)
	if !ok {
		c.st.droppedProgress.Add(1)
		return
	}
	p.progress(out)
}

// cancelled handles the server cancelling one of its own requests.
func (c *Conn) cancelled(params json.RawMessage) {
	var p struct {
		RequestID json.RawMessage `json:"requestId"`
	}
	if json.Unmarshal(params, &p) != nil || len(p.RequestID) == 0 {
		return
	}
	var v any
	if json.Unmarshal(p.RequestID, &v) != nil {
		return
	}
	id, err := jsonrpc.MakeID(v)
	if err != nil {
		return
	}
	key := idKey(id)
	c.mu.Lock()
	cancel := c.inbound[key]
	delete(c.inbound, key)
	c.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

func idKey(id jsonrpc.ID) string {
	switch v := id.Raw().(type) {
	case int64:
		return strconv.FormatInt(v, 10)
	case string:
		return "s" + v
	}
	return ""
}

func (c *Conn) serveRequest(req *jsonrpc.Request) {
	key := idKey(req.ID)
	select {
	case c.reqSem <- struct{}{}:
	default:
		c.st.refused.Add(1)
		c.answer(req.ID, nil, &RPCError{Code: jsonrpc.CodeInternalError, Message: "too many requests in flight"})
		return
	}
	ctx, cancel := context.WithCancel(c.life)
	c.mu.Lock()
	_, dup := c.inbound[key]
	if !dup && !c.closed {
		c.inbound[key] = cancel
	}
	closed := c.closed
	c.mu.Unlock()
	if dup || closed {
		cancel()
		<-c.reqSem
		if dup {
			c.answer(req.ID, nil, &RPCError{Code: jsonrpc.CodeInvalidRequest, Message: "request id already in use"})
		}
		return
	}
	go func() {
		defer func() { <-c.reqSem }()
		res, err := c.handle(ctx, req)
		c.mu.Lock()
		_, live := c.inbound[key]
		delete(c.inbound, key)
		c.mu.Unlock()
		abandoned := ctx.Err() != nil
		cancel()
		if live && !abandoned {
			// Written here, still holding the slot, so answers are bounded
			// by MaxInboundRequests too.
			wctx, stop := context.WithTimeout(c.life, cancelNotifyTimeout)
			defer stop()
			if err := c.send(wctx, c.response(req.ID, res, err), nil); err != nil && wctx.Err() == nil {
				c.log.Debug("upstream: answering a server request failed", "error", c.redacted(err))
			}
		}
	}()
}

func (c *Conn) handle(ctx context.Context, req *jsonrpc.Request) (res json.RawMessage, err error) {
	defer func() {
		if r := recover(); r != nil {
			c.log.Error("upstream request handler panicked", "method", req.Method, "panic", fmt.Sprint(r))
			res, err = nil, errors.New("handler panicked")
		}
	}()
	return c.opts.OnRequest(ctx, req.Method, req.Params)
}

// answer sends a response to a server request in the background.
func (c *Conn) answer(id jsonrpc.ID, res json.RawMessage, err error) {
	c.sendBackground(c.response(id, res, err))
}

func (c *Conn) response(id jsonrpc.ID, res json.RawMessage, err error) *jsonrpc.Response {
	resp := &jsonrpc.Response{ID: id}
	var rpcErr *RPCError
	switch {
	case errors.As(err, &rpcErr):
		resp.Error = &jsonrpc.Error{Code: rpcErr.Code, Message: rpcErr.Message, Data: rpcErr.Data}
	case err != nil:
		c.log.Warn("upstream request handler failed", "error", err)
		resp.Error = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "internal error"}
	case res == nil:
		resp.Result = json.RawMessage(`{}`)
	default:
		resp.Result = res
	}
	return resp
}

// oversized handles a message dropped for its size that carried an id.
func (c *Conn) oversized(raw json.RawMessage, isRequest bool) {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return
	}
	id, err := jsonrpc.MakeID(v)
	if err != nil || !id.IsValid() {
		return
	}
	if isRequest {
		c.answer(id, nil, &RPCError{Code: jsonrpc.CodeInvalidRequest,
			Message: fmt.Sprintf("request exceeds %d bytes", c.opts.MaxMessageBytes)})
		return
	}
	n, ok := id.Raw().(int64)
	if !ok {
		return
	}
	c.mu.Lock()
	p := c.pending[n]
	delete(c.pending, n)
	c.mu.Unlock()
	if p != nil {
		p.ch <- reply{err: &MessageTooLargeError{Limit: c.opts.MaxMessageBytes}}
	}
}

// closeWith ends the connection (once): every pending call fails with a
// *ClosedError carrying cause, the server's requests in flight are cancelled,
// and the go-sdk connection is closed in the background.
func (c *Conn) closeWith(cause error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	c.closeErr = &ClosedError{Cause: cause}
	pend, inb := c.pending, c.inbound
	c.pending, c.inbound = nil, nil
	c.mu.Unlock()

	if cause != nil {
		c.log.Info("upstream connection ended", "cause", cause)
	}
	c.cancel()
	close(c.done)
	for _, p := range pend {
		p.ch <- reply{err: c.closeErr}
	}
	for _, cancel := range inb {
		cancel()
	}
	go func() {
		if c.t.conn != nil {
			c.t.conn.Close()
		}
		if c.t.closed != nil {
			c.t.closed()
		}
		close(c.shutdown)
	}()
}

func (c *Conn) closedError() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closeErr == nil {
		return &ClosedError{}
	}
	return c.closeErr
}

// Close ends the connection and waits until its transport is closed (over
// Streamable HTTP that includes the session's DELETE, bounded by the go-sdk).
// Over stdio it closes the server's stdin and stdout but does not wait for the
// process: Process.Stop does that.
func (c *Conn) Close() error {
	c.closeWith(nil)
	<-c.shutdown
	return nil
}

// Done is closed when the connection ends, whoever ended it.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Err returns why the connection ended (nil while it runs, and when its owner
// closed it).
func (c *Conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closeErr == nil {
		return nil
	}
	return c.closeErr.Cause
}

// Stats returns the connection's counters.
func (c *Conn) Stats() Stats {
	return Stats{
		DroppedLines:         c.st.droppedLines.Load(),
		OversizedMessages:    c.st.oversized.Load(),
		BadMessages:          c.st.badMessages.Load(),
		UnmatchedResponses:   c.st.unmatched.Load(),
		DroppedNotifications: c.st.droppedNotes.Load(),
		DroppedProgress:      c.st.droppedProgress.Load(),
		RefusedRequests:      c.st.refused.Load(),
		DroppedWrites:        c.st.droppedWrites.Load(),
	}
}
