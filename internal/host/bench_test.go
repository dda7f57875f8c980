package host_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/toolgate/toolgate/internal/host"
	"github.com/toolgate/toolgate/internal/host/hosttest"
)

// BenchmarkCallReady measures what Host.Call adds to a call on a ready shared server:
// direct and direct_parallel are the fake session alone, the floors; serial and
// parallel go through the host (lookup, the live connection, the call counts).
//
//	go test -run '^$' -bench CallReady -benchmem -cpu 1,2 ./internal/host/
func BenchmarkCallReady(b *testing.B) {
	d := hosttest.NewDialer()
	h, err := host.New(host.Options{Dialer: d, IdleTimeout: -1, Health: host.HealthPolicy{Interval: -1}})
	if err != nil {
		b.Fatal(err)
	}
	defer h.Shutdown(context.Background())
	for _, n := range []string{"other1", "bench", "other2"} {
		if _, err := h.Install(context.Background(), def(n)); err != nil {
			b.Fatal(err)
		}
	}
	ctx := context.Background()
	params := json.RawMessage(`{"name":"echo","arguments":{}}`)
	if _, err := h.Call(ctx, "bench", "tools/call", params, host.CallOptions{}); err != nil {
		b.Fatal(err)
	}
	sess := d.Last("bench")

	b.Run("direct", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := sess.Call(ctx, "tools/call", params, host.CallOptions{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("direct_parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := sess.Call(ctx, "tools/call", params, host.CallOptions{}); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := h.Call(ctx, "bench", "tools/call", params, host.CallOptions{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := h.Call(ctx, "bench", "tools/call", params, host.CallOptions{SessionKey: "k"}); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
	if d.Dials("bench") != 1 {
		b.Fatalf("benchmark restarted the server (%d dials)", d.Dials("bench"))
	}
}
