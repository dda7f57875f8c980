package kernel_test

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/kernel"
	"github.com/toolgate/toolgate/internal/kernel/kerneltest"
	"github.com/toolgate/toolgate/internal/mcpspec"
	"github.com/toolgate/toolgate/internal/policy"
	"github.com/toolgate/toolgate/internal/rpcwire"
)

// hashKernel is a kernel recording argument hashes as toolgate does (audit.HashValue
// under key), with one tool that accepts any object and keeps the Call it got.
func hashKernel(t testing.TB, key []byte, got *kernel.Call) (*kernel.Turn, *kerneltest.Audit) {
	t.Helper()
	aud := &kerneltest.Audit{}
	k, err := kernel.New(kernel.Options{Audit: aud, Escalations: &kerneltest.Escalations{},
		HashArg: func(v []byte) string { return audit.HashValue(key, v) }})
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Register(&kernel.Tool{ID: "local.any", InputSchema: json.RawMessage(`{"type":"object"}`),
		Run: func(_ context.Context, c *kernel.Call) (*kernel.Output, error) {
			*got = *c
			return &kernel.Output{Text: "ok"}, nil
		}}); err != nil {
		t.Fatal(err)
	}
	if err := k.SetGrants([]policy.Grant{{ID: "g", Principal: "p", Tool: "*", Action: "*", Effect: policy.Allow}}); err != nil {
		t.Fatal(err)
	}
	tr, err := k.OpenTurn(context.Background(), kernel.TurnOptions{Principal: "p"})
	if err != nil {
		t.Fatal(err)
	}
	return tr, aud
}

// argumentsOf is what a surface hands the kernel: the arguments of a tools/call as the
// strict decoder encoded them.
func argumentsOf(t testing.TB, args string) json.RawMessage {
	t.Helper()
	body, jerr := rpcwire.Decode([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"local.any","arguments":` + args + `}}`))
	if jerr != nil || body.Items[0].Msg == nil {
		t.Fatalf("decoding %s: %v %+v", args, jerr, body)
	}
	return body.Items[0].Msg.Param("arguments")
}

// The kernel hashes the canonical bytes it read the arguments from, without
// re-encoding them; the hashes are the frozen ones of internal/audit's vectors, so
// every trail written before verifies and looks up the same values.
func TestArgumentHashesAreTheFrozenOnes(t *testing.T) {
	key := []byte("toolgate-test-key-0123456789abcdef")
	args := `{"path":"docs/a.md","n":1.50,"big":12345678901234567890,"list":["a","b"],"obj":{"z":1,"a":"<&>"}}`
	want := map[string]string{ // internal/audit/vectors_test.go, TestHashArgsFrozenVectors
		"path": "b0f7f55aca17472ef9e64bfbd5399550bb19f6b94228ed6ea33d40dd813753f9",
		"n":    "d532414d2d152b217050bf1f6165c6838ebf9ecbf9cbebce48ba7d5a06720285",
		"big":  "32cfe36e0d2a3b850cfcb70bcea50be9836007ff7f52f5b930ee1802553882b8",
		"list": "2506042cdbee1d22fc0f41e30027e47268f63db4ff708d07419036376aa37c80",
		"obj":  "b95dae134752569a51fd6be10c7a526988093c4b0c7da9d8b9cf1fcbcdd99e18",
	}
	for name, raw := range map[string]json.RawMessage{
		"as a surface hands them": argumentsOf(t, args),
		"as written":              json.RawMessage(args),
		"spaced and unsorted":     json.RawMessage(" {\"obj\": {\"z\": 1, \"a\": \"\\u003c&>\"}, \"list\": [\"a\", \"b\"], \"big\": 12345678901234567890, \"n\": 1.50, \"path\": \"docs/a.md\"} "),
	} {
		var c kernel.Call
		tr, aud := hashKernel(t, key, &c)
		if r, err := tr.CallTool(context.Background(), &mcpspec.CallRequest{Name: "local.any", Arguments: raw}); err != nil || r.IsError {
			t.Fatalf("%s: %v %+v", name, err, r)
		}
		if got := aud.Last().Args; !reflect.DeepEqual(got, want) {
			t.Errorf("%s: hashes %v, want the frozen %v", name, got, want)
		}
		if string(c.Arguments) != `{"big":12345678901234567890,"list":["a","b"],"n":1.50,"obj":{"a":"<&>","z":1},"path":"docs/a.md"}` {
			t.Errorf("%s: the tool got the arguments %s", name, c.Arguments)
		}
	}
}

// FuzzArgumentHashes: for any arguments the strict decoder accepts, the hashes the
// kernel records from their canonical bytes are those audit.HashArgs gives for the
// parsed value (the encoding docs/audit.md fixes), and the tool sees that value.
func FuzzArgumentHashes(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":1}`, `{"s":"\u2028<>&\u0001é😀","n":-1.0e+3,"z":[null,true,{"k":"v"}]}`, `{"b":{"d":1,"c":2},"a":[]}`} {
		f.Add(s)
	}
	key := []byte("fuzz-key")
	f.Fuzz(func(t *testing.T, args string) {
		body, jerr := rpcwire.Decode([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"local.any","arguments":` + args + `}}`))
		if jerr != nil || body.Items[0].Msg == nil {
			return
		}
		raw := body.Items[0].Msg.Param("arguments")
		if len(raw) == 0 || raw[0] != '{' {
			return
		}
		var c kernel.Call
		tr, aud := hashKernel(t, key, &c)
		if r, err := tr.CallTool(context.Background(), &mcpspec.CallRequest{Name: "local.any", Arguments: raw}); err != nil || r.IsError {
			t.Fatalf("%s: %v %+v", raw, err, r)
		}
		parsed, err := rpcwire.DecodeValue(raw)
		if err != nil {
			t.Fatal(err)
		}
		want := audit.HashArgs(key, parsed.(map[string]any))
		if got := aud.Last().Args; !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: kernel hashes %v, audit.HashArgs %v", raw, got, want)
		}
		if !reflect.DeepEqual(c.Args, parsed) {
			t.Fatalf("%s: the tool got %#v, want %#v", raw, c.Args, parsed)
		}
	})
}
