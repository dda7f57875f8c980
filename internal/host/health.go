package host

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// armHealthLocked schedules c's next ping.
func (r *runtime) armHealthLocked(c *conn) {
	if d := r.h.opts.Health.Interval; d > 0 {
		c.health = time.AfterFunc(d, func() { r.ping(c) })
	}
}

// ping runs one health check of c, without any lock held while it waits: slow is
// degraded, no answer is degraded and counted, Failures in a row restart it.
func (r *runtime) ping(c *conn) {
	r.mu.Lock()
	live := c.s.conn == c && c.s.phase == phaseLive
	r.mu.Unlock()
	if !live {
		return
	}
	p := r.h.opts.Health
	ctx, cancel := context.WithTimeout(r.h.ctx, p.Timeout)
	start := now()
	err := c.sess.Ping(ctx)
	took := now().Sub(start)
	cancel()

	r.mu.Lock()
	defer r.mu.Unlock()
	if c.s.conn != c || c.s.phase != phaseLive {
		return
	}
	var why Reason
	switch {
	case errors.Is(err, ErrAuthRequired):
		r.lastErr = err
		r.authLocked()
		r.recomputeLocked(ReasonAuthRequired)
		return
	case err != nil:
		c.pingFails++
		c.degraded = true
		err = fmt.Errorf("ping %d/%d failed: %w", c.pingFails, p.Failures, err)
		r.lastErr = err
		if c.pingFails >= p.Failures {
			r.recomputeLocked(r.failLiveLocked(c, ReasonHealthFailed, err))
			return
		}
		why = ReasonPingFailed
	case took > p.Slow:
		c.pingFails = 0
		c.degraded = true
		why = ReasonPingSlow
		r.lastErr = fmt.Errorf("ping answered in %s (slow above %s)", took.Round(time.Millisecond), p.Slow)
	default:
		c.pingFails = 0
		c.degraded = false
		r.lastSeen.Store(now().UnixNano())
		why = ReasonRecovered
	}
	r.recomputeLocked(why)
	r.armHealthLocked(c)
}

// armIdleLocked schedules an idle check of the "" connection c after d.
func (r *runtime) armIdleLocked(c *conn, d time.Duration) {
	if r.h.opts.IdleTimeout > 0 {
		c.idle = time.AfterFunc(d, func() { r.idleCheck(c) })
	}
}

// idleCheck stops c when nothing used it for IdleTimeout: no call in flight, none
// finished since, no per-session connection open, and the server is not required.
func (r *runtime) idleCheck(c *conn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c.s.conn != c || c.s.phase != phaseLive {
		return
	}
	idle := r.h.opts.IdleTimeout
	if r.def.Required || r.keyedLocked() > 0 || c.inflight() > 0 {
		r.armIdleLocked(c, idle)
		return
	}
	if left := idle - now().Sub(time.Unix(0, c.lastUsed.Load())); left > 0 {
		r.armIdleLocked(c, left)
		return
	}
	// Claim the conn: from here a new call cannot start on it.
	if !c.refs.CompareAndSwap(0, closingBit) {
		r.armIdleLocked(c, idle)
		return
	}
	if now().Sub(time.Unix(0, c.lastUsed.Load())) < idle { // a call came and went meanwhile
		c.refs.Add(-closingBit)
		r.armIdleLocked(c, idle)
		return
	}
	r.closeSlotLocked(c.s, ReasonIdle, afterRemove)
	r.recomputeLocked(ReasonIdle)
}
