package mcpserver_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/mcpserver"
	"github.com/toolgate/toolgate/internal/mcpserver/mcpservertest"
	"github.com/toolgate/toolgate/internal/mcpspec"
)

// lockedWriter is a ResponseWriter a test may read while the handler writes.
type lockedWriter struct {
	mu     sync.Mutex
	header http.Header
	code   int
	body   bytes.Buffer
	// afterReturn counts writes after the handler returned (must stay 0).
	returned, afterReturn bool
}

func newLockedWriter() *lockedWriter { return &lockedWriter{header: http.Header{}} }

func (w *lockedWriter) Header() http.Header { return w.header }
func (w *lockedWriter) WriteHeader(code int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.code == 0 {
		w.code = code
	}
}
func (w *lockedWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.code == 0 {
		w.code = http.StatusOK
	}
	if w.returned {
		w.afterReturn = true
	}
	return w.body.Write(b)
}
func (w *lockedWriter) Flush() {}

func (w *lockedWriter) snapshot() (int, string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.code, w.body.String()
}

func (w *lockedWriter) finish() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.returned = true
}

// TestSSEKeepAlive (fake clock): a long call of a client accepting JSON and SSE
// writes nothing until the first keep-alive, which starts the stream; it then
// carries a keep-alive comment every interval until the answer, and none after
// it; the same call answered as JSON carries none; a notification with an SSE
// accept is still 202.
func TestSSEKeepAlive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var tc turnCounter
		h := mcpserver.NewHandler(mcpserver.HandlerOptions{
			ServerInfo: mcpspec.Implementation{Name: "toolgate", Version: "test"},
			OpenTurn:   tc.open,
		})
		defer h.Close()
		sid := initSession(t, h)
		turn := tc.turns[0]

		serve := func(w *lockedWriter, accept string) chan struct{} {
			done := make(chan struct{})
			req := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(blockCall))
			req.Host = "127.0.0.1:7077"
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", accept)
			req.Header.Set("Mcp-Session-Id", sid)
			go func() {
				defer close(done)
				h.ServeHTTP(w, req)
				w.finish()
			}()
			return done
		}
		sse, js := newLockedWriter(), newLockedWriter()
		sseDone := serve(sse, "application/json, text/event-stream")
		jsDone := serve(js, "application/json")
		synctest.Wait()

		// Nothing before the first interval: the call may still end first and be
		// answered whole.
		if code, body := sse.snapshot(); code != 0 || body != "" {
			t.Errorf("SSE answer before the first interval: %d %q", code, body)
		}
		if code, _ := js.snapshot(); code != 0 {
			t.Errorf("JSON answer started before the call ended: %d", code)
		}

		time.Sleep(3*mcpserver.DefaultKeepAliveInterval + time.Second)
		synctest.Wait()
		code, body := sse.snapshot()
		if code != http.StatusOK || body != strings.Repeat(": keep-alive\n\n", 3) {
			t.Errorf("after three intervals: %d %q", code, body)
		}
		for k, want := range map[string]string{"Content-Type": "text/event-stream", "Cache-Control": "no-cache", "X-Accel-Buffering": "no", "Mcp-Session-Id": sid} {
			if got := sse.header.Get(k); got != want {
				t.Errorf("%s: %q, want %q", k, got, want)
			}
		}
		turn.Release()
		<-sseDone
		<-jsDone
		_, body = sse.snapshot()
		wantTail := "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"content\":[{\"text\":\"released\",\"type\":\"text\"}],\"isError\":false}}\n\n"
		if body != strings.Repeat(": keep-alive\n\n", 3)+wantTail {
			t.Errorf("SSE answer: %q", body)
		}
		code, body = js.snapshot()
		if code != http.StatusOK || js.header.Get("Content-Type") != "application/json" || strings.Contains(body, "keep-alive") ||
			body != `{"jsonrpc":"2.0","id":7,"result":{"content":[{"text":"released","type":"text"}],"isError":false}}` {
			t.Errorf("JSON answer: %d %q", code, body)
		}
		time.Sleep(5 * mcpserver.DefaultKeepAliveInterval)
		synctest.Wait()
		if sse.afterReturn || js.afterReturn {
			t.Error("written after the handler returned")
		}

		rec := post(h, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, "Mcp-Session-Id", sid, "Accept", "text/event-stream")
		if rec.Code != http.StatusAccepted || rec.Body.Len() != 0 {
			t.Errorf("notification with an SSE accept: %d %q", rec.Code, rec.Body)
		}
	})
}

// TestSSEKeepAliveOff: a negative interval sends no keep-alives.
func TestSSEKeepAliveOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		turn := mcpservertest.NewTurn()
		h := mcpserver.NewHandler(mcpserver.HandlerOptions{
			OpenTurn:          func(context.Context, string) (mcpserver.Turn, error) { return turn, nil },
			KeepAliveInterval: -1,
		})
		defer h.Close()
		sid := post(h, initBody).Header().Get("Mcp-Session-Id")
		w := newLockedWriter()
		req := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(blockCall))
		req.Host = "127.0.0.1"
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Mcp-Session-Id", sid)
		done := make(chan struct{})
		go func() { defer close(done); h.ServeHTTP(w, req) }()
		time.Sleep(time.Hour)
		synctest.Wait()
		if code, body := w.snapshot(); code != http.StatusOK || body != "" {
			t.Errorf("with keep-alives off: %d %q", code, body)
		}
		turn.Release()
		<-done
	})
}

// keepAliveCounter wraps response bodies and signals once it has seen n
// keep-alive comments on them.
type keepAliveCounter struct {
	base http.RoundTripper
	n    int

	mu   sync.Mutex
	seen int
	tail string
	hit  chan struct{}
}

func (k *keepAliveCounter) RoundTrip(r *http.Request) (*http.Response, error) {
	res, err := k.base.RoundTrip(r)
	if err == nil {
		res.Body = &countingBody{ReadCloser: res.Body, k: k}
	}
	return res, err
}

type countingBody struct {
	io.ReadCloser
	k *keepAliveCounter
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	k := b.k
	k.mu.Lock()
	s := k.tail + string(p[:n])
	k.seen += strings.Count(s, ": keep-alive\n")
	if i := strings.LastIndex(s, "\n"); i >= 0 {
		s = s[i+1:]
	}
	k.tail = s
	if k.seen >= k.n && k.hit != nil {
		close(k.hit)
		k.hit = nil
	}
	k.mu.Unlock()
	return n, err
}

// TestSDKClientKeepAlive: the Go SDK client's call that runs through several
// keep-alive intervals completes over SSE, the comments ignored.
func TestSDKClientKeepAlive(t *testing.T) {
	turn := mcpservertest.NewTurn()
	b, err := mcpserver.NewBridge(turn, mcpserver.BridgeOptions{
		ServerInfo:        mcpspec.Implementation{Name: "toolgate", Version: "test"},
		Authorize:         mcpserver.StaticToken("tok-123"),
		KeepAliveInterval: 5 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	counter := &keepAliveCounter{base: http.DefaultTransport, n: 5, hit: make(chan struct{})}
	hit := counter.hit
	tr := &mcp.StreamableClientTransport{
		Endpoint:   b.URL(),
		HTTPClient: &http.Client{Transport: bearerTransport{"tok-123", counter}},
		MaxRetries: -1,
	}
	cs, err := sdkClient(false).Connect(context.Background(), tr, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer cs.Close()
	type result struct {
		res *mcp.CallToolResult
		err error
	}
	got := make(chan result, 1)
	go func() {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: mcpservertest.ToolBlock})
		got <- result{res, err}
	}()
	// The call is held until the client has received five keep-alives on it.
	// (The bound only turns a broken build into a failure instead of a hang.)
	select {
	case <-hit:
	case <-time.After(time.Minute):
		t.Fatal("no keep-alives reached the client")
	}
	select {
	case r := <-got:
		t.Fatalf("the call ended before it was released: %+v %v", r.res, r.err)
	default:
	}
	turn.Release()
	r := <-got
	if r.err != nil {
		t.Fatalf("tools/call: %v", r.err)
	}
	if r.res.IsError || textOf(t, r.res) != "released" {
		t.Errorf("result: isError=%v %q", r.res.IsError, textOf(t, r.res))
	}
	// The session still works after the long call.
	if err := cs.Ping(context.Background(), nil); err != nil {
		t.Errorf("ping after the call: %v", err)
	}
}
