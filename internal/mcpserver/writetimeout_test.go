package mcpserver_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/toolgate/toolgate/internal/mcpserver"
)

// pipeListener hands a server in-process connections (net.Pipe): unlike
// sockets, testing/synctest can wait on them, and a pipe has no buffer, so a
// client that does not read stalls the very first write.
type pipeListener struct {
	conns  chan net.Conn
	closed chan struct{}
	once   sync.Once
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), closed: make(chan struct{})}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return pipeAddr{} }

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "pipe" }

// send opens a connection and sends one POST on it; nothing is read.
func (l *pipeListener) send(t *testing.T, body, accept, session string) net.Conn {
	t.Helper()
	srv, cli := net.Pipe()
	l.conns <- srv
	req := fmt.Sprintf("POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nAccept: %s\r\nMcp-Session-Id: %s\r\nContent-Length: %d\r\n\r\n%s",
		accept, session, len(body), body)
	go func() { _, _ = cli.Write([]byte(req)) }()
	t.Cleanup(func() { cli.Close() })
	return cli
}

// closedByServer reports whether the server gave up on conn: a read finds the
// connection closed, with nothing left to take. A server still trying to write
// would hand the reader its bytes instead.
func closedByServer(t *testing.T, conn net.Conn, r io.Reader) bool {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(time.Second))
	b, err := io.ReadAll(r) // nil at EOF
	if len(b) > 0 || err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Logf("read %d bytes (%.60q…), %v", len(b), b, err)
		return false
	}
	return true
}

// TestWriteTimeoutDropsUnreadAnswers (fake clock, in-process connections): an
// answer to a client that stops reading is dropped once one write has waited
// WriteTimeout, the connection is closed, and the drop is logged.
//
//   - An SSE answer whose client took the headers and then nothing: the first
//     keep-alive stalls, the later ones (every second) do not push its
//     deadline back, and the call still running is cancelled (the request ends
//     although test.block was never released).
//   - A JSON answer too large for the connection's buffers: the write stalls.
//   - A small JSON answer the handler handed to net/http's buffers: the
//     server's own flush is bounded the same way.
//
// Before, each was held forever, keeping a request slot, a busy session that
// could not be evicted, and a goroutine.
func TestWriteTimeoutDropsUnreadAnswers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var tc turnCounter
		var logs safeBuffer
		h := mcpserver.NewHandler(mcpserver.HandlerOptions{
			OpenTurn:          tc.open,
			KeepAliveInterval: time.Second,
			Logger:            slog.New(slog.NewTextHandler(&logs, nil)),
		})
		defer h.Close()
		ln := newPipeListener()
		srv := &http.Server{Handler: h}
		go func() { _ = srv.Serve(ln) }()
		defer srv.Close()
		sid := initSession(t, h)
		turn := tc.turns[0]
		running := func(what string, want int) {
			t.Helper()
			synctest.Wait()
			if n := mcpserver.InFlight(h, ""); n != want {
				t.Errorf("%s: %d requests running, want %d", what, n, want)
			}
		}

		// SSE only: the stream starts at once, its headers before the call runs.
		sse := ln.send(t, blockCall, "text/event-stream", sid)
		br := bufio.NewReader(sse)
		res, err := http.ReadResponse(br, nil)
		if err != nil || res.StatusCode != http.StatusOK {
			t.Fatalf("SSE headers: %v %v", res, err)
		}
		<-turn.Started()
		// The first keep-alive (at 1 s) stalls; it is dropped at 31 s.
		time.Sleep(mcpserver.DefaultWriteTimeout)
		running("SSE answer before its stalled write ran out of time", 1)
		time.Sleep(2 * time.Second)
		running("SSE answer after the write timeout", 0)
		if !closedByServer(t, sse, br) {
			t.Error("the SSE connection is still held")
		}

		big := `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"test.echo","arguments":{"pad":"` + strings.Repeat("x", 200_000) + `"}}}`
		js := ln.send(t, big, "application/json", sid)
		<-turn.Started()
		time.Sleep(mcpserver.DefaultWriteTimeout - time.Second)
		running("large JSON answer before the write timeout", 1)
		time.Sleep(2 * time.Second)
		running("large JSON answer after the write timeout", 0)
		if !closedByServer(t, js, js) {
			t.Error("the large JSON answer's connection is still held")
		}

		small := ln.send(t, `{"jsonrpc":"2.0","id":9,"method":"ping"}`, "application/json", sid)
		time.Sleep(mcpserver.DefaultWriteTimeout + time.Second)
		synctest.Wait()
		if !closedByServer(t, small, small) {
			t.Error("the small JSON answer's connection is still held")
		}

		if got := strings.Count(logs.String(), "dropped an answer: the client took none of it within the write timeout"); got != 2 {
			t.Errorf("%d dropped answers logged, want 2 (the small one never failed a write of the handler's):\n%s", got, logs.String())
		}
		if err := mcpserver.CheckSessionBookkeeping(h); err != nil {
			t.Error(err)
		}
	})
}
