// Package telemetry drives the real `toolgate serve` binary with an installed fixture
// upstream and checks what an operator observes: the spans of a tools/call reaching
// an OTLP/HTTP collector as one trace from the caller's traceparent through the
// kernel to the upstream (which receives the same trace), and /metrics following an
// upstream's states and restarts (docs/deployment.md, "Traces" and "Metrics").
package telemetry
