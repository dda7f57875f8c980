package upstream_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/toolgate/toolgate/internal/upstream"
	"github.com/toolgate/toolgate/internal/upstream/upstreamtest"
)

// BenchmarkStdioCall is one tools/call round trip to the fixture over its
// pipes: encode, write, the fixture's answer, the line filter, decode,
// correlation.
func BenchmarkStdioCall(b *testing.B) {
	c, _, _ := dial(b, upstream.Options{})
	params := json.RawMessage(`{"name":"echo","arguments":{"text":"hello"}}`)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Call(ctx, "tools/call", params); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStdioCallParallel is the same with many callers sharing the one
// connection, as sessions share a server.
func BenchmarkStdioCallParallel(b *testing.B) {
	c, _, _ := dial(b, upstream.Options{})
	params := json.RawMessage(`{"name":"echo","arguments":{"text":"hello"}}`)
	ctx := context.Background()
	b.ReportAllocs()
	b.SetParallelism(8)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := c.Call(ctx, "tools/call", params); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkStdioCallProgress adds the progress-token rewrite (two small JSON
// re-encodes) to the round trip.
func BenchmarkStdioCallProgress(b *testing.B) {
	c, _, _ := dial(b, upstream.Options{})
	params := json.RawMessage(`{"name":"echo","arguments":{"text":"hello"},"_meta":{"progressToken":"t"}}`)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.CallWithProgress(ctx, "tools/call", params, func(json.RawMessage) {}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStatelessCall is one 2026-07-28 tools/call round trip over HTTP:
// _meta spliced into the params, the Mcp-* headers, the x-mcp-header values.
func BenchmarkStatelessCall(b *testing.B) {
	s := upstreamtest.NewStatelessServer(b, func(method string, params json.RawMessage) (string, int, string) {
		if method == "tools/list" {
			return `{"resultType":"complete","tools":[{"name":"echo","inputSchema":{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"}}}}]}`, 0, ""
		}
		return `{"resultType":"complete","content":[]}`, 0, ""
	})
	ctx := context.Background()
	c, err := upstream.DialHTTP(ctx, upstream.HTTPSpec{URL: s.URL}, upstream.Options{Era: upstream.EraStateless})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Call(ctx, "tools/list", nil); err != nil {
		b.Fatal(err)
	}
	params := json.RawMessage(`{"name":"echo","arguments":{"region":"eu-west","text":"hello"},"_meta":{"progressToken":"p"}}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Call(ctx, "tools/call", params); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkHTTPCall is the same round trip on a legacy (initialize)
// connection, for comparison with BenchmarkStatelessCall.
func BenchmarkHTTPCall(b *testing.B) {
	s := upstreamtest.NewHTTPServer(b, upstreamtest.HTTPServerOptions{})
	ctx := context.Background()
	c, err := upstream.DialHTTP(ctx, upstream.HTTPSpec{URL: s.URL}, upstream.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	params := json.RawMessage(`{"name":"echo","arguments":{"region":"eu-west","text":"hello"},"_meta":{"progressToken":"p"}}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Call(ctx, "tools/call", params); err != nil {
			b.Fatal(err)
		}
	}
}
