package mcpserver_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/mcpserver"
	"github.com/toolgate/toolgate/internal/mcpserver/mcpservertest"
	"github.com/toolgate/toolgate/internal/rpcwire/rpcwiretest"
)

// largeCall is a 3 MiB-class tools/call of test.fail, which answers without
// reading its arguments, so what is measured is the MCP layer's own cost.
func largeCall(shape string, size int) []byte {
	return rpcwiretest.LargeCall(mcpservertest.ToolFail, shape, size)
}

// BenchmarkHandlerLargeCall is one 3 MiB tools/call through the Handler (body
// read, strict decode, dispatch, answer), in memory. B/op over the body size
// is the multiple of its size one request costs.
func BenchmarkHandlerLargeCall(b *testing.B) {
	for _, shape := range rpcwiretest.Shapes {
		b.Run(shape, func(b *testing.B) {
			h := mcpserver.NewHandler(mcpserver.HandlerOptions{OpenTurn: (&turnCounter{}).open})
			defer h.Close()
			sid := post(h, initBody).Header().Get("Mcp-Session-Id")
			body := largeCall(shape, 3<<20)
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				req := httptest.NewRequest(http.MethodPost, "/mcp", bytes.NewReader(body))
				req.Host = "127.0.0.1:7077"
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Mcp-Session-Id", sid)
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "tool_failed") {
					b.Fatalf("%d %.200s", rec.Code, rec.Body)
				}
			}
		})
	}
}

// TestLargeCallCostProportional: a 3 MiB tools/call costs the Handler less
// than three times its size in allocations, whatever the arguments' shape: the
// body once, its canonical params once, and small change. Params used to be
// copied again by every lookup of a member (the 2026-07-28 check alone made
// three), on top of a decoder that built a tree: 18 times the body for a long
// string, 43 times for many small objects.
func TestLargeCallCostProportional(t *testing.T) {
	h := mcpserver.NewHandler(mcpserver.HandlerOptions{OpenTurn: (&turnCounter{}).open})
	defer h.Close()
	sid := post(h, initBody).Header().Get("Mcp-Session-Id")
	for _, shape := range rpcwiretest.Shapes {
		body := largeCall(shape, 3<<20)
		req := httptest.NewRequest(http.MethodPost, "/mcp", bytes.NewReader(body))
		req.Host = "127.0.0.1:7077"
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Mcp-Session-Id", sid)
		rec := httptest.NewRecorder()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		h.ServeHTTP(rec, req)
		runtime.ReadMemStats(&after)
		if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "tool_failed") {
			t.Fatalf("%s: %d %.200s", shape, rec.Code, rec.Body)
		}
		n := after.TotalAlloc - before.TotalAlloc
		if ratio := float64(n) / float64(len(body)); ratio > 3 {
			t.Errorf("%s: a %d-byte call allocated %d (%.1f times the body), want under 3", shape, len(body), n, ratio)
		}
	}
}
