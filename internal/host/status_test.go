package host_test

import (
	"context"
	"encoding/json"
	"errors"
	"sort"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/toolgate/toolgate/internal/host"
	"github.com/toolgate/toolgate/internal/host/hosttest"
)

func TestStatusHealthFields(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, nil)
		e.d.Server("a").Set(func(b *hosttest.Behavior) { b.Stderr = "listening on stdio\n" })
		e.install(def("a"))
		st := e.status("a")
		if st.State != host.StateNotStarted || st.Live || !st.LastSeenAt.IsZero() || st.Reason != host.ReasonInstalled || !st.Enabled || st.Isolation != host.IsolationShared {
			t.Fatalf("fresh status: %+v", st)
		}
		e.mustCall("a")
		advance(time.Minute)
		e.mustCall("a")
		st = e.status("a")
		// Dated by the health pings and the activity check, not per call.
		if time.Since(st.LastSeenAt) > host.DefaultHealthInterval || st.StderrTail != "listening on stdio\n" || st.Since.IsZero() {
			t.Fatalf("live status: %+v", st)
		}
		// The tail outlives the session that wrote it.
		e.d.Server("a").Set(func(b *hosttest.Behavior) { b.Stderr = "panic: boom\n"; b.DialErr = errors.New("exit 2") })
		e.d.Last("a").Crash(errors.New("exit status 2"))
		synctest.Wait()
		st = e.status("a")
		if st.StderrTail != "panic: boom\n" || st.LastError != "exit status 2" || st.Live {
			t.Fatalf("after the crash: %+v", st)
		}
	})
}

func TestLastSeenDatedByCalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, func(o *host.Options) { o.Health.Interval = -1 })
		e.install(def("a"))
		e.mustCall("a")
		started := e.status("a").LastSeenAt
		advance(5 * time.Minute)
		if got := e.status("a").LastSeenAt; !got.Equal(started) {
			t.Fatalf("last seen moved to %v with no call and no ping", got)
		}
		callAt := time.Now()
		e.mustCall("a")
		advance(idleSlack(host.DefaultIdleTimeout))
		if got := e.status("a").LastSeenAt; got.Before(callAt.Add(-idleSlack(host.DefaultIdleTimeout))) || got.After(callAt) {
			t.Fatalf("last seen %v; the call was answered at %v", got, callAt)
		}
		// A call that got no answer does not count.
		e.d.Server("a").Set(func(b *hosttest.Behavior) { b.CallHang = true })
		before := e.status("a").LastSeenAt
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if _, err := e.h.Call(ctx, "a", "tools/call", nil, host.CallOptions{}); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatal(err)
		}
		advance(idleSlack(host.DefaultIdleTimeout))
		if got := e.status("a").LastSeenAt; !got.Equal(before) {
			t.Fatalf("an unanswered call moved last seen to %v", got)
		}
	})
}

func TestSnapshotVersion(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, nil)
		for _, n := range []string{"c", "a", "b"} {
			e.install(def(n))
		}
		e.mustCall("b")
		synctest.Wait()
		snap := e.h.Snapshot()
		if snap.Version == 0 || snap.Version != e.rec.LastSeq() {
			t.Fatalf("snapshot version %d, last event %d", snap.Version, e.rec.LastSeq())
		}
		if !sort.SliceIsSorted(snap.Servers, func(i, j int) bool { return snap.Servers[i].Name < snap.Servers[j].Name }) || len(snap.Servers) != 3 {
			t.Fatalf("servers %v", snap.Servers)
		}
		if snap.Servers[1].State != host.StateReady {
			t.Fatalf("b: %s", snap.Servers[1].State)
		}
		// Installing, enabling, state and catalogue changes all bump it.
		_ = e.h.SetEnabled("c", false)
		synctest.Wait()
		if v := e.h.Snapshot().Version; v <= snap.Version || v != e.rec.LastSeq() {
			t.Fatalf("after a policy change: version %d (was %d), last event %d", v, snap.Version, e.rec.LastSeq())
		}
	})
}

func TestProgressPassesThrough(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, nil)
		steps := []json.RawMessage{json.RawMessage(`{"progressToken":"t1","progress":1,"total":2}`), json.RawMessage(`{"progressToken":"t1","progress":2,"total":2}`)}
		e.d.Server("a").Set(func(b *hosttest.Behavior) { b.Progress = steps })
		e.install(def("a"))
		var got []string
		_, err := e.h.Call(context.Background(), "a", "tools/call", nil, host.CallOptions{Progress: func(p json.RawMessage) { got = append(got, string(p)) }})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || got[0] != string(steps[0]) || got[1] != string(steps[1]) {
			t.Fatalf("progress %v", got)
		}
	})
}

// brokenDialer breaks the Dialer contract in the ways a buggy adapter could.
type brokenDialer struct {
	inner *hosttest.Dialer
	mode  string
}

func (b *brokenDialer) Dial(ctx context.Context, req host.DialRequest) (host.Session, error) {
	switch b.mode {
	case "nil session":
		return nil, nil
	case "session and error":
		s, _ := b.inner.Dial(ctx, req)
		return s, errors.New("half-started")
	}
	return b.inner.Dial(ctx, req)
}

func TestBrokenDialer(t *testing.T) {
	for _, mode := range []string{"nil session", "session and error"} {
		t.Run(mode, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				inner := hosttest.NewDialer()
				h, err := host.New(host.Options{Dialer: &brokenDialer{inner, mode}, Servers: []host.Definition{def("a")}})
				if err != nil {
					t.Fatal(err)
				}
				_, err = h.Call(context.Background(), "a", "tools/call", nil, host.CallOptions{})
				if !errors.Is(err, host.ErrStartFailed) {
					t.Fatalf("call: %v", err)
				}
				if err := h.Shutdown(context.Background()); err != nil {
					t.Fatal(err)
				}
				synctest.Wait()
				if n := len(inner.Unclosed()); n != 0 {
					t.Fatalf("%d sessions leaked by a dialer that returned one with an error", n)
				}
			})
		})
	}
}

func TestGarbageCapabilities(t *testing.T) {
	for _, caps := range []string{`"tools"`, `[1]`, `null`, `{"tools":`, ``} {
		t.Run(caps, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEnv(t, nil)
				e.d.Server("a").Set(func(b *hosttest.Behavior) {
					b.Info = host.SessionInfo{ProtocolVersion: "2025-06-18", Capabilities: json.RawMessage(caps)}
					b.Tools = tools("t")
				})
				e.install(def("a"))
				c, err := e.h.RefreshCatalog(context.Background(), "a")
				if err != nil || len(c.Tools) != 0 || e.d.Last("a").ListCalls("tools/list") != 0 {
					t.Fatalf("catalogue %+v, err %v", c.Counts(), err)
				}
				e.wantState("a", host.StateReady)
			})
		})
	}
}

func TestServerErrorText(t *testing.T) {
	e := &host.ServerError{Server: "gh", Kind: host.ErrUnavailable, State: host.StateFailed, Reason: host.ReasonCrashLoop,
		RetryAt: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC), Err: errors.New("exit 1")}
	want := `server "gh": server unavailable (state failed, crash_loop); next attempt at 2030-01-02T03:04:05Z: exit 1`
	if e.Error() != want {
		t.Fatalf("%q", e.Error())
	}
	se := &host.ShutdownError{Unclosed: []string{"a", "b"}, Err: context.DeadlineExceeded}
	if !strings.Contains(se.Error(), "a, b") || !errors.Is(se, context.DeadlineExceeded) {
		t.Fatal(se)
	}
}
