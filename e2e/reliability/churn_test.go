package reliability

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/app"
	"github.com/toolgate/toolgate/internal/upstream/upstreamtest"
)

// onlyFixture returns the one live fixture process of r, waiting for it.
func (r *rig) onlyFixture(t *testing.T) int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		pids := upstreamtest.Processes(t, r.marker)
		if len(pids) == 1 {
			return pids[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("fixture processes: %v, want exactly one", pids)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// echoOK calls fx.echo until it answers text, tolerating only the documented codes
// of an upstream that is coming back (upstream_unavailable, upstream_crashed).
func echoOK(t *testing.T, s *session, text string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		o, err := s.call("fx.echo", fmt.Sprintf(`{"text":%q}`, text))
		if err != nil {
			t.Fatalf("fx.echo: %v", err)
		}
		if o.code == "" {
			if o.text != text {
				t.Fatalf("fx.echo answered %q, want %q", o.text, text)
			}
			return
		}
		if o.code != "upstream_unavailable" && o.code != "upstream_crashed" {
			t.Fatalf("fx.echo: code %s (%s)", o.code, o.text)
		}
		if time.Now().After(deadline) {
			t.Fatalf("fx.echo still %s after 30 s", o.code)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestUpstreamCrashChurn: an upstream under `toolgate serve` crashes 200 times, on
// a call (the call fails upstream_crashed at once) or on SIGKILL while idle, and is
// restarted each time (`toolgate restart fx`, which also closes the crash-loop
// circuit that five crashes a minute open). Serve holds no more descriptors at the
// end than after the first cycles; no fixture process, no process in any group a
// fixture ran in, and no temporary file is left once serve stops.
func TestUpstreamCrashChurn(t *testing.T) {
	n := envInt(t, "TOOLGATE_CRASH_CYCLES", 200)
	r := newRig(t)
	srv := r.serve(t)
	s := r.session(t, srv.URL, "fx.echo")
	pgids := map[int]bool{}
	var fdBase int
	for i := range n {
		echoOK(t, s, "c"+strconv.Itoa(i))
		pid := r.onlyFixture(t)
		pgids[pgidOf(pid)] = true
		if i == 5 {
			fdBase = fdCount(t, srv.Cmd.Process.Pid)
		}
		if i%2 == 0 {
			o, err := s.call("fx.crash", `{}`)
			if err != nil {
				t.Fatalf("cycle %d: fx.crash: %v", i, err)
			}
			if o.code != "upstream_crashed" {
				t.Fatalf("cycle %d: fx.crash answered code %q (%s), want upstream_crashed", i, o.code, o.text)
			}
		} else if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatalf("cycle %d: %v", i, err)
		}
		upstreamtest.WaitGone(t, r.marker, 10*time.Second)
		r.tg(t, "restart", "fx")
	}
	echoOK(t, s, "last")
	fdEnd := fdCount(t, srv.Cmd.Process.Pid)
	t.Logf("%d crash cycles; serve descriptors after cycle 5: %d, at the end: %d; %d fixture process groups", n, fdBase, fdEnd, len(pgids))
	if n > 5 && fdEnd > fdBase+4 {
		t.Errorf("serve's descriptors grew from %d to %d over %d crash cycles", fdBase, fdEnd, n)
	}
	if err := srv.Stop(t, syscall.SIGTERM); err != nil {
		t.Errorf("serve: %v", err)
	}
	upstreamtest.WaitGone(t, r.marker, 10*time.Second)
	if left := inGroups(pgids); len(left) != 0 {
		t.Errorf("processes left in the fixtures' groups: %v", left)
	}
	if left := r.tmpLeft(t); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

// TestServeStartStopChurn: `toolgate serve` started, its upstream started by a call,
// and stopped with SIGTERM, 200 times (TOOLGATE_SERVE_CYCLES): every stop exits 0 and leaves no fixture process,
// nothing in its process group, no daemon.json and no temporary file.
func TestServeStartStopChurn(t *testing.T) {
	n := envInt(t, "TOOLGATE_SERVE_CYCLES", 200)
	r := newRig(t)
	pgids := map[int]bool{}
	start := time.Now()
	for i := range n {
		srv := r.serve(t)
		s := r.session(t, srv.URL, "fx.echo")
		echoOK(t, s, "s"+strconv.Itoa(i))
		pgids[pgidOf(r.onlyFixture(t))] = true
		if err := srv.Stop(t, syscall.SIGTERM); err != nil {
			t.Fatalf("cycle %d: serve: %v\n%s", i, err, srv.Stderr.String())
		}
		upstreamtest.WaitGone(t, r.marker, 10*time.Second)
		if left := inGroups(pgids); len(left) != 0 {
			t.Fatalf("cycle %d: processes left in the fixtures' groups: %v", i, left)
		}
		if _, err := os.Stat(filepath.Join(r.data, app.DaemonFile)); !os.IsNotExist(err) {
			t.Fatalf("cycle %d: daemon.json after a clean stop: %v", i, err)
		}
		if left := r.tmpLeft(t); len(left) != 0 {
			t.Fatalf("cycle %d: temporary files left: %v", i, left)
		}
	}
	t.Logf("%d serve start/stop cycles in %v", n, time.Since(start).Round(time.Millisecond))
}
