package mcpserver

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// A Handler behind a Guard that accepts exactly what its own guard accepts does not
// check a request again (toolgate serve checks once); behind a Guard accepting other
// hosts it checks as if alone.
func TestHandlerTrustsAnEquivalentGuardOnly(t *testing.T) {
	newH := func(hosts ...string) *Handler {
		h := NewHandler(HandlerOptions{AllowedHosts: hosts})
		t.Cleanup(func() { h.Close() })
		return h
	}
	ping := func(h http.Handler, host string, ctx context.Context) int {
		req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
		req.Host = host
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	bg := context.Background()
	same := newH("gw.example")
	// 400 missing_session is the handler's own answer: past every check.
	if code := ping(Guard(same, []string{"GW.example "}), "gw.example", bg); code != http.StatusBadRequest {
		t.Errorf("behind an equivalent Guard: %d, want 400 missing_session", code)
	}
	// It is the Guard's mark that makes the handler skip its check: marked, a request
	// its own guard would refuse goes on; unmarked, it is refused.
	marked := context.WithValue(bg, guardedKey{}, same.core.guard.key)
	if code := ping(same, "evil.example", marked); code != http.StatusBadRequest {
		t.Errorf("marked as guarded: %d, want 400 (not checked again)", code)
	}
	if code := ping(same, "evil.example", bg); code != http.StatusForbidden {
		t.Errorf("unmarked: %d, want 403 forbidden_host", code)
	}
	other := newH("a.example")
	if code := ping(Guard(other, []string{"b.example"}), "b.example", bg); code != http.StatusForbidden {
		t.Errorf("behind a Guard accepting another host: %d, want 403 forbidden_host", code)
	}
}
