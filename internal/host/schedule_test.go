package host_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/toolgate/toolgate/internal/host"
	"github.com/toolgate/toolgate/internal/host/hosttest"
)

// runSchedule interprets prog as a sequence of events — install, remove, restart,
// enable/disable, update, calls on any caller session, session ends, crashes, upstream
// misbehaviour (failing, hanging, slow dials, pings, closes, refused credentials),
// list_changed, catalogue refreshes, time passing — applied to three servers (two
// shared, one per-session), and checks after every event and at the end:
//   - a shared server never has two sessions open at once (across reinstalls too);
//   - every state is one of the ten, every transition documented and chained (the
//     Recorder), Live iff ready or degraded, a shared server has at most one
//     connection;
//   - every error a call gets is the host's *ServerError or the caller's context's;
//   - after Shutdown every dialled session was closed exactly once and every call
//     returned.
func runSchedule(t *testing.T, prog []byte) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, func(o *host.Options) {
			o.IdleTimeout = time.Minute
			o.StartTimeout = 10 * time.Second
			o.StopTimeout = 3 * time.Second
			o.MaxSessions = 2
			o.Health = host.HealthPolicy{Interval: 5 * time.Second, Timeout: 2 * time.Second, Slow: time.Second, Failures: 2}
			o.Restart.CooldownInitial = 5 * time.Second
		})
		names := []string{"s1", "s2", "p1"}
		shared := map[string]bool{"s1": true, "s2": true}
		keys := []string{"", "k1", "k2", "k3"}
		version := map[string]int{}
		required := map[string]bool{}
		var calls sync.WaitGroup
		badErr := make(chan error, 1024)

		definition := func(n string) host.Definition {
			d := host.Definition{Name: n, Fingerprint: fmt.Sprintf("sha256:%s-%d", n, version[n]), Required: required[n]}
			if !shared[n] {
				d.Isolation = host.IsolationSession
			}
			return d
		}
		checkErr := func(err error) {
			var se *host.ServerError
			if err != nil && !errors.As(err, &se) && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
				badErr <- err
			}
		}
		for i := 0; i+2 < len(prog); i += 3 {
			op, a, b := prog[i]%16, int(prog[i+1]), int(prog[i+2])
			n := names[a%len(names)]
			srv := e.d.Server(n)
			switch op {
			case 0:
				required[n] = b%4 == 0
				_, _ = e.h.Install(context.Background(), definition(n))
			case 1:
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration(b%4)*time.Second)
				_ = e.h.Remove(ctx, n)
				cancel()
			case 2:
				_ = e.h.Restart(n)
			case 3:
				_ = e.h.SetEnabled(n, b%2 == 0)
			case 4:
				if b%2 == 0 {
					version[n]++
				} else {
					required[n] = !required[n]
				}
				_, _ = e.h.Update(context.Background(), definition(n))
			case 5, 6:
				key := keys[b%len(keys)]
				calls.Go(func() {
					ctx, cancel := context.WithTimeout(context.Background(), time.Duration(1+b%20)*time.Second)
					defer cancel()
					_, err := e.h.Call(ctx, n, "tools/call", []byte(`{}`), host.CallOptions{SessionKey: key})
					checkErr(err)
				})
			case 7:
				e.h.EndSession(keys[b%len(keys)])
			case 8:
				if ss := e.d.Sessions(n); len(ss) > 0 {
					ss[b%len(ss)].Crash(nil)
				}
			case 9:
				srv.Set(func(bh *hosttest.Behavior) {
					bh.DialErr, bh.DialHang, bh.DialDelay = nil, false, 0
					switch b % 6 {
					case 1:
						bh.DialErr = errors.New("exit 1")
					case 2:
						bh.DialErr = errUnauthorized
					case 3:
						bh.DialHang = true
					case 4:
						bh.DialDelay = time.Duration(b) * 50 * time.Millisecond
					}
				})
			case 10:
				srv.Set(func(bh *hosttest.Behavior) {
					bh.PingErr, bh.PingHang, bh.PingDelay = nil, false, 0
					switch b % 4 {
					case 1:
						bh.PingErr = errors.New("broken pipe")
					case 2:
						bh.PingHang = true
					case 3:
						bh.PingDelay = 1500 * time.Millisecond
					}
				})
			case 11:
				srv.Set(func(bh *hosttest.Behavior) {
					bh.CloseDelay = time.Duration(b%5) * time.Second
					bh.CloseHang = b%7 == 0
					bh.CallDelay = time.Duration(b%3) * time.Second
					bh.CallHang = b%11 == 0
				})
			case 12, 13:
				advance(time.Duration(b) * 100 * time.Millisecond)
			case 14:
				if s := e.d.Last(n); s != nil && !s.Closed() {
					srv.Set(func(bh *hosttest.Behavior) { bh.Tools = tools(fmt.Sprint("t", b)) })
					s.Notify("notifications/tools/list_changed")
				}
			case 15:
				calls.Go(func() {
					ctx, cancel := context.WithTimeout(context.Background(), time.Duration(1+b%20)*time.Second)
					defer cancel()
					_, err := e.h.RefreshCatalog(ctx, n)
					if err != nil && !errors.Is(err, context.DeadlineExceeded) {
						var se *host.ServerError
						if !errors.As(err, &se) && !errors.Is(err, hosttest.ErrEnded) {
							badErr <- fmt.Errorf("refresh: %w", err)
						}
					}
				})
			}
			synctest.Wait()
			for _, n := range names {
				if shared[n] && e.d.MaxOpen(n) > 1 {
					t.Fatalf("step %d (op %d): shared server %s had %d sessions open at once", i/3, op, n, e.d.MaxOpen(n))
				}
				st, ok := e.h.Status(n)
				if !ok {
					continue
				}
				if !st.State.Valid() || st.Live != st.State.Live() {
					t.Fatalf("step %d: %s status %+v", i/3, n, st)
				}
				if shared[n] && st.Connections > 1 {
					t.Fatalf("step %d: shared %s has %d connections", i/3, n, st.Connections)
				}
				if st.Live && st.Connections == 0 {
					t.Fatalf("step %d: %s is %s with no connection", i/3, n, st.State)
				}
			}
			if v := e.rec.Violations(); len(v) > 0 {
				t.Fatalf("step %d (op %d): %v", i/3, op, v)
			}
		}
		if err := e.h.Shutdown(context.Background()); err != nil {
			t.Fatalf("Shutdown: %v", err)
		}
		calls.Wait() // every call returns once the host is shut down
		close(badErr)
		for err := range badErr {
			t.Errorf("unexpected error kind: %v", err)
		}
		synctest.Wait()
		e.checkClean()
	})
}

func FuzzSchedule(f *testing.F) {
	for seed := range uint64(8) {
		f.Add(randomProgram(seed, 120))
	}
	f.Fuzz(func(t *testing.T, prog []byte) {
		if len(prog) > 3*400 {
			prog = prog[:3*400]
		}
		runSchedule(t, prog)
	})
}

func randomProgram(seed uint64, steps int) []byte {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	prog := make([]byte, 3*steps)
	for i := range prog {
		prog[i] = byte(rng.UintN(256))
	}
	return prog
}

// TestRandomSchedules runs many random schedules with every ordinary test run.
func TestRandomSchedules(t *testing.T) {
	n := 200
	if testing.Short() {
		n = 20
	}
	for seed := range uint64(n) {
		prog := randomProgram(1000+seed, 150)
		if !t.Run(fmt.Sprint("seed", 1000+seed), func(t *testing.T) { runSchedule(t, prog) }) {
			return
		}
	}
}
