//go:build !nootlp

package main

import (
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/toolgate/toolgate/internal/telemetry"
	"github.com/toolgate/toolgate/internal/version"
)

// flushTimeout bounds how long the process waits, as it exits, for the spans still
// queued to reach the collector: an unreachable one delays the exit by at most this.
const flushTimeout = 5 * time.Second

// startTracing installs the OpenTelemetry SDK with an OTLP/HTTP exporter as the global
// TracerProvider when the environment asks for it (tracingWanted), and returns what
// flushes it at exit. The exporter reads its own OTEL_EXPORTER_OTLP_* settings
// (endpoint, headers, timeout, TLS), the SDK the sampler's and the batch's. Spans
// leave through a bounded queue on the SDK's goroutine: a slow or unreachable
// collector costs dropped spans (counted in telemetry.Spans), never a blocked call.
func startTracing(getenv func(string) string, stderr io.Writer) (flush func()) {
	on, notice := tracingWanted(getenv)
	if notice != "" {
		fmt.Fprintf(stderr, "toolgate: %s\n", notice)
	}
	if !on {
		return func() {}
	}
	ctx := context.Background()
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "toolgate: traces are not exported: %v\n", err)
		return func() {}
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", "toolgate"), attribute.String("service.version", version.String())),
		resource.WithFromEnv()) // OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES
	if err != nil {
		fmt.Fprintf(stderr, "toolgate: trace resource attributes: %v\n", err) // res holds what could be read
	}
	q := queueSize(getenv)
	inflight := &atomic.Int64{}
	bsp := sdktrace.NewBatchSpanProcessor(countingExporter{exp, inflight}, sdktrace.WithMaxQueueSize(q))
	tp := sdktrace.NewTracerProvider(sdktrace.WithResource(res),
		sdktrace.WithSpanProcessor(boundedProcessor{SpanProcessor: bsp, inflight: inflight, limit: int64(q)}))
	otel.SetErrorHandler(&exportErrors{w: stderr})
	otel.SetTracerProvider(tp)
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), flushTimeout)
		defer cancel()
		if err := tp.Shutdown(ctx); err != nil {
			fmt.Fprintf(stderr, "toolgate: flushing traces: %v (%d spans dropped, %d failed in all)\n", err,
				telemetry.Spans.Dropped.Load(), telemetry.Spans.Failed.Load())
		}
	}
}

// boundedProcessor counts and drops a sampled span when limit spans are already
// waiting for (or in) an export, so the batch processor's own queue never fills and
// every drop is counted (telemetry.Spans.Dropped). OnEnd never blocks.
type boundedProcessor struct {
	sdktrace.SpanProcessor
	inflight *atomic.Int64
	limit    int64
}

func (p boundedProcessor) OnEnd(s sdktrace.ReadOnlySpan) {
	if !s.SpanContext().IsSampled() {
		p.SpanProcessor.OnEnd(s) // not exported: the batch processor ignores it
		return
	}
	if p.inflight.Add(1) > p.limit {
		p.inflight.Add(-1)
		telemetry.Spans.Dropped.Add(1)
		return
	}
	p.SpanProcessor.OnEnd(s)
}

// countingExporter counts each batch's outcome and releases its spans' places in
// the queue bound.
type countingExporter struct {
	sdktrace.SpanExporter
	inflight *atomic.Int64
}

func (e countingExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	err := e.SpanExporter.ExportSpans(ctx, spans)
	e.inflight.Add(-int64(len(spans)))
	if err != nil {
		telemetry.Spans.Failed.Add(uint64(len(spans)))
	} else {
		telemetry.Spans.Exported.Add(uint64(len(spans)))
	}
	return err
}

// exportErrors writes the SDK's errors (an unreachable collector, a refused batch) to
// stderr, at most one line a minute, with the running counts.
type exportErrors struct {
	w    io.Writer
	mu   sync.Mutex
	last time.Time
}

func (h *exportErrors) Handle(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if now := time.Now(); h.last.IsZero() || now.Sub(h.last) >= time.Minute {
		h.last = now
		fmt.Fprintf(h.w, "toolgate: trace export: %v (%d spans failed, %d dropped so far; toolgate_trace_spans_*_total)\n",
			err, telemetry.Spans.Failed.Load(), telemetry.Spans.Dropped.Load())
	}
}
