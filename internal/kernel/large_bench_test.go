package kernel_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/kernel"
	"github.com/toolgate/toolgate/internal/kernel/kerneltest"
	"github.com/toolgate/toolgate/internal/mcpspec"
	"github.com/toolgate/toolgate/internal/policy"
	"github.com/toolgate/toolgate/internal/rpcwire"
	"github.com/toolgate/toolgate/internal/rpcwire/rpcwiretest"
)

// BenchmarkCallLargeArguments is one authorized 3 MiB call in the kernel, arguments as
// the strict decoder hands them (rpcwiretest's two shapes), with the real argument
// HMAC and an in-memory audit log: what the kernel's one parse and the hashes cost.
func BenchmarkCallLargeArguments(b *testing.B) {
	for _, shape := range rpcwiretest.Shapes {
		b.Run(shape, func(b *testing.B) {
			key := []byte("0123456789abcdef0123456789abcdef")
			k, err := kernel.New(kernel.Options{Audit: discardAudit{}, Escalations: &kerneltest.Escalations{},
				HashArg: func(v []byte) string { return audit.HashValue(key, v) }})
			if err != nil {
				b.Fatal(err)
			}
			if err := k.Register(&kernel.Tool{ID: "local.write_file", InputSchema: json.RawMessage(`{"type":"object"}`),
				Run: func(context.Context, *kernel.Call) (*kernel.Output, error) { return &kernel.Output{Text: "ok"}, nil }}); err != nil {
				b.Fatal(err)
			}
			if err := k.SetGrants([]policy.Grant{{ID: "g", Principal: "p", Tool: "*", Action: "*", Effect: policy.Allow}}); err != nil {
				b.Fatal(err)
			}
			tr, err := k.OpenTurn(context.Background(), kernel.TurnOptions{Principal: "p"})
			if err != nil {
				b.Fatal(err)
			}
			body, jerr := rpcwire.Decode(rpcwiretest.LargeCall("local.write_file", shape, 3<<20))
			if jerr != nil {
				b.Fatal(jerr)
			}
			args := body.Items[0].Msg.Param("arguments")
			req := &mcpspec.CallRequest{Name: "local.write_file", Arguments: args}
			b.SetBytes(int64(len(args)))
			b.ReportAllocs()
			ctx := context.Background()
			for b.Loop() {
				r, err := tr.CallTool(ctx, req)
				if err != nil || r.IsError {
					b.Fatalf("%v %+v", err, r)
				}
			}
		})
	}
}
