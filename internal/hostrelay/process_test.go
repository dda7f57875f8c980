package hostrelay

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/internal/upstream/upstreamtest"
	"github.com/toolgate/toolgate/internal/upstream/upstreamtest/fixturedata"
)

// fixtureUpstream returns the helper's upstream setting for the fixture with a fresh
// marker, and the marker.
func fixtureUpstream(t testing.TB) (string, string) {
	marker := upstreamtest.Marker(t)
	t.Cleanup(func() { upstreamtest.WaitGone(t, marker, 20*time.Second) })
	return "fixture:" + upstreamtest.Fixture(t) + ":" + marker, marker
}

// startProcs starts n helpers on dir at once, so they race for the lock.
func startProcs(t testing.TB, n int, dir, up string) []*proc {
	t.Helper()
	ps := make([]*proc, n)
	var wg sync.WaitGroup
	for i := range ps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ps[i] = launch(t, dir, up, nil, "")
		}()
	}
	wg.Wait()
	for _, p := range ps {
		p.waitReady()
	}
	return ps
}

// hosts returns the processes that report hosting.
func hosts(t testing.TB, ps []*proc) []*proc {
	var out []*proc
	for _, p := range ps {
		if p.stats().Hosting {
			out = append(out, p)
		}
	}
	return out
}

// callAll has every process call echo at once and checks each gets its own answer.
func callAll(t testing.TB, ps []*proc, tag string) {
	t.Helper()
	chans := make([]<-chan reply, len(ps))
	for i, p := range ps {
		_, chans[i] = p.start(command{Op: "call", Tool: "echo", Args: json.RawMessage(fmt.Sprintf(`{"text":"%s-%d"}`, tag, i))})
	}
	for i, p := range ps {
		r := p.await(chans[i])
		if want := fmt.Sprintf(`"text":"%s-%d"`, tag, i); r.Err != "" || !bytes.Contains(r.Result, []byte(want)) {
			t.Errorf("process %d: result %s, error %q (want %s)", i, r.Result, r.Err, want)
		}
	}
}

func TestOneHostPerDataDirectory(t *testing.T) {
	for _, n := range []int{2, 5} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			dir := testenv.PrivateDir(t)
			up, marker := fixtureUpstream(t)
			ps := startProcs(t, n, dir, up)
			callAll(t, ps, "first")
			callAll(t, ps, "again")
			h := hosts(t, ps)
			if len(h) != 1 {
				t.Fatalf("%d processes host the data directory, want 1", len(h))
			}
			hostPID := h[0].cmd.Process.Pid
			for i, p := range ps {
				if st := p.stats(); st.HostPID != hostPID {
					t.Errorf("process %d thinks pid %d hosts, not %d", i, st.HostPID, hostPID)
				}
			}
			if pids := upstreamtest.Processes(t, marker); len(pids) != 1 {
				t.Errorf("%d upstream processes run (%v), want 1", len(pids), pids)
			}
			if st := h[0].stats(); st.Clients != n-1 {
				t.Errorf("the host serves %d clients, want %d", st.Clients, n-1)
			}
		})
	}
}

func TestHostKilledAnotherTakesOver(t *testing.T) {
	dir := testenv.PrivateDir(t)
	up, marker := fixtureUpstream(t)
	ps := startProcs(t, 4, dir, up)
	callAll(t, ps, "before")
	h := hosts(t, ps)
	if len(h) != 1 {
		t.Fatalf("%d hosts", len(h))
	}
	victim := h[0]
	var rest []*proc
	for _, p := range ps {
		if p != victim {
			rest = append(rest, p)
		}
	}
	// One survivor watches: it needs a host for its events, so it elects at once.
	watcher := rest[0]
	watcher.do(command{Op: "watch"})
	watcher.waitEvent("resync", 1)
	// A call under way when the host dies fails at once, with the typed error.
	_, hung := rest[1].start(command{Op: "call", Tool: "hang"})
	waitUntil(t, "the hanging call to reach the host", func() bool { return rest[2].inFlight() == 1 })
	old := upstreamtest.Processes(t, marker)
	if len(old) != 1 {
		t.Fatalf("upstream processes before the kill: %v", old)
	}
	victim.kill()
	if r := rest[1].await(hung); r.Kind != "host_gone" {
		t.Errorf("the call under way when the host was killed: kind %q, error %q; want host_gone", r.Kind, r.Err)
	}
	// The watcher elects without being asked; the others' next calls find it.
	watcher.waitEvent("resync", 2) // again: its new host's snapshot, before any call
	callAll(t, rest, "after")
	h = hosts(t, rest)
	if len(h) != 1 {
		t.Fatalf("%d hosts after the kill, want 1", len(h))
	}
	if st := h[0].stats(); st.Clients != len(rest)-1 {
		t.Errorf("the new host serves %d clients, want %d", st.Clients, len(rest)-1)
	}
	// The killed host's upstream got its parent-death signal; one upstream runs.
	waitUntil(t, "the killed host's upstream to go", func() bool {
		return !slices.Contains(upstreamtest.Processes(t, marker), old[0])
	})
	if pids := upstreamtest.Processes(t, marker); len(pids) != 1 {
		t.Errorf("upstream processes after the re-election: %v, want 1", pids)
	}
}

// pairProcs starts a hosting helper and a relaying one on a fresh data directory.
func pairProcs(t testing.TB) (hostP, clientP *proc, marker string) {
	t.Helper()
	dir := testenv.PrivateDir(t)
	up, marker := fixtureUpstream(t)
	hostP = startProc(t, dir, up)
	clientP = startProc(t, dir, up)
	if !hostP.stats().Hosting || clientP.stats().Hosting {
		t.Fatal("the first process should host and the second relay")
	}
	return hostP, clientP, marker
}

func TestHostShutdownFailsCallsInFlight(t *testing.T) {
	hostP, clientP, marker := pairProcs(t)
	_, hung := clientP.start(command{Op: "call", Tool: "hang"})
	waitUntil(t, "the hanging call to reach the host", func() bool { return clientP.inFlight() == 1 })
	// The host closes without waiting for the call (it never ends by itself) …
	if r := hostP.do(command{Op: "close"}); r.Err != "" {
		t.Fatalf("closing the host: %s", r.Err)
	}
	// … which failed at once with the typed error, and nothing of the host runs.
	if r := clientP.await(hung); r.Kind != "host_gone" {
		t.Errorf("the call under way: kind %q, error %q; want host_gone", r.Kind, r.Err)
	}
	if pids := upstreamtest.Processes(t, marker); len(pids) != 0 {
		t.Errorf("upstream processes after the host closed: %v", pids)
	}
	// The next call makes the client the host.
	callAll(t, []*proc{clientP}, "after")
	if st := clientP.stats(); !st.Hosting {
		t.Errorf("the client did not take over: %+v", st)
	}
	if pids := upstreamtest.Processes(t, marker); len(pids) != 1 {
		t.Errorf("upstream processes: %v, want 1", pids)
	}
}

func TestCancellationReachesTheUpstream(t *testing.T) {
	hostP, clientP, _ := pairProcs(t)
	// "ask" makes the fixture send a request back and wait: when the host process
	// sees that request, the relayed tools/call is in flight at the upstream.
	id, ch := clientP.start(command{Op: "call", Tool: "ask", Args: json.RawMessage(`{"method":"sampling/createMessage","params":{}}`)})
	hostP.waitAsked()
	clientP.do(command{Op: "cancel", Target: id})
	if r := clientP.await(ch); r.Kind != "canceled" {
		t.Fatalf("the cancelled call: kind %q, error %q", r.Kind, r.Err)
	}
	waitUntil(t, "the fixture to record notifications/cancelled", func() bool {
		r := clientP.do(command{Op: "call", Tool: "cancellations"})
		return bytes.Contains(r.Result, []byte(`tools/call:ask`))
	})
}

func TestProgressRelayedInOrder(t *testing.T) {
	_, clientP, _ := pairProcs(t)
	const steps = 300
	// An awkward token: the upstream swaps it for its own id and back, byte for byte.
	r := clientP.do(command{Op: "call", Tool: "progress", Args: json.RawMessage(fmt.Sprintf(`{"steps":%d}`, steps)),
		Meta: json.RawMessage(`{"progressToken":1.50}`), Progress: true})
	if r.Err != "" {
		t.Fatal(r.Err)
	}
	if len(r.Progress) != steps {
		t.Fatalf("%d progress notifications, want %d", len(r.Progress), steps)
	}
	for i, p := range r.Progress {
		want := fmt.Sprintf(`{"progressToken":1.50,"progress":%d,"total":%d,"message":"step %d"}`, i+1, steps, i+1)
		if string(p) != want {
			t.Fatalf("progress %d: %s, want %s", i+1, p, want)
		}
	}
}

func TestUpstreamBytesExactAcrossProcesses(t *testing.T) {
	_, clientP, _ := pairProcs(t)
	r := clientP.do(command{Op: "call", Tool: "awkward"})
	if string(r.Result) != fixturedata.AwkwardResult {
		t.Errorf("relayed result:\n%s\nwant the fixture's bytes:\n%s", r.Result, fixturedata.AwkwardResult)
	}
	cat := clientP.do(command{Op: "catalog"})
	if cat.Err != "" {
		t.Fatal(cat.Err)
	}
	found := false
	for _, it := range cat.Items {
		found = found || string(it) == fixturedata.AwkwardTool
	}
	if !found {
		t.Errorf("the relayed catalogue has no byte-exact awkward tool: %q", cat.Items)
	}
}
