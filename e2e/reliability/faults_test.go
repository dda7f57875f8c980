package reliability

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/upstream/upstreamtest"
)

// faultRig is a serve with two upstreams: fx, the fixture with its protocol-fault
// tools, and ok, a well-behaved fixture that must not notice fx's faults.
type faultRig struct {
	*rig
	okMarker string
	pid      int // serve's
	s        *session
}

func newFaultRig(t *testing.T) *faultRig {
	t.Helper()
	return newFaultRigWith(t, nil)
}

// newFaultRigWith is newFaultRig with more members in fx's entry.
func newFaultRigWith(t *testing.T, members map[string]any) *faultRig {
	t.Helper()
	f := &faultRig{rig: newRigWith(t, members, "-faults"), okMarker: upstreamtest.Marker(t)}
	f.addServer(t, "ok", f.okMarker)
	srv := f.serve(t)
	f.pid = srv.Cmd.Process.Pid
	// Both servers' catalogues are published before the session under test opens: a
	// catalogue published after it makes the session stale (its next request 404,
	// docs/host.md "List changes to open sessions"), which is not the fault tested.
	_ = f.session(t, srv.URL, "ok.echo")
	f.s = f.session(t, srv.URL, "fx.twice")
	echoOK(t, f.s, "warm")
	f.okEcho(t, "warm")
	return f
}

// okEcho calls the other server, which must answer at once whatever fx does.
func (f *faultRig) okEcho(t *testing.T, text string) {
	t.Helper()
	s := f.session(t, f.s.url, "ok.echo")
	o, err := s.call("ok.echo", fmt.Sprintf(`{"text":%q}`, text))
	if err != nil || o.code != "" || o.text != text {
		t.Fatalf("ok.echo during fx's fault: %+v %v", o, err)
	}
}

// sameProcess checks fx is still the one process it was: the fault did not restart it.
func (f *faultRig) sameProcess(t *testing.T, pid int) {
	t.Helper()
	if now := f.onlyFixture(t); now != pid {
		t.Errorf("fx was restarted (pid %d, now %d); the fault must not restart it", pid, now)
	}
}

// An upstream answering a call with a 1 GiB line (the cap is 16 MiB): the line is
// skipped as it streams, never buffered — serve's RSS, sampled every 10 ms during
// the call, grows by at most 96 MiB (six times the cap, whatever the line's length;
// TOOLGATE_HUGE_BYTES sets it) — and the call fails
// upstream_unavailable; the connection survives (the next call is answered by the
// same process) and the other server is not affected.
func TestUpstreamHugeLine(t *testing.T) {
	f := newFaultRig(t)
	pid := f.onlyFixture(t)
	base := rssKiB(t, f.pid)
	var peak atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			if v := int64(rssKiB(t, f.pid)); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	start := time.Now()
	size := 1 << 30
	if v := os.Getenv("TOOLGATE_HUGE_BYTES"); v != "" {
		size, _ = strconv.Atoi(v)
	}
	o, err := f.s.call("fx.huge", fmt.Sprintf(`{"bytes":%d}`, size))
	took := time.Since(start)
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatalf("fx.huge: %v", err)
	}
	t.Logf("%d-byte line: answered %q in %v; serve RSS %d KiB before, peak %d KiB", size, o.code, took.Round(time.Millisecond), base, peak.Load())
	if o.code != "upstream_unavailable" || !strings.Contains(o.text, "exceeds") {
		t.Errorf("fx.huge answered %+v, want upstream_unavailable naming the cap", o)
	}
	if grew := peak.Load() - int64(base); grew > 96<<10 {
		t.Errorf("serve's RSS grew by %d KiB while skipping the line", grew)
	}
	echoOK(t, f.s, "after huge")
	f.sameProcess(t, pid)
	f.okEcho(t, "after huge")
}

// An upstream that never answers, ended by its caller before the call timeout
// (the default, 60 s) — by notifications/cancelled, or by disconnecting. Either way notifications/cancelled reaches the upstream, the call is
// audited cancelled after its allowed event, the upstream keeps running (it is
// healthy: it answers everything else), and the other server answers throughout.
func TestUpstreamNeverAnswers(t *testing.T) {
	f := newFaultRig(t)
	pid := f.onlyFixture(t)
	// 1. notifications/cancelled from the client.
	hung := &session{url: f.s.url, token: f.s.token, id: f.s.id, next: 1000}
	done := make(chan error, 1)
	go func() {
		res, err := hung.rpc("tools/call", `{"name":"fx.hang","arguments":{}}`)
		t.Logf("the cancelled call answered: %.300s", res)
		done <- err
	}()
	f.waitAllowed(t, "fx.hang", 1)
	f.okEcho(t, "while hung")
	if code, err := f.s.post(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1001,"reason":"test"}}`); err != nil || code != 202 {
		t.Fatalf("notifications/cancelled: %d %v", code, err)
	}
	select {
	case err := <-done:
		t.Logf("the cancelled call's request ended: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("the cancelled call's request never ended")
	}
	f.waitCancelled(t, 1)
	// 2. The client disconnects mid-call.
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		_, err := hung.rpcContext(ctx, "tools/call", `{"name":"fx.hang","arguments":{}}`)
		done <- err
	}()
	f.waitAllowed(t, "fx.hang", 2)
	cancel()
	<-done
	f.waitCancelled(t, 2)
	o, err := f.s.call("fx.cancellations", `{}`)
	if err != nil || o.code != "" {
		t.Fatalf("fx.cancellations: %+v %v", o, err)
	}
	if n := strings.Count(o.text, ",") + 1; strings.TrimSpace(o.text) == "[]" || n < 2 {
		t.Errorf("the upstream received notifications/cancelled for %s; want two requests", o.text)
	}
	f.sameProcess(t, pid)
	f.okEcho(t, "after hang")
}

// waitAllowed waits until tool has n allowed events.
func (f *faultRig) waitAllowed(t *testing.T, tool string, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		got := 0
		for _, e := range f.audit(t, "--tool", tool, "--decision", "allowed") {
			_ = e
			got++
		}
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d allowed events, want %d", tool, got, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitCancelled waits until fx.hang has n outcomes, every one of them cancelled.
func (f *faultRig) waitCancelled(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var codes []string
		for _, e := range f.audit(t, "--tool", "fx.hang") {
			if e.Decision != "allowed" {
				codes = append(codes, e.Decision+"/"+e.Code)
			}
		}
		if len(codes) >= n {
			for _, c := range codes {
				if c != "failed/cancelled" {
					t.Fatalf("fx.hang outcomes %v, want failed/cancelled", codes)
				}
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("fx.hang outcomes %v, want %d cancelled", codes, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// An upstream answering an id it was never sent, then the call: the stray answer
// is dropped, the call gets its own answer, nothing is restarted.
func TestUpstreamUnknownID(t *testing.T) {
	f := newFaultRig(t)
	pid := f.onlyFixture(t)
	for i := range 20 {
		o, err := f.s.call("fx.wrong_id", `{}`)
		if err != nil || o.code != "" || o.text != "answered" {
			t.Fatalf("fx.wrong_id #%d: %+v %v", i, o, err)
		}
	}
	echoOK(t, f.s, "after wrong ids")
	f.sameProcess(t, pid)
	f.okEcho(t, "after wrong ids")
}

// An upstream answering one call twice: the caller gets the first answer, the
// second is dropped and never reaches the next call, nothing is restarted.
func TestUpstreamAnswersTwice(t *testing.T) {
	f := newFaultRig(t)
	pid := f.onlyFixture(t)
	for i := range 20 {
		o, err := f.s.call("fx.twice", `{}`)
		if err != nil || o.code != "" || o.text != "first" {
			t.Fatalf("fx.twice #%d: %+v %v", i, o, err)
		}
		echoOK(t, f.s, fmt.Sprintf("after twice %d", i))
	}
	f.sameProcess(t, pid)
	f.okEcho(t, "after twice")
}
