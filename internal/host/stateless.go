package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"
)

// A connection per era (docs/host.md, "Eras"). A server's connections speak the
// legacy era (initialize, one set of client capabilities for the connection's life,
// server→client requests mid-call). A 2026-07-28 caller's request must reach a
// server that speaks that revision as that caller's own stateless request: its own
// client capabilities in its _meta, the server's input_required result (its
// inputRequests keys, its requestState) back to the caller. That cannot share the
// legacy stream: a server decides per connection whether it asks its client
// mid-call or answers input_required (the go-sdk's server reads the connection's
// negotiated version), so one stream cannot serve both eras. So each live
// connection of the shared ("") slot gets, on the first call with
// CallOptions.Stateless, a second, stateless connection to the same server
// (DialRequest.Stateless): one more process for a stdio server, dialled once and
// kept for the legacy connection's life, closed with it. A server that does not
// speak 2026-07-28 fails that dial with ErrNotStateless, which is remembered for the
// legacy connection's life: no further dial, every stateless call gets
// ErrNotStateless at once and the caller takes the legacy path.

// ErrNotStateless is a Dialer's error (wrapped) for a stateless dial of a server that
// does not speak the 2026-07-28 revision, and Call's for a call with
// CallOptions.Stateless to such a server: the caller uses the legacy connection
// instead.
var ErrNotStateless = errors.New("host: the server does not speak the stateless 2026-07-28 revision")

// Stateless says how a 2026-07-28 caller's request is sent on a server's stateless
// connection (CallOptions.Stateless).
type Stateless struct {
	// Capabilities are the client capabilities the request declares in its _meta: the
	// caller's own (as the gateway lets it declare them), a JSON object.
	Capabilities json.RawMessage
}

// statelessRetry is how long a stateless connection whose dial failed (other than
// with ErrNotStateless) refuses calls with that failure before it is dialled again:
// a server that cannot start is not started once per call.
const statelessRetry = 5 * time.Second

// sidecar is a live conn's stateless connection. The zero value has none.
type sidecar struct {
	mu       sync.Mutex // never held across I/O
	sess     Session
	dialing  chan struct{} // closed when the dial under way returns
	verdict  error         // ErrNotStateless, for the life of the conn
	failErr  error
	failedAt time.Time
	closed   bool
	// route takes the log messages the stateless connection sends during a call.
	route router
}

// statelessSession returns c's stateless connection, dialling it on first use.
func (c *conn) statelessSession(ctx context.Context) (Session, error) {
	sc := &c.side
	for {
		sc.mu.Lock()
		switch {
		case sc.closed:
			sc.mu.Unlock()
			return nil, c.stoppedErr()
		case sc.verdict != nil:
			err := sc.verdict
			sc.mu.Unlock()
			return nil, err
		case sc.sess != nil:
			select {
			case <-sc.sess.Done():
				// It ended (crashed): reap it, dial a new one below.
				dead := sc.sess
				sc.sess = nil
				go closeQuietly(dead, c.r.h.opts.StopTimeout)
				sc.mu.Unlock()
				continue
			default:
			}
			s := sc.sess
			sc.mu.Unlock()
			return s, nil
		case sc.dialing != nil:
			wait := sc.dialing
			sc.mu.Unlock()
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		case sc.failErr != nil && now().Sub(sc.failedAt) < statelessRetry:
			err := sc.failErr
			sc.mu.Unlock()
			return nil, err
		}
		done := make(chan struct{})
		sc.dialing = done
		sc.mu.Unlock()
		go c.dialStateless(done)
	}
}

// dialStateless dials c's stateless connection on the host's context (not a caller's:
// other callers may wait for it), bounded by StartTimeout.
func (c *conn) dialStateless(done chan struct{}) {
	r := c.r
	ctx, cancel := context.WithTimeout(r.h.ctx, r.h.opts.StartTimeout)
	defer cancel()
	r.mu.Lock()
	cfg := r.def.Config
	r.mu.Unlock()
	sc := &c.side
	sess, err := r.h.opts.Dialer.Dial(ctx, DialRequest{Server: r.name, Config: cfg, Notify: c.statelessNotify, Stateless: true})
	if err != nil && sess != nil {
		go closeQuietly(sess, r.h.opts.StopTimeout)
		sess = nil
	}
	sc.mu.Lock()
	defer func() {
		sc.dialing = nil
		sc.mu.Unlock()
		close(done)
	}()
	switch {
	case sc.closed:
		if sess != nil {
			go closeQuietly(sess, r.h.opts.StopTimeout)
		}
	case errors.Is(err, ErrNotStateless):
		sc.verdict = fmt.Errorf("%w: %w", ErrNotStateless, err)
	case err != nil:
		sc.failErr = &ServerError{Server: r.name, Kind: ErrStartFailed, State: StateReady, Err: err}
		sc.failedAt = now()
	default:
		sc.sess, sc.failErr = sess, nil
	}
}

// statelessNotify takes the stateless connection's notifications: its log messages to
// the call they belong to, its list_changed as the legacy connection's.
func (c *conn) statelessNotify(method string, params json.RawMessage) {
	if method == notificationMessage {
		c.side.route.notify(method, params)
		return
	}
	c.notify(method, params)
}

// closeSidecar closes c's stateless connection, if any, by ctx's deadline; no new one
// is dialled after it.
func (c *conn) closeSidecar(ctx context.Context) {
	sc := &c.side
	sc.mu.Lock()
	sc.closed = true
	sess := sc.sess
	sc.sess = nil
	sc.mu.Unlock()
	if sess != nil {
		_ = sess.Close(ctx)
	}
}

// stoppedErr is the error of a call whose connection the host closed.
func (c *conn) stoppedErr() *ServerError {
	c.r.mu.Lock()
	defer c.r.mu.Unlock()
	return c.r.stopErrLocked(c.closeCause)
}

// doStateless sends one call on c's stateless connection; c holds the call's
// reservation (so the legacy connection is not idle while it runs).
func (r *runtime) doStateless(ctx context.Context, c *conn, method string, params json.RawMessage, opts CallOptions) (json.RawMessage, error) {
	sess, err := c.statelessSession(ctx)
	if err != nil {
		c.release(false)
		return nil, err
	}
	if opts.Notify != nil {
		opts.Request = nil // the revision has no server→client request
		defer c.side.route.add(&opts)()
	}
	res, err := sess.Call(ctx, method, params, opts)
	c.release(err == nil)
	if err == nil {
		return res, nil
	}
	if errors.Is(err, ErrAuthRequired) {
		return nil, r.callError(c, err)
	}
	select {
	case <-sess.Done():
	default:
		return nil, err // the upstream's own error, or ctx's
	}
	if c.hostClosed.Load() {
		e := c.stoppedErr()
		e.Err = err
		return nil, e
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return nil, r.errLocked(ErrCrashed, err)
}
