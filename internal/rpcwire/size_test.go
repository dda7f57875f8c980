package rpcwire

import (
	"runtime"
	"testing"

	"github.com/toolgate/toolgate/internal/rpcwire/rpcwiretest"
)

func largeCall(shape string, size int) []byte {
	return rpcwiretest.LargeCall("local.write_file", shape, size)
}

// BenchmarkDecode3MiB is the strict decode of a 3 MiB tools/call; B/op over
// the body's size is what one such request costs the decoder.
func BenchmarkDecode3MiB(b *testing.B) {
	for _, shape := range rpcwiretest.Shapes {
		b.Run(shape, func(b *testing.B) {
			msg := largeCall(shape, 3<<20)
			b.SetBytes(int64(len(msg)))
			b.ReportAllocs()
			for b.Loop() {
				body, err := Decode(msg)
				if err != nil || body.Items[0].Msg == nil {
					b.Fatal(err, body.Items[0].Err)
				}
			}
		})
	}
}

// allocated returns the bytes f allocates (the process's total, so nothing
// else should run meanwhile).
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestDecodeCostProportional: decoding a 3 MiB tools/call allocates less than
// twice its size, whatever its shape. Reading through encoding/json's token
// stream and a tree cost 12 times the body for one long string and 37 times
// for many small objects.
func TestDecodeCostProportional(t *testing.T) {
	for _, shape := range rpcwiretest.Shapes {
		msg := largeCall(shape, 3<<20)
		var body *Body
		n := allocated(func() { body, _ = Decode(msg) })
		if body == nil || body.Items[0].Msg == nil {
			t.Fatalf("%s: not decoded", shape)
		}
		if ratio := float64(n) / float64(len(msg)); ratio > 2 {
			t.Errorf("%s: decoding %d bytes allocated %d (%.1f times the body), want under 2", shape, len(msg), n, ratio)
		}
	}
}

// TestParam: a message's params members are slices of Params, found by their
// exact names.
func TestParam(t *testing.T) {
	body, err := Decode([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{"b":[1,{"c":"\u2028"}],"a":null},"Name2":"y","_meta":{"k":"v"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	m := body.Items[0].Msg
	for name, want := range map[string]string{
		"name": `"x"`, "arguments": `{"a":null,"b":[1,{"c":"\u2028"}]}`, "Name2": `"y"`, "_meta": `{"k":"v"}`, "NAME": "", "nam": "",
	} {
		if got := string(m.Param(name)); got != want {
			t.Errorf("Param(%q) = %s, want %s", name, got, want)
		}
	}
	if v, ok := Member(m.Param("_meta"), "k"); !ok || string(v) != `"v"` {
		t.Errorf("Member(_meta, k) = %s %v", v, ok)
	}
	if _, ok := Member(m.Param("arguments"), "c"); ok {
		t.Error("Member found a nested member")
	}
	body, _ = Decode([]byte(`{"jsonrpc":"2.0","id":1,"method":"x","params":[{"name":"x"}]}`))
	if p := body.Items[0].Msg.Param("name"); p != nil {
		t.Errorf("Param of array params = %s", p)
	}
}
