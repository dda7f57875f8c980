package host_test

import (
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/toolgate/toolgate/internal/host"
	"github.com/toolgate/toolgate/internal/host/hosttest"
)

// Warm starts a lazy server in the background; calls during the start wait for that
// one dial, and warming a running server does nothing.
func TestWarmStartsInTheBackground(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, nil)
		e.d.Server("a").Set(func(b *hosttest.Behavior) { b.DialDelay = 2 * time.Second })
		e.install(def("a"))
		e.h.Warm("a") // returns at once: the dial takes 2 s
		synctest.Wait()
		e.wantState("a", host.StateStarting)
		if st := e.status("a"); st.Reason != host.ReasonWarm {
			t.Fatalf("reason %s, want %s", st.Reason, host.ReasonWarm)
		}
		var wg sync.WaitGroup
		for range 10 {
			wg.Go(func() { e.mustCall("a") })
		}
		e.h.Warm("a")
		wg.Wait()
		for range 3 {
			e.h.Warm("a")
		}
		synctest.Wait()
		if n := e.d.Dials("a"); n != 1 {
			t.Fatalf("a warm, 10 calls during it and 4 more warms dialled %d times, want 1", n)
		}
		e.wantPath("a", host.StateNotStarted, host.StateStarting, host.StateReady)
		// A warmed server nobody calls stops when idle, as any other.
		e.idle()
		e.wantState("a", host.StateStopped)
		e.h.Warm("a")
		advance(3 * time.Second)
		e.wantState("a", host.StateReady)
		if n := e.d.Dials("a"); n != 2 {
			t.Fatalf("warm after an idle stop: %d dials, want 2", n)
		}
	})
}

// Warm never starts what a call could not use, nor what belongs to a caller session.
func TestWarmLeavesAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, oneFailureOpens)
		d := def("sess")
		d.Isolation = host.IsolationSession
		e.install(d)
		d = def("off")
		d.Disabled = true
		e.install(d)
		e.install(def("a"))
		e.authFail() // a: auth_required
		e.wantState("a", host.StateAuthRequired)
		dials := e.d.Dials("a")
		for _, n := range []string{"sess", "off", "a", "unknown"} {
			e.h.Warm(n)
		}
		synctest.Wait()
		if n := e.d.Dials("sess") + e.d.Dials("off"); n != 0 {
			t.Fatalf("warming a session-isolated or disabled server dialled %d times", n)
		}
		if n := e.d.Dials("a"); n != dials {
			t.Fatalf("warming an auth_required server dialled again (%d → %d)", dials, n)
		}
		e.wantState("sess", host.StateNotStarted)
		e.wantState("off", host.StateDisabled)
		e.wantState("a", host.StateAuthRequired)
	})
}
