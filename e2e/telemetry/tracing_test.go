package telemetry

import (
	"bytes"
	"compress/gzip"
	"encoding/hex"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// collector is an in-test OTLP/HTTP trace collector: it decodes each export request
// with the OTLP protobuf types and keeps every span with its resource's service.name.
type collector struct {
	srv   *httptest.Server
	mu    sync.Mutex
	spans []*tracepb.Span
	svc   map[string]bool
	bad   []string
}

func newCollector(t *testing.T) *collector {
	c := &collector{svc: map[string]bool{}}
	c.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body io.Reader = r.Body
		if r.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(r.Body)
			if err != nil {
				http.Error(w, err.Error(), 400)
				return
			}
			body = zr
		}
		raw, _ := io.ReadAll(body)
		var req coltracepb.ExportTraceServiceRequest
		c.mu.Lock()
		defer c.mu.Unlock()
		if r.Method != "POST" || r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" || proto.Unmarshal(raw, &req) != nil {
			c.bad = append(c.bad, r.Method+" "+r.URL.Path+" "+r.Header.Get("Content-Type"))
			http.Error(w, "bad export", 400)
			return
		}
		for _, rs := range req.ResourceSpans {
			for _, kv := range rs.GetResource().GetAttributes() {
				if kv.Key == "service.name" {
					c.svc[kv.GetValue().GetStringValue()] = true
				}
			}
			for _, ss := range rs.ScopeSpans {
				c.spans = append(c.spans, ss.Spans...)
			}
		}
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(out)
	}))
	t.Cleanup(c.srv.Close)
	return c
}

func (c *collector) inTrace(traceID string) []*tracepb.Span {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*tracepb.Span
	for _, s := range c.spans {
		if hex.EncodeToString(s.TraceId) == traceID {
			out = append(out, s)
		}
	}
	return out
}

func attr(s *tracepb.Span, key string) string {
	for _, kv := range s.Attributes {
		if kv.Key == key {
			return kv.GetValue().GetStringValue()
		}
	}
	return ""
}

const (
	callerTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	callerSpan  = "00f067aa0ba902b7"
)

// One tools/call of an installed stdio server through the real binary, with the
// caller's traceparent, exported by OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: the collector
// receives one trace, the caller's, holding the request's server span (child of the
// caller's span), the kernel's call span under it and the upstream client span under
// that; the upstream process received the same trace id with the upstream span as
// parent in params._meta.traceparent. A malformed traceparent is not passed on.
func TestCallTraceReachesCollector(t *testing.T) {
	col := newCollector(t)
	data := filepath.Join(t.TempDir(), "data")
	rec := filepath.Join(t.TempDir(), "in.jsonl")
	installFixture(t, data, "-record-in", rec)
	srv := testenvStart(t, data, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT="+col.srv.URL+"/v1/traces", "OTEL_BSP_SCHEDULE_DELAY=50")
	c := open(t, srv.URL, ownerToken(t, data), "fx.echo")
	hdr := http.Header{"Traceparent": {"00-" + callerTrace + "-" + callerSpan + "-01"}, "Tracestate": {"vendor=v1"}}
	if raw, code := c.post("tools/call", `{"name":"fx.echo","arguments":{"text":"traced"}}`, hdr); code != 200 || !strings.Contains(string(raw), "traced") {
		t.Fatalf("traced call: %d %s", code, raw)
	}
	// A malformed traceparent, in the header and in _meta: the call runs in a trace
	// of its own, and the upstream never sees the caller's bytes.
	bad := http.Header{"Traceparent": {"00-zzzz-forged-01"}}
	if raw, code := c.post("tools/call", `{"name":"fx.echo","arguments":{"text":"untraced"},"_meta":{"traceparent":"00-forged"}}`, bad); code != 200 || !strings.Contains(string(raw), "untraced") {
		t.Fatalf("call with a malformed traceparent: %d %s", code, raw)
	}
	if err := srv.Stop(t, syscall.SIGTERM); err != nil { // flushes the queued spans
		t.Fatalf("serve: %v", err)
	}

	spans := col.inTrace(callerTrace)
	byName := map[string]*tracepb.Span{}
	for _, s := range spans {
		byName[s.Name+"/"+s.Kind.String()] = s
	}
	server := byName["POST /mcp/SPAN_KIND_SERVER"]
	kernel := byName["tools/call/SPAN_KIND_INTERNAL"]
	up := byName["tools/call/SPAN_KIND_CLIENT"]
	if server == nil || kernel == nil || up == nil {
		var names []string
		for k := range byName {
			names = append(names, k)
		}
		t.Fatalf("trace %s holds %v; want the server, kernel and upstream spans (collector refused: %v)", callerTrace, names, col.bad)
	}
	if got := hex.EncodeToString(server.ParentSpanId); got != callerSpan {
		t.Errorf("server span's parent %s, want the caller's %s", got, callerSpan)
	}
	if !bytes.Equal(kernel.ParentSpanId, server.SpanId) || !bytes.Equal(up.ParentSpanId, kernel.SpanId) {
		t.Errorf("spans not chained: server %x, kernel %x (parent %x), upstream parent %x", server.SpanId, kernel.SpanId, kernel.ParentSpanId, up.ParentSpanId)
	}
	if server.TraceState != "vendor=v1" {
		t.Errorf("server span tracestate %q", server.TraceState)
	}
	if attr(kernel, "toolgate.tool") != "fx.echo" || attr(kernel, "toolgate.outcome") != "ok" || attr(kernel, "toolgate.surface") != "http" {
		t.Errorf("kernel span attributes: %v", kernel.Attributes)
	}
	if attr(up, "toolgate.server") != "fx" || attr(up, "rpc.method") != "tools/call" || attr(up, "toolgate.upstream.transport") != "stdio" {
		t.Errorf("upstream span attributes: %v", up.Attributes)
	}
	if !col.svc["toolgate"] {
		t.Errorf("resource service.name: %v", col.svc)
	}

	// What the upstream process read: the traced call with the upstream span as
	// parent, the other with no trace context at all.
	b, err := os.ReadFile(rec)
	if err != nil {
		t.Fatal(err)
	}
	want := "00-" + callerTrace + "-" + hex.EncodeToString(up.SpanId) + "-01"
	var calls []map[string]json.RawMessage
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var m struct {
			Method string
			Params struct {
				Meta map[string]json.RawMessage `json:"_meta"`
			}
		}
		if json.Unmarshal([]byte(line), &m) == nil && m.Method == "tools/call" {
			calls = append(calls, m.Params.Meta)
		}
	}
	if len(calls) != 2 {
		t.Fatalf("the upstream read %d tools/call, want 2:\n%s", len(calls), b)
	}
	if got := string(calls[0]["traceparent"]); got != `"`+want+`"` {
		t.Errorf("upstream _meta.traceparent %s, want %q", got, want)
	}
	if got := string(calls[0]["tracestate"]); got != `"vendor=v1"` {
		t.Errorf("upstream _meta.tracestate %s", got)
	}
	if tp := string(calls[1]["traceparent"]); strings.Contains(tp, "forged") || strings.Contains(tp, callerTrace) {
		t.Errorf("the malformed call's upstream traceparent %s", tp)
	}
}

// A collector that accepts connections and never answers: calls are not slowed or
// failed by it, and serve still exits on SIGTERM once its bounded flush gives up.
func TestUnreachableCollectorNeverBlocksCalls(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var held []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, conn) // read nothing, answer nothing
			mu.Unlock()
		}
	}()
	defer func() {
		mu.Lock()
		for _, c := range held {
			c.Close()
		}
		mu.Unlock()
	}()
	data := filepath.Join(t.TempDir(), "data")
	installFixture(t, data)
	srv := testenvStart(t, data, "OTEL_EXPORTER_OTLP_ENDPOINT=http://"+ln.Addr().String(), "OTEL_BSP_SCHEDULE_DELAY=10", "OTEL_BSP_MAX_QUEUE_SIZE=4")
	c := open(t, srv.URL, ownerToken(t, data), "fx.echo")
	for i := 0; i < 40; i++ {
		if raw, code := c.post("tools/call", `{"name":"fx.echo","arguments":{"text":"x"}}`, nil); code != 200 || !strings.Contains(string(raw), `"x"`) {
			t.Fatalf("call %d: %d %s", i, code, raw)
		}
	}
	metrics := scrape(t, srv.URL, ownerToken(t, data))
	if v := metricValue(metrics, "toolgate_trace_spans_dropped_total"); v <= 0 {
		t.Errorf("no dropped spans counted with a 4-span queue and a silent collector:\n%s", grepLines(metrics, "toolgate_trace_"))
	}
	if err := srv.Stop(t, syscall.SIGTERM); err != nil {
		t.Fatalf("serve: %v", err)
	}
}
