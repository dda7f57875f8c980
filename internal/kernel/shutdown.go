package kernel

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/toolgate/toolgate/internal/audit"
)

// ErrShutdown is the cause (context.Cause) of a call's context when Shutdown cancels it.
var ErrShutdown = errors.New("toolgate is shutting down")

// ShutdownGrace is how long Shutdown waits, after cancelling the calls still in
// flight, for their tools to return and their outcome events to be written. A tool
// that is still running after it gets its outcome written by Shutdown, so that no
// executed call is left without one when the process exits.
const ShutdownGrace = 5 * time.Second

// ShutdownAppendWait is how long Shutdown then still waits for calls that are not
// running a tool but writing (their decision, their outcome, an escalation): such a
// write ends on its own, within the store's busy timeout (10 s) when another process
// holds the lock; this is three times that. Past it Shutdown gives up on them (and
// says so in the log) rather than hang an exiting process on a stuck disk.
const ShutdownAppendWait = 30 * time.Second

// drainState is where a kernel is in its shutdown.
type drainState int

const (
	drainOpen     drainState = iota // taking calls
	drainDraining                   // Shutdown running: new calls refused (recorded), those in flight cancelled
	drainClosed                     // Shutdown returned: the audit log may be gone
)

// call phases (callState.phase): what a shutdown may do to a call in flight.
const (
	phaseDeciding int32 = iota // authorizing, appending the decision
	phaseRunning               // the allowed event is written and the tool is running
	phaseRecorded              // the outcome is being (or was) written, by the call or by Shutdown
)

// inflight is the set of calls between their start and their return, so that a
// shutdown can wait for them, cancel them and make sure each one's outcome is written
// before the audit log is closed. The lock guards only the map and the state.
type inflight struct {
	mu    sync.Mutex
	state drainState
	calls map[*callState]struct{}
	idle  chan struct{} // made by Shutdown; closed once no call is in flight
}

// enter registers c unless the kernel is closed, and returns the state it found.
func (f *inflight) enter(c *callState) drainState {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.state == drainClosed {
		return drainClosed
	}
	if f.calls == nil {
		f.calls = map[*callState]struct{}{}
	}
	f.calls[c] = struct{}{}
	return f.state
}

// leave removes c (it may have been removed already, by an abandon).
func (f *inflight) leave(c *callState) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.calls, c)
	f.signalIdleLocked()
}

func (f *inflight) signalIdleLocked() {
	if f.idle != nil && len(f.calls) == 0 {
		select {
		case <-f.idle:
		default:
			close(f.idle)
		}
	}
}

func (f *inflight) snapshot() []*callState {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]*callState, 0, len(f.calls))
	for c := range f.calls {
		out = append(out, c)
	}
	return out
}

// Shutdown ends the kernel's work without losing an outcome: every call still in flight
// is cancelled (its context's cause is ErrShutdown) and recorded failed
// cancelled_by_shutdown after its allowed event; Shutdown waits up to ShutdownGrace for
// those outcome events, and writes the outcome itself for a call whose tool has still
// not returned. A call arriving meanwhile is refused with the same code (and recorded).
// When Shutdown returns nothing the kernel started is waiting to write to the audit
// log, so it may be closed; calls after that are refused without being recorded (they
// run nothing). It returns how many calls it cancelled; calling it again returns 0.
//
// Letting calls finish first is the surfaces' part (an HTTP server's Shutdown, a
// stdio server answering what it read): they stop taking work and wait up to their
// drain deadline, then call Shutdown for whatever is left.
func (k *Kernel) Shutdown() int {
	f := &k.calls
	f.mu.Lock()
	if f.state != drainOpen {
		f.mu.Unlock()
		return 0
	}
	f.state = drainDraining
	f.idle = make(chan struct{})
	f.signalIdleLocked()
	idle := f.idle
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.state = drainClosed
		f.mu.Unlock()
	}()

	running := f.snapshot()
	for _, c := range running {
		c.cancel(ErrShutdown)
	}
	grace := time.NewTimer(ShutdownGrace)
	defer grace.Stop()
	select {
	case <-idle:
		return len(running)
	case <-grace.C:
	}
	// Tools that ignore cancellation: record their outcome now, and stop waiting for
	// them. The calls left are writing to the audit or escalation log.
	for _, c := range f.snapshot() {
		if c.abandon(k) {
			f.leave(c)
		}
	}
	grace.Reset(ShutdownAppendWait)
	select {
	case <-idle:
	case <-grace.C:
		k.log.Error("shutdown: calls still writing to the audit log; giving up on them", "calls", len(f.snapshot()), "waited", ShutdownGrace+ShutdownAppendWait)
	}
	return len(running)
}

// abandon writes the outcome of a call whose tool is still running after a shutdown
// cancelled it, unless the call is past that already. It reports whether it did.
func (c *callState) abandon(k *Kernel) bool {
	if !c.phase.CompareAndSwap(phaseRunning, phaseRecorded) {
		return false
	}
	ev := c.ev // the call's goroutine no longer touches c.ev: it lost the phase
	ev.Decision, ev.Code, ev.Message = audit.Failed, string(CodeCancelledByShutdown),
		"cancelled by shutdown; the tool had not stopped "+ShutdownGrace.String()+" later"
	ev.Time = k.opts.Now().UTC()
	ev.LatencyMicros = time.Since(c.start).Microseconds()
	if err := k.opts.Audit.AppendAudit(context.Background(), &ev); err != nil {
		k.log.Error("audit: recording a call cut off by shutdown", "call", ev.CallID, "err", err)
	}
	return true
}

// shutdownRefusal is the answer to a call that arrives once Shutdown has begun.
func shutdownRefusal() *Error {
	return Failed(CodeCancelledByShutdown, "toolgate is shutting down; call again once it is back").WithRetryable(true)
}
