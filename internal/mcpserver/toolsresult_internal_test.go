package mcpserver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/toolgate/toolgate/internal/mcpspec"
	"github.com/toolgate/toolgate/internal/rpcwire"
)

// A tools/list answer spliced from a catalogue's encoded array is byte for byte the
// answer encoded from its tools, in both eras, and a broken array is still refused by
// the one check every raw result gets.
func TestToolsResultSplicesTheEncodedArray(t *testing.T) {
	tools := []json.RawMessage{
		json.RawMessage(`{"name":"a","inputSchema":{"type":"object","properties":{"n":{"type":"number","maximum":1.50}}}}`),
		json.RawMessage(`{"name":"b \"tools\":[]","inputSchema":{"type":"object"},"_meta":{"x":1e2}}`),
	}
	encoded := json.RawMessage(`[` + string(tools[0]) + `,` + string(tools[1]) + `]`)
	id7, err := jsonrpc.MakeID(float64(7))
	if err != nil {
		t.Fatal(err)
	}
	meta := map[string]any{mcpspec.MetaCatalogHash: "h", mcpspec.MetaExecutionID: "exec-1"}
	for _, modern := range []bool{false, true} {
		whole := mcpspec.ListToolsResult{Tools: tools, Meta: meta}
		bare := mcpspec.ListToolsResult{Tools: []json.RawMessage{}, Meta: meta}
		if modern {
			whole.ResultType, whole.CacheHints = mcpspec.ResultComplete, listHints
			bare.ResultType, bare.CacheHints = mcpspec.ResultComplete, listHints
		}
		want, err := rpcwire.Result(id7, whole)
		if err != nil {
			t.Fatal(err)
		}
		res, rpcErr := toolsResult(bare, encoded)
		if rpcErr != nil {
			t.Fatal(rpcErr)
		}
		got, err := rpcwire.Result(id7, res)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("modern=%v:\n got %s\nwant %s", modern, got, want)
		}
	}
	res, _ := toolsResult(mcpspec.ListToolsResult{Tools: []json.RawMessage{}}, json.RawMessage(`[{"name":`))
	if _, err := rpcwire.Result(id7, res); err == nil {
		t.Fatal("a broken encoded array was answered")
	}
}

// BenchmarkToolsList512 encodes a 512-tool tools/list answer as the surface does:
// from the catalogue's encoded array (spliced) and from the tools one by one.
func BenchmarkToolsList512(b *testing.B) {
	tools := make([]json.RawMessage, 512)
	for i := range tools {
		tools[i] = json.RawMessage(fmt.Sprintf(`{"name":"ns.tool_%d","description":"Tool number %d reads and writes things in a workspace, with a longer description as real servers have.","inputSchema":{"type":"object","properties":{"path":{"type":"string","description":"a path"},"n":{"type":"integer","minimum":0}},"required":["path"]},"annotations":{"readOnlyHint":true},"_meta":{"toolgate/source":"ns"}}`, i, i))
	}
	encoded := json.RawMessage("[" + string(bytes.Join(func() [][]byte {
		out := make([][]byte, len(tools))
		for i, t := range tools {
			out[i] = t
		}
		return out
	}(), []byte(","))) + "]")
	meta := map[string]any{mcpspec.MetaCatalogHash: "h", mcpspec.MetaExecutionID: "exec-1"}
	id, _ := jsonrpc.MakeID(float64(7))
	b.Run("spliced", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			res, _ := toolsResult(mcpspec.ListToolsResult{Tools: []json.RawMessage{}, Meta: meta}, encoded)
			if _, err := rpcwire.Result(id, res); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("per-tool", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			for _, t := range tools {
				if !json.Valid(t) {
					b.Fatal("invalid")
				}
			}
			if _, err := rpcwire.Result(id, mcpspec.ListToolsResult{Tools: tools, Meta: meta}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
