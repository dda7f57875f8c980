package host

import (
	"context"
	"encoding/json"
	"errors"
	"time"
)

// Call sends one request (tools/call, resources/read, prompts/get …) to server and
// returns the upstream's result bytes unchanged. params must be valid JSON (or nil);
// the host does not look at them.
//
// Routing: a shared server's calls all go to its one connection; a "session" server's
// go to the connection of opts.SessionKey, started on that key's first call. A server
// that is not running is started (single flight: concurrent first calls wait for one
// start) and the call waits for it, at most Options.StartTimeout and ctx. A call is
// answered at once, without waiting, when the server is disabled, auth_required or
// failed (circuit open).
//
// Errors: a *ServerError (errors.Is with ErrDisabled, ErrUnavailable, ErrCrashed …)
// when the host decided; otherwise the session's own error unchanged (the upstream's
// JSON-RPC error, ctx's error).
func (h *Host) Call(ctx context.Context, server, method string, params json.RawMessage, opts CallOptions) (json.RawMessage, error) {
	r := h.lookup(server)
	if r == nil {
		return nil, &ServerError{Server: server, Kind: ErrUnknownServer}
	}
	key := opts.SessionKey
	if !r.session.Load() || opts.Stateless != nil {
		// A stateless request carries everything of its caller's: it goes to the
		// shared connection's stateless twin whatever the isolation (stateless.go).
		key = ""
	}
	if key == "" {
		if c := r.fast.Load(); c != nil && !c.ended() && c.acquire() {
			return r.do(ctx, c, method, params, opts)
		}
	}
	c, err := r.acquire(ctx, key)
	if err != nil {
		return nil, err
	}
	return r.do(ctx, c, method, params, opts)
}

func (r *runtime) do(ctx context.Context, c *conn, method string, params json.RawMessage, opts CallOptions) (json.RawMessage, error) {
	var dl *callDeadline
	d := time.Duration(r.timeout.Load())
	if d > 0 {
		ctx, dl = withCallDeadline(ctx, d)
		dl.wrap(&opts)
	}
	if opts.Stateless != nil {
		res, err := r.doStateless(ctx, c, method, params, opts)
		if fired := dl != nil && dl.stop(); err != nil && fired && !c.ended() {
			return nil, r.timedOut(c, d, err)
		}
		return res, err
	}
	if opts.Request != nil || opts.Notify != nil {
		defer c.route.add(&opts)()
	}
	res, err := c.sess.Call(ctx, method, params, opts)
	fired := dl != nil && dl.stop()
	c.release(err == nil)
	if err != nil {
		if fired && !c.ended() {
			return nil, r.timedOut(c, d, err)
		}
		return nil, r.callError(c, err)
	}
	return res, nil
}

// callError turns a session's failure into the host's when the host knows better:
// the connection refused our credentials, died, or was closed by the host.
func (r *runtime) callError(c *conn, err error) error {
	if errors.Is(err, ErrAuthRequired) {
		r.mu.Lock()
		defer r.mu.Unlock()
		if c.s.conn == c && c.s.phase == phaseLive {
			r.lastErr = err
			r.authLocked()
			r.recomputeLocked(ReasonAuthRequired)
		}
		return r.errLocked(ErrAuthRequired, err)
	}
	select {
	case <-c.sess.Done():
	default:
		return err // the upstream answered with an error, or ctx ended
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if c.hostClosed.Load() {
		e := r.stopErrLocked(c.closeCause)
		e.Err = err
		return e
	}
	return r.errLocked(ErrCrashed, err)
}

// acquire returns a live conn for key with a call reserved on it, starting the
// connection if there is none and waiting for a start in progress.
func (r *runtime) acquire(ctx context.Context, key string) (*conn, error) {
	var timeout <-chan time.Time
	for {
		r.mu.Lock()
		if err := r.gateLocked(key); err != nil {
			r.mu.Unlock()
			return nil, err
		}
		s := r.slots[key]
		if s == nil {
			if key != "" && r.keyedLocked() >= r.h.opts.MaxSessions {
				err := r.errLocked(ErrSessionLimit, nil)
				r.mu.Unlock()
				return nil, err
			}
			s = r.newSlotLocked(key)
			r.startDialLocked(s)
			r.recomputeLocked(ReasonFirstUse)
		}
		var (
			wait <-chan struct{}
			att  *attempt
		)
		switch s.phase {
		case phaseLive:
			c := s.conn
			if c.ended() {
				// The session died and its watcher has not run yet: handle the crash
				// here, so this call waits for the restart instead of failing.
				r.recomputeLocked(r.crashLocked(c))
				r.mu.Unlock()
				continue
			}
			if c.acquire() {
				r.mu.Unlock()
				return c, nil
			}
			// Only possible while an idle check holds the closing bit under mu; it
			// cannot be seen here, but never spin if it were.
			wait = s.conn.stop
		case phaseDialing, phaseWaiting:
			if s.attempt == nil {
				s.attempt = &attempt{done: make(chan struct{})}
			}
			att = s.attempt
			wait = att.done
		case phaseClosing:
			wait = s.closed
		}
		r.mu.Unlock()
		if timeout == nil {
			t := time.NewTimer(r.h.opts.StartTimeout)
			defer t.Stop()
			timeout = t.C
		}
		select {
		case <-wait:
			if att != nil && att.err != nil {
				return nil, att.err
			}
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-timeout:
			r.mu.Lock()
			err := r.errLocked(ErrStartTimeout, nil)
			r.mu.Unlock()
			return nil, err
		}
	}
}

// gateLocked refuses a call at once when the server cannot serve it now.
func (r *runtime) gateLocked(key string) error {
	if err := r.refuseLocked(true); err != nil {
		return err
	}
	switch {
	case r.block == blockAuth:
		return r.errLocked(ErrAuthRequired, r.lastErr)
	case r.block == blockCircuit:
		if s := r.slots[key]; key == "" && s != nil && s.phase == phaseDialing {
			return nil // the half-open probe is under way: wait for it
		}
		return r.errLocked(ErrUnavailable, r.lastErr)
	}
	return nil
}
