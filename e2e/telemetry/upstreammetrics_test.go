package telemetry

import (
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// /metrics follows an installed server's lifecycle through the real binary: ready
// with no restart after its first call, then, after its process crashed, one restart
// counted and ready again, with no series left for a state it is no longer in.
func TestUpstreamStateAndRestartsInMetrics(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	installFixture(t, data)
	srv := testenvStart(t, data)
	tok := ownerToken(t, data)
	c := open(t, srv.URL, tok, "fx.echo")
	if raw, code := c.post("tools/call", `{"name":"fx.echo","arguments":{"text":"x"}}`, nil); code != http.StatusOK || !strings.Contains(string(raw), `"x"`) {
		t.Fatalf("call: %d %s", code, raw)
	}
	before := scrape(t, srv.URL, tok)
	if v := metricValue(before, `toolgate_upstream_state{server="fx",state="ready"}`); v != 1 {
		t.Fatalf("fx not ready in /metrics before the crash:\n%s", grepLines(before, "toolgate_upstream_"))
	}
	if v := metricValue(before, `toolgate_upstream_restarts_total{server="fx"}`); v != 0 {
		t.Fatalf("restarts before the crash: %v\n%s", v, grepLines(before, "toolgate_upstream_"))
	}
	c.post("tools/call", `{"name":"fx.crash","arguments":{"code":3}}`, nil) // the process exits mid-call
	var after string
	deadline := time.Now().Add(30 * time.Second)
	for {
		after = scrape(t, srv.URL, tok)
		if metricValue(after, `toolgate_upstream_restarts_total{server="fx"}`) == 1 &&
			metricValue(after, `toolgate_upstream_state{server="fx",state="ready"}`) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/metrics never showed fx restarted once and ready again:\n%s", grepLines(after, "toolgate_upstream_"))
		}
		time.Sleep(100 * time.Millisecond)
	}
	if n := strings.Count(after, "\ntoolgate_upstream_state{"); n != 1 {
		t.Errorf("%d state series for one server:\n%s", n, grepLines(after, "toolgate_upstream_"))
	}
	if raw, code := c.post("tools/call", `{"name":"fx.echo","arguments":{"text":"again"}}`, nil); code != http.StatusOK || !strings.Contains(string(raw), "again") {
		t.Errorf("call after the restart: %d %s", code, raw)
	}
	if err := srv.Stop(t, syscall.SIGTERM); err != nil {
		t.Fatalf("serve: %v", err)
	}
}
