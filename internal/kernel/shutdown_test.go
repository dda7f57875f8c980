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
	"github.com/toolgate/toolgate/internal/mcpspec"
	"github.com/toolgate/toolgate/internal/policy"
)

// blockingTool runs until release is closed or its context ends (honouring the
// cancellation), or, with stubborn, until release is closed whatever its context does. It reports on started once
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

func resultCode(r *mcpspec.CallResult) string {
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

// TestShutdown covers Kernel.Shutdown: the calls in flight are cancelled at once with
// ErrShutdown as the cause and recorded failed cancelled_by_shutdown (whatever error the
// tool made of it); a tool that ignores the cancellation gets that outcome written by
// Shutdown after ShutdownGrace, once, even when it returns later; a call arriving during
// the shutdown is refused and recorded; calls after it are refused and not run. Fake
// time (testing/synctest) measures the waits exactly.
func TestShutdown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		started := make(chan string, 8)
		stubbornRelease := make(chan struct{})
		var sawCause error
		var causeMu sync.Mutex
		tools := []*kernel.Tool{
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
			r    *mcpspec.CallResult
		}
		results := make(chan res, 8)
		for _, name := range []string{"x.slow", "x.timeout", "x.stubborn", "x.cause"} {
			go func() {
				r, err := tr.CallTool(context.Background(), &mcpspec.CallRequest{Name: name})
				if err != nil {
					t.Errorf("%s: %v", name, err)
				}
				results <- res{name, r}
			}()
		}
		for range 4 {
			<-started
		}

		begin := time.Now()
		done := make(chan int, 1)
		go func() { done <- f.k.Shutdown() }()

		// The cooperative calls are cancelled at once and answer the shutdown.
		got := map[string]*mcpspec.CallResult{}
		for range 3 {
			r := <-results
			got[r.tool] = r.r
		}
		if d := time.Since(begin); d != 0 {
			t.Errorf("calls cancelled after %s, want at once", d)
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

		// While Shutdown waits for the stubborn tool, a new call is refused, recorded,
		// and runs nothing.
		synctest.Wait()
		refusal(t, call(t, tr, "x.echo", `{}`), kernel.StatusFailed, kernel.CodeCancelledByShutdown)
		if e := f.aud.Last(); e.Tool != "x.echo" || e.Decision != audit.Failed || e.Code != string(kernel.CodeCancelledByShutdown) {
			t.Errorf("refusal during the shutdown recorded as %+v", e)
		}

		// After ShutdownGrace, Shutdown writes the stubborn call's outcome and returns.
		if n := <-done; n != 4 {
			t.Errorf("Shutdown cancelled %d calls, want 4", n)
		}
		if d := time.Since(begin); d != kernel.ShutdownGrace {
			t.Errorf("Shutdown returned after %s, want %s", d, kernel.ShutdownGrace)
		}
		byTool := map[string]string{}
		for _, e := range f.aud.Events() {
			byTool[e.Tool] = e.CallID
		}
		oc := outcomes(f.aud)
		for _, tool := range []string{"x.slow", "x.timeout", "x.cause", "x.stubborn"} {
			if g := oc[byTool[tool]]; len(g) != 2 || g[0] != "allowed" || g[1] != "failed:cancelled_by_shutdown" {
				t.Errorf("%s: events %v, want allowed then failed:cancelled_by_shutdown", tool, g)
			}
		}

		// After Shutdown: refused, not recorded, not run.
		n := f.aud.Len()
		refusal(t, call(t, tr, "x.echo", `{}`), kernel.StatusFailed, kernel.CodeCancelledByShutdown)
		if f.aud.Len() != n {
			t.Errorf("a call after Shutdown was recorded")
		}
		if f.k.Shutdown() != 0 {
			t.Errorf("a second Shutdown cancelled something")
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

// Shutdown waits for an escalation being stored (its audit event is written, the store
// row not yet): the store must not close between the two.
func TestShutdownWaitsForAnEscalation(t *testing.T) {
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
		done := make(chan *mcpspec.CallResult, 1)
		go func() {
			r, _ := tr.CallTool(context.Background(), &mcpspec.CallRequest{Name: kernel.EscalateID, Arguments: json.RawMessage(`{"reason":"need a person"}`)})
			done <- r
		}()
		<-esc.entered
		drained := make(chan struct{})
		go func() {
			k.Shutdown()
			close(drained)
		}()
		// Far past the grace a running tool gets: Shutdown is still waiting.
		time.Sleep(kernel.ShutdownGrace + kernel.ShutdownAppendWait - time.Second)
		select {
		case <-drained:
			t.Fatal("Shutdown returned while an escalation was being stored")
		default:
		}
		close(esc.release)
		<-drained
		if r := <-done; r.IsError || len(esc.List()) != 1 {
			t.Errorf("escalation %s, stored %d", mustJSON(r), len(esc.List()))
		}
	})
}

// A log write that never ends does not hang Shutdown for ever: it gives up after
// ShutdownGrace + ShutdownAppendWait.
func TestShutdownBoundedByAStuckLog(t *testing.T) {
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
		go tr.CallTool(context.Background(), &mcpspec.CallRequest{Name: kernel.EscalateID, Arguments: json.RawMessage(`{"reason":"need a person"}`)})
		<-esc.entered
		begin := time.Now()
		k.Shutdown()
		if d := time.Since(begin); d != kernel.ShutdownGrace+kernel.ShutdownAppendWait {
			t.Errorf("Shutdown gave up after %s, want %s", d, kernel.ShutdownGrace+kernel.ShutdownAppendWait)
		}
		close(esc.release)
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
	done := make(chan *mcpspec.CallResult, 1)
	go func() {
		r, _ := tr.CallTool(ctx, &mcpspec.CallRequest{Name: "x.bash"})
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
