package reliability

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/upstream/upstreamtest"
)

// An upstream that never answers, through toolgate serve with callTimeout "2s"
// (docs/mcp-config.md, "Call timeout"):
//
//  1. a call it ignores (fx.hang) while it still answers pings: the call is answered
//     upstream_timeout and audited so, the fixture got notifications/cancelled for
//     it, and the process keeps running (the same pid answers the next call);
//  2. a process that answers nothing at all (fx.stall without ms: no answer, no
//     ping): the call is answered upstream_timeout, and the ping that follows goes
//     unanswered, so the process is restarted — the stalled one is gone, a new one
//     answers — without waiting for three periodic pings (30 s apart);
//  3. a process frozen by SIGSTOP for good: the same, and the stopped process is
//     gone.
//
// The other server answers throughout.
func TestUpstreamNeverAnswersTimesOut(t *testing.T) {
	f := newFaultRigWith(t, map[string]any{"callTimeout": "2s"})
	pid := f.onlyFixture(t)
	calls := 0
	call := func(tool string) outcome {
		t.Helper()
		// The client's own bound is far past the call timeout: without the deadline
		// the call would fail here rather than hang the test.
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		calls++
		s := &session{url: f.s.url, token: f.s.token, id: f.s.id, next: 5000 + 10*calls}
		done := make(chan struct{})
		var o outcome
		var err error
		go func() {
			defer close(done)
			var res []byte
			res, err = s.rpcContext(ctx, "tools/call", `{"name":"`+tool+`","arguments":{}}`)
			if err == nil {
				o, err = parseOutcome(res)
			}
		}()
		f.waitAllowed(t, tool, 1)
		f.okEcho(t, "while "+tool+" is unanswered")
		<-done
		if err != nil {
			t.Fatalf("%s: %v (no answer within the client's 60 s)", tool, err)
		}
		return o
	}

	// 1. It still answers pings.
	if o := call("fx.hang"); o.code != "upstream_timeout" || !strings.Contains(o.text, "no answer within 2s") {
		t.Fatalf("fx.hang answered %+v, want upstream_timeout", o)
	}
	f.waitOutcome(t, "fx.hang", "failed/upstream_timeout")
	o, err := f.s.call("fx.cancellations", `{}`)
	if err != nil || o.code != "" || !strings.Contains(o.text, `"what":"tools/call:hang","reason":"timed out"`) {
		t.Fatalf("fx.cancellations: %+v %v; want notifications/cancelled for the hang", o, err)
	}
	echoOK(t, f.s, "after the timeout")
	f.sameProcess(t, pid)

	// 2. It answers nothing at all.
	if o := call("fx.stall"); o.code != "upstream_timeout" {
		t.Fatalf("fx.stall answered %+v, want upstream_timeout", o)
	}
	f.waitOutcome(t, "fx.stall", "failed/upstream_timeout")
	f.okEcho(t, "while fx is stalled")
	deadline := time.Now().Add(30 * time.Second)
	for {
		pids := upstreamtest.Processes(t, f.marker)
		if len(pids) == 1 && pids[0] != pid {
			t.Logf("the stalled fixture %d was replaced by %d", pid, pids[0])
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("fixture processes %v: the stalled %d was not restarted", pids, pid)
		}
		time.Sleep(50 * time.Millisecond)
	}
	echoOK(t, f.s, "after the restart")
	f.okEcho(t, "after the restart")

	// 3. The process is frozen (SIGSTOP) for good: the same, and the stopped process
	// (which cannot act on SIGTERM) is gone too.
	pid = f.onlyFixture(t)
	syscall.Kill(pid, syscall.SIGSTOP)
	if o := call("fx.echo"); o.code != "upstream_timeout" {
		t.Fatalf("fx.echo to a stopped process answered %+v, want upstream_timeout", o)
	}
	deadline = time.Now().Add(40 * time.Second)
	for {
		pids := upstreamtest.Processes(t, f.marker)
		if len(pids) == 1 && pids[0] != pid {
			t.Logf("the stopped fixture %d was replaced by %d", pid, pids[0])
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("fixture processes %v: the stopped %d was not replaced", pids, pid)
		}
		time.Sleep(50 * time.Millisecond)
	}
	echoOK(t, f.s, "after the second restart")
}

// waitOutcome waits until tool's one outcome event is want ("failed/CODE").
func (f *faultRig) waitOutcome(t *testing.T, tool, want string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var got []string
		for _, e := range f.audit(t, "--tool", tool) {
			if e.Decision != "allowed" {
				got = append(got, e.Decision+"/"+e.Code)
			}
		}
		if len(got) == 1 && got[0] == want {
			return
		}
		if len(got) > 1 || time.Now().After(deadline) {
			t.Fatalf("%s outcomes %v, want [%s]", tool, got, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
