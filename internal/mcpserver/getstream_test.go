package mcpserver_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/toolgate/toolgate/internal/mcpserver"
	"github.com/toolgate/toolgate/internal/mcpserver/mcpservertest"
)

// watchingTurn is a fake Turn whose lists a test changes (mcpserver.ListWatcher).
type watchingTurn struct {
	*mcpservertest.Turn
	hub *watchHub
}

func (w watchingTurn) WatchLists(kinds mcpserver.ListKind, changed func(mcpserver.ListKind)) func() {
	return w.hub.add(kinds, changed)
}

// watchHub is every watch of the turns a test opened.
type watchHub struct {
	mu      sync.Mutex
	next    int
	watches map[int]func(mcpserver.ListKind)
	kinds   map[int]mcpserver.ListKind
}

func (h *watchHub) add(kinds mcpserver.ListKind, fn func(mcpserver.ListKind)) func() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.watches == nil {
		h.watches, h.kinds = map[int]func(mcpserver.ListKind){}, map[int]mcpserver.ListKind{}
	}
	id := h.next
	h.next++
	h.watches[id], h.kinds[id] = fn, kinds
	return func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		delete(h.watches, id)
		delete(h.kinds, id)
	}
}

// change tells every watch that asked for k.
func (h *watchHub) change(k mcpserver.ListKind) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for id, fn := range h.watches {
		if h.kinds[id]&k != 0 {
			fn(h.kinds[id] & k)
		}
	}
}

func (h *watchHub) live() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.watches)
}

func newWatchingHandler(hub *watchHub, opts mcpserver.HandlerOptions) *mcpserver.Handler {
	opts.OpenTurn = func(context.Context, string) (mcpserver.Turn, error) {
		return watchingTurn{mcpservertest.NewTurn(), hub}, nil
	}
	return mcpserver.NewHandler(opts)
}

// openStream initializes a session on url at version and opens its GET stream.
func openStream(t *testing.T, c *http.Client, url, version string) (sid, caps string, body *bufio.Reader, res *http.Response) {
	t.Helper()
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"` + version + `","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	r, err := c.Post(url, "application/json", strings.NewReader(init))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(r.Body)
	r.Body.Close()
	sid = r.Header.Get("Mcp-Session-Id")
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	res, err = c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { res.Body.Close() })
	return sid, string(b), bufio.NewReader(res.Body), res
}

// nextEvent reads one SSE message's data line, skipping keep-alives.
func nextEvent(t *testing.T, r *bufio.Reader) string {
	t.Helper()
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("stream ended: %v", err)
		}
		if d, ok := strings.CutPrefix(line, "data: "); ok {
			return strings.TrimSpace(d)
		}
	}
}

// TestGetStream: an initialized 2025-11-25 session advertises tools
// listChanged, gets each list's change on its GET stream, a second stream is
// 409, and a DELETE ends the stream and stops its watch.
func TestGetStream(t *testing.T) {
	hub := &watchHub{}
	h := newWatchingHandler(hub, mcpserver.HandlerOptions{})
	defer h.Close()
	srv := httptest.NewServer(h)
	defer srv.Close()
	url := srv.URL + "/mcp"
	c := srv.Client()

	sid, caps, body, res := openStream(t, c, url, "2025-11-25")
	if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("GET: %d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
	if !strings.Contains(caps, `"tools":{"listChanged":true}`) {
		t.Errorf("initialize capabilities %s: want tools listChanged true where it is delivered", caps)
	}
	waitFor(t, "the stream's watch", func() bool { return hub.live() == 1 })
	hub.change(mcpserver.ToolsList)
	if got := nextEvent(t, body); got != `{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}` {
		t.Fatalf("event %s", got)
	}
	hub.change(mcpserver.PromptsList)
	if got := nextEvent(t, body); got != `{"jsonrpc":"2.0","method":"notifications/prompts/list_changed"}` {
		t.Fatalf("event %s", got)
	}

	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	second, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(second.Body)
	second.Body.Close()
	if second.StatusCode != http.StatusConflict || strings.TrimSpace(string(b)) != `{"error":"stream_conflict"}` {
		t.Errorf("second GET: %d %s", second.StatusCode, b)
	}

	del, _ := http.NewRequest(http.MethodDelete, url, nil)
	del.Header.Set("Mcp-Session-Id", sid)
	if r, err := c.Do(del); err != nil || r.StatusCode != http.StatusOK {
		t.Fatalf("DELETE: %v %v", r, err)
	}
	if _, err := io.ReadAll(body); err != nil {
		t.Errorf("the stream did not end cleanly with its session: %v", err)
	}
	waitFor(t, "the watch to stop", func() bool { return hub.live() == 0 })

	// 2024-11-05 has no such stream, and its initialize advertises none.
	_, caps, _, old := openStream(t, c, url, "2024-11-05")
	if old.StatusCode != http.StatusMethodNotAllowed || !strings.Contains(caps, `"listChanged":false`) {
		t.Errorf("2024-11-05: GET %d, capabilities %s", old.StatusCode, caps)
	}
}

// TestGetStreamBridgeWatchesNoTools: a bridge serves one catalogue, so its
// sessions advertise and watch resources and prompts only.
func TestGetStreamBridgeWatchesNoTools(t *testing.T) {
	hub := &watchHub{}
	b, err := mcpserver.NewBridge(watchingTurn{mcpservertest.NewTurn(), hub}, mcpserver.BridgeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	_, caps, body, res := openStream(t, http.DefaultClient, b.URL(), "2025-06-18")
	if res.StatusCode != http.StatusOK || !strings.Contains(caps, `"tools":{"listChanged":false}`) {
		t.Fatalf("GET %d, capabilities %s", res.StatusCode, caps)
	}
	waitFor(t, "the stream's watch", func() bool { return hub.live() == 1 })
	hub.change(mcpserver.ToolsList) // not asked for: nothing is written
	hub.change(mcpserver.ResourcesList)
	if got := nextEvent(t, body); got != `{"jsonrpc":"2.0","method":"notifications/resources/list_changed"}` {
		t.Fatalf("event %s", got)
	}
}

// TestGetStreamNeverRead (fake clock, unbuffered connections): a client that
// takes the stream's headers and then nothing. A flood of changes is coalesced
// into what the one stalled write holds (no queue grows), the write runs out of
// the write timeout, the stream ends and its watch stops; the session is
// usable again (a new stream opens).
func TestGetStreamNeverRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hub := &watchHub{}
		h := newWatchingHandler(hub, mcpserver.HandlerOptions{KeepAliveInterval: -1})
		defer h.Close()
		ln := newPipeListener()
		srv := &http.Server{Handler: h}
		go func() { _ = srv.Serve(ln) }()
		defer srv.Close()
		sid := initSession(t, h)
		conn := ln.get(t, sid)
		br := bufio.NewReader(conn)
		res, err := http.ReadResponse(br, nil)
		if err != nil || res.StatusCode != http.StatusOK {
			t.Fatalf("GET headers: %v %v", res, err)
		}
		synctest.Wait()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		for range 100_000 {
			hub.change(mcpserver.ToolsList | mcpserver.ResourcesList | mcpserver.PromptsList)
		}
		synctest.Wait()
		if hub.live() != 1 {
			t.Fatalf("%d watches while the stream stalls, want 1", hub.live())
		}
		time.Sleep(mcpserver.DefaultWriteTimeout + time.Second)
		synctest.Wait()
		if hub.live() != 0 {
			t.Errorf("the stalled stream's watch is still live")
		}
		if !closedByServer(t, conn, br) {
			t.Error("the stalled stream's connection is still held")
		}
		again := ln.get(t, sid)
		if res, err := http.ReadResponse(bufio.NewReader(again), nil); err != nil || res.StatusCode != http.StatusOK {
			t.Errorf("a new stream on the session: %v %v", res, err)
		}
		again.Close()
	})
}

// TestThousandGetStreams: 1,000 sessions each hold a stream; one change
// reaches each once; closing the handler ends every stream and every watch,
// and the goroutines go back to what they were.
func TestThousandGetStreams(t *testing.T) {
	const n = 1000
	hub := &watchHub{}
	h := newWatchingHandler(hub, mcpserver.HandlerOptions{MaxSessions: n, MaxSessionsPerPrincipal: n})
	srv := httptest.NewServer(h)
	defer srv.Close()
	tr := &http.Transport{MaxIdleConnsPerHost: n}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}
	base := runtime.NumGoroutine()
	bodies := make([]*bufio.Reader, n)
	for i := range n {
		_, _, bodies[i], _ = openStream(t, c, srv.URL+"/mcp", "2025-11-25")
	}
	waitFor(t, "every watch", func() bool { return hub.live() == n })
	hub.change(mcpserver.ToolsList)
	for i, b := range bodies {
		if got := nextEvent(t, b); !strings.Contains(got, "tools/list_changed") {
			t.Fatalf("stream %d: %s", i, got)
		}
	}
	h.Close()
	for i, b := range bodies {
		if _, err := io.ReadAll(b); err != nil {
			t.Fatalf("stream %d did not end: %v", i, err)
		}
	}
	waitFor(t, "the watches to stop", func() bool { return hub.live() == 0 })
	tr.CloseIdleConnections()
	waitFor(t, fmt.Sprintf("goroutines back to about %d", base), func() bool { return runtime.NumGoroutine() <= base+10 })
}

// get opens a connection and sends a GET for session's stream; nothing is read.
func (l *pipeListener) get(t *testing.T, session string) net.Conn {
	t.Helper()
	srv, cli := net.Pipe()
	l.conns <- srv
	req := "GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\nMcp-Session-Id: " + session + "\r\n\r\n"
	go func() { _, _ = cli.Write([]byte(req)) }()
	t.Cleanup(func() { cli.Close() })
	return cli
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestStdioListChanged: a stdio connection is told its relayed lists' changes as
// lines once initialized, never its tools (a stdio turn serves one catalogue).
func TestStdioListChanged(t *testing.T) {
	hub := &watchHub{}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- mcpserver.ServeStdio(context.Background(), inR, outW, watchingTurn{mcpservertest.NewTurn(), hub}, mcpserver.StdioOptions{})
		outW.Close()
	}()
	sc := bufio.NewScanner(outR)
	waitFor(t, "the connection's watch", func() bool { return hub.live() == 1 })
	if _, err := io.WriteString(inW, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2024-11-05"}}`+"\n"); err != nil {
		t.Fatal(err)
	}
	if !sc.Scan() || !strings.Contains(sc.Text(), `"id":1,"result"`) {
		t.Fatalf("initialize answer %q", sc.Text())
	}
	hub.change(mcpserver.ToolsList)
	hub.change(mcpserver.PromptsList)
	if !sc.Scan() || sc.Text() != `{"jsonrpc":"2.0","method":"notifications/prompts/list_changed"}` {
		t.Fatalf("line %q", sc.Text())
	}
	inW.Close()
	for sc.Scan() {
		t.Errorf("unexpected line %q", sc.Text())
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if hub.live() != 0 {
		t.Error("the connection's watch outlived it")
	}
}
