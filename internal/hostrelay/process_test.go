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
			ps[i] = launch(t, dir, up, nil)
		}()
	}
	wg.Wait()
	for _, p := range ps {
		select {
		case <-p.readyCh():
		case <-time.After(30 * time.Second):
			t.Fatalf("helper not ready: %s", p.stderr.String())
		}
		if p.ready.Err != "" {
			t.Fatalf("helper could not open the data directory: %s", p.ready.Err)
		}
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
