package mcpserver_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/toolgate/toolgate/internal/mcpserver"
)

// TestHandlerToollessQuota: a principal that can see no tool holds at most
// MaxSessionsWithoutTools sessions. With both of its sessions busy its next
// initialize is 503 too_many_sessions (Retry-After 1) and the Turn opened for
// it is closed; once they are idle an initialize ends the least recently used
// one instead. Principals that see tools keep the ordinary quota, and a
// handful of toolless principals can no longer fill the global cap that those
// principals need. Before, each toolless principal could hold
// MaxSessionsPerPrincipal sessions, and a few of them locked everyone else
// out until the idle timeout.
func TestHandlerToollessQuota(t *testing.T) {
	pt := principalTurns{empty: map[string]bool{"nobody": true, "ghost": true}}
	h := mcpserver.NewHandler(mcpserver.HandlerOptions{OpenTurn: pt.open, Authenticate: tokenIsPrincipal, MaxSessions: 8})
	defer h.Close()
	quota := mcpserver.DefaultMaxSessionsWithoutTools

	var sessions []string
	for range quota {
		code, sid, _, body := initAs(h, "nobody")
		if code != http.StatusOK {
			t.Fatalf("nobody's initialize: %d %s", code, body)
		}
		sessions = append(sessions, sid)
	}
	done := make(chan int, quota)
	for i, sid := range sessions {
		go func() {
			done <- post(h, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"test.block"}}`, i+2),
				"Authorization", "Bearer nobody", "Mcp-Session-Id", sid).Code
		}()
		<-pt.nth("nobody", i).Started()
	}
	code, _, retry, body := initAs(h, "nobody")
	if code != http.StatusServiceUnavailable || body != `{"error":"too_many_sessions"}` || retry != "1" {
		t.Errorf("nobody at its quota with both sessions busy: %d %s Retry-After %q", code, body, retry)
	}
	if open, closed := pt.count("nobody"); open != quota || closed != 1 {
		t.Errorf("nobody: %d open turns, %d closed; want %d, 1 (the refused one)", open, closed, quota)
	}
	checkBookkeeping(t, h)
	// Released in order, so the first session is the least recently used.
	for i := range quota {
		pt.nth("nobody", i).Release()
		if c := <-done; c != http.StatusOK {
			t.Errorf("a blocked call ended with %d", c)
		}
	}
	code, _, _, _ = initAs(h, "nobody")
	if code != http.StatusOK || pingAs(h, "nobody", sessions[0]) != http.StatusNotFound || pingAs(h, "nobody", sessions[1]) != http.StatusOK {
		t.Errorf("nobody with idle sessions: %d; its least recently used session should have ended", code)
	}

	// Another toolless principal fills its own two places and no more.
	for range 5 {
		if code, _, _, _ := initAs(h, "ghost"); code != http.StatusOK {
			t.Fatalf("ghost's initialize: %d", code)
		}
	}
	if n := h.Sessions(); n != 2*quota {
		t.Errorf("%d sessions held by two toolless principals, want %d", n, 2*quota)
	}
	// The rest of the cap is there for a principal with tools.
	for i := range 8 - 2*quota {
		if code, _, _, body := initAs(h, "alice"); code != http.StatusOK {
			t.Fatalf("alice's initialize %d: %d %s", i, code, body)
		}
	}
	checkBookkeeping(t, h)
}
