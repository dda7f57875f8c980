package mcpserver_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/toolgate/toolgate/internal/mcpserver"
	"github.com/toolgate/toolgate/internal/mcpserver/mcpservertest"
)

// staleTurn is a fake Turn whose grants can be declared changed.
type staleTurn struct {
	*mcpservertest.Turn
	stale *atomic.Bool
}

func (s staleTurn) Stale(context.Context) bool { return s.stale.Load() }

var _ mcpserver.StaleTurn = staleTurn{}

// TestHandlerEndsStaleSessions: once the grants a session's Turn was opened under
// have changed (a grant removed with `toolgate grant rm`), the session's next
// request gets 404 unknown_session and the session and its Turn end, so the
// client initializes again under the current grants. Before, a busy session kept
// the authority it opened with for as long as it was used.
func TestHandlerEndsStaleSessions(t *testing.T) {
	var stale atomic.Bool
	fake := mcpservertest.NewTurn()
	h := mcpserver.NewHandler(mcpserver.HandlerOptions{
		OpenTurn: func(context.Context, string) (mcpserver.Turn, error) { return staleTurn{fake, &stale}, nil },
	})
	defer h.Close()
	rec := post(h, initBody)
	sid := rec.Header().Get("Mcp-Session-Id")
	if rec.Code != http.StatusOK || sid == "" {
		t.Fatalf("initialize: %d %s", rec.Code, rec.Body)
	}
	ping := `{"jsonrpc":"2.0","id":2,"method":"ping"}`
	if rec := post(h, ping, "Mcp-Session-Id", sid); rec.Code != http.StatusOK {
		t.Fatalf("ping on a current session: %d %s", rec.Code, rec.Body)
	}
	stale.Store(true)
	rec = post(h, ping, "Mcp-Session-Id", sid)
	if rec.Code != http.StatusNotFound || rec.Body.String() != `{"error":"unknown_session"}` {
		t.Errorf("ping on a stale session: %d %s, want 404 unknown_session", rec.Code, rec.Body)
	}
	if h.Sessions() != 0 || fake.Closed() != 1 {
		t.Errorf("after a stale request: %d sessions, turn closed %d times", h.Sessions(), fake.Closed())
	}
	if err := mcpserver.CheckSessionBookkeeping(h); err != nil {
		t.Error(err)
	}
	// The session stays gone; a new initialize gets a new one.
	stale.Store(false)
	if rec := post(h, ping, "Mcp-Session-Id", sid); rec.Code != http.StatusNotFound {
		t.Errorf("the ended session answered %d", rec.Code)
	}
	if rec := post(h, initBody); rec.Code != http.StatusOK || rec.Header().Get("Mcp-Session-Id") == sid {
		t.Errorf("re-initialize: %d, same id %v", rec.Code, rec.Header().Get("Mcp-Session-Id") == sid)
	}
}
