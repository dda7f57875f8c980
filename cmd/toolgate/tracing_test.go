package main

import (
	"strings"
	"testing"
)

// Export is off unless asked for; what this binary cannot do is refused with a notice,
// never half-enabled.
func TestTracingWanted(t *testing.T) {
	for _, c := range []struct {
		env    map[string]string
		on     bool
		notice string
	}{
		{env: nil},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, on: true},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"}, on: true},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, on: true},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": " OTLP "}, on: true},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}},
		{env: map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"}},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "console"}, notice: `"console" is not supported`},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp,console"}, notice: "not supported"},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, notice: `"grpc" is not supported`},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/json"}, notice: "http/protobuf only"},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}, on: true},
	} {
		on, notice := tracingWanted(func(k string) string { return c.env[k] })
		if on != c.on || (c.notice == "") != (notice == "") || !strings.Contains(notice, c.notice) {
			t.Errorf("%v: on %v notice %q; want %v, %q", c.env, on, notice, c.on, c.notice)
		}
	}
	if n := queueSize(func(string) string { return "-3" }); n != defaultQueue {
		t.Errorf("a negative queue size gave %d", n)
	}
	if n := queueSize(func(string) string { return "64" }); n != 64 {
		t.Errorf("queue size 64 gave %d", n)
	}
}
