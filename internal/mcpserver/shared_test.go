package mcpserver_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/mcpserver"
	"github.com/toolgate/toolgate/internal/mcpserver/mcpservertest"
)

// fakeShared is a database the Handlers share: a key and the ended sessions.
type fakeShared struct {
	key   []byte
	mu    sync.Mutex
	ended map[string]time.Time
	fail  error
}

func (f *fakeShared) Key() []byte { return f.key }
func (f *fakeShared) Ended(_ context.Context, h string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.ended[h]
	return ok, f.fail
}
func (f *fakeShared) End(_ context.Context, h string, exp time.Time) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ended[h] = exp
	return nil
}
func (f *fakeShared) hashes() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for h := range f.ended {
		out = append(out, h)
	}
	return out
}

// statefulTurn reports a state; a replica resumes it only while its "catalogue" is
// the one the state names.
type statefulTurn struct {
	*mcpservertest.Turn
	state string
}

func (t statefulTurn) SessionState() string { return t.state }

// replica is one Handler of a shared deployment whose current catalogue is *catalog.
func replica(sh mcpserver.SharedSessions, catalog *string, mu *sync.Mutex) *mcpserver.Handler {
	return replicaOf(sh, catalog, mu, false)
}

// replicaOf is replica whose turns publish no tool when empty.
func replicaOf(sh mcpserver.SharedSessions, catalog *string, mu *sync.Mutex, empty bool) *mcpserver.Handler {
	cur := func() string { mu.Lock(); defer mu.Unlock(); return *catalog }
	turn := func(state string) mcpserver.Turn {
		t := mcpservertest.NewTurn()
		t.Empty = empty
		return statefulTurn{t, state}
	}
	return mcpserver.NewHandler(mcpserver.HandlerOptions{
		Authenticate: func(tok string, present bool) (string, bool) { return strings.TrimPrefix(tok, "tok-"), present },
		OpenTurn: func(context.Context, string) (mcpserver.Turn, error) {
			return turn(cur()), nil
		},
		ResumeTurn: func(_ context.Context, _ string, state string) (mcpserver.Turn, error) {
			if state != cur() {
				return nil, errors.New("stale")
			}
			return turn(state), nil
		},
		Shared: sh,
	})
}

func send(h http.Handler, method, principal, sid, body string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, "/mcp", strings.NewReader(body))
	req.Host = "127.0.0.1:7077"
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer tok-"+principal)
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// A session opened on one Handler is served by another sharing its key, for its own
// principal only, while its state is current; a forged or foreign id is not; a DELETE
// anywhere ends it everywhere (recorded for those that never held it, EndShared for
// one that does).
func TestSharedSessionsServedAnywhere(t *testing.T) {
	sh := &fakeShared{key: []byte("0123456789abcdef0123456789abcdef"), ended: map[string]time.Time{}}
	var mu sync.Mutex
	catalog := "cat-1"
	a, b, c := replica(sh, &catalog, &mu), replica(sh, &catalog, &mu), replica(sh, &catalog, &mu)
	other := replica(&fakeShared{key: []byte("another key, another deployment"), ended: map[string]time.Time{}}, &catalog, &mu)
	for _, h := range []*mcpserver.Handler{a, b, c, other} {
		defer h.Close()
	}
	rec := send(a, "POST", "ann", "", initBody)
	sid := rec.Header().Get("Mcp-Session-Id")
	if rec.Code != 200 || !strings.HasPrefix(sid, "tg1.") {
		t.Fatalf("initialize: %d %q %s", rec.Code, sid, rec.Body)
	}
	if rec := send(b, "POST", "ann", sid, listBody); rec.Code != 200 || !strings.Contains(rec.Body.String(), `"tools"`) || rec.Header().Get("Mcp-Session-Id") != sid {
		t.Fatalf("tools/list on another replica: %d %s", rec.Code, rec.Body)
	}
	if b.Sessions() != 1 {
		t.Errorf("the other replica holds %d sessions, want 1", b.Sessions())
	}
	if rec := send(b, "POST", "bob", sid, listBody); rec.Code != 404 {
		t.Errorf("another principal's session: %d %s", rec.Code, rec.Body)
	}
	if rec := send(other, "POST", "ann", sid, listBody); rec.Code != 404 {
		t.Errorf("a session of another deployment: %d %s", rec.Code, rec.Body)
	}
	forged := sid[:len(sid)-2] + "AA"
	if rec := send(c, "POST", "ann", forged, listBody); rec.Code != 404 {
		t.Errorf("a forged session id: %d", rec.Code)
	}
	// The catalogue changes (grants): the session is stale wherever it is not held.
	mu.Lock()
	catalog = "cat-2"
	mu.Unlock()
	if rec := send(c, "POST", "ann", sid, listBody); rec.Code != 404 {
		t.Errorf("a stale session on a replica that never held it: %d", rec.Code)
	}
	mu.Lock()
	catalog = "cat-1"
	mu.Unlock()

	// DELETE through c ends it there, and nobody takes it up again.
	if rec := send(c, "DELETE", "ann", sid, ""); rec.Code != 200 {
		t.Fatalf("DELETE: %d %s", rec.Code, rec.Body)
	}
	d := replica(sh, &catalog, &mu)
	defer d.Close()
	for name, h := range map[string]*mcpserver.Handler{"c": c, "d": d} {
		if rec := send(h, "POST", "ann", sid, listBody); rec.Code != 404 {
			t.Errorf("%s after DELETE: %d", name, rec.Code)
		}
	}
	// a and b still hold it until told (the daemon does on the store's notification).
	a.EndShared(sh.hashes()...)
	b.EndShared(sh.hashes()...)
	for name, h := range map[string]*mcpserver.Handler{"a": a, "b": b} {
		if rec := send(h, "POST", "ann", sid, listBody); rec.Code != 404 {
			t.Errorf("%s after DELETE and EndShared: %d", name, rec.Code)
		}
		if h.Sessions() != 0 {
			t.Errorf("%s holds %d sessions", name, h.Sessions())
		}
	}
	// A store that cannot say whether a session ended fails closed.
	sid2 := send(a, "POST", "ann", "", initBody).Header().Get("Mcp-Session-Id")
	sh.mu.Lock()
	sh.fail = errors.New("database down")
	sh.mu.Unlock()
	if rec := send(b, "POST", "ann", sid2, listBody); rec.Code != 404 {
		t.Errorf("resume with the store down: %d", rec.Code)
	}
}

// Without Shared nothing changes: ids are random and another Handler does not know them.
func TestUnsharedSessionsStayLocal(t *testing.T) {
	var mu sync.Mutex
	catalog := "x"
	open := func(context.Context, string) (mcpserver.Turn, error) { return mcpservertest.NewTurn(), nil }
	a := mcpserver.NewHandler(mcpserver.HandlerOptions{OpenTurn: open})
	b := replica(nil, &catalog, &mu)
	defer a.Close()
	defer b.Close()
	sid := initSession(t, a)
	if strings.HasPrefix(sid, "tg1.") {
		t.Errorf("unshared id is signed: %s", sid)
	}
	if rec := send(b, "POST", "", sid, listBody); rec.Code != 404 {
		t.Errorf("unshared session on another handler: %d", rec.Code)
	}
}

// A principal that sees no tool holds at most MaxSessionsWithoutTools sessions on a
// replica that takes up the ones it opened elsewhere, as on the one it opened them on.
func TestSharedSessionsToollessCap(t *testing.T) {
	sh := &fakeShared{key: []byte("0123456789abcdef0123456789abcdef"), ended: map[string]time.Time{}}
	var mu sync.Mutex
	catalog := "empty"
	a, b := replicaOf(sh, &catalog, &mu, true), replicaOf(sh, &catalog, &mu, true)
	defer a.Close()
	defer b.Close()
	var sids []string
	for range 6 {
		sids = append(sids, send(a, "POST", "ghost", "", initBody).Header().Get("Mcp-Session-Id"))
	}
	if a.Sessions() != mcpserver.DefaultMaxSessionsWithoutTools {
		t.Fatalf("the opening replica holds %d", a.Sessions())
	}
	for _, sid := range sids {
		send(b, "POST", "ghost", sid, `{"jsonrpc":"2.0","id":3,"method":"ping"}`)
	}
	if n := b.Sessions(); n > mcpserver.DefaultMaxSessionsWithoutTools {
		t.Errorf("the other replica took up %d sessions of a principal that sees no tool", n)
	}
}
