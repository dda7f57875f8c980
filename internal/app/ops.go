package app

import (
	"context"
	"time"

	"github.com/toolgate/toolgate/internal/mcpspec"
	"github.com/toolgate/toolgate/internal/metrics"
	"github.com/toolgate/toolgate/internal/store"
)

// Ready reports whether the App can serve calls now: its store answers and is at the
// schema version this binary knows (store.CheckReady). toolgate serve's /readyz asks.
func (a *App) Ready(ctx context.Context) error { return a.st.CheckReady(ctx) }

// Metrics is what toolgate serve exposes on /metrics: calls, their latency, the audit
// queue and commits, the change listener (docs/deployment.md, "Metrics").
func (a *App) Metrics() *metrics.Metrics { return a.metrics }

// newMetrics instruments st's audit commits and queue, and on PostgreSQL its change
// listener.
func newMetrics(st *store.Store) *metrics.Metrics {
	m := metrics.New()
	st.ObserveAuditCommits(m.ObserveAuditCommit)
	m.GaugeFunc("toolgate_audit_queue_depth", "Audit events waiting for a group commit: decided calls held until their event is durable.",
		func() float64 { return float64(st.AuditQueueDepth()) })
	if ch := st.Changes(); ch.Notifies() {
		m.GaugeFunc("toolgate_store_listener_up", "1 while the PostgreSQL change listener is connected; at 0, changes made elsewhere reach this replica at its next request's version read only.",
			func() float64 {
				if ch.Live() {
					return 1
				}
				return 0
			})
	}
	return m
}

// observe records one call in the metrics: the canonical tool id when the turn
// publishes the name (else metrics.Other, so unknown names add no series), the
// outcome and reason code from the result's _meta. It returns those labels, which
// the call's span records too.
func (t turn) observe(req *mcpspec.CallRequest, res *mcpspec.CallResult, err error, d time.Duration) (tool, outcome, code string) {
	tool, ok := t.Turn.ToolID(req.Name)
	if !ok {
		tool = metrics.Other
	} else if err == nil && res != nil {
		t.a.noteBinding(tool)
	}
	outcome = metrics.OutcomeOK
	switch {
	case err != nil || res == nil:
		outcome, code = metrics.OutcomeError, "internal_error"
	case res.IsError:
		outcome = metrics.OutcomeFailed
		if s, _ := res.Meta[mcpspec.MetaStatus].(string); s == metrics.OutcomeDenied {
			outcome = metrics.OutcomeDenied
		}
		code, _ = res.Meta[mcpspec.MetaCode].(string)
	}
	t.a.metrics.ObserveCall(t.surface, tool, outcome, code, d)
	return tool, outcome, code
}
