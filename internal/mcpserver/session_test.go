package mcpserver_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/toolgate/toolgate/internal/mcpserver"
	"github.com/toolgate/toolgate/internal/mcpserver/mcpservertest"
)

const initBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}`

func post(h http.Handler, body string, headers ...string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(body))
	req.Host = "127.0.0.1:7077"
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// initSession opens a session on h and returns its id.
func initSession(t *testing.T, h http.Handler) string {
	t.Helper()
	rec := post(h, initBody)
	sid := rec.Header().Get("Mcp-Session-Id")
	if rec.Code != http.StatusOK || sid == "" {
		t.Fatalf("initialize: %d %s", rec.Code, rec.Body)
	}
	return sid
}

// turnCounter opens fake turns and remembers them.
type turnCounter struct {
	mu    sync.Mutex
	turns []*mcpservertest.Turn
}

func (c *turnCounter) open(ctx context.Context, principal string) (mcpserver.Turn, error) {
	t := mcpservertest.NewTurn()
	c.mu.Lock()
	c.turns = append(c.turns, t)
	c.mu.Unlock()
	return t, nil
}

func (c *turnCounter) closed() (open, closed int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, t := range c.turns {
		if t.Closed() > 0 {
			closed++
		} else {
			open++
		}
	}
	return
}

// TestHandlerAbandonedInitializesStayBounded: ten thousand initializes that are
// never used again leave at most MaxSessions sessions; every evicted session's
// Turn is closed.
func TestHandlerAbandonedInitializesStayBounded(t *testing.T) {
	var tc turnCounter
	h := mcpserver.NewHandler(mcpserver.HandlerOptions{OpenTurn: tc.open, MaxSessions: 64})
	defer h.Close()
	for i := range 10_000 {
		if rec := post(h, initBody); rec.Code != http.StatusOK {
			t.Fatalf("initialize %d: %d %s", i, rec.Code, rec.Body)
		}
		if h.Sessions() > 64 {
			t.Fatalf("after %d initializes: %d sessions", i+1, h.Sessions())
		}
	}
	open, closed := tc.closed()
	if open != 64 || closed != 10_000-64 {
		t.Errorf("open turns %d, closed %d", open, closed)
	}
	h.Close()
	if open, _ := tc.closed(); open != 0 || h.Sessions() != 0 {
		t.Errorf("after Close: %d open turns, %d sessions", open, h.Sessions())
	}
	if rec := post(h, initBody); rec.Code == http.StatusOK {
		t.Errorf("initialize after Close: %d", rec.Code)
	}
}

// TestHandlerCapAllBusy: at the cap with every session busy, initialize gets 503.
func TestHandlerCapAllBusy(t *testing.T) {
	var tc turnCounter
	h := mcpserver.NewHandler(mcpserver.HandlerOptions{OpenTurn: tc.open, MaxSessions: 1})
	defer h.Close()
	rec := post(h, initBody)
	sid := rec.Header().Get("Mcp-Session-Id")
	done := make(chan *httptest.ResponseRecorder)
	go func() {
		done <- post(h, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"test.block"}}`, "Mcp-Session-Id", sid)
	}()
	tc.mu.Lock()
	turn := tc.turns[0]
	tc.mu.Unlock()
	<-turn.Started()
	if rec := post(h, initBody); rec.Code != http.StatusServiceUnavailable || rec.Body.String() != `{"error":"too_many_sessions"}` {
		t.Errorf("initialize at the cap: %d %s", rec.Code, rec.Body)
	}
	turn.Release()
	if rec := <-done; rec.Code != http.StatusOK {
		t.Errorf("blocked call: %d", rec.Code)
	}
	if rec := post(h, initBody); rec.Code != http.StatusOK {
		t.Errorf("initialize once idle: %d", rec.Code)
	}
}

// TestHandlerIdleReaping: a session unused for IdleTimeout is ended and its Turn
// closed; a session in use is kept.
func TestHandlerIdleReaping(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var tc turnCounter
		h := mcpserver.NewHandler(mcpserver.HandlerOptions{OpenTurn: tc.open, IdleTimeout: time.Minute})
		defer h.Close()
		idle := post(h, initBody).Header().Get("Mcp-Session-Id")
		busy := post(h, initBody).Header().Get("Mcp-Session-Id")
		for range 6 {
			time.Sleep(20 * time.Second)
			if rec := post(h, `{"jsonrpc":"2.0","id":2,"method":"ping"}`, "Mcp-Session-Id", busy); rec.Code != http.StatusOK {
				t.Fatalf("busy session: %d", rec.Code)
			}
		}
		synctest.Wait()
		if rec := post(h, `{"jsonrpc":"2.0","id":3,"method":"ping"}`, "Mcp-Session-Id", idle); rec.Code != http.StatusNotFound {
			t.Errorf("idle session after 2 minutes: %d %s", rec.Code, rec.Body)
		}
		if open, closed := tc.closed(); open != 1 || closed != 1 {
			t.Errorf("open %d closed %d", open, closed)
		}
		if h.Sessions() != 1 {
			t.Errorf("%d sessions", h.Sessions())
		}
	})
}

// TestHandlerOpenTurnFailure: a failing OpenTurn is a 503 catalog_unavailable, as the
// HTTP API answers a turn it cannot open (internal/httpwire), with no details and no
// session.
func TestHandlerOpenTurnFailure(t *testing.T) {
	h := mcpserver.NewHandler(mcpserver.HandlerOptions{OpenTurn: func(context.Context, string) (mcpserver.Turn, error) {
		return nil, errors.New("secret store failure")
	}})
	defer h.Close()
	rec := post(h, initBody)
	if rec.Code != http.StatusServiceUnavailable || rec.Body.String() != `{"error":"catalog_unavailable"}` || h.Sessions() != 0 {
		t.Errorf("got %d %s, %d sessions", rec.Code, rec.Body, h.Sessions())
	}
}

// TestHandlerNoSessionBeforeAuth: refused requests (bad Host, no token) never open
// a session or a Turn.
func TestHandlerNoSessionBeforeAuth(t *testing.T) {
	var tc turnCounter
	h := mcpserver.NewHandler(mcpserver.HandlerOptions{OpenTurn: tc.open,
		Authenticate: func(tok string, present bool) (string, bool) { return "p", present && tok == "good" }})
	defer h.Close()
	for i := range 50 {
		req := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(initBody))
		req.Header.Set("Content-Type", "application/json")
		if i%2 == 0 {
			req.Host = "evil.example"
			req.Header.Set("Authorization", "Bearer good")
		} else {
			req.Host = "localhost"
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusForbidden && rec.Code != http.StatusUnauthorized {
			t.Fatalf("request %d: %d", i, rec.Code)
		}
	}
	if h.Sessions() != 0 || len(tc.turns) != 0 {
		t.Errorf("%d sessions, %d turns opened", h.Sessions(), len(tc.turns))
	}
}

func TestBridgeLifecycle(t *testing.T) {
	turn := mcpservertest.NewTurn()
	b, err := mcpserver.NewBridge(turn, mcpserver.BridgeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("http://127.0.0.1:%d/mcp", b.Port()); b.URL() != want || b.Port() == 0 {
		t.Errorf("URL %q, port %d", b.URL(), b.Port())
	}
	if len(b.SessionID()) != 32 {
		t.Errorf("session id %q", b.SessionID())
	}
	// A second bridge cannot take the same port.
	if _, err := mcpserver.NewBridge(turn, mcpserver.BridgeOptions{Port: b.Port()}); err == nil {
		t.Error("second bridge on a busy port")
	}
	res, err := http.Post(b.URL(), "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 || res.Header.Get("Mcp-Session-Id") != b.SessionID() {
		t.Errorf("ping: %d %q", res.StatusCode, res.Header.Get("Mcp-Session-Id"))
	}
	select {
	case <-b.Done():
		t.Fatal("done before Close")
	default:
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	<-b.Done()
	if err := b.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if turn.Closed() != 1 {
		t.Errorf("turn closed %d times", turn.Closed())
	}
	// The listener is gone; mounted elsewhere the handler answers 404.
	if _, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", b.Port())); err == nil {
		t.Error("listener still open after Close")
	}
	if rec := post(b, `{"jsonrpc":"2.0","id":1,"method":"ping"}`, "Mcp-Session-Id", b.SessionID()); rec.Code != http.StatusNotFound {
		t.Errorf("after Close: %d", rec.Code)
	}
}

// TestBridgeCloseCancelsCalls: Close ends a call in flight instead of waiting on it.
func TestBridgeCloseCancelsCalls(t *testing.T) {
	turn := mcpservertest.NewTurn()
	b, err := mcpserver.NewBridge(turn, mcpserver.BridgeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rec := post(b, initBody); rec.Code != http.StatusOK {
		t.Fatalf("initialize: %d %s", rec.Code, rec.Body)
	}
	done := make(chan int)
	go func() {
		res, err := http.Post(b.URL(), "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"test.block"}}`))
		if err != nil {
			done <- 0
			return
		}
		res.Body.Close()
		done <- res.StatusCode
	}()
	<-turn.Started()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if code := <-done; code != 200 && code != 0 {
		t.Errorf("blocked call ended with %d", code)
	}
}

func TestGuardMiddleware(t *testing.T) {
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(299) })
	g := mcpserver.Guard(next, []string{"gw.internal", "10.0.0.5:7077"})
	tests := []struct {
		method, host, origin, ctype string
		want                        int
	}{
		{"GET", "127.0.0.1:1", "", "", 299},
		{"GET", "localhost", "", "", 299},
		{"GET", "LOCALHOST:80", "", "", 299},
		{"GET", "[::1]:9", "", "", 299},
		{"GET", "127.0.0.2", "", "", 299},
		{"GET", "gw.internal:443", "", "", 299},
		{"GET", "10.0.0.5:7077", "", "", 299},
		{"GET", "10.0.0.5:7078", "", "", 403},
		{"GET", "evil.com", "", "", 403},
		{"GET", "localhost.evil.com", "", "", 403},
		{"GET", "", "", "", 403},
		{"GET", "127.0.0.1", "http://127.0.0.1:3000", "", 299},
		{"GET", "127.0.0.1", "https://gw.internal", "", 299},
		{"GET", "127.0.0.1", "http://evil.com", "", 403},
		{"GET", "127.0.0.1", "null", "", 403},
		{"GET", "127.0.0.1", "file://localhost", "", 403},
		{"POST", "127.0.0.1", "", "application/json", 299},
		{"POST", "127.0.0.1", "", "Application/JSON; charset=utf-8", 299},
		{"POST", "127.0.0.1", "", "text/plain", 415},
		{"POST", "127.0.0.1", "", "application/x-www-form-urlencoded", 415},
		{"POST", "127.0.0.1", "", "multipart/form-data; boundary=x", 415},
		{"POST", "127.0.0.1", "", "", 415},
	}
	for _, tt := range tests {
		req := httptest.NewRequest(tt.method, "/v1/tools", nil)
		req.Host = tt.host
		if tt.origin != "" {
			req.Header.Set("Origin", tt.origin)
		}
		if tt.ctype != "" {
			req.Header.Set("Content-Type", tt.ctype)
		}
		rec := httptest.NewRecorder()
		g.ServeHTTP(rec, req)
		if rec.Code != tt.want {
			t.Errorf("%s host=%q origin=%q type=%q: %d, want %d", tt.method, tt.host, tt.origin, tt.ctype, rec.Code, tt.want)
		}
	}
}

func TestStaticToken(t *testing.T) {
	a := mcpserver.StaticToken("s3cret")
	if !a("s3cret", true) || a("s3cret", false) || a("s3cre", true) || a("", true) || a("S3CRET", true) {
		t.Error("StaticToken accepts the wrong things")
	}
	if mcpserver.StaticToken("")("", true) {
		t.Error("an empty token accepts")
	}
}

// TestBridgeNoAuthOnlyLoopback: a bridge without Authorize refuses to listen
// beyond loopback.
func TestBridgeNoAuthOnlyLoopback(t *testing.T) {
	for _, host := range []string{"0.0.0.0", "::", "192.0.2.1", "example.com"} {
		if b, err := mcpserver.NewBridge(mcpservertest.NewTurn(), mcpserver.BridgeOptions{Host: host}); err == nil {
			b.Close()
			t.Errorf("host %q accepted without Authorize", host)
		}
	}
	b, err := mcpserver.NewBridge(mcpservertest.NewTurn(), mcpserver.BridgeOptions{Host: "0.0.0.0", Authorize: mcpserver.StaticToken("t")})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if !strings.HasPrefix(b.URL(), "http://127.0.0.1:") {
		t.Errorf("URL %q", b.URL())
	}
}

// TestBridgeReadHeaderTimeout: a client that never finishes its headers is
// disconnected instead of holding the connection open.
func TestBridgeReadHeaderTimeout(t *testing.T) {
	b, err := mcpserver.NewBridge(mcpservertest.NewTurn(), mcpserver.BridgeOptions{ReadHeaderTimeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	conn, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", b.Port()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")); err != nil {
		t.Fatal(err)
	}
	// The read returns only once the server gives up on the headers and
	// closes the connection (a 408 may come first).
	buf := make([]byte, 1024)
	for {
		if _, err := conn.Read(buf); err != nil {
			break
		}
	}
}
