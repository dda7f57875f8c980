package hostrelay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/toolgate/toolgate/internal/host"
)

// client is one connection to the hosting process. It does not reconnect: when the
// connection ends every request under way fails with *HostGoneError at once, and the
// Node that owns it elects again on the next request.
type client struct {
	nc      *net.UnixConn
	lim     Limits
	log     *slog.Logger
	hostPID int
	sendMax int           // the host's cap (from hello)
	slots   chan struct{} // one per request under way
	wq      chan wmsg     // to the writer

	mu       sync.Mutex
	nextID   int64
	pending  map[int64]*pcall
	watching bool
	sinks    sinkSet

	done    chan struct{}
	wdone   chan struct{} // the writer returned
	endOnce sync.Once
	endErr  error // set before done closes
	byUs    atomic.Bool
	onEnd   func(*client)

	droppedCancels atomic.Uint64
}

type wmsg struct {
	line []byte
	p    *pcall // nil for a notification
}

type pcall struct {
	resp     chan *jsonrpc.Response
	progress func(json.RawMessage)
	// sent is set once the writer has handed at least one byte of the request to the
	// kernel (the host may then run it); settled closes once the writer knows whether
	// it did, so a caller whose connection ended can tell a request to retry from one
	// that may have run.
	sent    atomic.Bool
	settled chan struct{}
}

// dialClient connects to the relay at addr, checks the host's uid and exchanges hello.
func dialClient(ctx context.Context, addr string, lim Limits, log *slog.Logger, onEnd func(*client)) (*client, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", addr)
	if err != nil {
		return nil, err
	}
	nc := conn.(*net.UnixConn)
	pid, err := checkPeer(nc)
	if err != nil {
		nc.Close()
		return nil, err
	}
	c := &client{
		nc: nc, lim: lim, log: log, hostPID: pid, sendMax: lim.MaxMessageBytes,
		wq: make(chan wmsg, 2*lim.MaxInFlight+8), pending: map[int64]*pcall{},
		done: make(chan struct{}), wdone: make(chan struct{}), onEnd: onEnd,
	}
	go c.read()
	go c.write()
	res, err := c.roundTrip(ctx, "hello", mHello, marshal(helloParams{Protocol: Protocol, PID: os.Getpid(), MaxMessageBytes: lim.MaxMessageBytes}), "")
	if err == nil {
		var h helloResult
		if err = json.Unmarshal(res, &h); err == nil && h.Protocol != Protocol {
			err = &ProtocolError{Ours: Protocol, Theirs: h.Protocol, HostPID: pid}
		}
		if err == nil {
			if h.MaxMessageBytes > 0 && h.MaxMessageBytes < c.sendMax {
				c.sendMax = h.MaxMessageBytes
			}
			n := lim.MaxInFlight
			if h.MaxInFlight > 0 && h.MaxInFlight < n {
				n = h.MaxInFlight
			}
			c.slots = make(chan struct{}, n)
		}
	}
	if err != nil {
		c.close()
		return nil, fmt.Errorf("hostrelay: hello to the process hosting the upstream servers (pid %d): %w", pid, err)
	}
	return c, nil
}

// ended reports whether the connection has ended.
func (c *client) ended() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// end closes the connection once; err says why.
func (c *client) end(err error) {
	c.endOnce.Do(func() {
		c.mu.Lock()
		c.endErr = err
		c.mu.Unlock()
		close(c.done)
		c.nc.Close()
		if c.onEnd != nil && !c.byUs.Load() {
			c.onEnd(c)
		}
	})
}

func (c *client) close() {
	c.byUs.Store(true)
	c.end(ErrClosed)
}

func (c *client) gone(op, server string, sent bool) error {
	if c.byUs.Load() {
		return ErrClosed
	}
	c.mu.Lock()
	err := c.endErr
	c.mu.Unlock()
	return &HostGoneError{Op: op, Server: server, HostPID: c.hostPID, Sent: sent, Err: err}
}

// roundTrip sends one request and waits for its answer; it returns the result bytes
// or the error the answer carried. The hello goes without a slot (none exist yet).
func (c *client) roundTrip(ctx context.Context, op, method string, params []byte, server string) (json.RawMessage, error) {
	return c.request(ctx, op, method, params, server, nil)
}

func (c *client) request(ctx context.Context, op, method string, params []byte, server string, progress func(json.RawMessage)) (json.RawMessage, error) {
	if c.slots != nil {
		select {
		case c.slots <- struct{}{}:
			defer func() { <-c.slots }()
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-c.done:
			return nil, c.gone(op, server, false)
		}
	}
	p := &pcall{resp: make(chan *jsonrpc.Response, 1), progress: progress, settled: make(chan struct{})}
	c.mu.Lock()
	if c.ended() {
		c.mu.Unlock()
		return nil, c.gone(op, server, false)
	}
	c.nextID++
	id := c.nextID
	c.pending[id] = p
	c.mu.Unlock()

	line := appendRequest(nil, id, method, params)
	if len(line) > c.sendMax {
		c.forget(id)
		return nil, &MessageTooLargeError{Size: len(line), Limit: c.sendMax}
	}
	select {
	case c.wq <- wmsg{line: line, p: p}:
	case <-ctx.Done():
		c.forget(id)
		return nil, ctx.Err()
	case <-c.done:
		c.forget(id)
		return nil, c.gone(op, server, false)
	}
	select {
	case r := <-p.resp:
		return c.answer(r)
	case <-ctx.Done():
		c.forget(id)
		// Queued after the request (the writer keeps the order), so the host cancels
		// it whether it started it yet or not; it ignores ids it does not know.
		c.cancel(id)
		return nil, ctx.Err()
	case <-c.done:
		select {
		case r := <-p.resp: // answered just before the end
			return c.answer(r)
		default:
		}
		// The writer settles the request at once now: its write fails on the closed
		// socket, or it finds the request still queued.
		select {
		case <-p.settled:
		case <-c.wdone: // the writer is gone: what it did not settle never left
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return nil, c.gone(op, server, p.sent.Load())
	}
}

func (c *client) answer(r *jsonrpc.Response) (json.RawMessage, error) {
	if r.Error != nil {
		var we *jsonrpc.Error
		if errors.As(r.Error, &we) {
			return nil, fromWire(we, c.hostPID)
		}
		return nil, &RemoteError{Message: r.Error.Error()}
	}
	return r.Result, nil
}

func (c *client) forget(id int64) {
	c.mu.Lock()
	delete(c.pending, id)
	c.mu.Unlock()
}

// cancel tells the host a call was given up, best effort: it is dropped (and counted)
// rather than waited for when the writer's queue is full.
func (c *client) cancel(id int64) {
	line := appendRequest(nil, 0, nCancel, marshal(cancelParams{ID: id}))
	select {
	case c.wq <- wmsg{line: line}:
	default:
		c.droppedCancels.Add(1)
	}
}

// maxBatch bounds the messages written with one writev.
const maxBatch = 64

func (c *client) write() {
	batch := make([]wmsg, 0, maxBatch)
	bufs := make(net.Buffers, 0, maxBatch)
	defer close(c.wdone)
	defer func() { // requests still queued at the end never left
		for {
			select {
			case m := <-c.wq:
				if m.p != nil {
					close(m.p.settled)
				}
			default:
				return
			}
		}
	}()
	for {
		batch = batch[:0]
		select {
		case m := <-c.wq:
			batch = append(batch, m)
		case <-c.done:
			return
		}
	more:
		for len(batch) < maxBatch {
			select {
			case m := <-c.wq:
				batch = append(batch, m)
			default:
				break more
			}
		}
		bufs = bufs[:0]
		for _, m := range batch {
			bufs = append(bufs, m.line)
		}
		c.nc.SetWriteDeadline(time.Now().Add(c.lim.WriteTimeout))
		toWrite := bufs // WriteTo consumes its receiver
		n, err := toWrite.WriteTo(c.nc)
		// A request counts as sent from its first byte the kernel took.
		var off int64
		for _, m := range batch {
			if m.p != nil {
				if off < n {
					m.p.sent.Store(true)
				}
				close(m.p.settled)
			}
			off += int64(len(m.line))
		}
		clear(batch)
		if err != nil {
			c.end(fmt.Errorf("writing to the relay: %w", err))
			return
		}
	}
}

func (c *client) read() {
	lr := newLineReader(c.nc, c.lim.MaxMessageBytes)
	for {
		line, err := lr.next()
		if err != nil {
			c.end(err)
			return
		}
		msg, err := decodeLine(line)
		if err != nil {
			c.end(fmt.Errorf("undecodable message from the host: %w", err))
			return
		}
		switch m := msg.(type) {
		case *jsonrpc.Response:
			id, _ := intID(m.ID)
			c.mu.Lock()
			p := c.pending[id]
			delete(c.pending, id)
			c.mu.Unlock()
			if p != nil {
				p.resp <- m
			}
		case *jsonrpc.Request:
			c.notification(m)
		}
	}
}

func (c *client) notification(m *jsonrpc.Request) {
	switch m.Method {
	case nProgress:
		var p progressParams
		if json.Unmarshal(m.Params, &p) != nil {
			return
		}
		c.mu.Lock()
		pc := c.pending[p.ID]
		c.mu.Unlock()
		if pc != nil && pc.progress != nil {
			pc.progress(rawOr(p.Params, p.ParamsB64))
		}
	case nEvent:
		var p eventParams
		if json.Unmarshal(m.Params, &p) != nil {
			return
		}
		if ev, ok := p.event(); ok {
			c.sinks.event(ev)
		}
	case nResync:
		var p resyncParams
		if json.Unmarshal(m.Params, &p) != nil {
			return
		}
		c.sinks.resync(&p.Snapshot)
	}
}

// addSink subscribes the connection to the host's events (once) and hands them to k;
// the host answers the subscription with a resync.
func (c *client) addSink(ctx context.Context, k sink) (remove func(), err error) {
	remove = c.sinks.add(k)
	c.mu.Lock()
	first := !c.watching
	c.watching = true
	c.mu.Unlock()
	if first {
		if _, err := c.roundTrip(ctx, "watch", mWatch, []byte("{}"), ""); err != nil {
			remove()
			c.mu.Lock()
			c.watching = false
			c.mu.Unlock()
			return nil, err
		}
	} else {
		k.resync(nil)
	}
	return remove, nil
}

// The operations, as Upstreams has them.

func (c *client) Call(ctx context.Context, server, method string, params json.RawMessage, opts host.CallOptions) (json.RawMessage, error) {
	if params != nil && !validJSON(params) {
		return nil, fmt.Errorf("hostrelay: call %q %s: params are not valid JSON", server, method)
	}
	if opts.Stateless != nil {
		// The socket does not carry a stateless request's capabilities: the caller
		// takes the legacy connection (docs/hostrelay.md, "Protocol").
		return nil, fmt.Errorf("hostrelay: call %q %s: the relay carries no stateless request: %w", server, method, host.ErrNotStateless)
	}
	var timeout time.Duration
	if dl, ok := ctx.Deadline(); ok {
		if timeout = time.Until(dl); timeout <= 0 {
			return nil, context.DeadlineExceeded
		}
	}
	body := appendCallParams(nil, server, method, opts.SessionKey, opts.Progress != nil, timeout, params)
	res, err := c.request(ctx, "call", mCall, body, server, opts.Progress)
	if err != nil {
		return nil, err
	}
	var r callResult
	if err := json.Unmarshal(res, &r); err != nil {
		return nil, fmt.Errorf("hostrelay: decoding the result of %q %s: %w", server, method, err)
	}
	return rawOr(r.Result, r.ResultB64), nil
}

func (c *client) Catalog(ctx context.Context, server string) (host.Catalog, bool, error) {
	res, err := c.roundTrip(ctx, "catalog", mCatalog, marshal(nameParams{Name: server}), server)
	if err != nil {
		return host.Catalog{}, false, err
	}
	var r catalogResult
	if err := json.Unmarshal(res, &r); err != nil {
		return host.Catalog{}, false, fmt.Errorf("hostrelay: decoding the catalogue of %q: %w", server, err)
	}
	if !r.Found {
		return host.Catalog{}, false, nil
	}
	cat, err := r.catalog()
	return cat, err == nil, err
}

func (c *client) RefreshCatalog(ctx context.Context, server string) (host.Catalog, error) {
	res, err := c.roundTrip(ctx, "refresh_catalog", mRefresh, marshal(nameParams{Name: server}), server)
	if err != nil {
		return host.Catalog{}, err
	}
	var r catalogResult
	if err := json.Unmarshal(res, &r); err != nil {
		return host.Catalog{}, fmt.Errorf("hostrelay: decoding the catalogue of %q: %w", server, err)
	}
	cat, err := r.catalog()
	if err != nil {
		return host.Catalog{}, err
	}
	if r.Error != nil {
		return cat, r.Error.err(r.Error.Cause, c.hostPID)
	}
	return cat, nil
}

func (c *client) Status(ctx context.Context, server string) (host.Status, bool, error) {
	res, err := c.roundTrip(ctx, "status", mStatus, marshal(nameParams{Name: server}), server)
	if err != nil {
		return host.Status{}, false, err
	}
	var r statusResult
	if err := json.Unmarshal(res, &r); err != nil {
		return host.Status{}, false, fmt.Errorf("hostrelay: decoding the status of %q: %w", server, err)
	}
	if !r.Found || r.Status == nil {
		return host.Status{}, false, nil
	}
	return *r.Status, true, nil
}

func (c *client) Snapshot(ctx context.Context) (host.Snapshot, error) {
	res, err := c.roundTrip(ctx, "snapshot", mSnapshot, []byte("{}"), "")
	if err != nil {
		return host.Snapshot{}, err
	}
	var s host.Snapshot
	if err := json.Unmarshal(res, &s); err != nil {
		return host.Snapshot{}, fmt.Errorf("hostrelay: decoding a snapshot: %w", err)
	}
	return s, nil
}

func (c *client) Restart(ctx context.Context, server string) error {
	_, err := c.roundTrip(ctx, "restart", mRestart, marshal(nameParams{Name: server}), server)
	return err
}

func (c *client) Warm(ctx context.Context, server string) error {
	_, err := c.roundTrip(ctx, "warm", mWarm, marshal(nameParams{Name: server}), server)
	return err
}

func (c *client) EndSession(ctx context.Context, key string) error {
	if key == "" {
		return nil
	}
	_, err := c.roundTrip(ctx, "end_session", mEndSession, marshal(keyParams{Key: key}), "")
	return err
}

func (c *client) Reload(ctx context.Context) error {
	_, err := c.roundTrip(ctx, "reload", mReload, []byte("{}"), "")
	return err
}
