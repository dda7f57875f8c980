package host_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/toolgate/toolgate/internal/host"
	"github.com/toolgate/toolgate/internal/host/hosttest"
)

// within checks that the next attempt is due between lo and hi from now.
func within(t *testing.T, st host.Status, lo, hi time.Duration) time.Duration {
	t.Helper()
	if st.Retry.NextAttempt.IsZero() {
		t.Fatalf("no next attempt scheduled: %+v", st.Retry)
	}
	d := time.Until(st.Retry.NextAttempt)
	if d < lo || d > hi {
		t.Fatalf("next attempt in %s, want within [%s, %s]", d, lo, hi)
	}
	return d
}

func TestCrashRestartsWithBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, nil)
		e.install(def("a"))
		e.mustCall("a")
		// The default backoff: 500ms, ×2, ±50 % jitter.
		wants := [][2]time.Duration{{250 * time.Millisecond, 750 * time.Millisecond}, {500 * time.Millisecond, 1500 * time.Millisecond}, {time.Second, 3 * time.Second}}
		for i, w := range wants {
			e.d.Last("a").Crash(fmt.Errorf("exit status %d", i+1))
			synctest.Wait()
			st := e.status("a")
			if st.State != host.StateRestarting || st.Reason != host.ReasonCrashed || st.Retry.Attempts != i+1 {
				t.Fatalf("crash %d: %+v", i+1, st)
			}
			if st.LastError != fmt.Sprintf("exit status %d", i+1) {
				t.Fatalf("crash %d: last error %q", i+1, st.LastError)
			}
			d := within(t, st, w[0], w[1])
			// A call while restarting waits for the restart.
			start := time.Now()
			e.mustCall("a")
			if took := time.Since(start); took != d {
				t.Fatalf("call during restarting took %s, want the backoff %s", took, d)
			}
			e.wantPath("a", host.StateReady, host.StateRestarting, host.StateStarting, host.StateReady)
		}
		if e.d.Dials("a") != 4 || e.d.MaxOpen("a") != 1 {
			t.Fatalf("dials %d (want 4), max open %d (want 1: the crashed one is reaped before the next)", e.d.Dials("a"), e.d.MaxOpen("a"))
		}
		for _, s := range e.d.Sessions("a")[:3] {
			if !s.Closed() {
				t.Fatal("crashed session not reaped (closed)")
			}
		}
	})
}

func TestBackoffResetsAfterStableRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, func(o *host.Options) { o.IdleTimeout = -1 })
		e.install(def("a"))
		e.mustCall("a")
		for range 3 {
			e.d.Last("a").Crash(nil)
			advance(10 * time.Second)
		}
		e.wantState("a", host.StateReady)
		advance(host.DefaultCircuitWindow)
		e.d.Last("a").Crash(nil)
		st := e.status("a")
		within(t, st, 250*time.Millisecond, 750*time.Millisecond)
		if st.Retry.Attempts != 1 {
			t.Fatalf("attempts %d after a stable run, want 1", st.Retry.Attempts)
		}
	})
}

func TestCrashLoopOpensCircuit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, nil)
		e.install(def("a"))
		e.mustCall("a")
		for i := range host.DefaultCircuitThreshold - 1 {
			e.d.Last("a").Crash(nil)
			e.mustCall("a")
			if st := e.status("a"); st.Retry.CircuitOpen || st.Retry.Failures != i+1 {
				t.Fatalf("after %d crashes: %+v", i+1, st.Retry)
			}
		}
		e.d.Last("a").Crash(errors.New("segfault"))
		e.wantPath("a", host.StateReady, host.StateFailed)
		st := e.status("a")
		if !st.Retry.CircuitOpen || st.Reason != host.ReasonCrashLoop || st.LastError != "segfault" || st.Live {
			t.Fatalf("after the crash loop: %+v", st)
		}
		cool := within(t, st, 24*time.Second, 36*time.Second) // 30s ±20 %
		dials := e.d.Dials("a")

		// While open, calls are answered at once with the retry time.
		start := time.Now()
		_, err := e.call("a")
		var se *host.ServerError
		if !errors.Is(err, host.ErrUnavailable) || !errors.As(err, &se) || time.Since(start) != 0 {
			t.Fatalf("call while open: %v after %s", err, time.Since(start))
		}
		if !se.RetryAt.Equal(st.Retry.NextAttempt) || se.State != host.StateFailed {
			t.Fatalf("error retry %v state %s; status says %v", se.RetryAt, se.State, st.Retry.NextAttempt)
		}
		advance(cool - time.Second)
		if e.d.Dials("a") != dials {
			t.Fatal("dialled before the cool-down ended")
		}
		// The half-open probe fails: the cool-down doubles.
		e.d.Server("a").Set(func(b *hosttest.Behavior) { b.DialErr = errors.New("still broken") })
		advance(time.Second)
		if e.d.Dials("a") != dials+1 {
			t.Fatalf("dials %d, want one probe", e.d.Dials("a")-dials)
		}
		e.wantPath("a", host.StateFailed, host.StateStarting, host.StateFailed)
		st = e.status("a")
		cool = within(t, st, 48*time.Second, 72*time.Second)
		if st.Reason != host.ReasonCrashLoop || st.LastError != "still broken" {
			t.Fatalf("after a failed probe: %+v", st)
		}
		// The next probe succeeds: the circuit closes and the backoff starts over.
		e.d.Server("a").Set(func(b *hosttest.Behavior) { b.DialErr = nil })
		advance(cool)
		e.wantPath("a", host.StateFailed, host.StateStarting, host.StateReady)
		st = e.status("a")
		if st.Retry.CircuitOpen || st.Retry.Attempts != 0 || st.Retry.Failures != 0 || !st.Retry.NextAttempt.IsZero() {
			t.Fatalf("after a successful probe: %+v", st.Retry)
		}
		e.mustCall("a")
	})
}

// TestFailedProbesDoubleTheCooldown: once a crash loop opened the circuit, every failed
// probe reopens it with a doubled cool-down, even when the crashes that opened it have
// left the window.
func TestFailedProbesDoubleTheCooldown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, nil)
		e.install(def("a"))
		e.mustCall("a")
		for range host.DefaultCircuitThreshold {
			e.d.Last("a").Crash(nil)
			if _, err := e.call("a"); err != nil && !errors.Is(err, host.ErrUnavailable) {
				t.Fatal(err)
			}
		}
		e.wantState("a", host.StateFailed)
		e.d.Server("a").Set(func(b *hosttest.Behavior) { b.DialErr = errors.New("still broken") })
		lo, hi := 24*time.Second, 36*time.Second
		for probe := range 4 {
			d := within(t, e.status("a"), lo, hi)
			dials := e.d.Dials("a")
			advance(d)
			if e.d.Dials("a") != dials+1 {
				t.Fatalf("probe %d: %d dials at the cool-down's end, want 1", probe+1, e.d.Dials("a")-dials)
			}
			if st := e.status("a"); st.State != host.StateFailed || !st.Retry.CircuitOpen {
				t.Fatalf("probe %d failed but the server is %s (circuit open %v)", probe+1, st.State, st.Retry.CircuitOpen)
			}
			lo, hi = 2*lo, 2*hi
		}
	})
}

func TestFailedStartsOpenCircuit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, nil)
		e.d.Server("a").Set(func(b *hosttest.Behavior) { b.DialErr = errors.New("command not found") })
		e.install(def("a"))
		_, err := e.call("a")
		if !errors.Is(err, host.ErrStartFailed) {
			t.Fatalf("first call: %v", err)
		}
		// Retries go on by themselves, backing off (0.5+1+2+4 s ±50 %), until the
		// circuit opens.
		advance(20 * time.Second)
		if n := e.d.Dials("a"); n != host.DefaultCircuitThreshold {
			t.Fatalf("dials %d, want %d before the circuit opens", n, host.DefaultCircuitThreshold)
		}
		e.wantPath("a", host.StateStarting, host.StateRestarting, host.StateStarting, host.StateFailed)
		start := time.Now()
		if _, err := e.call("a"); !errors.Is(err, host.ErrUnavailable) || time.Since(start) != 0 {
			t.Fatalf("call with the circuit open: %v", err)
		}
		// No retry storm: one probe per cool-down (30s, 60s, 120s … ±20 %).
		advance(10 * time.Minute)
		if n := e.d.Dials("a") - host.DefaultCircuitThreshold; n < 3 || n > 5 {
			t.Fatalf("%d probes in 10 min, want 3-5", n)
		}
		// An explicit restart tries at once.
		dials := e.d.Dials("a")
		e.d.Server("a").Set(func(b *hosttest.Behavior) { b.DialErr = nil })
		if err := e.h.Restart("a"); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if e.d.Dials("a") != dials+1 {
			t.Fatal("restart did not dial")
		}
		e.wantState("a", host.StateReady)
	})
}

func TestJitterSpreadsRestarts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, nil)
		const n = 20
		for i := range n {
			e.install(def(fmt.Sprint("s", i)))
			e.mustCall(fmt.Sprint("s", i))
		}
		for i := range n {
			e.d.Last(fmt.Sprint("s", i)).Crash(nil)
		}
		synctest.Wait()
		at := map[time.Time]bool{}
		for i := range n {
			at[e.status(fmt.Sprint("s", i)).Retry.NextAttempt] = true
		}
		if len(at) < n/2 {
			t.Fatalf("%d servers crashing together retry at only %d distinct times", n, len(at))
		}
	})
}

var errUnauthorized = fmt.Errorf("HTTP 401 (WWW-Authenticate: Bearer): %w", host.ErrAuthRequired)

func TestAuthRequiredAtStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, nil)
		e.d.Server("a").Set(func(b *hosttest.Behavior) { b.DialErr = errUnauthorized })
		e.install(def("a"))
		_, err := e.call("a")
		if !errors.Is(err, host.ErrAuthRequired) {
			t.Fatalf("call: %v", err)
		}
		e.wantPath("a", host.StateNotStarted, host.StateStarting, host.StateAuthRequired)
		st := e.status("a")
		if st.Reason != host.ReasonAuthRequired || st.LastError != errUnauthorized.Error() || !st.Retry.NextAttempt.IsZero() {
			t.Fatalf("status: %+v", st)
		}
		// No retries, however long, and calls are refused at once.
		advance(24 * time.Hour)
		start := time.Now()
		if _, err := e.call("a"); !errors.Is(err, host.ErrAuthRequired) || time.Since(start) != 0 {
			t.Fatalf("call while auth_required: %v", err)
		}
		if n := e.d.Dials("a"); n != 1 {
			t.Fatalf("dials %d in a day, want 1 (no retry storm)", n)
		}
		// The same definition again changes nothing.
		if c, err := e.h.Update(context.Background(), def("a")); err != nil || c != host.ChangeUnchanged {
			t.Fatalf("Update(same): %s %v", c, err)
		}
		synctest.Wait()
		if e.d.Dials("a") != 1 {
			t.Fatal("an unchanged definition retried")
		}
		// New credentials (a new fingerprint) are tried at once.
		e.d.Server("a").Set(func(b *hosttest.Behavior) { b.DialErr = nil })
		d := def("a")
		d.Fingerprint = "sha256:a-2"
		d.Config = "new token"
		if c, err := e.h.Update(context.Background(), d); err != nil || c != host.ChangeUpdated {
			t.Fatalf("Update(new fingerprint): %s %v", c, err)
		}
		synctest.Wait()
		e.wantPath("a", host.StateAuthRequired, host.StateStarting, host.StateReady)
		if cfg := e.d.Last("a").Config; cfg != "new token" {
			t.Fatalf("dialled with config %v", cfg)
		}
	})
}

func TestAuthRequiredMidSession(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, nil)
		e.install(def("a"))
		e.mustCall("a")
		e.d.Server("a").Set(func(b *hosttest.Behavior) {
			b.Handler = func(context.Context, string, json.RawMessage) (json.RawMessage, error) { return nil, errUnauthorized }
		})
		_, err := e.call("a")
		if !errors.Is(err, host.ErrAuthRequired) {
			t.Fatalf("call: %v", err)
		}
		e.wantPath("a", host.StateReady, host.StateAuthRequired)
		if !e.d.Last("a").Closed() {
			t.Fatal("session that refused our credentials is still open")
		}
		advance(time.Hour)
		if e.d.Dials("a") != 1 {
			t.Fatal("retried while auth_required")
		}
		// An explicit restart tries again (and the upstream now accepts).
		e.d.Server("a").Set(func(b *hosttest.Behavior) { b.Handler = nil })
		if err := e.h.Restart("a"); err != nil {
			t.Fatal(err)
		}
		e.mustCall("a")
		e.wantPath("a", host.StateAuthRequired, host.StateStarting, host.StateReady)
	})
}

func TestHealthSlowIsDegraded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, func(o *host.Options) { o.IdleTimeout = -1 })
		e.install(def("a"))
		e.mustCall("a")
		e.d.Server("a").Set(func(b *hosttest.Behavior) { b.PingDelay = 3 * time.Second })
		advance(host.DefaultHealthInterval + 3*time.Second)
		e.wantPath("a", host.StateReady, host.StateDegraded)
		st := e.status("a")
		if st.Reason != host.ReasonPingSlow || !st.Live {
			t.Fatalf("slow ping: %+v", st)
		}
		e.mustCall("a") // degraded still serves
		e.d.Server("a").Set(func(b *hosttest.Behavior) { b.PingDelay = 0 })
		advance(host.DefaultHealthInterval)
		e.wantPath("a", host.StateDegraded, host.StateReady)
		if st := e.status("a"); st.Reason != host.ReasonRecovered {
			t.Fatalf("recovered: %+v", st)
		}
		if e.d.Dials("a") != 1 {
			t.Fatal("a slow server was restarted")
		}
	})
}

func TestHealthFailuresRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, func(o *host.Options) { o.IdleTimeout = -1 })
		e.install(def("a"))
		e.mustCall("a")
		first := e.d.Last("a")
		e.d.Server("a").Set(func(b *hosttest.Behavior) { b.PingHang = true })
		// Each ping waits the 10 s timeout; two failures are degraded, the third restarts.
		advance(host.DefaultHealthInterval + host.DefaultHealthTimeout)
		e.wantPath("a", host.StateReady, host.StateDegraded)
		if st := e.status("a"); st.Reason != host.ReasonPingFailed || st.LastError == "" {
			t.Fatalf("failed ping: %+v", st)
		}
		e.d.Server("a").Set(func(b *hosttest.Behavior) { b.PingHang = false; b.PingErr = errors.New("broken pipe") })
		advance(host.DefaultHealthInterval)
		e.wantState("a", host.StateDegraded)
		advance(host.DefaultHealthInterval)
		e.d.Server("a").Set(func(b *hosttest.Behavior) { b.PingErr = nil })
		advance(time.Second)
		e.wantPath("a", host.StateDegraded, host.StateRestarting, host.StateStarting, host.StateReady)
		if !first.Closed() || e.d.Dials("a") != 2 {
			t.Fatalf("unhealthy session closed %v, dials %d", first.Closed(), e.d.Dials("a"))
		}
		if st := e.status("a"); st.Retry.Attempts != 1 {
			t.Fatalf("a health restart counts as a failure: %+v", st.Retry)
		}
	})
}
