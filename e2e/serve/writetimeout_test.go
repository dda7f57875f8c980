package serve

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/mcpserver"
	"github.com/toolgate/toolgate/internal/policy"
)

// TestAttackUnreadSSEAnswerIsDropped: a client with a tiny receive buffer asks
// /mcp for a large SSE answer (a batch of 40 reads of a 256 KiB file) and never
// reads it. The daemon used to hold that answer, its goroutine and its busy
// session forever; now its stalled write runs out of the write timeout, the
// answer is dropped and said so on stderr, the connection is closed, and the
// daemon goes on serving.
func TestAttackUnreadSSEAnswerIsDropped(t *testing.T) {
	data, toks := setup(t, []policy.Grant{
		{Principal: "mallory", Tool: "local.read_file", Action: "read", Resource: "*", Effect: policy.Allow},
	}, "mallory")
	ws := workspaceDir(t)
	if err := os.WriteFile(filepath.Join(ws, "big.txt"), []byte(strings.Repeat("0123456789abcdef", 16<<10)), 0o644); err != nil {
		t.Fatal(err)
	}
	d := startServe(t, data, ws)
	s := openMCP(t, d.url, toks["mallory"])

	var calls []string
	for i := range 40 {
		calls = append(calls, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"local.read_file","arguments":{"path":"big.txt"}}}`, i+1))
	}
	body := "[" + strings.Join(calls, ",") + "]"
	dialer := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		if err != nil {
			return err
		}
		return serr
	}}
	conn, err := dialer.Dial("tcp", strings.TrimPrefix(d.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /mcp HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMcp-Session-Id: %s\r\nMCP-Protocol-Version: 2025-06-18\r\nContent-Length: %d\r\n\r\n%s",
		strings.TrimPrefix(d.url, "http://"), toks["mallory"], s.id, len(body), body)

	// Never read. The daemon must give up on its own (a bound, not a measure).
	deadline := time.Now().Add(mcpserver.DefaultWriteTimeout + time.Minute)
	for !strings.Contains(d.stderr.String(), "dropped an answer: the client took none of it within the write timeout") {
		if time.Now().After(deadline) {
			t.Fatalf("the unread answer is still held after %s; stderr:\n%s", mcpserver.DefaultWriteTimeout+time.Minute, d.stderr.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The connection was closed: reading drains what was buffered, then ends.
	_ = conn.SetReadDeadline(time.Now().Add(time.Minute))
	buf := make([]byte, 64<<10)
	for {
		if _, err := conn.Read(buf); err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Fatal("the connection of the dropped answer is still open")
			}
			break
		}
	}
	// The daemon still serves, the session included.
	if res := s.call("tools/list", "{}"); !strings.Contains(string(res), "local.read_file") {
		t.Errorf("tools/list after the drop: %s", res)
	}
	out, _, _ := run(t, data, "audit", "--json", "--principal", "mallory", "--tool", "local.read_file")
	if n := strings.Count(out, "\n"); n != 40 {
		t.Errorf("%d reads audited, want the 40 that ran", n)
	}
}
