package reliability

import (
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// envInt reads a count from the environment (the long forms in
// docs/reliability.md), or def.
func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	if v := os.Getenv(name); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			t.Fatalf("%s=%q: want a positive integer", name, v)
		}
		return n
	}
	return def
}

// TestLoad: TOOLGATE_LOAD_SESSIONS concurrent MCP sessions (default 100; 1,000 in
// docs/reliability.md) each make TOOLGATE_LOAD_CALLS calls of fx.echo back to back
// (default 20; 100 there) through `toolgate serve` on loopback. The sessions belong
// to principals of 50 sessions each (the handler's per-principal limit is 64). Zero
// errors: every call answers its own text; the audit has one allowed event per
// call; serve's RSS is sampled (its peak reported, bounded); the latency
// distribution is reported, never asserted.
func TestLoad(t *testing.T) {
	nSess := envInt(t, "TOOLGATE_LOAD_SESSIONS", 100)
	nCalls := envInt(t, "TOOLGATE_LOAD_CALLS", 20)
	r := newRig(t)
	const perPrincipal = 50
	var tokens []string
	for p := 0; p*perPrincipal < nSess; p++ {
		name := fmt.Sprintf("load%d", p)
		r.tg(t, "grant", "add", "--principal", name, "--tool", "fx.*", "--action", "execute")
		tokens = append(tokens, strings.TrimSpace(r.tg(t, "token", "mint", "--principal", name, "--ttl", "1h")))
	}
	srv := r.serve(t)
	r.session(t, srv.URL, "fx.echo") // the catalogue is in
	pid := srv.Cmd.Process.Pid
	before := len(r.audit(t, "--tool", "fx.echo", "--decision", "allowed"))
	client := &http.Client{Transport: &http.Transport{MaxIdleConns: nSess + 16, MaxIdleConnsPerHost: nSess + 16, IdleConnTimeout: time.Minute}}

	sessions := make([]*session, nSess)
	for i := range sessions {
		s := &session{url: srv.URL, token: tokens[i/perPrincipal], client: client}
		if err := s.open(); err != nil {
			t.Fatalf("session %d: %v", i, err)
		}
		sessions[i] = s
	}
	base := rssKiB(t, pid)
	var peak atomic.Int64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			if v := int64(rssKiB(t, pid)); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	lat := make([][]time.Duration, nSess)
	var errs atomic.Int64
	var firstErr sync.Once
	start := time.Now()
	var wg sync.WaitGroup
	for i, s := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lat[i] = make([]time.Duration, 0, nCalls)
			for c := range nCalls {
				want := fmt.Sprintf("s%d-c%d", i, c)
				t0 := time.Now()
				o, err := s.call("fx.echo", fmt.Sprintf(`{"text":%q}`, want))
				lat[i] = append(lat[i], time.Since(t0))
				if err != nil || o.code != "" || o.text != want {
					errs.Add(1)
					firstErr.Do(func() { t.Errorf("session %d call %d: %+v %v", i, c, o, err) })
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(stop)
	<-sampled
	end := rssKiB(t, pid)
	all := slices.Concat(lat...)
	slices.Sort(all)
	pct := func(p float64) time.Duration {
		return all[min(len(all)-1, int(p*float64(len(all))))].Round(10 * time.Microsecond)
	}
	t.Logf("load: %d sessions × %d calls = %d calls in %v (%.0f calls/s), %d errors; latency p50 %v p90 %v p99 %v p99.9 %v max %v; serve RSS %d KiB before, peak %d KiB, %d KiB after",
		nSess, nCalls, len(all), elapsed.Round(time.Millisecond), float64(len(all))/elapsed.Seconds(), errs.Load(),
		pct(0.5), pct(0.9), pct(0.99), pct(0.999), all[len(all)-1].Round(10*time.Microsecond), base, peak.Load(), end)
	if errs.Load() != 0 {
		t.Errorf("%d of %d calls failed", errs.Load(), len(all))
	}
	// Bounded: a session's state is small; 1,000 of them stay far below this.
	if grew := peak.Load() - int64(base); grew > 512<<10 {
		t.Errorf("serve's RSS grew by %d KiB under load", grew)
	}
	if n := len(r.audit(t, "--tool", "fx.echo", "--decision", "allowed")) - before; n != len(all) {
		t.Errorf("%d allowed events for %d calls", n, len(all))
	}
}
