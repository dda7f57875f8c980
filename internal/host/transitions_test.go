package host_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/toolgate/toolgate/internal/host"
	"github.com/toolgate/toolgate/internal/host/hosttest"
)

const (
	notStarted   = host.StateNotStarted
	disabled     = host.StateDisabled
	starting     = host.StateStarting
	ready        = host.StateReady
	degraded     = host.StateDegraded
	authRequired = host.StateAuthRequired
	failed       = host.StateFailed
	stopping     = host.StateStopping
	stopped      = host.StateStopped
	restarting   = host.StateRestarting
)

func edge(from, to host.State) hosttest.Edge { return hosttest.Edge{From: from, To: to} }

// scenario drives one server "a" into a transition; the env methods below are its steps.
type scenario struct {
	opts func(o *host.Options)
	run  func(e *env)
}

func (e *env) set(f func(b *hosttest.Behavior)) { e.d.Server("a").Set(f) }

func (e *env) ready() { e.install(def("a")); e.mustCall("a"); synctest.Wait() }

func (e *env) degraded() {
	e.ready()
	e.set(func(b *hosttest.Behavior) { b.PingDelay = 3 * time.Second })
	advance(host.DefaultHealthInterval + 3*time.Second)
	e.set(func(b *hosttest.Behavior) { b.PingDelay = 0 })
	e.wantState("a", degraded)
}

func (e *env) crash()            { e.d.Last("a").Crash(nil); synctest.Wait() }
func (e *env) disable()          { _ = e.h.SetEnabled("a", false); synctest.Wait() }
func (e *env) enable()           { _ = e.h.SetEnabled("a", true); synctest.Wait() }
func (e *env) restart()          { _ = e.h.Restart("a"); synctest.Wait() }
func (e *env) goCall(key string) { go func() { _, _ = e.callKey("a", key) }(); synctest.Wait() }
func (e *env) idle() {
	advance(host.DefaultIdleTimeout + idleSlack(host.DefaultIdleTimeout) + time.Second)
}
func (e *env) authFail() {
	e.set(func(b *hosttest.Behavior) {
		b.Handler = func(context.Context, string, json.RawMessage) (json.RawMessage, error) { return nil, errUnauthorized }
	})
	_, _ = e.call("a")
	synctest.Wait()
}

func oneFailureOpens(o *host.Options) { o.Restart.Threshold = 1 }

func sessionServer(e *env) {
	d := def("a")
	d.Isolation = host.IsolationSession
	e.install(d)
	if _, err := e.callKey("a", "k1"); err != nil {
		e.t.Fatal(err)
	}
}

var scenarios = map[hosttest.Edge]scenario{
	edge(notStarted, starting): {run: func(e *env) { e.install(def("a")); e.mustCall("a") }},
	edge(notStarted, disabled): {run: func(e *env) { e.install(def("a")); e.disable() }},
	edge(disabled, notStarted): {run: func(e *env) { e.install(def("a")); e.disable(); e.enable() }},
	edge(disabled, stopped):    {run: func(e *env) { e.ready(); e.disable(); e.enable() }},
	edge(disabled, starting): {run: func(e *env) {
		d := def("a")
		d.Required, d.Disabled = true, true
		e.install(d)
		e.enable()
	}},
	edge(starting, ready): {run: func(e *env) { e.ready() }},
	edge(starting, restarting): {run: func(e *env) {
		e.set(func(b *hosttest.Behavior) { b.DialErr = os.ErrNotExist })
		e.install(def("a"))
		_, _ = e.call("a")
	}},
	edge(starting, failed): {run: func(e *env) {
		e.set(func(b *hosttest.Behavior) { b.DialErr = os.ErrNotExist })
		e.install(def("a"))
		_, _ = e.call("a")
		advance(20 * time.Second)
	}},
	edge(starting, authRequired): {run: func(e *env) {
		e.set(func(b *hosttest.Behavior) { b.DialErr = errUnauthorized })
		e.install(def("a"))
		_, _ = e.call("a")
	}},
	edge(starting, stopping): {run: func(e *env) {
		e.set(func(b *hosttest.Behavior) { b.DialDelay = 5 * time.Second })
		e.install(def("a"))
		e.goCall("")
		e.disable()
	}},
	edge(ready, degraded):        {run: func(e *env) { e.degraded() }},
	edge(ready, restarting):      {run: func(e *env) { e.ready(); e.crash() }},
	edge(ready, failed):          {opts: oneFailureOpens, run: func(e *env) { e.ready(); e.crash() }},
	edge(ready, authRequired):    {run: func(e *env) { e.ready(); e.authFail() }},
	edge(ready, stopping):        {run: func(e *env) { e.ready(); e.idle() }},
	edge(degraded, ready):        {run: func(e *env) { e.degraded(); advance(host.DefaultHealthInterval) }},
	edge(degraded, restarting):   {run: func(e *env) { e.degraded(); e.crash() }},
	edge(degraded, failed):       {opts: oneFailureOpens, run: func(e *env) { e.degraded(); e.crash() }},
	edge(degraded, authRequired): {run: func(e *env) { e.degraded(); e.authFail() }},
	edge(degraded, stopping):     {run: func(e *env) { e.degraded(); e.disable() }},
	edge(authRequired, starting): {run: func(e *env) { e.ready(); e.authFail(); e.restart() }},
	edge(authRequired, disabled): {run: func(e *env) { e.ready(); e.authFail(); e.disable() }},
	edge(failed, starting):       {opts: oneFailureOpens, run: func(e *env) { e.ready(); e.crash(); advance(host.DefaultCooldownInitial * 2) }},
	edge(failed, disabled):       {opts: oneFailureOpens, run: func(e *env) { e.ready(); e.crash(); e.disable() }},
	edge(stopping, stopped):      {run: func(e *env) { e.ready(); e.idle() }},
	edge(stopping, disabled):     {run: func(e *env) { e.ready(); e.disable() }},
	edge(stopping, restarting): {run: func(e *env) {
		e.ready()
		e.set(func(b *hosttest.Behavior) { b.CloseDelay = 5 * time.Second })
		e.idle()
		e.restart()
	}},
	edge(stopping, starting): {run: func(e *env) { // session isolation: the last live one closes as another starts
		sessionServer(e)
		e.set(func(b *hosttest.Behavior) { b.CloseDelay, b.DialDelay = time.Second, 5*time.Second })
		e.h.EndSession("k1")
		e.goCall("k2")
		advance(5 * time.Second)
	}},
	edge(stopping, ready): {run: func(e *env) { // session isolation: another is up before the last closed
		sessionServer(e)
		e.set(func(b *hosttest.Behavior) { b.CloseDelay, b.DialDelay = 5*time.Second, time.Second })
		e.h.EndSession("k1")
		e.goCall("k2")
		advance(5 * time.Second)
	}},
	edge(stopped, starting):    {run: func(e *env) { e.ready(); e.idle(); e.mustCall("a") }},
	edge(stopped, disabled):    {run: func(e *env) { e.ready(); e.idle(); e.disable() }},
	edge(restarting, starting): {run: func(e *env) { e.ready(); e.crash(); advance(time.Second) }},
	edge(restarting, stopping): {run: func(e *env) {
		e.ready()
		e.set(func(b *hosttest.Behavior) { b.CloseDelay = 5 * time.Second })
		e.restart()
		e.disable()
	}},
	edge(restarting, stopped):  {run: func(e *env) { e.ready(); e.crash(); e.shutdown() }},
	edge(restarting, disabled): {run: func(e *env) { e.ready(); e.crash(); e.disable() }},

	// Shutdown leaves nothing blocked: every server ends stopped.
	edge(authRequired, stopped): {run: func(e *env) { e.ready(); e.authFail(); e.shutdown() }},
	edge(failed, stopped):       {opts: oneFailureOpens, run: func(e *env) { e.ready(); e.crash(); e.shutdown() }},
	// Asked to restart (or reconfigured, or disabled) while the refused or crashed
	// connection is still closing.
	edge(authRequired, restarting): {run: func(e *env) { e.ready(); e.slowClose(); e.authFail(); e.restart() }},
	edge(authRequired, stopping):   {run: func(e *env) { e.ready(); e.slowClose(); e.authFail(); e.disable() }},
	edge(failed, restarting):       {opts: oneFailureOpens, run: func(e *env) { e.ready(); e.slowClose(); e.crash(); e.reconfigure() }},
	edge(failed, stopping):         {opts: oneFailureOpens, run: func(e *env) { e.ready(); e.slowClose(); e.crash(); e.disable() }},
	// Isolation "session": one caller's connection waits to restart (or closes)
	// while another caller's starts, and that start decides.
	edge(restarting, ready): {run: func(e *env) { sessionServer(e); e.crashKey("k1"); e.goCall("k2") }},
	edge(restarting, failed): {opts: func(o *host.Options) { o.Restart.Threshold = 2 }, run: func(e *env) {
		sessionServer(e)
		e.crashKey("k1")
		e.set(func(b *hosttest.Behavior) { b.DialErr = os.ErrNotExist })
		e.goCall("k2")
	}},
	edge(restarting, authRequired): {run: func(e *env) {
		sessionServer(e)
		e.crashKey("k1")
		e.set(func(b *hosttest.Behavior) { b.DialErr = errUnauthorized })
		e.goCall("k2")
	}},
	edge(stopping, failed): {opts: oneFailureOpens, run: func(e *env) {
		sessionServer(e)
		e.slowClose()
		e.h.EndSession("k1")
		e.set(func(b *hosttest.Behavior) { b.DialErr = os.ErrNotExist })
		e.goCall("k2")
	}},
	edge(stopping, authRequired): {run: func(e *env) {
		sessionServer(e)
		e.slowClose()
		e.h.EndSession("k1")
		e.set(func(b *hosttest.Behavior) { b.DialErr = errUnauthorized })
		e.goCall("k2")
	}},
}

func (e *env) shutdown()  { _ = e.h.Shutdown(context.Background()); synctest.Wait() }
func (e *env) slowClose() { e.set(func(b *hosttest.Behavior) { b.CloseDelay = 5 * time.Second }) }
func (e *env) reconfigure() {
	d := def("a")
	d.Fingerprint = "sha256:a-2"
	if _, err := e.h.Update(context.Background(), d); err != nil {
		e.t.Fatal(err)
	}
	synctest.Wait()
}
func (e *env) crashKey(key string) {
	for _, s := range e.d.Sessions("a") {
		if s.Key == key && !s.Closed() {
			s.Crash(nil)
		}
	}
	synctest.Wait()
}

// TestTransitionTable makes every documented transition happen and checks it was
// observed; each env's cleanup checks (through hosttest.Recorder) that no transition
// outside the table happened along the way.
func TestTransitionTable(t *testing.T) {
	documented := map[hosttest.Edge]bool{}
	for from, tos := range host.Transitions {
		for _, to := range tos {
			documented[hosttest.Edge{From: from, To: to}] = true
		}
	}
	for edge := range scenarios {
		if !documented[edge] {
			t.Errorf("scenario for %s, which is not in host.Transitions", edge)
		}
	}
	seen := map[hosttest.Edge]bool{}
	for edge := range documented {
		sc, ok := scenarios[edge]
		if !ok {
			t.Errorf("no scenario makes %s happen", edge)
			continue
		}
		t.Run(strings.ReplaceAll(edge.String(), " → ", "_to_"), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEnv(t, sc.opts)
				sc.run(e)
				synctest.Wait()
				edges := e.rec.Edges()
				if edges[edge] == 0 {
					t.Fatalf("%s not observed; path %v", edge, e.rec.Path("a"))
				}
				for ed := range edges {
					seen[ed] = true
				}
			})
		})
	}
	for edge := range seen {
		if !documented[edge] {
			t.Errorf("observed undocumented %s", edge)
		}
	}
}

// TestTransitionsDocumented checks docs/host.md's transition table is host.Transitions.
func TestTransitionsDocumented(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "host.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := map[host.State][]host.State{}
	row := regexp.MustCompile("(?m)^\\| `([a-z_]+)` \\| ([^|]*) \\|")
	sec := string(b)
	i := strings.Index(sec, "## Transitions")
	if i < 0 {
		t.Fatal("docs/host.md has no '## Transitions' section")
	}
	sec = sec[i:]
	if j := strings.Index(sec[3:], "\n## "); j >= 0 {
		sec = sec[:j+3]
	}
	for _, m := range row.FindAllStringSubmatch(sec, -1) {
		for _, to := range regexp.MustCompile("`([a-z_]+)`").FindAllStringSubmatch(m[2], -1) {
			doc[host.State(m[1])] = append(doc[host.State(m[1])], host.State(to[1]))
		}
	}
	for _, s := range host.States {
		want := slices.Clone(host.Transitions[s])
		got := doc[s]
		slices.Sort(want)
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("docs/host.md: from %s to %v; host.Transitions says %v", s, got, want)
		}
	}
	if len(doc) != len(host.States) {
		t.Errorf("docs/host.md lists %d source states, want %d", len(doc), len(host.States))
	}
	for _, s := range host.States {
		if !strings.Contains(string(b), "`"+string(s)+"`") {
			t.Errorf("docs/host.md does not mention %s", s)
		}
	}
}
