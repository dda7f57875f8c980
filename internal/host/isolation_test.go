package host_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/toolgate/toolgate/internal/host"
	"github.com/toolgate/toolgate/internal/host/hosttest"
)

func TestCrashMidCallFailsOnlyThatServer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, nil)
		for _, n := range []string{"a", "b"} {
			e.install(def(n))
			e.mustCall(n)
			e.d.Server(n).Set(func(b *hosttest.Behavior) { b.CallDelay = time.Minute })
		}
		type result struct {
			err  error
			took time.Duration
		}
		call := func(name string) chan result {
			ch := make(chan result, 1)
			go func() {
				start := time.Now()
				_, err := e.call(name)
				ch <- result{err, time.Since(start)}
			}()
			return ch
		}
		a1, a2, b := call("a"), call("a"), call("b")
		advance(time.Second)
		e.d.Last("a").Crash(errors.New("killed by signal 9"))
		for _, ch := range []chan result{a1, a2} {
			r := <-ch
			if !errors.Is(r.err, host.ErrCrashed) || r.took != time.Second {
				t.Fatalf("call on the crashed server: %v after %s; want ErrCrashed at the crash (1s)", r.err, r.took)
			}
			if !errors.Is(r.err, hosttest.ErrEnded) {
				t.Fatalf("crash error does not wrap the session's: %v", r.err)
			}
		}
		synctest.Wait()
		if st := e.status("b"); st.State != host.StateReady || st.InFlight != 1 {
			t.Fatalf("the other server: %+v", st)
		}
		if r := <-b; r.err != nil || r.took != time.Minute {
			t.Fatalf("call on the healthy server: %v after %s", r.err, r.took)
		}
		if e.d.Dials("b") != 1 {
			t.Fatal("the healthy server was restarted")
		}
	})
}

func TestHungUpstreamDelaysNoOne(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, nil)
		e.install(def("hung"))
		e.install(def("ok"))
		e.install(def("hungdial"))
		e.mustCall("hung")
		e.mustCall("ok")
		synctest.Wait()
		e.d.Server("hung").Set(func(b *hosttest.Behavior) {
			b.CallHang, b.PingHang, b.ListHang, b.CloseHang = true, true, true, true
		})
		e.d.Server("hungdial").Set(func(b *hosttest.Behavior) { b.DialHang = true })
		hungDone := make(chan error, 3)
		go func() { _, err := e.call("hung"); hungDone <- err }()
		go func() { _, err := e.call("hungdial"); hungDone <- err }()
		go func() { _, err := e.h.RefreshCatalog(context.Background(), "hung"); hungDone <- err }()
		synctest.Wait()

		start := time.Now()
		for range 10 {
			e.mustCall("ok")
		}
		if _, err := e.h.RefreshCatalog(context.Background(), "ok"); err != nil {
			t.Fatal(err)
		}
		for _, n := range []string{"hung", "ok", "hungdial"} {
			if _, ok := e.h.Status(n); !ok {
				t.Fatal(n)
			}
			e.h.Catalog(n)
		}
		if n := len(e.h.Snapshot().Servers); n != 3 {
			t.Fatalf("snapshot has %d servers", n)
		}
		if d := time.Since(start); d != 0 {
			t.Fatalf("the healthy server's calls, statuses, catalogues and the snapshot took %s while others hung", d)
		}

		// Shutdown is bounded by the hung server's own stop timeout.
		start = time.Now()
		if err := e.h.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d != host.DefaultStopTimeout {
			t.Fatalf("Shutdown took %s, want the stop timeout %s", d, host.DefaultStopTimeout)
		}
		for range 3 {
			if err := <-hungDone; err == nil {
				t.Fatal("a hung operation succeeded")
			}
		}
	})
}

func TestSharedServerOneSession(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, nil)
		e.install(def("a"))
		for _, k := range []string{"k1", "k2", "k3", ""} {
			if _, err := e.callKey("a", k); err != nil {
				t.Fatal(err)
			}
		}
		if e.d.Dials("a") != 1 || e.d.Last("a").Calls() != 4 {
			t.Fatalf("dials %d, calls %d; want one shared session with 4 calls", e.d.Dials("a"), e.d.Last("a").Calls())
		}
		e.h.EndSession("k1")
		synctest.Wait()
		if e.d.Last("a").Closed() {
			t.Fatal("ending a caller session closed the shared session")
		}
	})
}

func TestSessionIsolation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, func(o *host.Options) { o.MaxSessions = 2 })
		d := def("browser")
		d.Isolation = host.IsolationSession
		e.install(d)
		for _, k := range []string{"k1", "k2", "k1", "k2", "k1"} {
			if _, err := e.callKey("browser", k); err != nil {
				t.Fatal(err)
			}
		}
		ss := e.d.Sessions("browser")
		if len(ss) != 2 || ss[0].Key != "k1" || ss[1].Key != "k2" || ss[0].Calls() != 3 || ss[1].Calls() != 2 {
			t.Fatalf("sessions: %d", len(ss))
		}
		if st := e.status("browser"); st.Connections != 2 || st.State != host.StateReady {
			t.Fatalf("status: %+v", st)
		}
		// Bounded in number.
		if _, err := e.callKey("browser", "k3"); !errors.Is(err, host.ErrSessionLimit) {
			t.Fatalf("third session: %v", err)
		}
		// A per-session connection is not idle.
		advance(2 * host.DefaultIdleTimeout)
		if e.d.Open("browser") != 2 {
			t.Fatal("per-session connections were idle-stopped")
		}
		e.h.EndSession("k1")
		synctest.Wait()
		if !ss[0].Closed() || ss[1].Closed() {
			t.Fatal("EndSession(k1) closed the wrong connection")
		}
		e.wantState("browser", host.StateReady)
		if _, err := e.callKey("browser", "k3"); err != nil {
			t.Fatalf("a slot freed: %v", err)
		}
		e.h.EndSession("k2")
		e.h.EndSession("k3")
		e.wantPath("browser", host.StateReady, host.StateStopping, host.StateStopped)
		if e.d.Open("browser") != 0 {
			t.Fatal("connections left open")
		}
	})
}

func TestSessionCrashRestartsOnlyItsConnection(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, nil)
		d := def("p")
		d.Isolation = host.IsolationSession
		e.install(d)
		for _, k := range []string{"k1", "k2"} {
			if _, err := e.callKey("p", k); err != nil {
				t.Fatal(err)
			}
		}
		ss := e.d.Sessions("p")
		ss[0].Crash(nil)
		synctest.Wait()
		if ss[1].Closed() {
			t.Fatal("one caller's crash closed another's connection")
		}
		e.wantState("p", host.StateReady)
		if _, err := e.callKey("p", "k1"); err != nil {
			t.Fatal(err)
		}
		if got := e.d.Last("p").Key; got != "k1" || len(e.d.Sessions("p")) != 3 {
			t.Fatalf("restarted key %q, %d sessions", got, len(e.d.Sessions("p")))
		}
	})
}

func TestIsolationChange(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, nil)
		d := def("p")
		d.Isolation = host.IsolationSession
		e.install(d)
		e.d.Server("p").Set(func(b *hosttest.Behavior) { b.CloseDelay = 5 * time.Second })
		for _, k := range []string{"k1", "k2"} {
			if _, err := e.callKey("p", k); err != nil {
				t.Fatal(err)
			}
		}
		d.Isolation = host.IsolationShared
		if c, err := e.h.Update(context.Background(), d); err != nil || c != host.ChangeUpdated {
			t.Fatal(c, err)
		}
		// The shared connection starts only after the per-session ones are gone.
		if _, err := e.callKey("p", "k1"); err != nil {
			t.Fatal(err)
		}
		if e.d.MaxOpen("p") != 2 || e.d.Last("p").Key != "" {
			t.Fatalf("max open %d, last key %q", e.d.MaxOpen("p"), e.d.Last("p").Key)
		}
	})
}

func TestShutdownClosesInParallel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, nil)
		for i := range 10 {
			n := fmt.Sprint("s", i)
			e.install(def(n))
			e.mustCall(n)
			e.d.Server(n).Set(func(b *hosttest.Behavior) { b.CloseDelay = 5 * time.Second })
		}
		start := time.Now()
		if err := e.h.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d != 5*time.Second {
			t.Fatalf("shutting down 10 servers that each take 5s to close took %s", d)
		}
		if n := len(e.d.Unclosed()); n != 0 {
			t.Fatalf("%d sessions open after Shutdown returned", n)
		}
		if _, err := e.call("s0"); !errors.Is(err, host.ErrShutdown) {
			t.Fatalf("call after shutdown: %v", err)
		}
		if _, err := e.h.Install(context.Background(), def("new")); !errors.Is(err, host.ErrShutdown) {
			t.Fatalf("install after shutdown: %v", err)
		}
		if err := e.h.Restart("s0"); !errors.Is(err, host.ErrShutdown) {
			t.Fatalf("restart after shutdown: %v", err)
		}
		// A second Shutdown returns at once.
		if err := e.h.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		for i := range 10 {
			if st := e.status(fmt.Sprint("s", i)); st.State != host.StateStopped {
				t.Fatalf("after shutdown: %s", st.State)
			}
		}
	})
}

func TestShutdownReportsUnclosed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, nil)
		for _, n := range []string{"fast", "slow", "slower"} {
			e.install(def(n))
			e.mustCall(n)
		}
		e.d.Server("slow").Set(func(b *hosttest.Behavior) { b.CloseHang = true })
		e.d.Server("slower").Set(func(b *hosttest.Behavior) { b.CloseHang = true })
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		err := e.h.Shutdown(ctx)
		var se *host.ShutdownError
		if !errors.As(err, &se) || !slices.Equal(se.Unclosed, []string{"slow", "slower"}) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Shutdown: %v", err)
		}
		// No lock is held across a Close: the closing server answers at once.
		start := time.Now()
		if st, _ := e.h.Status("slow"); st.State != host.StateStopping {
			t.Fatalf("slow: %s", st.State)
		}
		e.h.Snapshot()
		e.h.Catalog("slow")
		if time.Since(start) != 0 {
			t.Fatal("status of a server whose Close hangs waited")
		}
		// They still close, within their stop timeout.
		advance(host.DefaultStopTimeout)
		if n := len(e.d.Unclosed()); n != 0 {
			t.Fatalf("%d sessions never closed", n)
		}
	})
}

func TestRemove(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, nil)
		e.install(def("a"))
		e.mustCall("a")
		synctest.Wait()
		if _, ok := e.cats.Get("a"); !ok {
			t.Fatal("catalogue not persisted")
		}
		e.d.Server("a").Set(func(b *hosttest.Behavior) { b.CallHang = true; b.CloseDelay = 3 * time.Second })
		inflight := make(chan error, 1)
		go func() { _, err := e.call("a"); inflight <- err }()
		synctest.Wait()
		start := time.Now()
		if err := e.h.Remove(context.Background(), "a"); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d != 3*time.Second {
			t.Fatalf("Remove returned after %s, want when the session closed (3s)", d)
		}
		if err := <-inflight; !errors.Is(err, host.ErrStopped) {
			t.Fatalf("call in flight during Remove: %v", err)
		}
		if _, ok := e.h.Status("a"); ok {
			t.Fatal("removed server still has a status")
		}
		if _, ok := e.cats.Get("a"); ok {
			t.Fatal("removed server's catalogue still persisted")
		}
		if _, err := e.call("a"); !errors.Is(err, host.ErrUnknownServer) {
			t.Fatalf("call after remove: %v", err)
		}
		synctest.Wait()
		evs := e.rec.Servers()
		if last := evs[len(evs)-1]; last.Change != host.ChangeRemoved || last.Server != "a" {
			t.Fatalf("last server event %+v", last)
		}
	})
}

// slowToClose makes "a" ready, with sessions that take 8s to close.
func slowToClose(t *testing.T) *env {
	e := newEnv(t, nil)
	e.install(def("a"))
	e.mustCall("a")
	e.d.Server("a").Set(func(b *hosttest.Behavior) { b.CloseDelay = 8 * time.Second })
	return e
}

func TestReinstallWaitsForTheOldCopy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := slowToClose(t)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if err := e.h.Remove(ctx, "a"); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Remove with a short context: %v", err)
		}
		if _, ok := e.cats.Get("a"); ok {
			t.Fatal("Remove that timed out waiting for the close left the catalogue persisted")
		}
		e.install(def("a"))
		start := time.Now()
		e.mustCall("a")
		if d := time.Since(start); d != 7*time.Second {
			t.Fatalf("the reinstalled server started after %s; want once the old copy closed (7s)", d)
		}
		if e.d.MaxOpen("a") != 1 {
			t.Fatalf("two copies of one server ran at once")
		}
	})
}

// TestRemoveTwiceWhileClosing: removed, reinstalled and removed again while the first
// copy still closes; the third copy must wait for the first, and Shutdown for both.
func TestRemoveTwiceWhileClosing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := slowToClose(t)
		expired, cancel := context.WithCancel(context.Background())
		cancel()
		_ = e.h.Remove(expired, "a")
		e.install(def("a")) // its start would wait for the first copy
		_ = e.h.Remove(expired, "a")
		e.install(def("a"))
		start := time.Now()
		e.mustCall("a")
		if d := time.Since(start); d != 8*time.Second || e.d.MaxOpen("a") != 1 {
			t.Fatalf("third copy started after %s with %d open at once; want 8s, 1", d, e.d.MaxOpen("a"))
		}
	})
	synctest.Test(t, func(t *testing.T) {
		e := slowToClose(t)
		expired, cancel := context.WithCancel(context.Background())
		cancel()
		_ = e.h.Remove(expired, "a")
		e.install(def("a"))
		_ = e.h.Remove(expired, "a")
		start := time.Now()
		if err := e.h.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d != 8*time.Second || len(e.d.Unclosed()) != 0 {
			t.Fatalf("Shutdown returned after %s with %d sessions open", d, len(e.d.Unclosed()))
		}
	})
}

func TestDisableEnable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, nil)
		e.install(def("a"))
		e.mustCall("a")
		if err := e.h.SetEnabled("a", false); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if _, err := e.call("a"); !errors.Is(err, host.ErrDisabled) || time.Since(start) != 0 {
			t.Fatalf("call while disabled: %v", err)
		}
		e.wantPath("a", host.StateReady, host.StateStopping, host.StateDisabled)
		if st := e.status("a"); st.Enabled || st.Reason != host.ReasonStopped {
			t.Fatalf("disabled status %+v", st)
		}
		if err := e.h.SetEnabled("a", false); err != nil {
			t.Fatal(err)
		}
		if err := e.h.Restart("a"); !errors.Is(err, host.ErrDisabled) {
			t.Fatalf("restart while disabled: %v", err)
		}
		if err := e.h.SetEnabled("a", true); err != nil {
			t.Fatal(err)
		}
		e.wantPath("a", host.StateDisabled, host.StateStopped)
		if e.d.Dials("a") != 1 {
			t.Fatal("enabling a lazy server started it")
		}
		e.mustCall("a")
		var policy int
		for _, ev := range e.rec.Servers() {
			if ev.Change == host.ChangePolicy {
				policy++
			}
		}
		if policy != 2 {
			t.Fatalf("%d policy events, want 2 (the repeated disable is no change)", policy)
		}
	})
}

func TestUpdate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, nil)
		e.install(def("a"))
		e.mustCall("a")
		if c, err := e.h.Install(context.Background(), def("a")); err != nil || c != host.ChangeUnchanged {
			t.Fatalf("reinstall of the same definition: %s %v", c, err)
		}
		synctest.Wait()
		if e.d.Dials("a") != 1 {
			t.Fatal("an unchanged definition restarted the server")
		}
		d := def("a")
		d.Fingerprint = "sha256:a-2"
		d.Config = 2
		if c, err := e.h.Install(context.Background(), d); err != nil || c != host.ChangeUpdated {
			t.Fatalf("install of a changed definition: %s %v", c, err)
		}
		e.mustCall("a")
		e.wantPath("a", host.StateReady, host.StateRestarting, host.StateStarting, host.StateReady)
		if e.d.Dials("a") != 2 || e.d.Last("a").Config != 2 || e.d.MaxOpen("a") != 1 {
			t.Fatalf("dials %d config %v max open %d", e.d.Dials("a"), e.d.Last("a").Config, e.d.MaxOpen("a"))
		}
		if st := e.status("a"); st.Fingerprint != "sha256:a-2" {
			t.Fatalf("fingerprint %s", st.Fingerprint)
		}
		// A changed definition of a server that is not running does not start it.
		e.install(def("lazy"))
		d = def("lazy")
		d.Fingerprint = "sha256:lazy-2"
		if _, err := e.h.Update(context.Background(), d); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if e.d.Dials("lazy") != 0 {
			t.Fatal("updating a lazy server started it")
		}
		// Becoming required starts it.
		d.Required = true
		if _, err := e.h.Update(context.Background(), d); err != nil {
			t.Fatal(err)
		}
		e.wantState("lazy", host.StateReady)
	})
}
