package hostrelay

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"golang.org/x/sys/unix"

	"github.com/toolgate/toolgate/internal/host"
)

// Bounds of what a client may name (a host refuses longer ones as invalid).
const (
	maxNameBytes   = 1024
	maxKeyBytes    = 4096
	maxMethodBytes = 256
)

// server is the relay of a hosting process: it accepts connections on the data
// directory's socket from processes of the same user and answers their requests from
// its Local.
type server struct {
	local *Local
	ln    *net.UnixListener
	lim   Limits
	log   *slog.Logger

	mu     sync.Mutex
	conns  map[*sconn]struct{}
	nextID uint64
	closed bool
	wg     sync.WaitGroup // the accept loop and every connection's goroutines

	refusedPeers    atomic.Uint64
	droppedClients  atomic.Uint64
	droppedProgress atomic.Uint64
	droppedEvents   atomic.Uint64
	refusedCalls    atomic.Uint64
}

func newServer(local *Local, ln *net.UnixListener, lim Limits, log *slog.Logger) *server {
	s := &server{local: local, ln: ln, lim: lim, log: log, conns: map[*sconn]struct{}{}}
	s.wg.Add(1)
	go s.accept()
	return s
}

func (s *server) accept() {
	defer s.wg.Done()
	for {
		nc, err := s.ln.AcceptUnix()
		if err != nil {
			if s.isClosed() {
				return
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, unix.EMFILE) || errors.Is(err, unix.ENFILE) {
				time.Sleep(10 * time.Millisecond) // out of descriptors: let some close
				continue
			}
			s.log.Error("hostrelay: accepting relay connections stopped", "err", err)
			return
		}
		s.admit(nc)
	}
}

func (s *server) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// admit checks the peer's uid and takes the connection on, or closes it unanswered.
func (s *server) admit(nc *net.UnixConn) {
	pid, err := checkPeer(nc)
	if err != nil {
		s.refusedPeers.Add(1)
		s.log.Warn("hostrelay: refused a relay connection", "pid", pid, "err", err)
		nc.Close()
		return
	}
	s.mu.Lock()
	if s.closed || len(s.conns) >= s.lim.MaxClients {
		s.mu.Unlock()
		s.refusedPeers.Add(1)
		s.log.Warn("hostrelay: refused a relay connection: too many clients", "pid", pid, "max", s.lim.MaxClients)
		nc.Close()
		return
	}
	s.nextID++
	c := &sconn{
		s: s, nc: nc, id: s.nextID, pid: pid,
		prefix:   "relay/" + strconv.FormatUint(s.nextID, 10) + "/",
		inflight: map[int64]context.CancelFunc{}, keys: map[string]struct{}{},
	}
	c.sendMax.Store(int64(s.lim.MaxMessageBytes))
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.out = newOutq(s.lim.NotificationQueue, s.lim.MaxInFlight+16, &s.droppedProgress, &s.droppedEvents)
	s.conns[c] = struct{}{}
	s.wg.Add(2)
	s.mu.Unlock()
	go c.read()
	go c.write()
}

// close stops accepting, drops every client (their requests under way fail at once
// with ErrHostGone on their side, and the calls here are cancelled), and waits for the
// connections' goroutines until ctx ends.
func (s *server) close(ctx context.Context) {
	s.mu.Lock()
	s.closed = true
	conns := make([]*sconn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	s.ln.Close()
	for _, c := range conns {
		c.close(nil)
	}
	done := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
	}
}

func (s *server) clients() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// sconn is one client connection. Its reader decodes requests and starts each on a
// goroutine of its own; its writer writes what they queue (outq).
type sconn struct {
	s       *server
	nc      *net.UnixConn
	id      uint64
	pid     int
	prefix  string // of the session keys this client names
	ctx     context.Context
	cancel  context.CancelFunc
	out     *outq
	sendMax atomic.Int64 // the client's cap (ours until hello tells it)

	hello bool // reader only

	mu       sync.Mutex
	inflight map[int64]context.CancelFunc
	keys     map[string]struct{}
	unwatch  func()
	closed   bool
}

// close ends the connection: the socket first (so nothing more is written, and the
// client sees the end before any answer the cancellation below would produce), then
// every request under way is cancelled and the client's per-session connections end.
func (c *sconn) close(cause error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	keys := c.keys
	c.keys = nil
	unwatch := c.unwatch
	c.mu.Unlock()

	c.nc.Close()
	c.cancel()
	c.out.close()
	if unwatch != nil {
		unwatch()
	}
	for k := range keys {
		c.s.local.h.EndSession(k)
	}
	c.s.mu.Lock()
	delete(c.s.conns, c)
	c.s.mu.Unlock()
	if cause != nil {
		c.s.log.Info("hostrelay: relay client dropped", "pid", c.pid, "err", cause)
	}
}

func (c *sconn) read() {
	defer c.s.wg.Done()
	lr := newLineReader(c.nc, c.s.lim.MaxMessageBytes)
	for {
		line, err := lr.next()
		if err != nil {
			var tl *MessageTooLargeError
			if errors.As(err, &tl) {
				c.s.droppedClients.Add(1)
				c.close(err)
			} else {
				c.close(nil)
			}
			return
		}
		c.dispatch(line)
		if !c.out.waitRoom(c.ctx) {
			return
		}
	}
}

func (c *sconn) dispatch(line []byte) {
	msg, err := decodeLine(line)
	if err != nil {
		c.out.pushResp(appendError(nil, 0, jsonrpc.CodeParseError, "hostrelay: "+err.Error(), nil))
		return
	}
	req, ok := msg.(*jsonrpc.Request)
	if !ok {
		return // a client sends no responses: the host asks nothing
	}
	if !req.IsCall() {
		c.notification(req)
		return
	}
	id, ok := intID(req.ID)
	if !ok {
		c.out.pushResp(appendError(nil, 0, jsonrpc.CodeInvalidRequest, "hostrelay: request ids are positive integers", nil))
		return
	}
	if req.Method == mHello {
		c.doHello(id, req.Params)
		return
	}
	if !c.hello {
		c.out.pushResp(appendRelayError(nil, id, "protocol", "hostrelay: hello must come first"))
		return
	}
	c.mu.Lock()
	if _, dup := c.inflight[id]; dup {
		c.mu.Unlock()
		c.out.pushResp(appendRelayError(nil, id, "invalid", "hostrelay: request id already in use"))
		return
	}
	if len(c.inflight) >= c.s.lim.MaxInFlight {
		c.mu.Unlock()
		c.s.refusedCalls.Add(1)
		c.out.pushResp(appendRelayError(nil, id, "busy", fmt.Sprintf("hostrelay: more than %d requests in flight", c.s.lim.MaxInFlight)))
		return
	}
	ctx, cancel := context.WithCancel(c.ctx)
	c.inflight[id] = cancel
	c.mu.Unlock()
	c.s.wg.Add(1)
	go func() {
		defer c.s.wg.Done()
		line := c.handle(ctx, id, req.Method, req.Params)
		if max := int(c.sendMax.Load()); len(line) > max {
			line = appendErrorFor(nil, id, &MessageTooLargeError{Size: len(line), Limit: max})
		}
		c.mu.Lock()
		delete(c.inflight, id)
		c.mu.Unlock()
		cancel()
		c.out.pushResp(line)
	}()
}

func (c *sconn) notification(req *jsonrpc.Request) {
	if req.Method != nCancel {
		return
	}
	var p cancelParams
	if unmarshalStrict(req.Params, &p) != nil {
		return
	}
	c.mu.Lock()
	cancel := c.inflight[p.ID]
	c.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

func (c *sconn) doHello(id int64, params json.RawMessage) {
	// Unlike every other request's, hello's params are read leniently: a client of
	// another release may send more, and must learn that the versions differ.
	var p helloParams
	if err := json.Unmarshal(params, &p); err != nil {
		c.out.pushResp(appendRelayError(nil, id, "invalid", "hostrelay: hello: "+err.Error()))
		return
	}
	if p.Protocol != Protocol {
		w := wireErr{Kind: "protocol", Protocol: Protocol}
		c.out.pushResp(appendError(nil, id, codeRelay,
			fmt.Sprintf("hostrelay: this host speaks relay protocol %d, the client %d", Protocol, p.Protocol), marshal(w)))
		return
	}
	if p.MaxMessageBytes > 0 && int64(p.MaxMessageBytes) < c.sendMax.Load() {
		c.sendMax.Store(int64(p.MaxMessageBytes))
	}
	c.hello = true
	c.out.pushResp(appendResult(nil, id, marshal(helloResult{
		Protocol: Protocol, PID: os.Getpid(),
		MaxMessageBytes: c.s.lim.MaxMessageBytes, MaxInFlight: c.s.lim.MaxInFlight,
	})))
}

// handle answers one request; it returns the response line.
func (c *sconn) handle(ctx context.Context, id int64, method string, params json.RawMessage) []byte {
	l := c.s.local
	invalid := func(err error) []byte {
		return appendRelayError(nil, id, "invalid", fmt.Sprintf("hostrelay: %s: bad params: %v", method, err))
	}
	switch method {
	case mCall:
		var p callParams
		if err := unmarshalStrict(params, &p); err != nil {
			return invalid(err)
		}
		if len(p.Server) > maxNameBytes || len(p.Method) > maxMethodBytes || len(p.SessionKey) > maxKeyBytes {
			return invalid(errors.New("server, method or session_key too long"))
		}
		return c.call(ctx, id, &p)
	case mCatalog:
		var p nameParams
		if err := unmarshalStrict(params, &p); err != nil {
			return invalid(err)
		}
		cat, ok := l.h.Catalog(p.Name)
		if !ok {
			return appendResult(nil, id, appendCatalogResult(nil, false, nil, nil))
		}
		return appendResult(nil, id, appendCatalogResult(nil, true, &cat, nil))
	case mRefresh:
		var p nameParams
		if err := unmarshalStrict(params, &p); err != nil {
			return invalid(err)
		}
		cat, err := l.RefreshCatalog(ctx, p.Name)
		var se *host.ServerError
		if errors.As(err, &se) && errors.Is(se.Kind, host.ErrUnknownServer) {
			return appendErrorFor(nil, id, err)
		}
		return appendResult(nil, id, appendCatalogResult(nil, false, &cat, err))
	case mStatus:
		var p nameParams
		if err := unmarshalStrict(params, &p); err != nil {
			return invalid(err)
		}
		st, ok := l.h.Status(p.Name)
		r := statusResult{Found: ok}
		if ok {
			r.Status = &st
		}
		return appendResult(nil, id, marshal(r))
	case mSnapshot:
		if err := unmarshalStrict(params, &struct{}{}); err != nil {
			return invalid(err)
		}
		return appendResult(nil, id, marshal(l.h.Snapshot()))
	case mRestart:
		var p nameParams
		if err := unmarshalStrict(params, &p); err != nil {
			return invalid(err)
		}
		if err := l.h.Restart(p.Name); err != nil {
			return appendErrorFor(nil, id, err)
		}
		return appendResult(nil, id, []byte("{}"))
	case mWarm:
		var p nameParams
		if err := unmarshalStrict(params, &p); err != nil {
			return invalid(err)
		}
		l.h.Warm(p.Name)
		return appendResult(nil, id, []byte("{}"))
	case mEndSession:
		var p keyParams
		if err := unmarshalStrict(params, &p); err != nil || len(p.Key) > maxKeyBytes {
			return invalid(fmt.Errorf("%v (key at most %d bytes)", err, maxKeyBytes))
		}
		if p.Key != "" {
			k := c.prefix + p.Key
			c.mu.Lock()
			delete(c.keys, k)
			c.mu.Unlock()
			l.h.EndSession(k)
		}
		return appendResult(nil, id, []byte("{}"))
	case mReload:
		if err := unmarshalStrict(params, &struct{}{}); err != nil {
			return invalid(err)
		}
		if err := l.Reload(ctx); err != nil {
			return appendErrorFor(nil, id, err)
		}
		return appendResult(nil, id, []byte("{}"))
	case mWatch:
		if err := unmarshalStrict(params, &struct{}{}); err != nil {
			return invalid(err)
		}
		c.watch()
		return appendResult(nil, id, []byte("{}"))
	}
	return appendError(nil, id, jsonrpc.CodeMethodNotFound, "hostrelay: method not found: "+method, nil)
}

func (c *sconn) call(ctx context.Context, id int64, p *callParams) []byte {
	params := rawOr(p.Params, p.ParamsB64)
	if params != nil && !validJSON(params) {
		return appendRelayError(nil, id, "invalid", "hostrelay: call: params are not valid JSON")
	}
	opts := host.CallOptions{}
	if p.SessionKey != "" {
		key := c.prefix + p.SessionKey
		opts.SessionKey = key
		c.mu.Lock()
		closed := c.closed
		if !closed {
			c.keys[key] = struct{}{}
		}
		c.mu.Unlock()
		if closed {
			return appendRelayError(nil, id, "cancelled", "hostrelay: the client went away")
		}
		// A call the client's departure overtook may open its session after close
		// ended the client's sessions: it ends it itself.
		defer func() {
			c.mu.Lock()
			closed := c.closed
			c.mu.Unlock()
			if closed {
				c.s.local.h.EndSession(key)
			}
		}()
	}
	if p.Progress {
		opts.Progress = func(params json.RawMessage) {
			if params != nil && !validJSON(params) {
				return
			}
			line := appendProgress(nil, id, params)
			if len(line) > int(c.sendMax.Load()) {
				c.s.droppedProgress.Add(1)
				return
			}
			c.out.pushNote(line, false)
		}
	}
	if p.TimeoutMS > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(p.TimeoutMS)*time.Millisecond)
		defer cancel()
	}
	res, err := c.s.local.h.Call(ctx, p.Server, p.Method, params, opts)
	if err != nil {
		return appendErrorFor(nil, id, err)
	}
	if res == nil { // no result member: nil on the other side too
		return appendResult(nil, id, []byte("{}"))
	}
	if !validJSON(res) {
		return appendRelayError(nil, id, "remote", fmt.Sprintf("hostrelay: server %q answered a result that is not valid JSON", p.Server))
	}
	return appendResult(nil, id, appendCallResult(nil, res))
}

// watch subscribes the client to the host's events; it gets a resync first.
func (c *sconn) watch() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.unwatch != nil || c.closed {
		return
	}
	c.unwatch = c.s.local.hub.sinks.add(c)
	c.out.requestResync()
}

// event and resync make sconn a sink of the host's events.
func (c *sconn) event(ev any) {
	if line := eventLine(ev); line != nil {
		c.out.pushNote(line, true)
	}
}

func (c *sconn) resync(*host.Snapshot) { c.out.requestResync() }

func (c *sconn) write() {
	defer c.s.wg.Done()
	bw := bufio.NewWriterSize(c.nc, 64<<10)
	var items []outItem
	for {
		select {
		case <-c.out.wake:
		case <-c.ctx.Done():
			return
		}
		var resync bool
		items, resync = c.out.take(items[:0])
		if len(items) == 0 && !resync {
			continue
		}
		c.nc.SetWriteDeadline(time.Now().Add(c.s.lim.WriteTimeout))
		var err error
		if resync {
			line := appendRequest(nil, 0, nResync, marshal(resyncParams{Snapshot: c.s.local.h.Snapshot()}))
			if len(line) <= int(c.sendMax.Load()) {
				_, err = bw.Write(line)
			}
		}
		for i := range items {
			if err == nil {
				_, err = bw.Write(items[i].line)
			}
			items[i] = outItem{}
		}
		if err == nil {
			err = bw.Flush()
		}
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				c.s.droppedClients.Add(1)
				err = fmt.Errorf("it read nothing for %v: %w", c.s.lim.WriteTimeout, err)
			}
			c.close(err)
			return
		}
	}
}
