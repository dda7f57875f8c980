package telemetry_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/telemetry"
)

const (
	parent   = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	traceID  = "4bf92f3577b34da6a3ce929d0e0e4736"
	parent2  = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	traceID2 = "0af7651916cd43dd8448eb211c80319c"
)

// traceOf runs one request through Middleware and FromMeta and returns the trace id
// the call's context carries.
func traceOf(t *testing.T, header, meta string) string {
	t.Helper()
	var got string
	h := telemetry.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := telemetry.FromMeta(r.Context(), json.RawMessage(meta))
		ctx, call := telemetry.StartCall(ctx, "http")
		got = telemetry.TraceID(ctx)
		call.End("local.echo", "ok", "")
	}))
	req := httptest.NewRequest("POST", "/mcp", nil)
	if header != "" {
		req.Header.Set("traceparent", header)
	}
	h.ServeHTTP(httptest.NewRecorder(), req)
	return got
}

// The W3C trace context reaches the call from the traceparent header, else from
// params._meta; the header wins; malformed or oversized values are ignored.
func TestTraceContextPropagation(t *testing.T) {
	for _, c := range []struct{ name, header, meta, want string }{
		{"header", parent, ``, traceID},
		{"meta", "", `{"traceparent":"` + parent2 + `"}`, traceID2},
		{"header wins", parent, `{"traceparent":"` + parent2 + `"}`, traceID},
		{"none", "", `{}`, ""},
		{"malformed header", "00-zz-00f067aa0ba902b7-01", ``, ""},
		{"malformed meta", "", `{"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01"}`, ""},
		{"meta not a string", "", `{"traceparent":7}`, ""},
		{"meta oversized", "", `{"traceparent":"` + parent2 + strings.Repeat(" ", 600) + `"}`, ""},
	} {
		if got := traceOf(t, c.header, c.meta); got != c.want {
			t.Errorf("%s: trace %q, want %q", c.name, got, c.want)
		}
	}
}

// Inject writes the context's traceparent for an upstream request.
func TestInject(t *testing.T) {
	h := telemetry.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		out := http.Header{}
		telemetry.Inject(r.Context(), out)
		w.Write([]byte(out.Get("traceparent")))
	}))
	req := httptest.NewRequest("GET", "/v1/tools", nil)
	req.Header.Set("traceparent", parent)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if !strings.HasPrefix(rec.Body.String(), "00-"+traceID+"-") {
		t.Errorf("injected %q", rec.Body.String())
	}
}

// Records logged with a traced context carry trace_id and span_id; others do not.
func TestLogHandler(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(telemetry.LogHandler(slog.NewJSONHandler(&buf, nil))).With("k", "v")
	h := telemetry.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		log.WarnContext(r.Context(), "traced")
	}))
	req := httptest.NewRequest("GET", "/mcp", nil)
	req.Header.Set("traceparent", parent)
	h.ServeHTTP(httptest.NewRecorder(), req)
	log.WarnContext(context.Background(), "untraced")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], `"trace_id":"`+traceID+`"`) || !strings.Contains(lines[0], `"span_id":"`) ||
		!strings.Contains(lines[0], `"k":"v"`) || strings.Contains(lines[1], "trace_id") {
		t.Errorf("log lines:\n%s", buf.String())
	}
}

// BenchmarkCallSpan is what each call pays for its span with no SDK installed (the
// API's no-op provider), a _meta without trace context included.
func BenchmarkCallSpan(b *testing.B) {
	ctx := context.Background()
	meta := json.RawMessage(`{"progressToken":1}`)
	b.ReportAllocs()
	for b.Loop() {
		c, call := telemetry.StartCall(telemetry.FromMeta(ctx, meta), "http")
		_ = c
		call.End("local.echo", "ok", "")
	}
}
