package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"
)

// DefaultCallTimeout is a call's deadline when its server's definition sets none
// (Definition.CallTimeout; docs/host.md, "Call deadline"). It is the TypeScript SDK's
// default request timeout: most clients give up on a call by then anyway, and a call
// that runs longer on purpose belongs to a server whose definition says so.
const DefaultCallTimeout = 60 * time.Second

// errCallTimeout is the cause a call's context is cancelled with at its deadline; it
// wraps context.DeadlineExceeded, so the upstream's notifications/cancelled says
// "timed out".
var errCallTimeout = fmt.Errorf("call timeout: %w", context.DeadlineExceeded)

// callTimeoutOf is the deadline def gives each call: its CallTimeout, the default
// when zero, none when negative.
func callTimeoutOf(def Definition) time.Duration {
	switch {
	case def.CallTimeout == 0:
		return DefaultCallTimeout
	case def.CallTimeout < 0:
		return 0
	}
	return def.CallTimeout
}

// callDeadline cancels one call's context once the upstream has had it for the call
// timeout. The time the upstream waits on the client — a request of its own
// (elicitation, sampling) that the caller answers, perhaps a person — does not count:
// the clock stops while one is in flight and goes on with what was left.
type callDeadline struct {
	cancel context.CancelCauseFunc

	mu      sync.Mutex
	t       *time.Timer
	left    time.Duration
	started time.Time
	asking  int // the upstream's requests to the client in flight
	fired   bool
	done    bool
}

// withCallDeadline returns ctx bounded by a call timeout d, and its deadline; stop
// must be called when the call returns.
func withCallDeadline(ctx context.Context, d time.Duration) (context.Context, *callDeadline) {
	ctx, cancel := context.WithCancelCause(ctx)
	dl := &callDeadline{cancel: cancel, left: d, started: time.Now()}
	dl.t = time.AfterFunc(d, dl.fire)
	return ctx, dl
}

func (dl *callDeadline) fire() {
	dl.mu.Lock()
	defer dl.mu.Unlock()
	if dl.done || dl.asking > 0 {
		return // stopped meanwhile (a Stop that lost the race with the timer)
	}
	dl.fired = true
	dl.cancel(errCallTimeout)
}

// pause stops the clock while the upstream waits on the client.
func (dl *callDeadline) pause() {
	dl.mu.Lock()
	defer dl.mu.Unlock()
	if dl.asking++; dl.asking == 1 && !dl.fired {
		if dl.t.Stop() {
			dl.left -= time.Since(dl.started)
		} else {
			dl.left = 0 // it ran out as the request began: fire waits for the answer
		}
	}
}

// resume starts the clock again with what was left.
func (dl *callDeadline) resume() {
	dl.mu.Lock()
	defer dl.mu.Unlock()
	if dl.asking--; dl.asking == 0 && !dl.fired && !dl.done {
		dl.started = time.Now()
		dl.t = time.AfterFunc(max(dl.left, 0), dl.fire)
	}
}

// stop ends the deadline and reports whether it had fired.
func (dl *callDeadline) stop() (fired bool) {
	dl.mu.Lock()
	defer dl.mu.Unlock()
	dl.done = true
	dl.t.Stop()
	dl.cancel(nil)
	return dl.fired
}

// wrap makes the upstream's requests to the caller stop the clock while they wait.
func (dl *callDeadline) wrap(opts *CallOptions) {
	if req := opts.Request; req != nil {
		opts.Request = func(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
			dl.pause()
			defer dl.resume()
			return req(ctx, method, params)
		}
	}
}

// timedOut is the error of a call that reached its deadline. The connection is then
// probed with one ping (unless a probe is already running): an upstream that answers
// it is only slow on that call and keeps its connection; one that answers nothing at
// all is restarted at once, rather than after Health.Failures pings.
func (r *runtime) timedOut(c *conn, d time.Duration, err error) error {
	if c.probing.CompareAndSwap(false, true) {
		go r.probe(c, d)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.errLocked(ErrTimeout, fmt.Errorf("no answer within %s (the call was cancelled upstream): %w", d, err))
}

// probe pings c after a call timed out on it (see timedOut).
func (r *runtime) probe(c *conn, d time.Duration) {
	defer c.probing.Store(false)
	ctx, cancel := context.WithTimeout(r.h.ctx, r.h.opts.Health.Timeout)
	err := c.sess.Ping(ctx)
	cancel()
	if err == nil || errors.Is(err, ErrAuthRequired) || r.h.ctx.Err() != nil {
		return // it answers (the periodic pings judge it as before), or the host is shutting down
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if c.s.conn != c || c.s.phase != phaseLive || c.ended() {
		return // already closing, or crashed (its watcher restarts it)
	}
	c.degraded = true
	err = fmt.Errorf("a call got no answer within %s, and then a ping none within %s: %w", d, r.h.opts.Health.Timeout, err)
	r.recomputeLocked(r.failLiveLocked(c, ReasonHealthFailed, err))
}
