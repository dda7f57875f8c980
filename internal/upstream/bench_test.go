package upstream_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/toolgate/toolgate/internal/upstream"
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
