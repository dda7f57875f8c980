package host

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v5"
)

// now is the clock; under testing/synctest it is the bubble's fake clock.
func now() time.Time { return time.Now() }

// A runtime supervises one installed server. It holds one slot per connection key: ""
// for the shared connection (the only key of a shared server; the catalogue and
// keyless callers' connection of a "session" server) and one per caller session of a
// "session" server. The server's State is derived from its slots and two flags
// (disabled, block) after every change, so it can never disagree with what runs.
//
// Everything under mu is memory only. Dials, calls, pings, closes and catalogue
// fetches run on their own goroutines and report back under mu; a stale report (its
// conn is no longer the slot's) is recognised by pointer identity and dropped.
type runtime struct {
	h    *Host
	name string

	// Read without mu by Call's fast path.
	fast     atomic.Pointer[conn] // the "" slot's conn while it is live
	session  atomic.Bool          // isolation == "session"
	lastSeen atomic.Int64         // unix nanos of the last answer from the upstream
	timeout  atomic.Int64         // each call's deadline (callTimeoutOf), in nanoseconds; 0: none
	cat      atomic.Pointer[Catalog]

	// refreshSem serializes this server's catalogue refreshes (and their saves); it is
	// the only thing held across I/O, and only this server's refreshes wait on it.
	refreshSem chan struct{}
	// prevs are removed runtimes of the same name that were still closing when this
	// one was installed: no dial starts before they have drained, so a reinstall never
	// runs two copies.
	prevs []*runtime

	mu        sync.Mutex
	def       Definition
	state     State
	since     time.Time
	reason    Reason
	lastErr   error
	removed   bool
	block     block
	started   bool // a start was attempted since install (not_started vs stopped)
	slots     map[string]*slot
	drained   chan struct{} // closed while slots is empty
	keyedGone chan struct{} // closed while no slot other than "" exists
	stderr    string        // stderr tail of the last connection that ended

	bo, cool    backoff.ExponentialBackOff
	failures    []time.Time // failures within RestartPolicy.Window
	attempts    int         // failures since the backoff was last reset
	startFails  int         // failed starts in a row
	nextAttempt time.Time

	pending  kind        // lists invalidated by list_changed, not yet refetched
	debounce *time.Timer // pending refresh after a list_changed
	catFresh bool        // a refresh succeeded since the last start or change
	catErr   error
	// persisted is the digest the CatalogStore holds (loaded, or last saved).
	persisted string
}

type block uint8

const (
	blockNone    block = iota
	blockAuth          // auth_required: nothing starts until Restart, Update or enable
	blockCircuit       // crash loop: only the "" slot's probe may start
)

type phase uint8

const (
	phaseDialing phase = iota + 1
	phaseLive
	phaseClosing // Session.Close running, or a cancelled dial returning
	phaseWaiting // a backoff or the circuit's cool-down before the next dial
)

// afterClose is what a closing slot does once its connection is gone; finishClose
// overrides it when the server is disabled, removed, blocked or shutting down.
type afterClose uint8

const (
	afterRemove afterClose = iota // forget the slot
	afterRedial                   // dial again at once (restart)
	afterRetry                    // dial again after the backoff (crash, health)
	afterProbe                    // circuit open: wait for the probe
)

// stopCause reports whether closing for why counts as stopping (rather than
// restarting or failing).
func stopCause(why Reason) bool {
	switch why {
	case ReasonIdle, ReasonDisabled, ReasonRemoved, ReasonShutdown, ReasonSessionEnded:
		return true
	}
	return false
}

// failureReason reports whether a transition caused by why carries the last error.
func failureReason(why Reason) bool {
	switch why {
	case ReasonStartFailed, ReasonCrashed, ReasonCrashLoop, ReasonAuthRequired, ReasonPingFailed, ReasonHealthFailed:
		return true
	}
	return false
}

// attempt is one start that callers wait for.
type attempt struct {
	done chan struct{}
	err  error // set before done is closed
}

func (a *attempt) finish(err error) { a.err = err; close(a.done) }

type slot struct {
	key      string
	phase    phase
	conn     *conn
	attempt  *attempt           // dialing/waiting: the start callers wait for
	cancel   context.CancelFunc // dialing: cancels the dial
	cause    Reason             // closing: why
	after    afterClose         // closing: what next
	closed   chan struct{}      // closing: closed when the slot moves on
	timer    *time.Timer        // waiting
	timerGen uint64             // invalidates a fired timer that lost the race
}

// closingBit in conn.refs marks a conn no new call may use.
const closingBit = int64(1) << 62

// conn is one Session and the bookkeeping of its life.
type conn struct {
	r    *runtime
	s    *slot
	sess Session
	// route holds the calls in flight that answer the upstream's requests and take
	// its log messages (route.go).
	route router
	// side is the connection's stateless twin (stateless.go).
	side sidecar

	refs       atomic.Int64  // calls in flight (+ closingBit)
	answered   atomic.Uint64 // calls that got an answer
	finished   atomic.Uint64 // calls that finished, answered or not
	hostClosed atomic.Bool   // the host asked for the close (vs a crash)
	probing    atomic.Bool   // a ping after a timed-out call is running (calltimeout.go)
	stop       chan struct{} // closed when the host starts closing it

	// Under r.mu.
	since      time.Time
	closeCause Reason
	degraded   bool
	pingFails  int
	health     *time.Timer
	activity   *time.Timer // the periodic activity check (idle stop, last seen)
	// What the last activity check saw and when it ran, and when calls were last seen
	// active.
	seenAnswered, seenFinished uint64
	checkedAt, activeAt        time.Time
}

func (c *conn) acquire() bool {
	if c.refs.Add(1)&closingBit != 0 {
		c.refs.Add(-1)
		return false
	}
	return true
}

// release ends a call. It only counts: reading the clock per call would cost more than
// the rest of the routing, so the periodic activity check turns the counts into times.
func (c *conn) release(answered bool) {
	if answered {
		c.answered.Add(1)
	}
	c.finished.Add(1) // before the decrement: an idle check seeing 0 in flight sees this
	c.refs.Add(-1)
}

// ended reports whether c's session has ended (crashed or closed).
func (c *conn) ended() bool {
	select {
	case <-c.sess.Done():
		return true
	default:
		return false
	}
}

func (c *conn) inflight() int { return int(c.refs.Load() &^ closingBit) }

func newRuntime(h *Host, def Definition, cat *Catalog) *runtime {
	r := &runtime{
		h: h, name: def.Name, def: def,
		refreshSem: make(chan struct{}, 1),
		slots:      map[string]*slot{},
		drained:    make(chan struct{}),
		keyedGone:  make(chan struct{}),
		since:      now(),
		reason:     ReasonInstalled,
	}
	close(r.drained)
	close(r.keyedGone)
	r.session.Store(def.Isolation == IsolationSession)
	r.timeout.Store(int64(callTimeoutOf(def)))
	if cat != nil {
		r.cat.Store(cat)
		r.persisted = cat.Digest
	}
	p := h.opts.Restart
	r.bo = backoff.ExponentialBackOff{InitialInterval: p.InitialInterval, RandomizationFactor: p.Jitter, Multiplier: p.Multiplier, MaxInterval: p.MaxInterval}
	r.bo.Reset()
	r.cool = backoff.ExponentialBackOff{InitialInterval: p.CooldownInitial, RandomizationFactor: cooldownJitter, Multiplier: 2, MaxInterval: p.CooldownMax}
	r.cool.Reset()
	r.state = r.deriveLocked()
	return r
}

// deriveLocked computes the state from the slots and flags. The order of the cases is
// the precedence docs/host.md describes.
func (r *runtime) deriveLocked() State {
	var live, degraded, dialing, stopping, restarting int
	for _, s := range r.slots {
		switch s.phase {
		case phaseLive:
			live++
			if s.conn.degraded {
				degraded++
			}
		case phaseDialing:
			dialing++
		case phaseClosing:
			switch {
			case s.after == afterRedial || s.after == afterRetry:
				restarting++
			case s.after == afterProbe || s.cause == ReasonAuthRequired:
				// failed / auth_required shows while the refused connection closes
			default:
				stopping++
			}
		case phaseWaiting:
			restarting++
		}
	}
	switch {
	case live > 0 && degraded > 0:
		return StateDegraded
	case live > 0:
		return StateReady
	case stopping > 0:
		return StateStopping
	case r.def.Disabled:
		return StateDisabled
	case r.h.closed.Load(): // shut down: whatever blocked it, nothing runs
		if r.started {
			return StateStopped
		}
		return StateNotStarted
	case r.block == blockAuth:
		return StateAuthRequired
	case r.block == blockCircuit && dialing == 0:
		return StateFailed
	case r.block == blockCircuit: // the half-open probe
		return StateStarting
	case restarting > 0:
		return StateRestarting
	case dialing > 0:
		return StateStarting
	case r.started:
		return StateStopped
	default:
		return StateNotStarted
	}
}

// recomputeLocked derives the state and, when it changed, records and emits the
// transition with why as its reason. A removed server's changes are not emitted: its
// ServerEvent "removed" was its last word.
func (r *runtime) recomputeLocked(why Reason) {
	st := r.deriveLocked()
	if st == r.state {
		return
	}
	from := r.state
	r.state, r.since, r.reason = st, now(), why
	if r.removed {
		return
	}
	var msg string
	if failureReason(why) && r.lastErr != nil {
		msg = r.lastErr.Error()
	}
	name, at := r.name, r.since
	r.h.ev.emit(func(seq uint64) any {
		return StateEvent{Seq: seq, At: at, Server: name, From: from, To: st, Reason: why, Error: msg}
	})
}

// errLocked builds the error a caller gets for kind, with the server's current state.
func (r *runtime) errLocked(kind, cause error) *ServerError {
	e := &ServerError{Server: r.name, Kind: kind, State: r.state, Reason: r.reason, Err: cause}
	if kind == ErrUnavailable || kind == ErrStartFailed || kind == ErrStartTimeout {
		e.RetryAt = r.nextAttemptLocked()
	}
	return e
}

// nextAttemptLocked is when the next automatic start is due, if one is scheduled.
func (r *runtime) nextAttemptLocked() time.Time {
	for _, s := range r.slots {
		if s.phase == phaseWaiting {
			return r.nextAttempt
		}
	}
	return time.Time{}
}

// stopErrLocked is the error for calls waiting on something closed because of why.
func (r *runtime) stopErrLocked(why Reason) *ServerError {
	kind := ErrStopped
	switch why {
	case ReasonDisabled:
		kind = ErrDisabled
	case ReasonShutdown:
		kind = ErrShutdown
	case ReasonCrashLoop:
		kind = ErrUnavailable
	case ReasonAuthRequired:
		kind = ErrAuthRequired
	}
	e := r.errLocked(kind, r.lastErr)
	if kind == ErrStopped || kind == ErrDisabled || kind == ErrShutdown {
		e.Err = nil
	}
	e.Reason = why
	return e
}

func (r *runtime) isDrained() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.slots) == 0
}

func (r *runtime) drainedChan() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.drained
}

func (r *runtime) keyedLocked() int {
	n := len(r.slots)
	if r.slots[""] != nil {
		n--
	}
	return n
}

func (r *runtime) slotListLocked() []*slot {
	out := make([]*slot, 0, len(r.slots))
	for _, s := range r.slots {
		out = append(out, s)
	}
	return out
}

func (r *runtime) newSlotLocked(key string) *slot {
	if len(r.slots) == 0 {
		r.drained = make(chan struct{})
	}
	if key != "" && r.keyedLocked() == 0 {
		r.keyedGone = make(chan struct{})
	}
	s := &slot{key: key}
	r.slots[key] = s
	return s
}

// deleteSlotLocked forgets s, failing whoever waits on its start with err.
func (r *runtime) deleteSlotLocked(s *slot, err error) {
	if s.attempt != nil {
		s.attempt.finish(err)
		s.attempt = nil
	}
	s.phase = 0
	if r.slots[s.key] == s {
		delete(r.slots, s.key)
		if len(r.slots) == 0 {
			close(r.drained)
		}
		if s.key != "" && r.keyedLocked() == 0 {
			close(r.keyedGone)
		}
	}
}

// startableLocked reports whether anything may start now.
func (r *runtime) startableLocked() bool {
	return !r.removed && !r.h.closed.Load() && !r.def.Disabled && r.block == blockNone
}

// keepRequiredLocked starts a required server that has no connection at all.
func (r *runtime) keepRequiredLocked() {
	if r.def.Required && r.startableLocked() && len(r.slots) == 0 {
		r.startDialLocked(r.newSlotLocked(""))
	}
}

// startDialLocked dials s's connection on a new goroutine. Like every mechanism below
// it does not recompute the state: each event handler does so once, at its end, with
// the event's reason, so one event is at most one transition.
func (r *runtime) startDialLocked(s *slot) {
	r.started = true
	s.phase = phaseDialing
	if s.attempt == nil {
		s.attempt = &attempt{done: make(chan struct{})}
	}
	c := &conn{r: r, s: s, stop: make(chan struct{})}
	s.conn = c
	ctx, cancel := context.WithTimeout(r.h.ctx, r.h.opts.StartTimeout)
	s.cancel = cancel
	req := DialRequest{Server: r.name, SessionKey: s.key, Config: r.def.Config, Notify: c.notify, Request: c.route.request}
	shared := s.key == "" && !r.session.Load()
	go r.dial(ctx, cancel, c, req, r.prevs, shared)
}

func (r *runtime) dial(ctx context.Context, cancel context.CancelFunc, c *conn, req DialRequest, prevs []*runtime, shared bool) {
	defer cancel()
	// A shared server never has two sessions: wait for a removed predecessor of the
	// same name, and for per-session connections left from an isolation change.
	var barrier error
	for _, p := range prevs {
		select {
		case <-p.drainedChan():
		case <-ctx.Done():
			barrier = fmt.Errorf("the removed copy of %s is still closing: %w", r.name, ctx.Err())
		}
	}
	if shared && barrier == nil {
		r.mu.Lock()
		gone := r.keyedGone
		r.mu.Unlock()
		select {
		case <-gone:
		case <-ctx.Done():
			barrier = fmt.Errorf("per-session connections of %s are still closing: %w", r.name, ctx.Err())
		}
	}
	var (
		sess Session
		err  = barrier
	)
	if err == nil {
		sess, err = r.h.opts.Dialer.Dial(ctx, req)
		if err == nil && sess == nil {
			err = errors.New("dialer returned no session")
		}
	}
	if err != nil && sess != nil { // a dialer breaking its contract: do not leak it
		go closeQuietly(sess, r.h.opts.StopTimeout)
		sess = nil
	}
	if barrier == nil && errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, ErrAuthRequired) {
		err = fmt.Errorf("no handshake within %s: %w", r.h.opts.StartTimeout, err)
	}

	r.mu.Lock()
	s := c.s
	switch {
	case s.conn != c:
		r.mu.Unlock()
		if sess != nil {
			closeQuietly(sess, r.h.opts.StopTimeout)
		}
	case s.phase != phaseDialing: // the host gave up on this dial
		if sess == nil {
			r.recomputeLocked(r.finishCloseLocked(s, c, nil))
			r.mu.Unlock()
			return
		}
		c.sess = sess
		c.hostClosed.Store(true)
		r.mu.Unlock()
		r.closeConn(c)
	case err != nil:
		r.dialFailedLocked(s, err)
		r.mu.Unlock()
	default:
		r.liveLocked(s, c, sess)
		r.mu.Unlock()
	}
}

func closeQuietly(s Session, d time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	_ = s.Close(ctx)
}

func (r *runtime) liveLocked(s *slot, c *conn, sess Session) {
	t := now()
	c.sess, c.since, c.activeAt, c.checkedAt = sess, t, t, t
	s.phase, s.cancel = phaseLive, nil
	r.lastSeen.Store(t.UnixNano())
	r.startFails = 0
	if r.block == blockCircuit {
		r.closeCircuitLocked() // the probe succeeded
	}
	waiting := false
	for _, o := range r.slots {
		waiting = waiting || o.phase == phaseWaiting
	}
	if !waiting {
		r.nextAttempt = time.Time{}
	}
	att := s.attempt
	s.attempt = nil
	if s.key == "" {
		r.fast.Store(c)
	}
	r.armActivityLocked(c)
	r.armHealthLocked(c)
	go r.watch(c)
	if s.key == "" || !r.catFresh {
		go func() { _ = r.refreshOwn(r.h.ctx, c) }()
	}
	r.recomputeLocked(ReasonStarted)
	att.finish(nil)
}

func (r *runtime) dialFailedLocked(s *slot, err error) {
	r.lastErr = err
	s.conn, s.cancel = nil, nil
	att := s.attempt
	s.attempt = nil
	switch {
	case errors.Is(err, ErrAuthRequired):
		r.deleteSlotLocked(s, nil)
		r.authLocked()
		r.recomputeLocked(ReasonAuthRequired)
		att.finish(r.errLocked(ErrAuthRequired, err))
	case r.failureLocked(true) || r.block == blockCircuit: // a failed probe reopens it
		s.phase = phaseWaiting
		r.openCircuitLocked()
		r.recomputeLocked(ReasonCrashLoop)
		att.finish(r.errLocked(ErrUnavailable, err))
	default:
		r.scheduleRetryLocked(s)
		r.recomputeLocked(ReasonStartFailed)
		att.finish(r.errLocked(ErrStartFailed, err))
	}
}

// failureLocked records a failure and reports whether it opens the circuit.
func (r *runtime) failureLocked(start bool) bool {
	t := now()
	r.attempts++
	if start {
		r.startFails++
	}
	keep := r.failures[:0]
	for _, f := range r.failures {
		if t.Sub(f) < r.h.opts.Restart.Window {
			keep = append(keep, f)
		}
	}
	r.failures = append(keep, t)
	th := r.h.opts.Restart.Threshold
	return len(r.failures) >= th || r.startFails >= th
}

func (r *runtime) scheduleRetryLocked(s *slot) {
	d := r.bo.NextBackOff()
	s.phase, s.conn = phaseWaiting, nil
	if s.attempt == nil {
		s.attempt = &attempt{done: make(chan struct{})}
	}
	r.nextAttempt = now().Add(d)
	r.armTimerLocked(s, d)
}

func (r *runtime) armTimerLocked(s *slot, d time.Duration) {
	s.timerGen++
	g := s.timerGen
	s.timer = time.AfterFunc(d, func() { r.fireTimer(s, g) })
}

func (r *runtime) fireTimer(s *slot, gen uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if s.phase != phaseWaiting || s.timerGen != gen || r.slots[s.key] != s {
		return
	}
	s.timer = nil
	why := ReasonRetry
	if r.block == blockCircuit {
		why = ReasonProbe
	}
	r.startDialLocked(s)
	r.recomputeLocked(why)
}

func (r *runtime) openCircuitLocked() {
	r.block = blockCircuit
	r.nextAttempt = now().Add(r.cool.NextBackOff())
	for _, s := range r.slotListLocked() {
		r.closeSlotLocked(s, ReasonCrashLoop, afterProbe)
	}
	if r.slots[""] == nil {
		s := r.newSlotLocked("")
		s.phase = phaseWaiting
		r.armTimerLocked(s, r.nextAttempt.Sub(now()))
	}
}

// closeCircuitLocked forgets past failures (a probe succeeded, or a person or a
// configuration change intervened).
func (r *runtime) closeCircuitLocked() {
	if r.block == blockCircuit {
		r.block = blockNone
	}
	r.failures, r.attempts, r.startFails = nil, 0, 0
	r.bo.Reset()
	r.cool.Reset()
}

func (r *runtime) authLocked() {
	r.block = blockAuth
	r.nextAttempt = time.Time{}
	for _, s := range r.slotListLocked() {
		r.closeSlotLocked(s, ReasonAuthRequired, afterRemove)
	}
}

// watch turns the end of a live session the host did not ask for into a crash.
func (r *runtime) watch(c *conn) {
	select {
	case <-c.sess.Done():
	case <-c.stop:
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if c.s.conn != c || c.s.phase != phaseLive {
		return
	}
	r.recomputeLocked(r.crashLocked(c))
}

// crashLocked handles the end of live c's session, which the host did not ask for.
func (r *runtime) crashLocked(c *conn) Reason {
	err := c.sess.Err()
	if err == nil {
		err = errors.New("connection ended")
	}
	return r.failLiveLocked(c, ReasonCrashed, err)
}

// failLiveLocked handles a live connection that died or failed its health checks:
// restart after the backoff, or open the circuit. It returns the reason to record.
func (r *runtime) failLiveLocked(c *conn, why Reason, err error) Reason {
	r.lastErr = err
	if now().Sub(c.since) >= r.h.opts.Restart.Window {
		r.bo.Reset() // it had been stable: start the backoff over
		r.attempts = 0
	}
	if r.failureLocked(false) {
		r.openCircuitLocked()
		return ReasonCrashLoop
	}
	r.closeSlotLocked(c.s, why, afterRetry)
	return why
}

// closeSlotLocked starts closing whatever s holds; after says what follows.
func (r *runtime) closeSlotLocked(s *slot, why Reason, after afterClose) {
	switch s.phase {
	case phaseLive:
		c := s.conn
		c.hostClosed.Store(!c.ended()) // closing a crashed session only reaps it
		c.refs.Or(closingBit)
		r.fast.CompareAndSwap(c, nil)
		c.closeCause = why
		stopTimer(c.health)
		stopTimer(c.activity)
		close(c.stop)
		s.phase, s.cause, s.after, s.closed = phaseClosing, why, after, make(chan struct{})
		go r.closeConn(c)
	case phaseDialing:
		s.cancel()
		s.phase, s.cause, s.after, s.closed = phaseClosing, why, after, make(chan struct{})
		if after != afterRedial && s.attempt != nil {
			s.attempt.finish(r.stopErrLocked(why))
			s.attempt = nil
		}
	case phaseWaiting:
		s.timerGen++
		stopTimer(s.timer)
		s.timer = nil
		if after != afterRedial && s.attempt != nil {
			s.attempt.finish(r.stopErrLocked(why))
			s.attempt = nil
		}
		s.phase, s.cause, s.after, s.closed = phaseClosing, why, after, make(chan struct{})
		_ = r.finishCloseLocked(s, nil, nil)
	case phaseClosing:
		s.cause, s.after = why, after
	}
}

func stopTimer(t *time.Timer) {
	if t != nil {
		t.Stop()
	}
}

// closeConn closes c's session, bounded by StopTimeout, and reports back.
func (r *runtime) closeConn(c *conn) {
	ctx, cancel := context.WithTimeout(context.Background(), r.h.opts.StopTimeout)
	c.closeSidecar(ctx)
	err := c.sess.Close(ctx)
	cancel()
	r.mu.Lock()
	r.recomputeLocked(r.finishCloseLocked(c.s, c, err))
	r.mu.Unlock()
}

// finishCloseLocked runs when s's connection is gone: the slot dials again, waits, or
// is forgotten. It returns the reason for the transition that follows.
func (r *runtime) finishCloseLocked(s *slot, c *conn, closeErr error) Reason {
	if c != nil && c.sess != nil {
		if tail := c.sess.StderrTail(); tail != "" {
			r.stderr = tail
		}
		if closeErr != nil {
			r.h.log.Warn("host: closing upstream session", "server", r.name, "key", s.key, "err", closeErr)
		}
	}
	ch := s.closed
	s.conn, s.cancel, s.closed = nil, nil, nil
	why, next := s.cause, ReasonStopped
	switch {
	case r.removed || r.h.closed.Load() || r.def.Disabled || r.block == blockAuth ||
		(s.key != "" && !r.session.Load()): // per-session slots left from an isolation change
		r.deleteSlotLocked(s, r.stopErrLocked(why))
	case r.block == blockCircuit:
		if s.key == "" {
			s.phase = phaseWaiting
			r.armTimerLocked(s, r.nextAttempt.Sub(now()))
		} else {
			r.deleteSlotLocked(s, r.stopErrLocked(ReasonCrashLoop))
		}
	case s.after == afterRedial:
		r.startDialLocked(s)
		next = why
	case s.after == afterRetry:
		r.scheduleRetryLocked(s)
		next = why
	default:
		r.deleteSlotLocked(s, r.stopErrLocked(why))
	}
	if ch != nil {
		close(ch)
	}
	if r.def.Required && r.startableLocked() && len(r.slots) == 0 {
		r.keepRequiredLocked()
		next = ReasonRequired
	}
	return next
}

// restartSlotsLocked closes and redials every connection that runs or is about to.
// Connections closing because their caller session ended stay closed, and so, unless
// the restart is explicit, do those stopping for another reason (idle). When nothing
// runs and startIfNone, it starts the "" connection.
func (r *runtime) restartSlotsLocked(why Reason, explicit, startIfNone bool) {
	running := false
	for _, s := range r.slotListLocked() {
		switch s.phase {
		case phaseLive, phaseDialing:
			running = true
			r.closeSlotLocked(s, why, afterRedial)
		case phaseWaiting:
			running = true
			s.timerGen++
			stopTimer(s.timer)
			s.timer = nil
			r.startDialLocked(s)
		case phaseClosing:
			if s.cause != ReasonSessionEnded && (explicit || !stopCause(s.cause)) {
				running = true
				s.cause, s.after = why, afterRedial
			}
		}
	}
	if !running && startIfNone {
		if s := r.slots[""]; s == nil {
			r.startDialLocked(r.newSlotLocked(""))
		}
	}
}

func (r *runtime) closeAllLocked(why Reason) {
	for _, s := range r.slotListLocked() {
		r.closeSlotLocked(s, why, afterRemove)
	}
}

// refuseLocked is the error for acting on a server that is shut down, removed, or
// (when disabledToo) disabled; nil otherwise.
func (r *runtime) refuseLocked(disabledToo bool) error {
	switch {
	case r.h.closed.Load():
		return r.errLocked(ErrShutdown, nil)
	case r.removed:
		return r.errLocked(ErrUnknownServer, nil)
	case disabledToo && r.def.Disabled:
		return r.errLocked(ErrDisabled, nil)
	}
	return nil
}

func (r *runtime) restart() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.refuseLocked(true); err != nil {
		return err
	}
	r.closeCircuitLocked()
	r.block = blockNone
	r.nextAttempt = time.Time{}
	r.restartSlotsLocked(ReasonRestartRequested, true, true)
	r.recomputeLocked(ReasonRestartRequested)
	return nil
}

func (r *runtime) update(def Definition) (Change, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.refuseLocked(false); err != nil {
		return "", err
	}
	old := r.def
	cfg := old.Fingerprint != def.Fingerprint
	iso := old.Isolation != def.Isolation
	if !cfg && !iso && old.Required == def.Required && old.Disabled == def.Disabled && old.CallTimeout == def.CallTimeout {
		return ChangeUnchanged, nil
	}
	r.def = def
	r.session.Store(def.Isolation == IsolationSession)
	r.timeout.Store(int64(callTimeoutOf(def)))
	r.h.emitServer(r.name, ChangeUpdated)
	if cfg || iso {
		r.catFresh = false
	}
	why := ReasonConfigChanged
	switch {
	case def.Disabled:
		r.closeAllLocked(ReasonDisabled)
		why = ReasonDisabled
	case cfg || iso || old.Disabled:
		blocked := r.block != blockNone
		r.closeCircuitLocked()
		r.block = blockNone
		r.nextAttempt = time.Time{}
		if old.Disabled {
			why = ReasonEnabled
		}
		if cfg || iso {
			if iso {
				r.closeAllLocked(ReasonConfigChanged) // the next use starts afresh
			} else {
				// A blocked server is tried again: its credentials may have changed.
				r.restartSlotsLocked(ReasonConfigChanged, false, blocked)
			}
		}
	}
	if r.def.Required && r.startableLocked() && len(r.slots) == 0 {
		r.keepRequiredLocked()
		why = ReasonRequired
	}
	r.recomputeLocked(why)
	return ChangeUpdated, nil
}

func (r *runtime) setEnabled(enabled bool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.refuseLocked(false); err != nil || r.def.Disabled == !enabled {
		return err
	}
	r.def.Disabled = !enabled
	r.h.emitServer(r.name, ChangePolicy)
	if !enabled {
		r.closeAllLocked(ReasonDisabled)
		r.recomputeLocked(ReasonDisabled)
		return nil
	}
	r.closeCircuitLocked()
	r.block = blockNone
	r.nextAttempt = time.Time{}
	r.keepRequiredLocked()
	r.recomputeLocked(ReasonEnabled)
	return nil
}

func (r *runtime) endSession(key string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if s := r.slots[key]; s != nil {
		r.closeSlotLocked(s, ReasonSessionEnded, afterRemove)
		r.recomputeLocked(ReasonSessionEnded)
	}
}

// remove marks the runtime removed, starts closing everything, and returns a channel
// closed once nothing is left.
func (r *runtime) remove() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.removed = true
	return r.stopAllLocked(ReasonRemoved)
}

func (r *runtime) stopAll(why Reason) <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stopAllLocked(why)
}

func (r *runtime) stopAllLocked(why Reason) <-chan struct{} {
	stopTimer(r.debounce)
	r.debounce = nil
	r.closeAllLocked(why)
	r.recomputeLocked(why)
	return r.drained
}
