package mcpserver_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/toolgate/toolgate/internal/mcpserver"
	"github.com/toolgate/toolgate/internal/mcpserver/mcpservertest"
	"github.com/toolgate/toolgate/internal/mcpspec"
)

const blockCall = `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"test.block"}}`

// readSpy is a request body that records being read.
type readSpy struct {
	mu   sync.Mutex
	read bool
}

func (r *readSpy) Read(p []byte) (int, error) {
	r.mu.Lock()
	r.read = true
	r.mu.Unlock()
	return copy(p, blockCall), nil
}
func (r *readSpy) Close() error { return nil }

func (r *readSpy) wasRead() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.read
}

func checkTooManyRequests(t *testing.T, rec *httptest.ResponseRecorder) {
	t.Helper()
	if rec.Code != http.StatusTooManyRequests || rec.Body.String() != `{"error":"too_many_requests"}` ||
		rec.Header().Get("Retry-After") != "1" || rec.Header().Get("Content-Type") != "application/json" ||
		rec.Header().Get("Mcp-Session-Id") != "" {
		t.Errorf("over the cap: %d %v %q", rec.Code, rec.Header(), rec.Body)
	}
}

// TestInFlightCapPerPrincipal: alice holding her cap of blocked calls gets 429
// (before her body is read or her Turn sees the call) while bob is served; once
// her calls end she is served again, and nothing stays counted.
func TestInFlightCapPerPrincipal(t *testing.T) {
	const limit = 3
	var pt principalTurns
	h := mcpserver.NewHandler(mcpserver.HandlerOptions{
		ServerInfo: mcpspec.Implementation{Name: "toolgate", Version: "test"},
		Authenticate: func(token string, present bool) (string, bool) {
			switch token {
			case "alice-token":
				return "alice", true
			case "bob-token":
				return "bob", true
			}
			return "", false
		},
		OpenTurn:                pt.open,
		MaxInFlightPerPrincipal: limit,
	})
	defer h.Close()
	open := func(token string) string {
		rec := post(h, initBody, "Authorization", "Bearer "+token)
		if rec.Code != http.StatusOK {
			t.Fatalf("initialize: %d %s", rec.Code, rec.Body)
		}
		return rec.Header().Get("Mcp-Session-Id")
	}
	alice := open("alice-token")
	aliceTurn := pt.of("alice")[0]

	// alice holds her cap of blocked calls on her session.
	var wg sync.WaitGroup
	results := make([]*httptest.ResponseRecorder, limit)
	for i := range limit {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = post(h, blockCall, "Authorization", "Bearer alice-token", "Mcp-Session-Id", alice)
		}()
	}
	for range limit {
		<-aliceTurn.Started()
	}
	if n := mcpserver.InFlight(h, "alice"); n != limit {
		t.Fatalf("alice has %d requests in flight, want %d", n, limit)
	}

	// Over the cap: 429 before the body is read or the Turn touched.
	spy := &readSpy{}
	req := httptest.NewRequest(http.MethodPost, "/mcp", nil)
	req.Body, req.ContentLength = spy, int64(len(blockCall))
	req.Host = "127.0.0.1:7077"
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer alice-token")
	req.Header.Set("Mcp-Session-Id", alice)
	calls := len(aliceTurn.Calls())
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	checkTooManyRequests(t, rec)
	if spy.wasRead() {
		t.Error("the body of a request over the cap was read")
	}
	if got := len(aliceTurn.Calls()); got != calls {
		t.Errorf("the Turn saw %d calls, want %d", got, calls)
	}
	// A new session, a DELETE and a stateless request are refused the same way.
	checkTooManyRequests(t, post(h, initBody, "Authorization", "Bearer alice-token"))
	checkTooManyRequests(t, post(h, `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`,
		"Authorization", "Bearer alice-token", "MCP-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/list"))
	if n := len(pt.of("alice")); n != 1 {
		t.Errorf("%d Turns opened for alice, want 1", n)
	}

	// bob is served meanwhile, up to his own cap.
	bob := open("bob-token")
	rec = post(h, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"test.echo","arguments":{"a":1}}}`,
		"Authorization", "Bearer bob-token", "Mcp-Session-Id", bob)
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"structuredContent":{"a":1}`) {
		t.Errorf("bob while alice is at her cap: %d %s", rec.Code, rec.Body)
	}

	aliceTurn.Release()
	wg.Wait()
	for i, r := range results {
		if r.Code != http.StatusOK || !strings.Contains(r.Body.String(), "released") {
			t.Errorf("alice's call %d: %d %s", i, r.Code, r.Body)
		}
	}
	if n := mcpserver.InFlight(h, "alice"); n != 0 {
		t.Errorf("alice has %d requests in flight after they ended", n)
	}
	rec = post(h, `{"jsonrpc":"2.0","id":3,"method":"ping"}`, "Authorization", "Bearer alice-token", "Mcp-Session-Id", alice)
	if rec.Code != http.StatusOK || rec.Body.String() != `{"jsonrpc":"2.0","id":3,"result":{}}` {
		t.Errorf("alice after her calls ended: %d %s", rec.Code, rec.Body)
	}
	// Refused and unauthenticated requests never stay counted.
	post(h, initBody, "Authorization", "Bearer nobody")
	for _, p := range []string{"alice", "bob", ""} {
		if n := mcpserver.InFlight(h, p); n != 0 {
			t.Errorf("principal %q: %d requests counted with none running", p, n)
		}
	}
	if err := mcpserver.CheckSessionBookkeeping(h); err != nil {
		t.Error(err)
	}
}

// TestInFlightCapBridge: a bridge holding its fixed cap of blocked calls
// answers the next request 429, and serves again once they end.
func TestInFlightCapBridge(t *testing.T) {
	turn := mcpservertest.NewTurn()
	b, err := mcpserver.NewBridge(turn, mcpserver.BridgeOptions{ServerInfo: mcpspec.Implementation{Name: "toolgate", Version: "test"}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if rec := post(b, initBody); rec.Code != http.StatusOK {
		t.Fatalf("initialize: %d %s", rec.Code, rec.Body)
	}
	var wg sync.WaitGroup
	codes := make([]int, mcpserver.BridgeMaxInFlight)
	for i := range mcpserver.BridgeMaxInFlight {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rec := post(b, blockCall)
			codes[i] = rec.Code
			var m map[string]any
			if err := json.Unmarshal(rec.Body.Bytes(), &m); err != nil || m["result"] == nil {
				codes[i] = -1
			}
		}()
	}
	// Started is buffered to 64, which is the cap: every call reports.
	for range mcpserver.BridgeMaxInFlight {
		<-turn.Started()
	}
	if n := mcpserver.BridgeInFlight(b); n != mcpserver.BridgeMaxInFlight {
		t.Fatalf("%d in flight, want %d", n, mcpserver.BridgeMaxInFlight)
	}
	checkTooManyRequests(t, post(b, `{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	turn.Release()
	wg.Wait()
	for i, c := range codes {
		if c != http.StatusOK {
			t.Errorf("call %d: %d", i, c)
		}
	}
	if rec := post(b, `{"jsonrpc":"2.0","id":1,"method":"ping"}`); rec.Code != http.StatusOK {
		t.Errorf("after the calls ended: %d %s", rec.Code, rec.Body)
	}
	if n := mcpserver.BridgeInFlight(b); n != 0 {
		t.Errorf("%d in flight with none running", n)
	}
}
