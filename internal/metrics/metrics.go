// Package metrics is toolgate's Prometheus instrumentation: what toolgate serve
// exposes on /metrics (docs/deployment.md, "Metrics"). It owns the registry and every
// metric; the app records calls and the store's audit commits into it, and the daemon
// reads its sessions from it at scrape time. Label values are bounded: tools by the
// catalogue (an unknown name is "other"), reason codes by a fixed cap, surfaces by a
// fixed list, so no caller input can grow the series without bound.
package metrics

import (
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Other is the label value of a tool not in the catalogue, a reason code past the
// cap or of an unexpected shape, and a surface not in Surfaces.
const Other = "other"

// Surfaces are the transports calls are timed per (kernel.TurnOptions.Transport).
var Surfaces = []string{"http", "api", "stdio", "bridge"}

// maxCodes bounds the distinct reason-code label values: the code table
// (docs/reason-codes.md) has about twenty; a code beyond the cap is Other.
const maxCodes = 64

// Outcome label values of toolgate_tool_calls_total.
const (
	OutcomeOK     = "ok"     // the call ran and its result is not an error
	OutcomeDenied = "denied" // refused by policy (toolgate/status "denied")
	OutcomeFailed = "failed" // failed: arguments, the tool, the audit (toolgate/status "failed"), or a tool's own error result
	OutcomeError  = "error"  // an internal error: no result at all
)

// callKey is one series of toolgate_tool_calls_total.
type callKey struct{ tool, outcome, code string }

// Metrics holds toolgate's metrics. The zero value is not usable; call New. Its
// methods are safe for concurrent use, and a nil *Metrics records nothing.
type Metrics struct {
	reg *prometheus.Registry

	calls   *prometheus.CounterVec
	latency map[string]prometheus.Observer // per surface, resolved once

	auditCommit   prometheus.Histogram
	auditBatch    prometheus.Histogram
	auditFailures prometheus.Counter

	sessions  atomic.Pointer[func() int]
	upstreams atomic.Pointer[Upstreams]

	mu     sync.RWMutex // guards series and codes; never held across I/O
	series map[callKey]prometheus.Counter
	codes  map[string]struct{}
}

// New returns a registry with toolgate's metrics and the Go runtime and process
// collectors.
func New() *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolgate_tool_calls_total",
			Help: "Tool calls decided by the kernel, by canonical tool id (other: not in the caller's catalogue), outcome (ok, denied, failed, error) and reason code (none when it succeeded).",
		}, []string{"tool", "outcome", "code"}),
		auditCommit: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "toolgate_audit_commit_duration_seconds",
			Help:    "Time to write and commit one group of audit events (one transaction, one fsync on SQLite).",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 10},
		}),
		auditBatch: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "toolgate_audit_commit_events",
			Help:    "Audit events per group commit.",
			Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128, 256},
		}),
		auditFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "toolgate_audit_commit_failures_total",
			Help: "Group commits that failed: every call in them failed closed (audit_unavailable).",
		}),
		latency: map[string]prometheus.Observer{},
		series:  map[callKey]prometheus.Counter{},
		codes:   map[string]struct{}{},
	}
	lat := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "toolgate_tool_call_duration_seconds",
		Help:    "Time from a tools/call reaching the kernel to its result, by surface (http: /mcp, api: /v1/tools/invoke, stdio, bridge).",
		Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300},
	}, []string{"surface"})
	for _, s := range append(Surfaces, Other) {
		m.latency[s] = lat.WithLabelValues(s)
	}
	sessions := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "toolgate_mcp_sessions",
		Help: "Live legacy Streamable HTTP sessions on this replica's /mcp (including sessions opened on another replica and served here).",
	}, func() float64 {
		if f := m.sessions.Load(); f != nil {
			return float64((*f)())
		}
		return 0
	})
	m.reg.MustRegister(m.calls, lat, m.auditCommit, m.auditBatch, m.auditFailures, sessions, upstreamCollector{m},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.reg.MustRegister(spanCounters()...)
	return m
}

// Handler serves the registry in the Prometheus text format (or OpenMetrics when the
// scraper asks for it). Authentication is the caller's (daemon: the owner token).
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// ObserveCall records one call: tool is its canonical id or Other, surface its
// transport, code its reason code ("" when it succeeded). After the first call of a
// series it takes a read lock and a map lookup, no allocation.
func (m *Metrics) ObserveCall(surface, tool, outcome, code string, d time.Duration) {
	if m == nil {
		return
	}
	if code == "" {
		code = "none"
	}
	k := callKey{tool, outcome, code}
	m.mu.RLock()
	c, ok := m.series[k]
	m.mu.RUnlock()
	if !ok {
		c = m.seriesFor(k)
	}
	c.Inc()
	o, ok := m.latency[surface]
	if !ok {
		o = m.latency[Other]
	}
	o.Observe(d.Seconds())
}

// seriesFor resolves a new series, bounding the reason codes: a code not seen before
// beyond maxCodes distinct ones, or not shaped like one, becomes Other.
func (m *Metrics) seriesFor(k callKey) prometheus.Counter {
	m.mu.Lock()
	defer m.mu.Unlock()
	if c, ok := m.series[k]; ok {
		return c
	}
	if _, known := m.codes[k.code]; !known {
		if len(m.codes) >= maxCodes || !codeShaped(k.code) {
			k.code = Other
			if c, ok := m.series[k]; ok {
				return c
			}
		} else {
			m.codes[k.code] = struct{}{}
		}
	}
	c := m.calls.WithLabelValues(k.tool, k.outcome, k.code)
	m.series[k] = c
	return c
}

// codeShaped accepts what the code table's codes look like: 1 to 48 of [a-z0-9_].
func codeShaped(s string) bool {
	if s == "" || len(s) > 48 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// ObserveAuditCommit records one group commit of n events (store.Store's commit
// observer).
func (m *Metrics) ObserveAuditCommit(d time.Duration, n int, err error) {
	if m == nil {
		return
	}
	m.auditCommit.Observe(d.Seconds())
	m.auditBatch.Observe(float64(n))
	if err != nil {
		m.auditFailures.Inc()
	}
}

// GaugeFunc registers a gauge read at scrape time (audit queue depth, sessions, the
// change listener). Registering a name twice panics: each is wired once, at start.
func (m *Metrics) GaugeFunc(name, help string, f func() float64) {
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f))
}

// SetSessions sets what toolgate_mcp_sessions reads (the /mcp handler's live
// sessions); the last call wins.
func (m *Metrics) SetSessions(f func() int) {
	if m != nil && f != nil {
		m.sessions.Store(&f)
	}
}
