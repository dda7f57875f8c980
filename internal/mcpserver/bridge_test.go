package mcpserver_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/toolgate/toolgate/internal/mcpserver"
	"github.com/toolgate/toolgate/internal/mcpserver/mcpservertest"
	"github.com/toolgate/toolgate/internal/mcpspec"
)

const listBody = `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`

func deleteOn(h http.Handler, session string) int {
	req := httptest.NewRequest(http.MethodDelete, "/mcp", nil)
	req.Host = "127.0.0.1:7077"
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code
}

// catalogHashOf returns the catalogHash of a tools/list answer, "" when there is none.
func catalogHashOf(rec *httptest.ResponseRecorder) string {
	var m struct {
		Result struct {
			Meta map[string]string `json:"_meta"`
		} `json:"result"`
	}
	_ = json.Unmarshal(rec.Body.Bytes(), &m)
	return m.Result.Meta[mcpspec.MetaCatalogHash]
}

// openBridge opens a loopback bridge without authorization on turn, closed
// when the test ends.
func openBridge(t *testing.T, turn mcpserver.Turn) *mcpserver.Bridge {
	t.Helper()
	b, err := mcpserver.NewBridge(turn, mcpserver.BridgeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

func checkBridgeBookkeeping(t *testing.T, b *mcpserver.Bridge) {
	t.Helper()
	if err := mcpserver.CheckBridgeSessionBookkeeping(b); err != nil {
		t.Fatal(err)
	}
}

// TestBridgeSessionsShareTheTurn: a bridge serves one turn to many sessions.
// The first initialize naming no session opens the bridge's first session
// (SessionID), every later one the next session, and requests naming no
// session go to the latest; every session lists the same catalogue. A second
// initialize naming a live session is refused. A DELETE ends one session: its
// id answers 404, the others and the turn go on, and until the next initialize
// a request naming no session is 400 missing_session. Only Close closes the
// turn.
func TestBridgeSessionsShareTheTurn(t *testing.T) {
	turn := mcpservertest.NewTurn()
	b := openBridge(t, turn)
	first := initSession(t, b)
	if first != b.SessionID() {
		t.Fatalf("the first initialize opened %s, not the bridge's first session %s", first, b.SessionID())
	}
	second := initSession(t, b)
	if second == first {
		t.Fatalf("a second initialize naming no session was served by the first session")
	}
	for _, tc := range []struct{ named, served string }{{first, first}, {second, second}, {"", second}} {
		var rec *httptest.ResponseRecorder
		if tc.named == "" {
			rec = post(b, listBody)
		} else {
			rec = post(b, listBody, "Mcp-Session-Id", tc.named)
		}
		if rec.Code != http.StatusOK || catalogHashOf(rec) != mcpservertest.CatalogHash {
			t.Errorf("tools/list naming %q: %d %s", tc.named, rec.Code, rec.Body)
		}
		if got := rec.Header().Get("Mcp-Session-Id"); got != tc.served {
			t.Errorf("tools/list naming %q answered in session %q, want %q", tc.named, got, tc.served)
		}
	}
	if rec := post(b, initBody, "Mcp-Session-Id", first); rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "already initialized") {
		t.Errorf("a second initialize naming a live session: %d %s", rec.Code, rec.Body)
	}
	if b.Sessions() != 2 {
		t.Errorf("%d sessions, want 2", b.Sessions())
	}
	checkBridgeBookkeeping(t, b)

	if code := deleteOn(b, ""); code != http.StatusOK { // the current session: second
		t.Fatalf("DELETE naming no session: %d", code)
	}
	if rec := post(b, listBody, "Mcp-Session-Id", second); rec.Code != http.StatusNotFound || !strings.Contains(rec.Body.String(), "unknown_session") {
		t.Errorf("the deleted session: %d %s", rec.Code, rec.Body)
	}
	if rec := post(b, listBody); rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "missing_session") {
		t.Errorf("no session named after the current one ended: %d %s", rec.Code, rec.Body)
	}
	if rec := post(b, listBody, "Mcp-Session-Id", first); rec.Code != http.StatusOK {
		t.Errorf("the other session after a DELETE: %d %s", rec.Code, rec.Body)
	}
	modern := `{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
	if rec := post(b, modern, "MCP-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/list"); rec.Code != http.StatusOK || rec.Header().Get("Mcp-Session-Id") != "" {
		t.Errorf("a 2026-07-28 request after the current session ended: %d %q %s", rec.Code, rec.Header().Get("Mcp-Session-Id"), rec.Body)
	}
	if turn.Closed() != 0 || b.Sessions() != 1 {
		t.Errorf("after a DELETE: turn closed %d times, %d sessions", turn.Closed(), b.Sessions())
	}
	select {
	case <-b.Done():
		t.Fatal("the bridge stopped serving after a DELETE")
	default:
	}

	third := initSession(t, b)
	if third == first || third == second {
		t.Fatalf("the next session reuses id %s", third)
	}
	if rec := post(b, listBody); rec.Code != http.StatusOK || rec.Header().Get("Mcp-Session-Id") != third {
		t.Errorf("no session named after the next initialize: %d %q", rec.Code, rec.Header().Get("Mcp-Session-Id"))
	}
	checkBridgeBookkeeping(t, b)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if turn.Closed() != 1 {
		t.Errorf("turn closed %d times", turn.Closed())
	}
	for _, sid := range []string{first, third} {
		if rec := post(b, listBody, "Mcp-Session-Id", sid); rec.Code != http.StatusNotFound {
			t.Errorf("session %s after Close: %d", sid, rec.Code)
		}
	}
	if rec := post(b, initBody); rec.Code != http.StatusNotFound {
		t.Errorf("initialize after Close: %d %s", rec.Code, rec.Body)
	}
}

// TestBridgeSessionCap: a bridge holds at most BridgeMaxSessions sessions. An
// initialize at the cap ends the least recently used idle session; with every
// session running a request it is 503 too_many_sessions, Retry-After 1, and no
// session ends.
func TestBridgeSessionCap(t *testing.T) {
	turn := mcpservertest.NewTurn()
	b := openBridge(t, turn)
	var ids []string
	for range mcpserver.BridgeMaxSessions + 1 {
		ids = append(ids, initSession(t, b))
	}
	if b.Sessions() != mcpserver.BridgeMaxSessions {
		t.Fatalf("%d sessions, want the cap %d", b.Sessions(), mcpserver.BridgeMaxSessions)
	}
	if rec := post(b, pingBody, "Mcp-Session-Id", ids[0]); rec.Code != http.StatusNotFound {
		t.Errorf("the least recently used session at the cap: %d, want 404", rec.Code)
	}
	live := ids[1:]
	var wg sync.WaitGroup
	for i, sid := range live {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"test.block"}}`, 100+i)
			if rec := post(b, body, "Mcp-Session-Id", sid); rec.Code != http.StatusOK {
				t.Errorf("blocked call in %s: %d %s", sid, rec.Code, rec.Body)
			}
		}()
	}
	for range live {
		<-turn.Started()
	}
	rec := post(b, initBody)
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") != "1" || !strings.Contains(rec.Body.String(), "too_many_sessions") {
		t.Errorf("initialize with every session busy: %d %q %s", rec.Code, rec.Header().Get("Retry-After"), rec.Body)
	}
	if b.Sessions() != mcpserver.BridgeMaxSessions {
		t.Errorf("%d sessions after the refusal", b.Sessions())
	}
	turn.Release()
	wg.Wait()
	checkBridgeBookkeeping(t, b)
	if sid := initSession(t, b); sid == "" || b.Sessions() != mcpserver.BridgeMaxSessions {
		t.Errorf("initialize once sessions are idle: %q, %d sessions", sid, b.Sessions())
	}
	checkBridgeBookkeeping(t, b)
}

// TestBridgeConcurrentInitializes: initializes naming no session that arrive at
// once each get a session of their own; exactly one of them is the bridge's
// first session, and none is refused as a second initialize.
func TestBridgeConcurrentInitializes(t *testing.T) {
	b := openBridge(t, mcpservertest.NewTurn())
	const n = 8
	ids := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rec := post(b, initBody)
			if rec.Code != http.StatusOK {
				t.Errorf("initialize %d: %d %s", i, rec.Code, rec.Body)
			}
			ids[i] = rec.Header().Get("Mcp-Session-Id")
		}()
	}
	wg.Wait()
	seen, firsts := map[string]bool{}, 0
	for _, id := range ids {
		if seen[id] {
			t.Errorf("session %s given to two initializes", id)
		}
		seen[id] = true
		if id == b.SessionID() {
			firsts++
		}
	}
	if firsts != 1 || b.Sessions() != n {
		t.Errorf("%d initializes got the first session, %d sessions live", firsts, b.Sessions())
	}
	checkBridgeBookkeeping(t, b)
}

// TestBridgeFailedInitialize: an initialize that fails (params not an object)
// leaves no session half-open for the next one, which opens a session and
// serves.
func TestBridgeFailedInitialize(t *testing.T) {
	b := openBridge(t, mcpservertest.NewTurn())
	if rec := post(b, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":[1]}`); rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "-32602") {
		t.Fatalf("initialize with array params: %d %s", rec.Code, rec.Body)
	}
	sid := initSession(t, b)
	if rec := post(b, listBody, "Mcp-Session-Id", sid); rec.Code != http.StatusOK {
		t.Errorf("tools/list after a failed then a good initialize: %d %s", rec.Code, rec.Body)
	}
}
