package mgmt_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/toolgate/toolgate/internal/mgmt"
	"github.com/toolgate/toolgate/internal/mgmt/mgmttest"
)

// pipeServer serves a handler over net.Pipe connections: a pipe buffers nothing, so a
// client that does not read blocks the server's very first write to it, with no
// kernel socket buffer hiding that it does not read.
type pipeServer struct {
	conns  chan net.Conn
	closed chan struct{}
	once   sync.Once
	srv    *http.Server
}

func newPipeServer(t *testing.T, h http.Handler) *pipeServer {
	t.Helper()
	p := &pipeServer{conns: make(chan net.Conn), closed: make(chan struct{})}
	p.srv = &http.Server{Handler: h}
	go func() { _ = p.srv.Serve(p) }()
	t.Cleanup(func() { _ = p.srv.Close() })
	return p
}

func (p *pipeServer) Accept() (net.Conn, error) {
	select {
	case c := <-p.conns:
		return c, nil
	case <-p.closed:
		return nil, net.ErrClosed
	}
}

func (p *pipeServer) Close() error   { p.once.Do(func() { close(p.closed) }); return nil }
func (p *pipeServer) Addr() net.Addr { return pipeAddr{} }

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "127.0.0.1:7077" }

func (p *pipeServer) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	server, client := net.Pipe()
	select {
	case p.conns <- server:
		return client, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// socket opens a WebSocket over a pipe; status is the HTTP status when it is refused.
func (p *pipeServer) socket(t *testing.T, token string, hdr http.Header) (*websocket.Conn, int, error) {
	return p.socketWith(t, token, hdr, nil)
}

func (p *pipeServer) socketWith(t *testing.T, token string, hdr http.Header, onPing func(context.Context, []byte) bool) (*websocket.Conn, int, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if hdr == nil {
		hdr = http.Header{}
	}
	if token != "" {
		hdr.Set("Authorization", "Bearer "+token)
	}
	c, resp, err := websocket.Dial(ctx, "ws://127.0.0.1:7077"+mgmt.Path, &websocket.DialOptions{
		HTTPClient:     &http.Client{Transport: &http.Transport{DialContext: p.dial}},
		HTTPHeader:     hdr,
		OnPingReceived: onPing,
	})
	if err != nil {
		status := 0
		if resp != nil {
			status = resp.StatusCode
		}
		return nil, status, err
	}
	c.SetReadLimit(mgmt.MaxAnswerBytes)
	t.Cleanup(func() { _ = c.CloseNow() })
	return c, 101, nil
}

func (p *pipeServer) mustSocket(t *testing.T) *websocket.Conn {
	t.Helper()
	c, status, err := p.socket(t, ownerToken, nil)
	if err != nil {
		t.Fatalf("opening a socket: %v (HTTP %d)", err, status)
	}
	return c
}

// waitStats polls the handler's counts until ok says yes (the handler changes them from
// its own goroutines); the test's deadline bounds it.
func waitStats(t *testing.T, h *mgmt.Handler, ok func(mgmt.Stats) bool) mgmt.Stats {
	t.Helper()
	start := time.Now()
	for {
		st := h.Stats()
		if ok(st) {
			return st
		}
		if t.Context().Err() != nil || time.Since(start) > 20*time.Second {
			t.Fatalf("stats never as expected: %+v", st)
		}
		time.Sleep(time.Millisecond)
	}
}

func changed(v uint64) *mgmt.Changed {
	return &mgmt.Changed{SnapshotVersion: v, At: mgmttest.Now, Change: mgmt.ChangeUpdated,
		NotifiedServer: mgmt.NotifiedServer{ServerID: "mcp_000000000000000001", Name: "filesystem", WorkspaceID: mgmttest.DefaultWorkspace, Scope: "workspace"}}
}

// A socket that never reads while notifications are published is dropped (counted),
// and neither the publisher nor a socket that reads notices: the reader gets every
// notification, in order.
func TestSocketThatDoesNotReadIsDropped(t *testing.T) {
	fake := mgmttest.NewSeeded()
	stack, h := serveStack(t, fake, mgmt.Options{SendQueue: 8})
	p := newPipeServer(t, stack)
	idle := p.mustSocket(t)
	reader := p.mustSocket(t)
	waitStats(t, h, func(s mgmt.Stats) bool { return s.Sockets == 2 })

	got := make(chan uint64)
	go func() {
		defer close(got)
		for {
			_, b, err := reader.Read(context.Background())
			if err != nil {
				return
			}
			n, ok := mgmt.DecodeNotification(b)
			if !ok {
				t.Errorf("not a notification: %s", b)
				return
			}
			got <- n.(*mgmt.Changed).SnapshotVersion
		}
	}()
	const rounds = 100
	for v := uint64(1); v <= rounds; v++ {
		fake.Publish(changed(v)) // returns at once whatever idle does
		if g := <-got; g != v {
			t.Fatalf("the reading socket got version %d, want %d", g, v)
		}
	}
	st := waitStats(t, h, func(s mgmt.Stats) bool { return s.Sockets == 1 })
	if st.Dropped != 1 {
		t.Fatalf("dropped %d sockets, want 1", st.Dropped)
	}
	// The idle socket was cut: what it reads now ends in an error, after at most the one
	// message the server had begun writing when it stopped taking them.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := 0; ; i++ {
		if _, _, err := idle.Read(ctx); err != nil {
			if ctx.Err() != nil {
				t.Fatal("the idle socket was never closed")
			}
			break
		}
		if i > 1 {
			t.Fatal("the idle socket got more than the message under way")
		}
	}
}

// A client that floods requests without reading the answers is dropped (counted)
// once a write to it waits WriteTimeout; until then the server stops reading from it
// when its answers fill their half of the queue, so the flood costs the server that
// much and other callers are served throughout.
func TestSocketRequestFloodWithoutReading(t *testing.T) {
	fake := mgmttest.NewSeeded()
	stack, h := serveStack(t, fake, mgmt.Options{SendQueue: 4, WriteTimeout: 20 * time.Millisecond})
	p := newPipeServer(t, stack)
	flood := p.mustSocket(t)
	var sent atomic.Int64
	done := make(chan error, 1)
	go func() {
		for i := 0; ; i++ {
			if err := flood.Write(context.Background(), websocket.MessageText,
				fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":"mcp/list"}`, i)); err != nil {
				done <- err
				return
			}
			sent.Add(1)
		}
	}()
	waitStats(t, h, func(s mgmt.Stats) bool { return s.Dropped == 1 && s.Sockets == 0 })
	if err := <-done; err == nil {
		t.Fatal("the flood's writes never failed")
	}
	// The server stopped reading the flood once the answers' half of the queue was
	// full: that, the answer being written and the request waiting to be answered.
	if n := sent.Load(); n > 2+1+1+1 {
		t.Fatalf("the server read %d requests from a socket that read nothing", n)
	}
	other := p.mustSocket(t)
	writeMsg(t, other, `{"jsonrpc":"2.0","id":1,"method":"mcp/list"}`)
	if a := readMsg(t, other); !strings.Contains(a, `"snapshot_version":7`) {
		t.Fatalf("another socket after the flood: %s", a)
	}
}

// A client that floods requests and reads the answers, however slowly, is answered in
// order, every one: the server reads its requests only as fast as it takes answers.
func TestSocketRequestFloodReading(t *testing.T) {
	fake := mgmttest.NewSeeded()
	stack, _ := serveStack(t, fake, mgmt.Options{SendQueue: 4})
	p := newPipeServer(t, stack)
	c := p.mustSocket(t)
	const n = 2000
	go func() {
		for i := range n {
			if c.Write(context.Background(), websocket.MessageText,
				fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":"mcp/server/details","params":{"name":"filesystem"}}`, i)) != nil {
				return
			}
		}
	}()
	for i := range n {
		a := readMsg(t, c)
		if !strings.HasPrefix(a, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{"server":`, i)) {
			t.Fatalf("answer %d: %.200s", i, a)
		}
	}
}

// A message over the read limit closes the socket with 1009; nothing of it is decoded.
func TestSocketMessageTooBig(t *testing.T) {
	stack, _ := serveStack(t, mgmttest.NewSeeded(), mgmt.Options{MaxBodyBytes: 1024})
	p := newPipeServer(t, stack)
	c := p.mustSocket(t)
	big := `{"jsonrpc":"2.0","id":1,"method":"mcp/install","params":{"config_json":"` + strings.Repeat("a", 2048) + `"}}`
	_ = c.Write(context.Background(), websocket.MessageText, []byte(big))
	_, _, err := c.Read(context.Background())
	if got := websocket.CloseStatus(err); got != websocket.StatusMessageTooBig {
		t.Fatalf("close status %v (%v), want 1009", got, err)
	}
}

// A binary message is answered with parse_error and the socket stays open.
func TestSocketBinaryMessage(t *testing.T) {
	stack, _ := serveStack(t, mgmttest.NewSeeded(), mgmt.Options{})
	p := newPipeServer(t, stack)
	c := p.mustSocket(t)
	if err := c.Write(context.Background(), websocket.MessageBinary, []byte(`{"jsonrpc":"2.0","id":1,"method":"mcp/list"}`)); err != nil {
		t.Fatal(err)
	}
	if a := readMsg(t, c); !strings.Contains(a, `"code":"parse_error"`) {
		t.Fatalf("binary message: %s", a)
	}
	writeMsg(t, c, `{"jsonrpc":"2.0","id":2,"method":"mcp/list"}`)
	if a := readMsg(t, c); !strings.HasPrefix(a, `{"jsonrpc":"2.0","id":2,"result":`) {
		t.Fatalf("after it: %s", a)
	}
}

// Upgrades are authenticated like POSTs: no token or a bad one is 401, a principal
// without the admin grant 403, and nothing is upgraded.
func TestSocketAuthentication(t *testing.T) {
	stack, h := serveStack(t, mgmttest.NewSeeded(), mgmt.Options{})
	p := newPipeServer(t, stack)
	for _, c := range []struct {
		token string
		want  int
	}{{"", 401}, {"not-a-token", 401}, {readerToken, 403}, {adminToken, 101}} {
		_, status, _ := p.socket(t, c.token, nil)
		if status != c.want {
			t.Errorf("token %q: HTTP %d, want %d", c.token, status, c.want)
		}
	}
	waitStats(t, h, func(s mgmt.Stats) bool { return s.Sockets == 1 })
}

// A cross-origin upgrade is refused unless its origin is listed, even a loopback one
// that serve's guard lets through (a page on another local port).
func TestSocketOrigin(t *testing.T) {
	stack, _ := serveStack(t, mgmttest.NewSeeded(), mgmt.Options{OriginPatterns: []string{"127.0.0.1:3000"}})
	p := newPipeServer(t, stack)
	for origin, want := range map[string]int{
		"http://localhost:3000": 403, "http://127.0.0.1:7077": 101, "http://127.0.0.1:3000": 101, "http://evil.example": 403,
	} {
		_, status, _ := p.socket(t, ownerToken, http.Header{"Origin": {origin}})
		if status != want {
			t.Errorf("origin %s: HTTP %d, want %d", origin, status, want)
		}
	}
}

// Sockets beyond MaxSockets are refused 503 too_many_connections.
func TestSocketLimit(t *testing.T) {
	stack, _ := serveStack(t, mgmttest.NewSeeded(), mgmt.Options{MaxSockets: 2})
	p := newPipeServer(t, stack)
	p.mustSocket(t)
	p.mustSocket(t)
	if _, status, _ := p.socket(t, ownerToken, nil); status != http.StatusServiceUnavailable {
		t.Fatalf("third socket: HTTP %d, want 503", status)
	}
}

// revocable is an Authenticator whose tokens can be revoked.
type revocable struct{ revoked atomic.Bool }

func (r *revocable) auth(ctx context.Context, token string) (mgmt.Caller, bool, bool) {
	if r.revoked.Load() {
		return mgmt.Caller{}, false, false
	}
	return testAuth(ctx, token)
}

// A socket whose token is revoked is answered unauthorized at its next request and
// closed with 1008.
func TestSocketRevokedAtRequest(t *testing.T) {
	rv := &revocable{}
	stack, h := serveStack(t, mgmttest.NewSeeded(), mgmt.Options{Authenticate: rv.auth})
	p := newPipeServer(t, stack)
	c := p.mustSocket(t)
	rv.revoked.Store(true)
	writeMsg(t, c, `{"jsonrpc":"2.0","id":1,"method":"mcp/list"}`)
	if a := readMsg(t, c); !strings.Contains(a, `"id":1,"error"`) || !strings.Contains(a, `"code":"unauthorized"`) {
		t.Fatalf("after revocation: %s", a)
	}
	_, _, err := c.Read(context.Background())
	if websocket.CloseStatus(err) != websocket.StatusPolicyViolation {
		t.Fatalf("close: %v, want 1008", err)
	}
	waitStats(t, h, func(s mgmt.Stats) bool { return s.Sockets == 0 })
}

// A socket that only listens is closed within PingInterval of its token's revocation.
func TestSocketRevokedAtKeepalive(t *testing.T) {
	rv := &revocable{}
	stack, _ := serveStack(t, mgmttest.NewSeeded(), mgmt.Options{Authenticate: rv.auth, PingInterval: 5 * time.Millisecond})
	p := newPipeServer(t, stack)
	c := p.mustSocket(t)
	rv.revoked.Store(true)
	_, _, err := c.Read(context.Background())
	if websocket.CloseStatus(err) != websocket.StatusPolicyViolation {
		t.Fatalf("close: %v, want 1008", err)
	}
}

// A socket that answers pings stays through many keepalive rounds; one that stops
// answering is dropped as gone once a pong is PongTimeout late.
func TestSocketKeepalive(t *testing.T) {
	stack, h := serveStack(t, mgmttest.NewSeeded(), mgmt.Options{PingInterval: time.Millisecond, PongTimeout: 20 * time.Millisecond})
	p := newPipeServer(t, stack)
	var pings atomic.Int64
	answer := atomic.Bool{}
	answer.Store(true)
	enough := make(chan struct{})
	c, status, err := p.socketWith(t, ownerToken, nil, func(context.Context, []byte) bool {
		if pings.Add(1) == 20 {
			close(enough)
		}
		return answer.Load()
	})
	if err != nil {
		t.Fatalf("HTTP %d: %v", status, err)
	}
	readErr := make(chan error, 1)
	go func() { _, _, err := c.Read(context.Background()); readErr <- err }() // Read answers pings
	<-enough
	if st := h.Stats(); st.Sockets != 1 {
		t.Fatalf("a socket answering pings was dropped after %d pings: %+v", pings.Load(), st)
	}
	answer.Store(false)
	if err := <-readErr; err == nil {
		t.Fatal("a socket that stopped answering pings was kept")
	}
	waitStats(t, h, func(s mgmt.Stats) bool { return s.Sockets == 0 })
	if st := h.Stats(); st.Dropped != 0 {
		t.Fatalf("a gone socket counted as not reading: %+v", st)
	}
}

// Close ends every socket with 1001 (going away) and refuses later upgrades.
func TestHandlerCloseEndsSockets(t *testing.T) {
	stack, h := serveStack(t, mgmttest.NewSeeded(), mgmt.Options{})
	p := newPipeServer(t, stack)
	c := p.mustSocket(t)
	go func() { _ = h.Close() }()
	_, _, err := c.Read(context.Background())
	if websocket.CloseStatus(err) != websocket.StatusGoingAway {
		t.Fatalf("close: %v, want 1001", err)
	}
	waitStats(t, h, func(s mgmt.Stats) bool { return s.Sockets == 0 })
	if _, status, _ := p.socket(t, ownerToken, nil); status != http.StatusServiceUnavailable {
		t.Fatalf("an upgrade after Close: HTTP %d, want 503", status)
	}
}

// The notification feed is subscribed while the handler lives, and Close ends it.
func TestHandlerCloseUnsubscribes(t *testing.T) {
	fake := mgmttest.NewSeeded()
	_, h := serveStack(t, fake, mgmt.Options{})
	if n := fake.Subscribers(); n != 1 {
		t.Fatalf("%d subscribers while open, want 1", n)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if n := fake.Subscribers(); n != 0 {
		t.Fatalf("%d subscribers after Close, want 0", n)
	}
}

// Close flushes what is queued to each socket, but a socket that does not take it is cut
// after WriteTimeout (counted as not reading) instead of holding Close.
func TestHandlerCloseWithSocketNotReading(t *testing.T) {
	fake := mgmttest.NewSeeded()
	stack, h := serveStack(t, fake, mgmt.Options{WriteTimeout: 20 * time.Millisecond})
	p := newPipeServer(t, stack)
	p.mustSocket(t) // never read
	waitStats(t, h, func(s mgmt.Stats) bool { return s.Sockets == 1 })
	for v := uint64(1); v <= 5; v++ {
		fake.Publish(changed(v))
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if st := h.Stats(); st.Sockets != 0 || st.Dropped != 1 {
		t.Fatalf("after Close: %+v", st)
	}
}
