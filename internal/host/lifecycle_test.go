package host_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/toolgate/toolgate/internal/host"
	"github.com/toolgate/toolgate/internal/host/hosttest"
)

func TestLazyStartSingleFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, nil)
		e.d.Server("a").Set(func(b *hosttest.Behavior) { b.DialDelay = 2 * time.Second })
		e.install(def("a"))
		synctest.Wait()
		if n := e.d.Dials("a"); n != 0 {
			t.Fatalf("installing dialled %d times; start is lazy", n)
		}
		e.wantState("a", host.StateNotStarted)

		var wg sync.WaitGroup
		errs := make(chan error, 50)
		for range 50 {
			wg.Go(func() {
				_, err := e.call("a")
				errs <- err
			})
		}
		synctest.Wait()
		e.wantState("a", host.StateStarting)
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatalf("call: %v", err)
			}
		}
		if n := e.d.Dials("a"); n != 1 {
			t.Fatalf("50 concurrent first calls dialled %d times, want 1", n)
		}
		e.wantPath("a", host.StateNotStarted, host.StateStarting, host.StateReady)
		if got := e.d.Last("a").Calls(); got != 50 {
			t.Fatalf("session saw %d calls, want 50", got)
		}
		if st := e.status("a"); !st.Live || st.Connections != 1 || st.Reason != host.ReasonStarted || st.LastSeenAt.IsZero() {
			t.Fatalf("status after start: %+v", st)
		}
	})
}

func TestCallPassesBytesThrough(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, nil)
		e.install(def("a"))
		params := []byte(`{"name":"echo", "arguments": {"z":1,"a":[1,2]} }`)
		res, err := e.h.Call(context.Background(), "a", "tools/call", params, host.CallOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if want := `{"echo":` + string(params) + `}`; string(res) != want {
			t.Fatalf("result %s, want %s", res, want)
		}
	})
}

func TestUnknownServer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, nil)
		_, err := e.call("nope")
		var se *host.ServerError
		if !errors.Is(err, host.ErrUnknownServer) || !errors.As(err, &se) || se.Server != "nope" {
			t.Fatalf("call to unknown server: %v", err)
		}
		for name, f := range map[string]func() error{
			"Restart":    func() error { return e.h.Restart("nope") },
			"SetEnabled": func() error { return e.h.SetEnabled("nope", false) },
			"Remove":     func() error { return e.h.Remove(context.Background(), "nope") },
			"Update": func() error {
				_, err := e.h.Update(context.Background(), def("nope"))
				return err
			},
		} {
			if err := f(); !errors.Is(err, host.ErrUnknownServer) {
				t.Errorf("%s: %v, want ErrUnknownServer", name, err)
			}
		}
		if _, ok := e.h.Status("nope"); ok {
			t.Error("Status of unknown server ok")
		}
		if _, ok := e.h.Catalog("nope"); ok {
			t.Error("Catalog of unknown server ok")
		}
	})
}

func TestInvalidDefinitions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, nil)
		long := make([]byte, 129)
		for i := range long {
			long[i] = 'x'
		}
		for _, d := range []host.Definition{
			{Name: "", Fingerprint: "f"},
			{Name: string(long), Fingerprint: "f"},
			{Name: "a b", Fingerprint: "f"},
			{Name: "a\x00", Fingerprint: "f"},
			{Name: "a\n", Fingerprint: "f"},
			{Name: "a", Fingerprint: ""},
			{Name: "a", Fingerprint: "f", Isolation: "per-call"},
		} {
			if _, err := e.h.Install(context.Background(), d); !errors.Is(err, host.ErrInvalidDefinition) {
				t.Errorf("Install(%+q): %v, want ErrInvalidDefinition", d.Name, err)
			}
		}
		if n := len(e.h.Snapshot().Servers); n != 0 {
			t.Fatalf("%d servers installed from invalid definitions", n)
		}
	})
}

func TestOptionsValidated(t *testing.T) {
	for name, o := range map[string]host.Options{
		"no dialer":       {},
		"negative start":  {Dialer: hosttest.NewDialer(), StartTimeout: -1},
		"jitter 1":        {Dialer: hosttest.NewDialer(), Restart: host.RestartPolicy{Jitter: 1}},
		"max < initial":   {Dialer: hosttest.NewDialer(), Restart: host.RestartPolicy{InitialInterval: time.Minute, MaxInterval: time.Second}},
		"multiplier < 1":  {Dialer: hosttest.NewDialer(), Restart: host.RestartPolicy{Multiplier: 0.5}},
		"negative limit":  {Dialer: hosttest.NewDialer(), MaxSessions: -1},
		"negative window": {Dialer: hosttest.NewDialer(), Restart: host.RestartPolicy{Window: -time.Second}},
	} {
		if _, err := host.New(o); err == nil {
			t.Errorf("%s: New accepted %+v", name, o)
		}
	}
}

func TestRequiredStartsAtInstall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := hosttest.NewDialer()
		rec := hosttest.NewRecorder()
		req := def("req")
		req.Required = true
		h, err := host.New(host.Options{Dialer: d, Observer: rec, Servers: []host.Definition{req, def("lazy")}})
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if d.Dials("req") != 1 || d.Dials("lazy") != 0 {
			t.Fatalf("dials: req %d, lazy %d; want 1, 0", d.Dials("req"), d.Dials("lazy"))
		}
		if st, _ := h.Status("req"); st.State != host.StateReady {
			t.Fatalf("required server: %s", st.State)
		}
		// Required servers are never idle.
		advance(time.Hour)
		if st, _ := h.Status("req"); st.State != host.StateReady {
			t.Fatalf("required server after an hour: %s", st.State)
		}
		if err := h.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if len(d.Unclosed()) != 0 {
			t.Fatal("sessions left open")
		}
	})
}

func TestIdleStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, nil)
		e.install(def("a"))
		e.mustCall("a")
		advance(host.DefaultIdleTimeout - time.Minute)
		e.mustCall("a") // resets the idle clock
		advance(host.DefaultIdleTimeout - time.Second)
		e.wantState("a", host.StateReady)
		advance(idleSlack(host.DefaultIdleTimeout) + time.Second)
		e.wantPath("a", host.StateReady, host.StateStopping, host.StateStopped)
		if st := e.status("a"); st.Reason != host.ReasonStopped || st.Connections != 0 {
			t.Fatalf("after idle stop: %+v", st)
		}
		if e.d.Open("a") != 0 {
			t.Fatal("idle session not closed")
		}
		// The next call starts it again.
		e.mustCall("a")
		e.wantPath("a", host.StateStopped, host.StateStarting, host.StateReady)
		if e.d.Dials("a") != 2 {
			t.Fatalf("dials %d, want 2", e.d.Dials("a"))
		}
	})
}

func TestIdleNotWhileCallInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, nil)
		d := def("a")
		d.CallTimeout = -1 // a 25-minute call, longer than any default deadline
		e.install(d)
		e.mustCall("a")
		e.d.Server("a").Set(func(b *hosttest.Behavior) { b.CallDelay = 25 * time.Minute })
		done := make(chan error)
		go func() { _, err := e.call("a"); done <- err }()
		advance(20 * time.Minute)
		e.wantState("a", host.StateReady)
		if st := e.status("a"); st.InFlight != 1 {
			t.Fatalf("in flight %d, want 1", st.InFlight)
		}
		advance(5 * time.Minute)
		if err := <-done; err != nil {
			t.Fatalf("long call: %v", err)
		}
		// Idle counts from the end of the last call.
		advance(host.DefaultIdleTimeout - time.Second)
		e.wantState("a", host.StateReady)
		advance(idleSlack(host.DefaultIdleTimeout) + time.Second)
		e.wantState("a", host.StateStopped)
	})
}

func TestIdleTimeoutOption(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, func(o *host.Options) { o.IdleTimeout = -1 })
		e.install(def("a"))
		e.mustCall("a")
		advance(24 * time.Hour)
		e.wantState("a", host.StateReady)
	})
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, func(o *host.Options) { o.IdleTimeout = time.Minute })
		e.install(def("a"))
		e.mustCall("a")
		advance(time.Minute - time.Second)
		e.wantState("a", host.StateReady)
		advance(idleSlack(time.Minute) + time.Second)
		e.wantState("a", host.StateStopped)
	})
}

func TestCallWaitsForStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, nil)
		e.d.Server("a").Set(func(b *hosttest.Behavior) { b.DialDelay = 10 * time.Second })
		e.install(def("a"))
		start := time.Now()
		e.mustCall("a")
		if took := time.Since(start); took != 10*time.Second {
			t.Fatalf("call returned after %s, want when the start finished (10s)", took)
		}
	})
}

func TestStartTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, nil)
		e.d.Server("a").Set(func(b *hosttest.Behavior) { b.DialHang = true })
		e.install(def("a"))
		start := time.Now()
		_, err := e.call("a")
		if took := time.Since(start); took != host.DefaultStartTimeout {
			t.Fatalf("call returned after %s, want the start timeout %s", took, host.DefaultStartTimeout)
		}
		// The call's wait and the dial's deadline end at the same instant: either
		// error says the start did not finish.
		if !errors.Is(err, host.ErrStartFailed) && !errors.Is(err, host.ErrStartTimeout) {
			t.Fatalf("hung start: %v", err)
		}
		e.wantPath("a", host.StateNotStarted, host.StateStarting, host.StateRestarting)

		// A caller's own context bounds the wait too.
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		start = time.Now()
		_, err = e.h.Call(ctx, "a", "tools/call", nil, host.CallOptions{})
		if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) != time.Second {
			t.Fatalf("call with 1s context: %v after %s", err, time.Since(start))
		}
	})
}
