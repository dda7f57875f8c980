package telemetry

import "sync/atomic"

// SpanCounts counts what the process's span exporter did with finished spans. The
// library packages only read them (/metrics: toolgate_trace_spans_*_total); the
// exporter wiring in cmd/toolgate writes them. All stay zero while no exporter is
// installed (docs/deployment.md, "Traces").
type SpanCounts struct {
	// Exported counts spans the collector accepted.
	Exported atomic.Uint64
	// Failed counts spans in batches the collector refused or could not be reached
	// for (after the exporter's retries).
	Failed atomic.Uint64
	// Dropped counts spans never sent because the export queue was full (a slow or
	// unreachable collector): a call never waits for its span to be queued.
	Dropped atomic.Uint64
}

// Spans is this process's exporter's SpanCounts.
var Spans SpanCounts
