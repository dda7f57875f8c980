package hostrelay

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/host"
	"github.com/toolgate/toolgate/internal/host/hosttest"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/internal/upstream/upstreamtest"
)

// BenchmarkCall compares a call through the relay (a relaying Node and the hosting
// Node in one process, over the data directory's unix socket: both ends' work is in
// the numbers) with the same call on the host itself, over the fake upstream (the
// relay's own cost) and over the real stdio fixture (what it adds to a real call).
//
//	go test -run '^$' -bench Call -benchmem ./internal/hostrelay/
func BenchmarkCall(b *testing.B) {
	params := json.RawMessage(`{"name":"echo","arguments":{"text":"hello, upstream"}}`)
	result := json.RawMessage(`{"content":[{"type":"text","text":"hello, upstream"}],"structuredContent":{"n":1.50},"isError":false}`)
	fake := func(b *testing.B) (local, relay Upstreams) {
		d := hosttest.NewDialer()
		d.Server("fx").Set(func(bh *hosttest.Behavior) {
			bh.Handler = func(context.Context, string, json.RawMessage) (json.RawMessage, error) { return result, nil }
		})
		hosting, relaying, _ := pair(b, d, def("fx"))
		return hosting, relaying
	}
	fixture := func(b *testing.B) (local, relay Upstreams) {
		dir := testenv.PrivateDir(b)
		marker := upstreamtest.Marker(b)
		b.Cleanup(func() { upstreamtest.WaitGone(b, marker, 20*time.Second) })
		nh := fixtureHost(upstreamtest.Fixture(b), marker, nil)
		hosting := open(b, dir, Options{NewHost: nh})
		return hosting, open(b, dir, Options{NewHost: nh})
	}
	for _, setup := range []struct {
		name string
		f    func(*testing.B) (Upstreams, Upstreams)
	}{{"fake", fake}, {"fixture", fixture}} {
		local, relay := setup.f(b)
		ctx := context.Background()
		if _, err := relay.Call(ctx, "fx", "tools/call", params, host.CallOptions{}); err != nil {
			b.Fatal(err) // and the upstream is started
		}
		for _, side := range []struct {
			name string
			up   Upstreams
		}{{"local", local}, {"relay", relay}} {
			b.Run(setup.name+"/"+side.name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, err := side.up.Call(ctx, "fx", "tools/call", params, host.CallOptions{}); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run(setup.name+"/"+side.name+"_parallel", func(b *testing.B) {
				b.ReportAllocs()
				b.SetParallelism(8)
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if _, err := side.up.Call(ctx, "fx", "tools/call", params, host.CallOptions{}); err != nil {
							b.Error(err)
							return
						}
					}
				})
			})
		}
	}
}
