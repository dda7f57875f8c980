package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolgate/toolgate/internal/telemetry"
)

// spanCounters are the trace exporter's counts (telemetry.Spans), read at scrape
// time: zero until an OTLP exporter is configured (docs/deployment.md, "Traces").
func spanCounters() []prometheus.Collector {
	c := func(name, help string, v func() uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 { return float64(v()) })
	}
	return []prometheus.Collector{
		c("toolgate_trace_spans_exported_total", "Spans the OTLP collector accepted.", telemetry.Spans.Exported.Load),
		c("toolgate_trace_spans_failed_total", "Spans in export batches that failed after the exporter's retries (collector unreachable or refusing).", telemetry.Spans.Failed.Load),
		c("toolgate_trace_spans_dropped_total", "Spans dropped because the export queue was full; calls never wait for the exporter.", telemetry.Spans.Dropped.Load),
	}
}
