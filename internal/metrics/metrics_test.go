package metrics_test

import (
	"fmt"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/metrics"
)

func scrape(t *testing.T, m *metrics.Metrics) string {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	b, _ := io.ReadAll(rec.Body)
	if rec.Code != 200 || !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/plain") {
		t.Fatalf("scrape: %d %s", rec.Code, rec.Header().Get("Content-Type"))
	}
	return string(b)
}

func wantLine(t *testing.T, text, line string) {
	t.Helper()
	for _, l := range strings.Split(text, "\n") {
		if l == line {
			return
		}
	}
	t.Errorf("no line %q in the scrape", line)
}

// Calls are counted by tool, outcome and code and timed per surface; an unexpected
// surface is "other"; reason codes beyond the cap, or not shaped like one, collapse
// into "other" instead of adding series.
func TestCallsBoundedLabels(t *testing.T) {
	m := metrics.New()
	m.ObserveCall("api", "local.read_file", metrics.OutcomeOK, "", time.Millisecond)
	m.ObserveCall("api", "local.read_file", metrics.OutcomeOK, "", time.Millisecond)
	m.ObserveCall("http", metrics.Other, metrics.OutcomeDenied, "tool_unavailable", time.Millisecond)
	m.ObserveCall("made-up", "local.read_file", metrics.OutcomeFailed, "Bad Code\n", time.Millisecond)
	for i := range 100 {
		m.ObserveCall("stdio", "local.read_file", metrics.OutcomeFailed, fmt.Sprintf("code_%d", i), time.Millisecond)
	}
	text := scrape(t, m)
	wantLine(t, text, `toolgate_tool_calls_total{code="none",outcome="ok",tool="local.read_file"} 2`)
	wantLine(t, text, `toolgate_tool_calls_total{code="tool_unavailable",outcome="denied",tool="other"} 1`)
	wantLine(t, text, `toolgate_tool_call_duration_seconds_count{surface="api"} 2`)
	wantLine(t, text, `toolgate_tool_call_duration_seconds_count{surface="other"} 1`)
	wantLine(t, text, `toolgate_tool_call_duration_seconds_count{surface="stdio"} 100`)
	// none, tool_unavailable and 62 of the 100 fill the cap of 64; the rest and the
	// malformed code are "other".
	wantLine(t, text, `toolgate_tool_calls_total{code="other",outcome="failed",tool="local.read_file"} 39`)
	if n := strings.Count(text, "\ntoolgate_tool_calls_total{"); n != 2+62+1 {
		t.Errorf("%d call series, want 65", n)
	}
}

// The audit, session and upstream metrics read what they are given; without an
// upstream source there is no upstream series.
func TestGaugesAndUpstreams(t *testing.T) {
	m := metrics.New()
	m.ObserveAuditCommit(2*time.Millisecond, 3, nil)
	m.ObserveAuditCommit(time.Millisecond, 1, io.EOF)
	m.SetSessions(func() int { return 7 })
	m.GaugeFunc("toolgate_test_gauge", "a test gauge", func() float64 { return 4 })
	text := scrape(t, m)
	wantLine(t, text, `toolgate_audit_commit_duration_seconds_count 2`)
	wantLine(t, text, `toolgate_audit_commit_events_sum 4`)
	wantLine(t, text, `toolgate_audit_commit_failures_total 1`)
	wantLine(t, text, `toolgate_mcp_sessions 7`)
	wantLine(t, text, `toolgate_test_gauge 4`)
	if strings.Contains(text, "toolgate_upstream_") {
		t.Error("upstream series without an upstream source")
	}
	m.SetUpstreams(func() []metrics.UpstreamState {
		return []metrics.UpstreamState{{Server: "github", State: "ready", Restarts: 2}, {Server: "github", State: "failed"}, {Server: "fs", State: "backoff"}}
	})
	text = scrape(t, m)
	wantLine(t, text, `toolgate_upstream_state{server="github",state="ready"} 1`)
	wantLine(t, text, `toolgate_upstream_restarts_total{server="github"} 2`)
	wantLine(t, text, `toolgate_upstream_state{server="fs",state="backoff"} 1`)
	if strings.Contains(text, `state="failed"`) {
		t.Error("a server reported twice got two series")
	}
	var nilM *metrics.Metrics
	nilM.ObserveCall("api", "x", metrics.OutcomeOK, "", 0) // records nothing, no panic
}

// BenchmarkObserveCall is the per-call cost once a series exists: no allocation.
func BenchmarkObserveCall(b *testing.B) {
	m := metrics.New()
	m.ObserveCall("http", "local.read_file", metrics.OutcomeOK, "", time.Millisecond)
	b.ReportAllocs()
	for b.Loop() {
		m.ObserveCall("http", "local.read_file", metrics.OutcomeOK, "", time.Millisecond)
	}
}

// The upstream table follows transitions, counts entries into restarting, keeps the
// restarts across a resync that keeps the server, and forgets a removed server.
func TestUpstreamTable(t *testing.T) {
	m := metrics.New()
	tab := metrics.NewUpstreamTable()
	m.SetUpstreams(tab.States)
	tab.Transition("fx", "starting", false)
	tab.Transition("fx", "ready", false)
	tab.Transition("fx", "restarting", true)
	tab.Transition("fx", "starting", false)
	tab.Transition("fx", "ready", false)
	tab.Transition("gone", "ready", false)
	text := scrape(t, m)
	wantLine(t, text, `toolgate_upstream_state{server="fx",state="ready"} 1`)
	wantLine(t, text, `toolgate_upstream_restarts_total{server="fx"} 1`)
	wantLine(t, text, `toolgate_upstream_state{server="gone",state="ready"} 1`)
	tab.Reset(map[string]string{"fx": "degraded", "new": "not_started"})
	text = scrape(t, m)
	wantLine(t, text, `toolgate_upstream_state{server="fx",state="degraded"} 1`)
	wantLine(t, text, `toolgate_upstream_restarts_total{server="fx"} 1`)
	wantLine(t, text, `toolgate_upstream_state{server="new",state="not_started"} 1`)
	if strings.Contains(text, `server="gone"`) || strings.Contains(text, `state="ready"`) {
		t.Errorf("a resync left a stale series:\n%s", text)
	}
	tab.Remove("fx")
	if text = scrape(t, m); strings.Contains(text, `server="fx"`) {
		t.Errorf("a removed server kept its series")
	}
}
