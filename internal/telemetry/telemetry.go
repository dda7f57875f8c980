// Package telemetry is toolgate's tracing through the OpenTelemetry API: the W3C
// trace context (traceparent, tracestate) read from each HTTP request and from MCP's
// params._meta, a span per request and per tool call, the context handed on to the
// tool (where an upstream adapter injects it into its own requests: Inject), and the
// trace and span ids on every log record written with that context (LogHandler).
//
// Only the API is used. Until a process installs an SDK with an exporter as the
// global TracerProvider, spans record nothing, but the trace context still flows: a
// request that came with a traceparent keeps its trace id through the kernel, into
// the tool's context and the logs (docs/deployment.md, "Traces").
package telemetry

import (
	"context"
	"encoding/json"
	"net/http"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolgate/toolgate/internal/rpcwire"
)

// instrumentation names toolgate's tracer.
const instrumentation = "github.com/toolgate/toolgate"

// propagator is W3C Trace Context, whatever the global propagator is: toolgate
// speaks traceparent and tracestate on every surface.
var propagator = propagation.TraceContext{}

// theTracer is resolved once: the global provider delegates to whatever provider a
// process installs later, so the tracer follows it.
var theTracer = otel.Tracer(instrumentation)

func tracer() trace.Tracer { return theTracer }

// Middleware gives each request a server span named after its method and route,
// child of the request's traceparent when it has a valid one.
func Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := propagator.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		if trace.SpanContextFromContext(ctx).IsValid() {
			ctx = context.WithValue(ctx, headerParentKey{}, true)
		}
		ctx, span := tracer().Start(ctx, r.Method+" "+routeOf(r.URL.Path), trace.WithSpanKind(trace.SpanKindServer),
			trace.WithAttributes(attribute.String("http.request.method", r.Method), attribute.String("url.path", routeOf(r.URL.Path))))
		defer span.End()
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// routeOf bounds the path attribute and span name to toolgate's routes.
func routeOf(path string) string {
	switch path {
	case "/mcp", "/v1/tools", "/v1/tools/invoke", "/healthz", "/readyz", "/metrics":
		return path
	}
	return "other"
}

// maxMetaTraceValue bounds a traceparent or tracestate read from _meta.
const maxMetaTraceValue = 512

// metaCarrier reads traceparent and tracestate from an MCP params._meta object.
type metaCarrier struct{ meta json.RawMessage }

func (m metaCarrier) Get(key string) string {
	raw, ok := rpcwire.Member(m.meta, key)
	if !ok || len(raw) > maxMetaTraceValue+2 {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}
func (metaCarrier) Set(string, string) {}
func (metaCarrier) Keys() []string     { return []string{"traceparent", "tracestate"} }

// headerParentKey marks a request whose traceparent header named a valid parent.
type headerParentKey struct{}

// FromMeta continues the trace an MCP request names in params._meta (traceparent,
// tracestate, as MCP carries W3C trace context): the call's span becomes its child.
// A valid traceparent header on the HTTP request wins; malformed values are ignored.
func FromMeta(ctx context.Context, meta json.RawMessage) context.Context {
	if len(meta) == 0 || meta[0] != '{' || ctx.Value(headerParentKey{}) != nil {
		return ctx
	}
	if _, ok := rpcwire.Member(meta, "traceparent"); !ok {
		return ctx // the common case: one scan of _meta, nothing allocated
	}
	if p := trace.SpanContextFromContext(propagator.Extract(context.Background(), metaCarrier{meta})); p.IsValid() {
		return trace.ContextWithRemoteSpanContext(ctx, p)
	}
	return ctx
}

// StartCall starts the span of one tool call on surface; call End with its outcome.
func StartCall(ctx context.Context, surface string) (context.Context, Call) {
	ctx, span := tracer().Start(ctx, "tools/call")
	if span.IsRecording() {
		span.SetAttributes(attribute.String("toolgate.surface", surface))
	}
	return ctx, Call{span}
}

// Call is one tool call's span.
type Call struct{ span trace.Span }

// End records the call's tool (canonical id or "other"), outcome and reason code,
// and ends the span; an outcome other than ok marks it an error.
func (c Call) End(tool, outcome, code string) {
	if !c.span.IsRecording() {
		c.span.End()
		return
	}
	c.span.SetAttributes(attribute.String("toolgate.tool", tool), attribute.String("toolgate.outcome", outcome))
	if code != "" {
		c.span.SetAttributes(attribute.String("toolgate.code", code))
	}
	if outcome != "ok" {
		c.span.SetStatus(codes.Error, outcome)
	}
	c.span.End()
}

// Inject writes ctx's trace context into h (traceparent, tracestate): what a client
// of an HTTP upstream sends with each request it makes for a call.
func Inject(ctx context.Context, h http.Header) {
	propagator.Inject(ctx, propagation.HeaderCarrier(h))
}

// TraceID is ctx's trace id in hex, or "" when it has none.
func TraceID(ctx context.Context) string {
	if sc := trace.SpanContextFromContext(ctx); sc.HasTraceID() {
		return sc.TraceID().String()
	}
	return ""
}

// Upstream is the client span of one request toolgate sends to an upstream server.
type Upstream struct{ span trace.Span }

// StartUpstream starts the client span of a request (method) to server over
// transport, child of ctx's span: only when ctx carries a trace (a call's). A
// health ping or a background catalogue refresh has none and gets no span, so an
// installed exporter records no root trace per ping.
func StartUpstream(ctx context.Context, method, server, transport string) (context.Context, Upstream) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ctx, Upstream{}
	}
	ctx, span := tracer().Start(ctx, method, trace.WithSpanKind(trace.SpanKindClient))
	if span.IsRecording() {
		span.SetAttributes(attribute.String("rpc.system", "jsonrpc"), attribute.String("rpc.method", method),
			attribute.String("toolgate.server", server), attribute.String("toolgate.upstream.transport", transport))
	}
	return ctx, Upstream{span}
}

// End ends the span; a non-nil err marks it an error (its message is not recorded:
// an upstream's error text may carry what the caller sent).
func (u Upstream) End(err error) {
	if u.span == nil {
		return
	}
	if err != nil && u.span.IsRecording() {
		u.span.SetStatus(codes.Error, "upstream request failed")
	}
	u.span.End()
}

// IsTraceKey reports the _meta and header keys of the W3C trace context toolgate
// sets on what it sends upstream (and removes from what it forwards otherwise).
func IsTraceKey(k string) bool { return k == "traceparent" || k == "tracestate" }

// MetaMembers is ctx's trace context as encoded _meta members
// (`"traceparent":"…"` and, when it has one, `,"tracestate":"…"`), written by the
// propagator from ctx's span context, never copied from a caller; nil when ctx has
// no valid span context.
func MetaMembers(ctx context.Context) []byte {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return nil
	}
	c := propagation.MapCarrier{}
	propagator.Inject(ctx, c)
	var b []byte
	for _, k := range []string{"traceparent", "tracestate"} {
		v, ok := c[k]
		if !ok || v == "" {
			continue
		}
		if len(b) > 0 {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = append(b, k...)
		b = append(b, `":`...)
		enc, _ := json.Marshal(v)
		b = append(b, enc...)
	}
	return b
}

// Detach is a context with no deadline, values or cancellation of ctx's but its
// span context: for work that outlives the request that started it (a held
// 2026-07-28 call) and still belongs to its trace.
func Detach(ctx context.Context) context.Context {
	return trace.ContextWithSpanContext(context.Background(), trace.SpanContextFromContext(ctx))
}
