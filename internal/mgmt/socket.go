package mgmt

import (
	"context"
	"net/http"
	"net/url"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// A socket carries requests from the client and, on the way back, their answers and
// every notification. Three goroutines serve it: the reader (the upgrade's handler
// goroutine) reads one request at a time and queues its answer before reading the
// next, the writer drains the send queue in order, and the keepalive pings and
// re-authenticates. Nothing else ever writes to the connection, and nothing but the
// queue connects a socket to the rest of the Handler.
//
// The queue holds SendQueue messages. Answers may take at most half of it: when that
// half is full the reader waits before answering (and so before reading more), which
// pushes back on a client that sends faster than it reads; a client that reads nothing
// at all is dropped when a write waits WriteTimeout. Notifications never wait: one that
// finds the queue full drops the socket at once, so a socket that stops reading costs
// the publisher and the other sockets nothing.

// endReason is why a socket ends: how it is closed, and whether what is queued is
// still sent first.
type endReason struct {
	status websocket.StatusCode
	reason string
	// flush sends what is queued before the close frame; a socket dropped for not
	// reading is cut at once instead (it would not take the rest anyway).
	flush bool
	// now closes the connection without a close handshake.
	now bool
}

var (
	endGoingAway = endReason{status: websocket.StatusGoingAway, reason: "server shutting down", flush: true}
	endRevoked   = endReason{status: websocket.StatusPolicyViolation, reason: "token no longer valid for management", flush: true}
	endSlow      = endReason{status: websocket.StatusPolicyViolation, reason: "not reading", now: true}
	endGone      = endReason{now: true}
)

// outgoing is one queued message; answer marks an answer, whose token in
// socket.answers the writer returns once it is written.
type outgoing struct {
	b      []byte
	answer bool
}

type socket struct {
	h      *Handler
	conn   *websocket.Conn
	token  string
	caller Caller

	q chan outgoing
	// answers holds a token for each answer queued or being written; its capacity is
	// the answers' half of the queue.
	answers chan struct{}
	// ctx ends when the socket ends; methods running for it are cancelled.
	ctx    context.Context
	cancel context.CancelFunc
	// cut ends only when the socket is cut without a close handshake (dropped, gone):
	// writes run under it, so a write stuck on a peer that does not read is aborted
	// (coder/websocket closes the connection when a write's context ends), while a
	// graceful end still lets queued messages and the close frame through.
	cut       context.Context
	cutCancel context.CancelFunc

	endOnce sync.Once
	why     endReason // set once, before ctx is cancelled
	dropped atomic.Bool
}

// answer queues an answer, waiting while the answers' half of the queue is full;
// false when the socket ended meanwhile.
func (s *socket) answer(b []byte) bool {
	select {
	case s.answers <- struct{}{}:
	case <-s.ctx.Done():
		return false
	}
	select {
	case s.q <- outgoing{b: b, answer: true}:
		return true
	case <-s.ctx.Done():
		return false
	}
}

// send queues a notification without waiting; a full queue ends the socket as not
// reading. Callers hold h.mu (publish).
func (s *socket) send(b []byte) {
	select {
	case <-s.ctx.Done():
		return
	default:
	}
	select {
	case s.q <- outgoing{b: b}:
	default:
		s.drop()
	}
}

// drop ends the socket as not reading (counted once) and cuts it, even when it was
// already ending gracefully: a peer that does not take what is flushed to it must not
// hold the close.
func (s *socket) drop() {
	if s.dropped.CompareAndSwap(false, true) {
		s.h.countDrop(s) // before the cut, so whoever sees the socket gone sees it counted
	}
	s.end(endSlow)
	s.cutCancel()
}

// end records why the socket ends and wakes its writer to close it; true for the call
// that ended it.
func (s *socket) end(why endReason) bool {
	ended := false
	s.endOnce.Do(func() {
		s.why = why
		ended = true
		if why.now {
			s.cutCancel()
		}
		s.cancel()
	})
	return ended
}

// serveSocket upgrades r and serves the socket until it ends.
func (h *Handler) serveSocket(w http.ResponseWriter, r *http.Request, token string, caller Caller) {
	if !originAllowed(r, h.opts.OriginPatterns) {
		refuse(w, Errorf(CodeForbidden, "forbidden: origin %q may not open a management socket", r.Header.Get("Origin")))
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	cut, cutCancel := context.WithCancel(context.Background())
	s := &socket{h: h, token: token, caller: caller,
		q: make(chan outgoing, h.opts.SendQueue), answers: make(chan struct{}, max(1, h.opts.SendQueue/2)),
		ctx: ctx, cancel: cancel, cut: cut, cutCancel: cutCancel}
	defer cutCancel()
	defer cancel()

	// The socket is registered before the upgrade is answered, so a client that has
	// its 101 gets every notification of a change made after it (subscribe, then
	// mcp/list: nothing falls between). What is published meanwhile waits in the queue.
	h.mu.Lock()
	switch {
	case h.closed:
		h.mu.Unlock()
		refuse(w, Errorf(CodeUnavailable, "unavailable: the server is shutting down"))
		return
	case len(h.sockets) >= h.opts.MaxSockets:
		h.mu.Unlock()
		refuse(w, Errorf(CodeTooManySockets, "too many connections: at most %d management sockets are open at once", h.opts.MaxSockets))
		return
	}
	h.sockets[s] = struct{}{}
	h.wg.Add(1)
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		delete(h.sockets, s)
		h.mu.Unlock()
		h.wg.Done()
	}()

	// Accept hijacks the connection; net/http clears its deadlines then, so the write
	// deadline serve's guard gives a response does not outlive the upgrade. From here on
	// the socket bounds its own reads and writes (PongTimeout, WriteTimeout).
	conn, err := websocket.Accept(w, r, &websocket.AcceptOptions{
		OriginPatterns:  h.opts.OriginPatterns,
		CompressionMode: websocket.CompressionDisabled,
	})
	if err != nil {
		h.log.Debug("accepting a management socket", "err", err)
		return
	}
	conn.SetReadLimit(h.opts.MaxBodyBytes)
	s.conn = conn

	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); s.write() }()
	go func() { defer wg.Done(); s.keepAlive() }()
	s.read()
	s.end(endGone)
	wg.Wait()
}

// read serves requests until the connection ends. It reads with a context of its own,
// not s.ctx: ending the socket must not cut the connection before the writer sent the
// close frame (coder/websocket closes a connection whose read context ends).
func (s *socket) read() {
	for {
		typ, data, err := s.conn.Read(context.Background())
		if err != nil {
			return
		}
		if s.ctx.Err() != nil {
			return
		}
		if typ != websocket.MessageText {
			if !s.answer(errorAnswer(jsonrpc.ID{}, Errorf(CodeParseError, "parse error: send JSON-RPC as text messages"))) {
				return
			}
			continue
		}
		msg, id, e := decodeOne(data, s.h.opts.MaxBodyBytes)
		if e != nil {
			if !s.answer(errorAnswer(id, e)) {
				return
			}
			continue
		}
		caller, admin, ok := s.h.opts.Authenticate(s.ctx, s.token)
		switch {
		case !ok:
			s.answer(errorAnswer(msg.ID, Errorf(CodeUnauthorized, "unauthorized: the token is no longer valid")))
			s.end(endRevoked)
			return
		case !admin:
			s.answer(errorAnswer(msg.ID, Errorf(CodeForbidden, "forbidden: principal %q is no longer an administrator", caller.Principal)))
			s.end(endRevoked)
			return
		}
		if !s.answer(s.h.d.answer(s.ctx, caller, msg)) {
			return
		}
	}
}

// write sends queued messages in order until the socket ends, then closes it as end
// said: after sending what is queued (each message within WriteTimeout), or at once.
func (s *socket) write() {
	for {
		select {
		case m := <-s.q:
			if s.writeOne(m) != nil {
				s.end(endGone) // unless writeOne's timer dropped it first
				_ = s.conn.CloseNow()
				return
			}
		case <-s.ctx.Done():
			why := s.why
			if why.now {
				_ = s.conn.CloseNow()
				return
			}
			if why.flush {
				for flushing := true; flushing; {
					select {
					case b := <-s.q:
						flushing = s.writeOne(b) == nil
					default:
						flushing = false
					}
				}
			}
			_ = s.conn.Close(why.status, why.reason)
			return
		}
	}
}

// writeOne writes one message. A write the peer does not take within WriteTimeout
// drops the socket as not reading; the reason is recorded before the connection is cut
// (end cancels cut, and coder/websocket closes a connection whose write context ends),
// so the reader, which sees the cut as a failed read, cannot record it as gone first.
func (s *socket) writeOne(m outgoing) error {
	if m.answer {
		defer func() { <-s.answers }()
	}
	t := time.AfterFunc(s.h.opts.WriteTimeout, s.drop)
	defer t.Stop()
	return s.conn.Write(s.cut, websocket.MessageText, m.b)
}

// keepAlive pings every PingInterval, ending the socket when a pong does not come
// within PongTimeout or the token is no longer an administrator's.
func (s *socket) keepAlive() {
	t := time.NewTicker(s.h.opts.PingInterval)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
		if _, admin, ok := s.h.opts.Authenticate(s.ctx, s.token); !ok || !admin {
			s.end(endRevoked)
			return
		}
		ctx, cancel := context.WithTimeout(s.ctx, s.h.opts.PongTimeout)
		err := s.conn.Ping(ctx)
		cancel()
		if err != nil {
			s.end(endGone)
			return
		}
	}
}

// originAllowed mirrors websocket.Accept's origin check, so a refused origin gets the
// protocol's own answer (403 forbidden) rather than the library's text: no Origin (a
// client that is not a browser), an Origin whose host is the request's Host, or one
// matching a pattern.
func originAllowed(r *http.Request, patterns []string) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" {
		return false
	}
	if strings.EqualFold(u.Host, r.Host) {
		return true
	}
	for _, p := range patterns {
		target := u.Host
		if strings.Contains(p, "://") {
			target = u.Scheme + "://" + u.Host
		}
		if ok, err := path.Match(strings.ToLower(p), strings.ToLower(target)); err == nil && ok {
			return true
		}
	}
	return false
}
