package mcpserver_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"

	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/mcpserver"
	"github.com/toolgate/toolgate/internal/mcpserver/mcpservertest"
)

// failGuard bounds how long a test waits for the server to give up on a slow
// client: reaching it means the connection was held, which is the failure.
const failGuard = 30 * time.Second

// slowBody sends headers announcing a 100-byte body and one byte of it, then
// waits for the server to answer and close. It returns the status line, or
// fails the test when the server holds the connection.
func slowBody(t *testing.T, addr string, headers string) string {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	req := "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" + headers + "Content-Length: 100\r\n\r\n{"
	if _, err := conn.Write([]byte(req)); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(failGuard))
	all, err := io.ReadAll(conn)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the server held a connection whose body never arrived (read %q)", all)
	}
	status, _, _ := strings.Cut(string(all), "\r\n")
	return status
}

// TestBridgeSlowBody: a client that sends its headers and then trickles (or
// never finishes) its body is answered and disconnected once ReadBodyTimeout
// passes, whether or not it is authorized. Before, the bridge held such a
// connection forever, even for a client refused 401.
func TestBridgeSlowBody(t *testing.T) {
	b, err := mcpserver.NewBridge(mcpservertest.NewTurn(), mcpserver.BridgeOptions{
		Authorize:       mcpserver.StaticToken("secret-token"),
		ReadBodyTimeout: 50 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	addr := fmt.Sprintf("127.0.0.1:%d", b.Port())
	if got := slowBody(t, addr, ""); got != "HTTP/1.1 401 Unauthorized" {
		t.Errorf("unauthorized slow body: status %q, want 401 then close", got)
	}
	if got := slowBody(t, addr, "Authorization: Bearer secret-token\r\n"); got != "HTTP/1.1 400 Bad Request" {
		t.Errorf("authorized slow body: status %q, want 400 then close", got)
	}
}

// TestGuardSlowBody: the Guard toolgate serve puts in front of every route gives
// a body the same deadline, also for routes that refuse without reading it.
func TestGuardSlowBody(t *testing.T) {
	refuse := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusUnauthorized)
	})
	srv := httptest.NewServer(mcpserver.GuardWithBodyTimeout(refuse, nil, 50*time.Millisecond))
	defer srv.Close()
	if got := slowBody(t, srv.Listener.Addr().String(), ""); got != "HTTP/1.1 401 Unauthorized" {
		t.Errorf("slow body behind the guard: status %q, want 401 then close", got)
	}
}

// TestBridgeBodyDeadlineSparesLongCalls: the body deadline ends with the body. A
// call that runs past it (here the deadline has passed before the body is even
// read) is not cancelled. net/http cancels a request's context when a read
// deadline passes under its background read; it clears the deadline when the
// body ends, and this pins that the body deadline relies on that safely.
func TestBridgeBodyDeadlineSparesLongCalls(t *testing.T) {
	turn := mcpservertest.NewTurn()
	b, err := mcpserver.NewBridge(turn, mcpserver.BridgeOptions{ReadBodyTimeout: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if rec := post(b, initBody); rec.Code != http.StatusOK {
		t.Fatalf("initialize: %d %s", rec.Code, rec.Body)
	}
	conn, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", b.Port()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"test.block"}}`
	req := fmt.Sprintf("POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	if _, err := conn.Write([]byte(req)); err != nil {
		t.Fatal(err)
	}
	<-turn.Started()
	turn.Release()
	_ = conn.SetReadDeadline(time.Now().Add(failGuard))
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if !strings.Contains(string(got), "released") {
		t.Errorf("the call was cut off: %s", got)
	}
}
