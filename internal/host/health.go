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

// activityTicks is how many activity checks run per IdleTimeout: a connection is
// stopped between IdleTimeout and IdleTimeout·(1+1/activityTicks) after its last call.
const activityTicks = 8

func (r *runtime) activityPeriod() time.Duration {
	idle := r.h.opts.IdleTimeout
	if idle <= 0 {
		idle = DefaultIdleTimeout // no idle stop; the check still dates last_seen_at
	}
	return max(idle/activityTicks, time.Millisecond)
}

func (r *runtime) armActivityLocked(c *conn) {
	c.activity = time.AfterFunc(r.activityPeriod(), func() { r.activityCheck(c) })
}

// activityCheck turns c's call counts into times: last_seen_at when calls were
// answered since the previous check, and an idle stop of the "" connection when nothing
// used it for IdleTimeout — no call in flight or finished, no per-session connection
// open, and the server is not required.
func (r *runtime) activityCheck(c *conn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c.s.conn != c || c.s.phase != phaseLive {
		return
	}
	t := now()
	if a := c.answered.Load(); a != c.seenAnswered {
		// Answered since the last check: date it to that check, so last_seen_at is
		// late by at most one period and never later than the truth.
		c.seenAnswered = a
		if ls := c.checkedAt.UnixNano(); ls > r.lastSeen.Load() {
			r.lastSeen.Store(ls)
		}
	}
	c.checkedAt = t
	if f := c.finished.Load(); f != c.seenFinished || c.inflight() > 0 || r.keyedLocked() > 0 {
		c.seenFinished = f
		c.activeAt = t // an open per-session connection keeps the server in use too
	}
	idle := r.h.opts.IdleTimeout
	if c.s.key != "" || idle <= 0 || r.def.Required || t.Sub(c.activeAt) < idle {
		r.armActivityLocked(c)
		return
	}
	// Claim the conn: from here a new call cannot start on it.
	if !c.refs.CompareAndSwap(0, closingBit) {
		r.armActivityLocked(c)
		return
	}
	if c.finished.Load() != c.seenFinished { // a call came and went meanwhile
		c.refs.Add(-closingBit)
		r.armActivityLocked(c)
		return
	}
	r.closeSlotLocked(c.s, ReasonIdle, afterRemove)
	r.recomputeLocked(ReasonIdle)
}
