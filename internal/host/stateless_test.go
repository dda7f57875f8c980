package host_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/toolgate/toolgate/internal/host"
	"github.com/toolgate/toolgate/internal/host/hosttest"
)

// eraDialer sends stateless dials to a fake of their own (counted apart from the
// legacy connections, whose invariants env checks), or refuses them as a server that
// does not speak 2026-07-28.
type eraDialer struct {
	legacy, stateless *hosttest.Dialer
	notStateless      atomic.Bool
	refused           atomic.Int32
}

func (d *eraDialer) Dial(ctx context.Context, req host.DialRequest) (host.Session, error) {
	if !req.Stateless {
		return d.legacy.Dial(ctx, req)
	}
	if req.Request != nil || req.SessionKey != "" {
		return nil, errors.New("a stateless dial with a request handler or a session key")
	}
	if d.notStateless.Load() {
		d.refused.Add(1)
		return nil, fmt.Errorf("dialing: %w", host.ErrNotStateless)
	}
	return d.stateless.Dial(ctx, req)
}

func statelessCall(e *env, server, key string) (json.RawMessage, error) {
	return e.h.Call(context.Background(), server, "tools/call", json.RawMessage(`{"name":"echo"}`),
		host.CallOptions{SessionKey: key, Stateless: &host.Stateless{Capabilities: json.RawMessage(`{}`)}})
}

// A stateless call goes to the server's stateless twin, dialled once for many calls
// (of any caller session, even on a "session" server) and closed with the legacy
// connection; a crashed twin is dialled again at the next call; a server that does not
// speak 2026-07-28 is asked once and every later stateless call gets ErrNotStateless
// at once, its legacy calls unaffected.
func TestStatelessTwin(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := &eraDialer{legacy: hosttest.NewDialer(), stateless: hosttest.NewDialer()}
		t.Cleanup(func() { // after the host's shutdown (cleanups run last first)
			for range d.stateless.Unclosed() {
				t.Error("a stateless session was never closed")
			}
		})
		e := newEnv(t, func(o *host.Options) { o.Dialer = d })
		e.d = d.legacy
		sd := def("s")
		sd.Isolation = "session"
		e.install(def("a"))
		e.install(sd)
		for i := range 5 {
			if _, err := statelessCall(e, "a", ""); err != nil {
				t.Fatal(err)
			}
			if _, err := statelessCall(e, "s", fmt.Sprint("turn-", i)); err != nil {
				t.Fatal(err)
			}
		}
		if d.stateless.Dials("a") != 1 || d.stateless.Dials("s") != 1 || d.legacy.Dials("s") != 1 {
			t.Errorf("stateless dials a=%d s=%d, legacy s=%d; want one each", d.stateless.Dials("a"), d.stateless.Dials("s"), d.legacy.Dials("s"))
		}
		if n := d.stateless.Last("a").Calls(); n != 5 || d.legacy.Last("a").Calls() != 0 {
			t.Errorf("stateless twin took %d calls, legacy %d", n, d.legacy.Last("a").Calls())
		}
		e.mustCall("a")
		if d.legacy.Last("a").Calls() != 1 {
			t.Error("a legacy call did not reach the legacy connection")
		}

		d.stateless.Last("a").Crash(errors.New("boom"))
		synctest.Wait()
		if _, err := statelessCall(e, "a", ""); err != nil || d.stateless.Dials("a") != 2 {
			t.Errorf("after a crash of the twin: %v, %d dials", err, d.stateless.Dials("a"))
		}
		twin := d.stateless.Last("a")
		if err := e.h.Restart("a"); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if !twin.Closed() {
			t.Error("the twin outlived its legacy connection")
		}

		d.notStateless.Store(true)
		e.install(def("old"))
		for range 4 {
			if _, err := statelessCall(e, "old", ""); !errors.Is(err, host.ErrNotStateless) {
				t.Fatalf("a legacy-only server: %v", err)
			}
		}
		if d.refused.Load() != 1 {
			t.Errorf("asked a legacy-only server %d times, want once", d.refused.Load())
		}
		e.mustCall("old")
	})
}
