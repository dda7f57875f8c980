package app_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/app"
	"github.com/toolgate/toolgate/internal/mcpserver"
)

// Idle Streamable HTTP sessions are cheap: 10,000 of them (2,000 under the race
// detector, which slows every request) fit in 200 MB, i.e. at most 20 KiB each of heap
// and stack, measured after a GC (docs/performance.md, "Scale").
func TestIdleSessionsAreCheap(t *testing.T) {
	if testing.Short() {
		t.Skip("opens thousands of sessions")
	}
	const perSessionMax = 20 << 10
	n := idleSessions
	a := openApp(t, new(int))
	h := mcpserver.NewHandler(mcpserver.HandlerOptions{
		OpenTurn: func(ctx context.Context, principal string) (mcpserver.Turn, error) {
			return a.OpenTurn(ctx, app.TurnRequest{Principal: app.DefaultPrincipal, Transport: "http"})
		},
		ServerInfo:              app.ServerInfo(),
		MaxSessions:             n,
		MaxSessionsPerPrincipal: n,
	})
	defer h.Close()
	srv := httptest.NewServer(mcpserver.Guard(h, nil))
	defer srv.Close()
	client := srv.Client()
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"idle","version":"1"}}}`
	post := func(body, session string) string {
		req, _ := http.NewRequest("POST", srv.URL+"/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
			req.Header.Set("MCP-Protocol-Version", "2025-06-18")
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			t.Fatalf("%s: status %d", body[:40], resp.StatusCode)
		}
		return resp.Header.Get("Mcp-Session-Id")
	}
	post(init, "") // warm the catalogue cache and the connection
	before := inUse()
	ids := make([]string, 0, n)
	for range n - 1 {
		id := post(init, "")
		post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`, id)
		ids = append(ids, id)
	}
	after := inUse()
	per := (after - before) / uint64(n-1)
	t.Logf("%d idle sessions: %.1f MiB of heap and stacks, %d bytes each", n, float64(after-before)/(1<<20), per)
	if per > perSessionMax {
		t.Errorf("an idle session costs %d bytes; want at most %d", per, perSessionMax)
	}
	// Every one of them is still live: a ping on the first answers.
	post(`{"jsonrpc":"2.0","id":2,"method":"ping"}`, ids[0])
	runtime.KeepAlive(ids)
}

func inUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse + m.StackInuse
}
