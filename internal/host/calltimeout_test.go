package host_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/toolgate/toolgate/internal/host"
	"github.com/toolgate/toolgate/internal/host/hosttest"
)

// A call the upstream never answers fails ErrTimeout at the definition's
// CallTimeout, its context cancelled upstream with a deadline cause (the upstream
// session then sends notifications/cancelled, reason "timed out"). The connection is
// then pinged: one that answers keeps running; one that answers nothing at all is
// restarted at once (after the ping's own timeout), not after Health.Failures pings.
func TestCallTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, func(o *host.Options) { o.IdleTimeout = -1 })
		var mu sync.Mutex
		var causes []error
		e.d.Server("a").Set(func(b *hosttest.Behavior) {
			b.Handler = func(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
				<-ctx.Done() // never answers
				mu.Lock()
				causes = append(causes, context.Cause(ctx))
				mu.Unlock()
				return nil, ctx.Err()
			}
		})
		d := def("a")
		d.CallTimeout = 5 * time.Second
		e.install(d)

		// 1. It answers pings: only the call fails.
		start := time.Now()
		_, err := e.call("a")
		if took := time.Since(start); took != 5*time.Second || !errors.Is(err, host.ErrTimeout) {
			t.Fatalf("hung call: %v after %s, want ErrTimeout after 5s", err, took)
		}
		var se *host.ServerError
		if !errors.As(err, &se) || se.Server != "a" {
			t.Fatalf("error %#v is not a *host.ServerError of a", err)
		}
		synctest.Wait()
		mu.Lock()
		if len(causes) != 1 || !errors.Is(causes[0], context.DeadlineExceeded) {
			t.Fatalf("the upstream call's context ended with %v, want a deadline", causes)
		}
		mu.Unlock()
		advance(time.Minute)
		if n := e.d.Dials("a"); n != 1 || e.d.Last("a").Pings() == 0 {
			t.Fatalf("after a timeout with pings answered: %d dials, %d pings; want 1 dial and the probe", n, e.d.Last("a").Pings())
		}
		e.wantState("a", host.StateReady)

		// 2. It answers nothing at all: the probe's ping times out and it is restarted.
		e.d.Server("a").Set(func(b *hosttest.Behavior) { b.PingHang = true })
		start = time.Now()
		if _, err := e.call("a"); !errors.Is(err, host.ErrTimeout) || time.Since(start) != 5*time.Second {
			t.Fatalf("hung call on a hung upstream: %v after %s", err, time.Since(start))
		}
		advance(host.DefaultHealthTimeout)
		st := e.status("a")
		if st.State != host.StateRestarting || st.Reason != host.ReasonHealthFailed || !strings.Contains(st.LastError, "no answer within 5s") {
			t.Fatalf("%s after the timeout: %s %s %q, want restarting, health_check_failed", host.DefaultHealthTimeout, st.State, st.Reason, st.LastError)
		}
		advance(time.Second) // the restart's backoff (500 ms ± 50 %)
		if n := e.d.Dials("a"); n != 2 {
			t.Fatalf("%d dials, want a restart (2)", n)
		}
		e.wantPath("a", host.StateReady, host.StateRestarting, host.StateStarting, host.StateReady)
	})
}

// Without CallTimeout a call gets DefaultCallTimeout; a negative one sets none.
func TestCallTimeoutDefaultAndNone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, func(o *host.Options) { o.IdleTimeout = -1 })
		e.d.Server("a").Set(func(b *hosttest.Behavior) { b.CallHang = true })
		e.d.Server("b").Set(func(b *hosttest.Behavior) { b.CallHang = true })
		e.install(def("a"))
		none := def("b")
		none.CallTimeout = -1
		e.install(none)
		start := time.Now()
		if _, err := e.call("a"); !errors.Is(err, host.ErrTimeout) || time.Since(start) != host.DefaultCallTimeout {
			t.Fatalf("default: %v after %s, want ErrTimeout after %s", err, time.Since(start), host.DefaultCallTimeout)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Hour)
		defer cancel()
		start = time.Now()
		_, err := e.h.Call(ctx, "b", "tools/call", nil, host.CallOptions{})
		if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, host.ErrTimeout) || time.Since(start) != 2*time.Hour {
			t.Fatalf("no deadline: %v after %s, want the caller's own 2h deadline", err, time.Since(start))
		}
	})
}

// Time the upstream waits on the client (its own request, answered by the caller)
// does not count against the call's deadline.
func TestCallTimeoutPausedWhileTheUpstreamAsks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, func(o *host.Options) { o.IdleTimeout = -1 })
		d := def("a")
		d.CallTimeout = 10 * time.Second
		e.install(d)
		// The fake upstream works 6 s, asks the client (answered after an hour), then
		// works on for work s before it answers.
		var work time.Duration
		e.d.Server("a").Set(func(b *hosttest.Behavior) {
			b.HandlerOpts = func(ctx context.Context, method string, params json.RawMessage, opts host.CallOptions) (json.RawMessage, error) {
				sleep := func(d time.Duration) error {
					select {
					case <-time.After(d):
						return nil
					case <-ctx.Done():
						return ctx.Err()
					}
				}
				if err := sleep(6 * time.Second); err != nil {
					return nil, err
				}
				if _, err := opts.Request(ctx, "elicitation/create", nil); err != nil {
					return nil, err
				}
				if err := sleep(work); err != nil {
					return nil, err
				}
				return json.RawMessage(`{"done":true}`), nil
			}
		})
		ask := host.CallOptions{Request: func(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
			time.Sleep(time.Hour) // a person taking their time
			return json.RawMessage(`{}`), nil
		}}
		for _, c := range []struct {
			work time.Duration
			ok   bool
		}{{3999 * time.Millisecond, true}, {4001 * time.Millisecond, false}} {
			work = c.work
			start := time.Now()
			_, err := e.h.Call(context.Background(), "a", "tools/call", nil, ask)
			took := time.Since(start)
			switch {
			case c.ok && (err != nil || took != time.Hour+6*time.Second+c.work):
				t.Errorf("6 s + an hour asking + %s: %v after %s, want the answer", c.work, err, took)
			case !c.ok && (!errors.Is(err, host.ErrTimeout) || took != time.Hour+10*time.Second):
				t.Errorf("6 s + an hour asking + %s: %v after %s, want ErrTimeout at 1h10s", c.work, err, took)
			}
		}
	})
}
