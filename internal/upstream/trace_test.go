package upstream_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/toolgate/toolgate/internal/upstream"
	"github.com/toolgate/toolgate/internal/upstream/upstreamtest"
)

// A call's context as a traced request leaves it: a remote parent, sampled.
func tracedCtx(t *testing.T) (context.Context, trace.SpanContext) {
	t.Helper()
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	ts, _ := trace.ParseTraceState("vendor=v1")
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, TraceState: ts, Remote: true})
	return trace.ContextWithRemoteSpanContext(testCtx(t), sc), sc
}

// callMeta is the params._meta of each tools/call line the fixture read.
func callMeta(t *testing.T, file string) []map[string]json.RawMessage {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var metas []map[string]json.RawMessage
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var m struct {
			Method string `json:"method"`
			Params struct {
				Meta map[string]json.RawMessage `json:"_meta"`
			} `json:"params"`
		}
		if json.Unmarshal([]byte(line), &m) == nil && m.Method == "tools/call" {
			metas = append(metas, m.Params.Meta)
		}
	}
	return metas
}

// Over stdio the call's trace context reaches the server process in
// params._meta.traceparent and tracestate, written from the context; a value the
// params carried (a caller's _meta relayed as it was, malformed here) is replaced
// when the call is traced and removed when it is not, and the other _meta members
// stay.
func TestTraceContextInMetaOverStdio(t *testing.T) {
	rec := filepath.Join(t.TempDir(), "in.jsonl")
	c, _, _ := dial(t, upstream.Options{}, "-record-in", rec)
	ctx, sc := tracedCtx(t)
	forged := `{"name":"echo","arguments":{"text":"x"},"_meta":{"traceparent":"00-zzzz-forged","tracestate":"evil=1","other":7}}`
	if _, err := c.Call(ctx, "tools/call", json.RawMessage(forged)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Call(testCtx(t), "tools/call", json.RawMessage(forged)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Call(ctx, "tools/call", json.RawMessage(`{"name":"echo","arguments":{"text":"y"}}`)); err != nil {
		t.Fatal(err)
	}
	metas := callMeta(t, rec)
	if len(metas) != 3 {
		t.Fatalf("%d tools/call lines recorded, want 3", len(metas))
	}
	want := `"00-` + sc.TraceID().String() + `-` + sc.SpanID().String() + `-01"`
	for _, i := range []int{0, 2} {
		if got := string(metas[i]["traceparent"]); got != want {
			t.Errorf("call %d: traceparent %s, want %s", i, got, want)
		}
		if got := string(metas[i]["tracestate"]); got != `"vendor=v1"` {
			t.Errorf("call %d: tracestate %s", i, got)
		}
	}
	if string(metas[0]["other"]) != "7" {
		t.Errorf("another _meta member was lost: %v", metas[0])
	}
	if _, ok := metas[1]["traceparent"]; ok {
		t.Errorf("an untraced call passed the params' traceparent on: %v", metas[1])
	}
	if _, ok := metas[1]["tracestate"]; ok || string(metas[1]["other"]) != "7" {
		t.Errorf("untraced call's _meta: %v", metas[1])
	}
}

// Over Streamable HTTP every request made for a traced call carries the traceparent
// and tracestate headers of the call's context, whatever the configuration says;
// requests of no call (initialize, DELETE) carry none.
func TestTraceContextInHTTPHeaders(t *testing.T) {
	s := upstreamtest.NewHTTPServer(t, upstreamtest.HTTPServerOptions{Session: true})
	c := dialHTTP(t, upstream.HTTPSpec{URL: s.URL, NoStandaloneStream: true, Headers: upstream.StaticHeaders{
		"traceparent": "00-ffffffffffffffffffffffffffffffff-ffffffffffffffff-01", // not configurable
	}}, upstream.Options{})
	ctx, sc := tracedCtx(t)
	if _, err := c.Call(ctx, "tools/call", json.RawMessage(`{"name":"echo","arguments":{"text":"x"}}`)); err != nil {
		t.Fatal(err)
	}
	c.Close()
	want := "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-01"
	calls := 0
	for i, r := range s.Requests() {
		tp := r.Header.Get("Traceparent")
		if r.Method == http.MethodPost && strings.Contains(r.Body, `"tools/call"`) {
			calls++
			if tp != want || r.Header.Get("Tracestate") != "vendor=v1" {
				t.Errorf("request %d (tools/call): traceparent %q tracestate %q, want %q", i, tp, r.Header.Get("Tracestate"), want)
			}
			if !strings.Contains(r.Body, `"traceparent":"`+want+`"`) {
				t.Errorf("request %d: _meta lacks the traceparent: %s", i, r.Body)
			}
			continue
		}
		if tp != "" {
			t.Errorf("request %d (%s) of no call carried traceparent %q", i, r.Method, tp)
		}
	}
	if calls != 1 {
		t.Fatalf("%d tools/call requests seen", calls)
	}
}
