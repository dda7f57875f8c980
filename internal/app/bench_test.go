package app_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/toolgate/toolgate/internal/app"
	"github.com/toolgate/toolgate/internal/kernel"
	"github.com/toolgate/toolgate/internal/mcpspec"
)

// BenchmarkAppCallAuthorized is one authorized call end to end below the transport:
// the kernel plus the durable (fsynced) audit append to the SQLite store.
func BenchmarkAppCallAuthorized(b *testing.B) {
	ctx := context.Background()
	tool := &kernel.Tool{ID: "local.noop", InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}}}`),
		Run: func(context.Context, *kernel.Call) (*kernel.Output, error) { return &kernel.Output{Text: "ok"}, nil }}
	a, err := app.Open(ctx, app.Options{DataDir: filepath.Join(b.TempDir(), "data"), Tools: []*kernel.Tool{tool}})
	if err != nil {
		b.Fatal(err)
	}
	defer a.Close()
	tr, err := a.OpenTurn(ctx, app.TurnRequest{})
	if err != nil {
		b.Fatal(err)
	}
	req := &mcpspec.CallRequest{Name: "local.noop", Arguments: json.RawMessage(`{"path":"docs/a.md"}`)}
	b.ReportAllocs()
	for b.Loop() {
		r, err := tr.CallTool(ctx, req)
		if err != nil || r.IsError {
			b.Fatalf("%v %+v", err, r)
		}
	}
}
