package host_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/toolgate/toolgate/internal/host"
	"github.com/toolgate/toolgate/internal/host/hosttest"
)

// env is one host over fakes, inside a synctest bubble. Its cleanup shuts the host
// down and checks what every test must leave true: the observer saw only documented,
// chained transitions, every dialled session was closed exactly once.
type env struct {
	t    *testing.T
	d    *hosttest.Dialer
	rec  *hosttest.Recorder
	cats *hosttest.Catalogs
	h    *host.Host
}

func newEnv(t *testing.T, mod func(o *host.Options)) *env {
	t.Helper()
	e := &env{t: t, d: hosttest.NewDialer(), rec: hosttest.NewRecorder(), cats: hosttest.NewCatalogs()}
	o := host.Options{Dialer: e.d, Observer: e.rec, Catalogs: e.cats}
	if mod != nil {
		mod(&o)
	}
	h, err := host.New(o)
	if err != nil {
		t.Fatal(err)
	}
	e.h = h
	t.Cleanup(func() {
		if err := h.Shutdown(context.Background()); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		synctest.Wait()
		e.checkClean()
	})
	return e
}

func (e *env) checkClean() {
	e.t.Helper()
	for _, v := range e.rec.Violations() {
		e.t.Errorf("observer: %s", v)
	}
	for _, v := range e.d.Violations() {
		e.t.Errorf("dialer: %s", v)
	}
	for _, s := range e.d.Unclosed() {
		e.t.Errorf("session of key %q never closed", s.Key)
	}
}

func def(name string) host.Definition {
	return host.Definition{Name: name, Fingerprint: "sha256:" + name + "-1"}
}

func (e *env) install(d host.Definition) {
	e.t.Helper()
	if _, err := e.h.Install(context.Background(), d); err != nil {
		e.t.Fatalf("Install(%s): %v", d.Name, err)
	}
}

func (e *env) call(server string) (json.RawMessage, error) {
	return e.h.Call(context.Background(), server, "tools/call", json.RawMessage(`{"name":"echo"}`), host.CallOptions{})
}

func (e *env) callKey(server, key string) (json.RawMessage, error) {
	return e.h.Call(context.Background(), server, "tools/call", json.RawMessage(`{"name":"echo"}`), host.CallOptions{SessionKey: key})
}

func (e *env) mustCall(server string) {
	e.t.Helper()
	if _, err := e.call(server); err != nil {
		e.t.Fatalf("call %s: %v", server, err)
	}
}

func (e *env) status(name string) host.Status {
	e.t.Helper()
	synctest.Wait()
	st, ok := e.h.Status(name)
	if !ok {
		e.t.Fatalf("Status(%s): not installed", name)
	}
	return st
}

func (e *env) wantState(name string, want host.State) {
	e.t.Helper()
	if got := e.status(name).State; got != want {
		e.t.Fatalf("%s: state %s, want %s (path %v)", name, got, want, e.rec.Path(name))
	}
}

// wantPath checks the server's observed states, in order, end with want.
func (e *env) wantPath(name string, want ...host.State) {
	e.t.Helper()
	synctest.Wait()
	got := e.rec.Path(name)
	if len(got) < len(want) || !slices.Equal(got[len(got)-len(want):], want) {
		e.t.Fatalf("%s: path %v, want it to end %v", name, got, want)
	}
}

// idleSlack is how late after IdleTimeout an idle connection may be stopped: activity
// is checked every IdleTimeout/8 (docs/host.md, "Timings and limits").
func idleSlack(idle time.Duration) time.Duration { return idle / 8 }

// advance moves the fake clock by d and lets everything settle.
func advance(d time.Duration) {
	time.Sleep(d)
	synctest.Wait()
}

func tools(names ...string) []json.RawMessage {
	out := make([]json.RawMessage, len(names))
	for i, n := range names {
		out[i] = json.RawMessage(`{"name":"` + n + `","inputSchema":{"type":"object"}}`)
	}
	return out
}
