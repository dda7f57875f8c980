package mcpserver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/toolgate/toolgate/internal/httpwire"
	"github.com/toolgate/toolgate/internal/mcpspec"
	"github.com/toolgate/toolgate/internal/rpcwire"
)

const (
	headerSessionID       = "Mcp-Session-Id"
	headerProtocolVersion = "Mcp-Protocol-Version"

	// DefaultMaxBodyBytes caps a POST body; larger bodies get 413.
	DefaultMaxBodyBytes = rpcwire.MaxMessageBytes
	// batchWorkers bounds how many messages of one batch run at once.
	batchWorkers = 8
)

// httpSession is one MCP session over Streamable HTTP.
type httpSession struct {
	id        string
	principal string
	conn      *conn
	turn      Turn
	ctx       context.Context
	cancel    context.CancelFunc
	log       *slog.Logger
	// slot is the session's place in its registry (a Handler's or a Bridge's).
	slot *sessionSlot
	// hash and expires are set for a signed session id (HandlerOptions.Shared).
	hash    string
	expires time.Time

	endOnce sync.Once
	ended   chan struct{}
	// out is the session's GET stream (getstream.go).
	out outbox
}

func newSessionID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func newHTTPSession(turn Turn, principal string, info mcpspec.Implementation, instructions string, log *slog.Logger, stateless bool) *httpSession {
	ctx, cancel := context.WithCancel(context.Background())
	return &httpSession{
		id: newSessionID(), principal: principal, turn: turn,
		conn: newConn(turn, info, instructions, log, stateless),
		ctx:  ctx, cancel: cancel, log: log, ended: make(chan struct{}),
	}
}

// acquire marks the session in use by one request until release, so that its
// registry neither evicts nor reaps it meanwhile; false when the session ended
// (it may have been evicted or reaped since it was looked up).
func (s *httpSession) acquire() bool { return s.slot.acquire() }

// release ends the use acquire began.
func (s *httpSession) release() { s.slot.release(s) }

func (s *httpSession) isEnded() bool {
	select {
	case <-s.ended:
		return true
	default:
		return false
	}
}

// end cancels the session's calls, fails its outstanding peer requests and
// closes its Turn when the Turn is an io.Closer. Safe to call more than once.
func (s *httpSession) end() {
	s.endOnce.Do(func() {
		close(s.ended)
		s.cancel()
		s.conn.close()
		if c, ok := s.turn.(io.Closer); ok {
			if err := c.Close(); err != nil {
				s.log.Warn("closing a turn", "err", err)
			}
		}
	})
}

// sessionStore is how the HTTP core finds sessions: a Handler opens one with a
// Turn of its own per initialize, a Bridge opens them all on its one Turn.
type sessionStore interface {
	// lookup returns the live session with this id owned by principal, or nil.
	lookup(ctx context.Context, id, principal string) *httpSession
	// implicit returns the session serving a request that names none, or nil.
	// For an initialize (initialize true) it returns only a session no
	// initialize has been given yet, which it then counts as given: the
	// initialize opens that session rather than a new one.
	implicit(principal string, initialize bool) *httpSession
	// create opens a new session for an initialize that named none, already
	// acquired for that request.
	create(ctx context.Context, principal string) (*httpSession, refusal)
	// remove forgets an ended session.
	remove(s *httpSession)
	// stateless returns the protocol state serving one 2026-07-28 request that
	// names no session, and a function to call once it is answered.
	stateless(ctx context.Context, principal string) (*conn, func(), refusal)
}

// httpCore serves the Streamable HTTP contract over a sessionStore.
type httpCore struct {
	path         string
	guard        *guard
	authenticate func(token string, present bool) (string, bool)
	limits       rpcwire.Limits
	maxBody      int64
	store        sessionStore
	log          *slog.Logger
	stateless    bool // the 2026-07-28 revision is served too
	// retryAfter, when set, is the Retry-After of a 503 too_many_sessions.
	retryAfter func(principal string) time.Duration
	// inflight caps each principal's concurrently running requests.
	inflight *inflightLimit
	// keepAlive is the interval of SSE comment lines on a running POST's answer;
	// zero or less sends none.
	keepAlive time.Duration
	// writeTimeout bounds each write of an answer (see deadlineWriter).
	writeTimeout time.Duration
}

// trackingWriter remembers whether anything was written, so a late panic knows
// whether a 500 can still be sent.
type trackingWriter struct {
	http.ResponseWriter
	wrote bool
}

func (t *trackingWriter) WriteHeader(code int) { t.wrote = true; t.ResponseWriter.WriteHeader(code) }
func (t *trackingWriter) Write(b []byte) (int, error) {
	t.wrote = true
	return t.ResponseWriter.Write(b)
}
func (t *trackingWriter) Unwrap() http.ResponseWriter { return t.ResponseWriter }

func (c *httpCore) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	w := &trackingWriter{ResponseWriter: withWriteDeadline(rw, c.writeTimeout)}
	defer func() {
		if p := recover(); p != nil {
			if p == http.ErrAbortHandler {
				panic(p)
			}
			c.log.Error("unhandled failure serving MCP", "panic", p)
			if !w.wrote {
				writeRefusal(w, refuseInternal)
			}
		}
	}()
	// The core checks its own path and method rather than sit behind a pattern mux:
	// the contract's 404 for another path is empty and its 405 is JSON with Allow:
	// POST, DELETE, both decided in its order of checks (docs/http-contract.md),
	// where a mux answers text/plain before any check.
	if r.URL.Path != c.path {
		writeRefusal(w, refuseNotFound)
		return
	}
	// Behind an equivalent Guard (toolgate serve's) the request was checked there.
	if !c.guard.passed(r) {
		if ref := c.guard.check(r); ref != refuseNone {
			writeRefusal(w, ref)
			return
		}
	}
	if r.Method != http.MethodPost && r.Method != http.MethodDelete && r.Method != http.MethodGet {
		writeRefusal(w, refuseOtherMethod)
		return
	}
	principal, ok := c.authorize(r)
	if !ok {
		writeRefusal(w, refuseUnauthorized)
		return
	}
	if r.Method == http.MethodGet {
		c.serveGet(w, r, principal) // a long-lived stream: counted in flight only while it opens
		return
	}
	// Counted from here until the answer is written (ServeHTTP returns), before
	// any body is read or Turn touched, so a principal at its cap costs the
	// server nothing more than this refusal.
	if !c.inflight.acquire(principal) {
		writeRefusalRetry(w, refuseTooManyRequests, time.Second)
		return
	}
	defer c.inflight.release(principal)
	if len(r.Header.Values(headerProtocolVersion)) > 1 {
		// Two versions are two readings of one request: refused, never resolved.
		writeRefusal(w, refuseBadProtocolVersion)
		return
	}
	if v := r.Header.Get(headerProtocolVersion); v != "" && !mcpspec.IsSessionVersion(v) && !(c.stateless && v == mcpspec.ModernVersion) {
		c.refuseVersion(w, r, v)
		return
	}
	var sess *httpSession
	if ids, named := r.Header[headerSessionID]; named {
		if len(ids) != 1 {
			writeRefusal(w, refuseUnknownSession)
			return
		}
		if sess = c.store.lookup(r.Context(), ids[0], principal); sess == nil || !sess.acquire() {
			writeRefusal(w, refuseUnknownSession)
			return
		}
		defer sess.release()
	}
	if r.Method == http.MethodDelete {
		c.serveDelete(w, r, sess, principal)
		return
	}
	c.servePost(w, r, sess, principal)
}

// authorize reads the bearer token (httpwire.Bearer: the Authorization header only,
// never the URL). A header with another scheme is refused outright.
func (c *httpCore) authorize(r *http.Request) (string, bool) {
	if c.authenticate == nil {
		return "", true
	}
	token, present, ok := httpwire.Bearer(r)
	if !ok {
		return "", false
	}
	return c.authenticate(token, present)
}

func (c *httpCore) serveDelete(w http.ResponseWriter, r *http.Request, sess *httpSession, principal string) {
	if sess == nil {
		sess = c.store.implicit(principal, false)
	}
	if sess == nil {
		writeRefusal(w, refuseUnknownSession)
		return
	}
	c.store.remove(sess)
	sess.end()
	if d, ok := c.store.(interface {
		deleted(context.Context, *httpSession)
	}); ok {
		d.deleted(r.Context(), sess) // a Handler sharing its sessions tells the others
	}
	w.WriteHeader(http.StatusOK)
}

func (c *httpCore) servePost(w *trackingWriter, r *http.Request, sess *httpSession, principal string) {
	data, err := httpwire.ReadBody(w, r, c.maxBody)
	if err != nil {
		if httpwire.IsTooLarge(err) {
			writeRefusal(w, refuseTooLarge)
			return
		}
		c.log.Debug("reading a request body", "err", err)
		writeRPCError(w, c.sessionIDFor(sess, principal), jsonrpc.ID{}, rpcwire.ParseError("body could not be read"))
		return
	}
	body, rpcErr := c.limits.Decode(data)
	if rpcErr != nil {
		writeRPCError(w, c.sessionIDFor(sess, principal), jsonrpc.ID{}, rpcErr)
		return
	}
	if !body.Batch && body.Items[0].Err != nil {
		writeRPCError(w, c.sessionIDFor(sess, principal), body.Items[0].ID, body.Items[0].Err)
		return
	}
	if c.stateless && !body.Batch && body.Items[0].Msg != nil {
		// A 2026-07-28 request: modern _meta, or that version in the header.
		meta, ok := modernMeta(body.Items[0].Msg)
		if ok || strings.TrimSpace(r.Header.Get(headerProtocolVersion)) == mcpspec.ModernVersion {
			c.serveModern(w, r, body.Items[0].Msg, meta, sess, principal)
			return
		}
	}
	if sess == nil {
		if sess = c.store.implicit(principal, opensSession(body)); sess != nil {
			if !sess.acquire() {
				sess = nil
			} else {
				defer sess.release()
			}
		}
	}
	if sess == nil {
		if !opensSession(body) {
			writeRefusal(w, refuseMissingSession)
			return
		}
		var ref refusal
		if sess, ref = c.store.create(r.Context(), principal); ref != refuseNone {
			if ref == refuseTooManySessions && c.retryAfter != nil {
				writeRefusalRetry(w, ref, c.retryAfter(principal))
				return
			}
			writeRefusal(w, ref)
			return
		}
		defer sess.release()
	}
	c.answer(w, r, sess, body)
}

func sessionIDOf(s *httpSession) string {
	if s == nil {
		return ""
	}
	return s.id
}

// sessionIDFor is the mcp-session-id of the answer to a body that could not be
// read as JSON-RPC: the session it named, else the one serving requests that
// name none (a Bridge's), else none.
func (c *httpCore) sessionIDFor(sess *httpSession, principal string) string {
	if sess == nil {
		sess = c.store.implicit(principal, false)
	}
	return sessionIDOf(sess)
}

// opensSession reports whether b is what opens a Handler session: one
// initialize, never batched (a batch's other requests would run beside the
// handshake).
func opensSession(b *rpcwire.Body) bool {
	m := b.Items[0].Msg
	return !b.Batch && m != nil && m.IsRequest() && m.Method == mcpspec.MethodInitialize
}

// acceptsSSE reports whether the client listed text/event-stream in Accept.
func acceptsSSE(r *http.Request) bool {
	return acceptsType(r, func(mt string) bool { return strings.EqualFold(mt, "text/event-stream") })
}

// acceptsJSON reports whether the client's Accept takes application/json (by name,
// application/* or */*), so a streamable answer may be written whole as JSON.
func acceptsJSON(r *http.Request) bool {
	return acceptsType(r, func(mt string) bool {
		return strings.EqualFold(mt, "application/json") || strings.EqualFold(mt, "application/*") || mt == "*/*"
	})
}

// acceptsType reports whether a media range of the Accept header matches, one
// with q=0 (not acceptable) excepted.
func acceptsType(r *http.Request, match func(string) bool) bool {
	for _, v := range r.Header.Values("Accept") {
		for _, part := range strings.Split(v, ",") {
			mt, params, _ := strings.Cut(strings.TrimSpace(part), ";")
			if !match(strings.TrimSpace(mt)) {
				continue
			}
			if q, ok := strings.CutPrefix(strings.ReplaceAll(params, " ", ""), "q="); ok && strings.Trim(q, "0.") == "" {
				continue
			}
			return true
		}
	}
	return false
}

// answer runs a decoded body and writes the answers in input order: 202 when
// there are none, else 200 with JSON (an array for a batch) or SSE events when
// the client accepts text/event-stream. Over SSE a Peer may send requests and
// notifications on the same stream before the answers. A client that accepts
// both gets the stream only when something goes first (a message the calls
// send, a keep-alive of a long call); calls that end before either are answered
// whole as JSON, one write and no stream (docs/http-contract.md, "SSE answers
// and keep-alives").
func (c *httpCore) answer(w *trackingWriter, r *http.Request, sess *httpSession, body *rpcwire.Body) {
	run := sess.conn.begin(body.Items, body.Batch)
	if run.refused != nil {
		// One request the handshake refuses (before initialize, a second
		// initialize): 400, as for a request without a session.
		writeRPCError(w, sess.id, body.Items[0].Msg.ID, run.refused)
		return
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	stop := context.AfterFunc(sess.ctx, cancel)
	defer stop()

	var stream *sseStream
	peer := mcpspec.Peer(peerFunc{c: sess.conn})
	stopKeepAlive := func() {}
	if acceptsSSE(r) {
		stream = newSSEStream(w, sess.id, func(err error) {
			// The client did not take the stream (or went away): the calls
			// still running for it are cancelled, so the kernel records how
			// they ended, and nothing waits on a reader that is not there.
			cancel()
			c.dropped(err)
		})
		defer stream.end()
		peer = peerFunc{c: sess.conn, send: stream.send}
		if run.pending() {
			// A request will be answered. A client that takes only SSE gets the
			// stream now, whatever the call does; either way keep-alives follow
			// while it runs, so idle timeouts in the client or a proxy do not
			// cut a long call.
			if !acceptsJSON(r) && stream.start() != nil {
				return // not even the headers were taken: nothing runs
			}
			stopKeepAlive = stream.keepAlive(c.keepAlive)
		}
	}
	answers, panicked := run.run(ctx, peer)
	stopKeepAlive()
	onStream := stream != nil && stream.claim()
	if panicked && !onStream {
		writeRefusal(w, refuseInternal)
		return
	}
	var out [][]byte
	for _, a := range answers {
		if a != nil {
			out = append(out, a)
		}
	}
	if onStream {
		for _, a := range out {
			if stream.send(a) != nil {
				return // the stream's onFail recorded it
			}
		}
		return
	}
	if len(out) == 0 {
		w.Header().Set(headerSessionID, sess.id)
		w.WriteHeader(http.StatusAccepted)
		return
	}
	w.Header().Set(headerSessionID, sess.id)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	var werr error
	write := func(b []byte) {
		if werr == nil {
			_, werr = w.Write(b)
		}
	}
	if body.Batch {
		write([]byte("["))
		for i, a := range out {
			if i > 0 {
				write([]byte(","))
			}
			write(a)
		}
		write([]byte("]"))
	} else {
		write(out[0])
	}
	if werr != nil {
		c.dropped(werr)
	}
}

// dropped records an answer the client did not take. A write that ran out of
// the write timeout (the client stopped reading) is a warning: the answer is
// lost, though the calls' outcomes are in the audit trail. Any other failure is
// a client that went away.
func (c *httpCore) dropped(err error) {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		c.log.Warn("dropped an answer: the client took none of it within the write timeout", "write_timeout", c.writeTimeout)
		return
	}
	c.log.Debug("writing an answer", "err", err)
}

// serveModern answers one 2026-07-28 request. Its standard headers must mirror
// the body (MCP-Protocol-Version, Mcp-Method, and Mcp-Name for tools/call), or it
// is 400 with -32020; no mcp-session-id is issued or echoed; JSON-RPC errors map
// to HTTP statuses in httpwire.StatelessStatus.
func (c *httpCore) serveModern(w *trackingWriter, r *http.Request, m *rpcwire.Message, meta json.RawMessage, sess *httpSession, principal string) {
	if rpcErr := checkModernHeaders(r, m, meta); rpcErr != nil {
		writeModernAnswer(w, rpcErr, rpcwire.Error(m.ID, rpcErr), false)
		return
	}
	var (
		cn   *conn
		done = func() {}
	)
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	if sess != nil {
		cn = sess.conn
		stop := context.AfterFunc(sess.ctx, cancel)
		defer stop()
	} else {
		var ref refusal
		if cn, done, ref = c.store.stateless(ctx, principal); ref != refuseNone {
			writeRefusal(w, ref)
			return
		}
	}
	defer done()
	if rpcErr := cn.checkParamHeaders(ctx, r, m); rpcErr != nil {
		writeModernAnswer(w, rpcErr, rpcwire.Error(m.ID, rpcErr), false)
		return
	}
	// A client that takes SSE gets the request's notifications (progress, log
	// messages) on the answer's stream, which starts with the first of them; with
	// none, the answer is written as below, its status the error's.
	var peer mcpspec.Peer = mcpspec.NoPeer{}
	var stream *sseStream
	if acceptsSSE(r) && m.IsRequest() {
		stream = newSSEStream(w, "", nil)
		defer stream.end()
		peer = peerFunc{c: cn, send: stream.send}
	}
	answer, rpcErr, err := cn.handleCode(ctx, m, peer, true)
	if stream != nil && stream.isStarted() {
		if errors.Is(err, errPanic) {
			answer = rpcwire.Error(m.ID, rpcwire.InternalError())
		}
		_ = stream.send(answer)
		return
	}
	if errors.Is(err, errPanic) {
		writeRefusal(w, refuseInternal)
		return
	}
	if answer == nil {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	writeModernAnswer(w, rpcErr, answer, acceptsSSE(r))
}

// checkModernHeaders compares the standard headers with the body.
func checkModernHeaders(r *http.Request, m *rpcwire.Message, meta json.RawMessage) *jsonrpc.Error {
	mismatch := func(what string) *jsonrpc.Error {
		return &jsonrpc.Error{Code: mcpspec.CodeHeaderMismatch, Message: "header mismatch: " + what}
	}
	// Checked before the version itself: a header sent that disagrees with the body
	// is a mismatch (-32020) even when the body's version is one not served; a header
	// missing is one when the body asks for this revision (an unserved version with
	// no header at all is answered -32022, so the client can negotiate).
	if v, ok := modernVersionOf(meta); ok {
		hv, sent := r.Header[http.CanonicalHeaderKey(headerProtocolVersion)]
		if (sent && strings.TrimSpace(hv[0]) != v) || (!sent && v == mcpspec.ModernVersion) {
			return mismatch("MCP-Protocol-Version must equal _meta[\"" + mcpspec.MetaProtocolVersion + "\"]")
		}
	}
	// Each standard header must be sent at most once: with two, the server and an
	// intermediary routing on the header could read different values (one takes
	// the first, another the last), which is the smuggling the headers exist to
	// prevent.
	for _, h := range []string{"Mcp-Method", "Mcp-Name"} {
		if len(r.Header.Values(h)) > 1 {
			return mismatch(h + " must be sent once")
		}
	}
	if m.IsNotification() {
		return nil
	}
	if strings.TrimSpace(r.Header.Get("Mcp-Method")) != m.Method {
		return mismatch("Mcp-Method must equal the method")
	}
	if m.Method == mcpspec.MethodToolsCall {
		// By the member's exact name, as callTool reads it (encoding/json's struct
		// fields would also take "NAME").
		var name string
		_ = json.Unmarshal(m.Param("name"), &name)
		if hv, ok := mcpspec.DecodeHeaderValue(strings.TrimSpace(r.Header.Get("Mcp-Name"))); name != "" && (!ok || hv != name) {
			return mismatch("Mcp-Name must equal params.name")
		}
	}
	return nil
}

// writeModernAnswer writes a 2026-07-28 answer: errors with the status
// httpwire.StatelessStatus gives them, results as JSON or one SSE event.
func writeModernAnswer(w http.ResponseWriter, rpcErr *jsonrpc.Error, answer []byte, sse bool) {
	status := http.StatusOK
	if rpcErr != nil {
		status = httpwire.StatelessStatus(rpcErr.Code)
	}
	if sse && status == http.StatusOK {
		_ = newSSEStream(w, "", nil).send(answer)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(answer)
}

// refuseVersion answers a request whose MCP-Protocol-Version is not served: 400.
// When the body is one 2026-07-28-style request (modern _meta or
// server/discover), the answer is its JSON-RPC -32022 naming the supported
// versions, so a newer client can negotiate; otherwise the body is not read
// further and the answer is {"error":"unsupported_protocol_version"}.
func (c *httpCore) refuseVersion(w http.ResponseWriter, r *http.Request, v string) {
	if c.stateless && r.Method == http.MethodPost {
		if data, err := httpwire.ReadBody(w, r, c.maxBody); err == nil {
			if body, rpcErr := c.limits.Decode(data); rpcErr == nil && !body.Batch && body.Items[0].Msg != nil && body.Items[0].Msg.IsRequest() {
				if _, ok := modernMeta(body.Items[0].Msg); ok {
					e := unsupportedVersion(v)
					writeModernAnswer(w, e, rpcwire.Error(body.Items[0].Msg.ID, e), false)
					return
				}
			}
		}
	}
	writeRefusal(w, refuseBadProtocolVersion)
}
