package kernel_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/kernel"
	"github.com/toolgate/toolgate/internal/kernel/kerneltest"
	"github.com/toolgate/toolgate/internal/mcpserver"
	"github.com/toolgate/toolgate/internal/policy"
)

// blockingTool runs until its context ends (honours cancellation), or, with stubborn,
// until release is closed whatever happens to its context. It reports on started once
// running. onCancel, when set, is the error it returns once cancelled.
func blockingTool(id string, started chan<- string, release <-chan struct{}, stubborn bool, onCancel error) *kernel.Tool {
	return &kernel.Tool{ID: id, InputSchema: json.RawMessage(`{"type":"object"}`),
		Run: func(ctx context.Context, c *kernel.Call) (*kernel.Output, error) {
			started <- c.ID
			if stubborn {
				<-release
				return &kernel.Output{Text: "finished late"}, nil
			}
			select {
			case <-release:
				return &kernel.Output{Text: "finished"}, nil
			case <-ctx.Done():
				if onCancel != nil {
					return nil, onCancel
				}
				return nil, ctx.Err()
			}
		}}
}

func resultCode(r *mcpserver.CallResult) string {
	if r == nil || !r.IsError {
		return ""
	}
	code, _ := r.Meta["toolgate/code"].(string)
	return code
}

// outcomes maps each call id to its decisions, in order.
func outcomes(a *kerneltest.Audit) map[string][]string {
	m := map[string][]string{}
	for _, e := range a.Events() {
		d := string(e.Decision)
		if e.Code != "" {
			d += ":" + e.Code
		}
		m[e.CallID] = append(m[e.CallID], d)
	}
	return m
}

// TestDrain covers a shutdown of the kernel: calls that finish within the drain
// deadline are left alone; calls still running at the deadline are cancelled with
// ErrShutdown as the cause and recorded failed cancelled_by_shutdown (whatever error
// the tool made of it); a tool that ignores the cancellation gets that outcome written
// by Drain after ShutdownGrace, once, even when it returns later; calls arriving during
// the drain are refused and recorded; calls after it are refused and not run. Fake time
// (testing/synctest) measures the waits exactly.
func TestDrain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		started := make(chan string, 8)
		release := make(chan struct{})
		stubbornRelease := make(chan struct{})
		var sawCause error
		var causeMu sync.Mutex
		tools := []*kernel.Tool{
			blockingTool("x.quick", started, release, false, nil),
			blockingTool("x.slow", started, make(chan struct{}), false, nil),
			blockingTool("x.timeout", started, make(chan struct{}), false, kernel.Failed(kernel.CodeTimeout, "killed")),
			blockingTool("x.stubborn", started, stubbornRelease, true, nil),
			{ID: "x.cause", InputSchema: json.RawMessage(`{"type":"object"}`),
				Run: func(ctx context.Context, c *kernel.Call) (*kernel.Output, error) {
					started <- c.ID
					<-ctx.Done()
					causeMu.Lock()
					sawCause = context.Cause(ctx)
					causeMu.Unlock()
					return nil, ctx.Err()
				}},
			echoTool("x.echo"),
		}
		f := newFixture(t, tools...)
		f.grants(t, policy.Grant{Principal: "p", Tool: "x.*"})
		tr := f.turn(t, "p")

		type res struct {
			tool string
			r    *mcpserver.CallResult
		}
		results := make(chan res, 8)
		for _, name := range []string{"x.quick", "x.slow", "x.timeout", "x.stubborn", "x.cause"} {
			go func() {
				r, err := tr.CallTool(context.Background(), &mcpserver.CallRequest{Name: name})
				if err != nil {
					t.Errorf("%s: %v", name, err)
				}
				results <- res{name, r}
			}()
		}
		for range 5 {
			<-started
		}

		const drain = 10 * time.Second
		begin := time.Now()
		drained := make(chan int, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), drain)
			defer cancel()
			drained <- f.k.Drain(ctx)
		}()
		synctest.Wait()

		// During the drain: a new call is refused, recorded, and runs nothing.
		r := call(t, tr, "x.echo", `{}`)
		refusal(t, r, kernel.StatusFailed, kernel.CodeCancelledByShutdown)
		if e := f.aud.Last(); e.Tool != "x.echo" || e.Decision != audit.Failed || e.Code != string(kernel.CodeCancelledByShutdown) {
			t.Errorf("refusal during the drain recorded as %+v", e)
		}

		// A call that finishes within the deadline is not cancelled.
		time.Sleep(3 * time.Second)
		close(release)
		if got := <-results; got.tool != "x.quick" || got.r.IsError {
			t.Errorf("the call finishing within the drain: %s %s", got.tool, mustJSON(got.r))
		}

		// At the deadline the others are cancelled; the cooperative ones record their
		// outcome at once.
		got := map[string]*mcpserver.CallResult{}
		for range 3 {
			r := <-results
			got[r.tool] = r.r
		}
		if d := time.Since(begin); d != drain {
			t.Errorf("calls cancelled after %s, want the drain deadline %s", d, drain)
		}
		for _, name := range []string{"x.slow", "x.timeout", "x.cause"} {
			if c := resultCode(got[name]); c != string(kernel.CodeCancelledByShutdown) {
				t.Errorf("%s answered %q, want cancelled_by_shutdown", name, c)
			}
		}
		causeMu.Lock()
		if !errors.Is(sawCause, kernel.ErrShutdown) {
			t.Errorf("the tool's context cause is %v, want ErrShutdown", sawCause)
		}
		causeMu.Unlock()

		// The stubborn tool: after ShutdownGrace, Drain writes its outcome and returns.
		if n := <-drained; n != 4 {
			t.Errorf("Drain cancelled %d calls, want 4", n)
		}
		if d := time.Since(begin); d != drain+kernel.ShutdownGrace {
			t.Errorf("Drain returned after %s, want %s", d, drain+kernel.ShutdownGrace)
		}
		byTool := map[string]string{}
		for _, e := range f.aud.Events() {
			byTool[e.Tool] = e.CallID
		}
		oc := outcomes(f.aud)
		want := map[string][]string{
			"x.quick":    {"allowed"},
			"x.slow":     {"allowed", "failed:cancelled_by_shutdown"},
			"x.timeout":  {"allowed", "failed:cancelled_by_shutdown"},
			"x.cause":    {"allowed", "failed:cancelled_by_shutdown"},
			"x.stubborn": {"allowed", "failed:cancelled_by_shutdown"},
		}
		for tool, w := range want {
			if g := oc[byTool[tool]]; len(g) != len(w) || g[0] != w[0] || g[len(g)-1] != w[len(w)-1] {
				t.Errorf("%s: events %v, want %v", tool, g, w)
			}
		}

		// After Drain: refused, not recorded, not run.
		n := f.aud.Len()
		refusal(t, call(t, tr, "x.echo", `{}`), kernel.StatusFailed, kernel.CodeCancelledByShutdown)
		if f.aud.Len() != n {
			t.Errorf("a call after Drain was recorded")
		}
		if f.k.Drain(context.Background()) != 0 {
			t.Errorf("a second Drain cancelled something")
		}

		// The stubborn tool returns at last: its caller hears the shutdown, and no
		// second outcome is written.
		close(stubbornRelease)
		if r := <-results; r.tool != "x.stubborn" || resultCode(r.r) != string(kernel.CodeCancelledByShutdown) {
			t.Errorf("the stubborn call answered %s %s", r.tool, mustJSON(r.r))
		}
		if f.aud.Len() != n {
			t.Errorf("the stubborn call wrote a second outcome: %v", outcomes(f.aud)[byTool["x.stubborn"]])
		}
	})
}

// slowEscalations blocks RecordEscalation until release is closed.
type slowEscalations struct {
	kerneltest.Escalations
	entered chan struct{}
	release chan struct{}
}

func (s *slowEscalations) RecordEscalation(ctx context.Context, e kernel.Escalation) error {
	close(s.entered)
	<-s.release
	return s.Escalations.RecordEscalation(ctx, e)
}

// Drain waits for an escalation being stored (its audit event is written, the store
// row not yet): the store must not close between the two.
func TestDrainWaitsForAnEscalation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		aud := &kerneltest.Audit{}
		esc := &slowEscalations{entered: make(chan struct{}), release: make(chan struct{})}
		k, err := kernel.New(kernel.Options{Audit: aud, Escalations: esc})
		if err != nil {
			t.Fatal(err)
		}
		if err := k.SetGrants([]policy.Grant{{ID: "g", Principal: "p", Tool: kernel.EscalateID, Action: "*", Effect: policy.Allow}}); err != nil {
			t.Fatal(err)
		}
		tr, err := k.OpenTurn(context.Background(), kernel.TurnOptions{Principal: "p"})
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan *mcpserver.CallResult, 1)
		go func() { done <- call(t, tr, kernel.EscalateID, `{"reason":"need a person"}`) }()
		<-esc.entered
		drained := make(chan struct{})
		go func() {
			k.Drain(context.Background())
			close(drained)
		}()
		time.Sleep(time.Hour) // far past any grace: Drain is still waiting
		select {
		case <-drained:
			t.Fatal("Drain returned while an escalation was being stored")
		default:
		}
		close(esc.release)
		<-drained
		if r := <-done; r.IsError || len(esc.List()) != 1 {
			t.Errorf("escalation %s, stored %d", mustJSON(r), len(esc.List()))
		}
	})
}

// A call its caller cancels (a disconnect, notifications/cancelled, the session
// ending) is recorded failed cancelled, not as the timeout the tool reports for its
// cancelled context (bash does), and not as a shutdown.
func TestCancelledByTheCaller(t *testing.T) {
	started := make(chan string, 1)
	f := newFixture(t, blockingTool("x.bash", started, make(chan struct{}), false, kernel.Failed(kernel.CodeTimeout, "bash call ended: context canceled")))
	f.grants(t, policy.Grant{Principal: "p", Tool: "x.*"})
	tr := f.turn(t, "p")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan *mcpserver.CallResult, 1)
	go func() {
		r, _ := tr.CallTool(ctx, &mcpserver.CallRequest{Name: "x.bash"})
		done <- r
	}()
	<-started
	cancel()
	r := <-done
	refusal(t, r, kernel.StatusFailed, kernel.CodeCancelled)
	if oc := outcomes(f.aud)[f.aud.Last().CallID]; len(oc) != 2 || oc[0] != "allowed" || oc[1] != "failed:cancelled" {
		t.Errorf("events %v, want allowed then failed:cancelled", oc)
	}
}
