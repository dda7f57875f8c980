package mcpserver_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/toolgate/toolgate/internal/mcpserver"
	"github.com/toolgate/toolgate/internal/mcpspec"
)

// notifyingTurn's one tool sends a progress notification through its call's peer, as an
// upstream tool forwards the upstream's, and records the handshake it was told of.
type notifyingTurn struct {
	mu      sync.Mutex
	version string
	info    string
}

func (*notifyingTurn) ListTools(context.Context) (*mcpspec.ToolList, error) {
	return &mcpspec.ToolList{Tools: []json.RawMessage{json.RawMessage(`{"name":"t","inputSchema":{"type":"object"}}`)}}, nil
}

func (*notifyingTurn) CallTool(ctx context.Context, req *mcpspec.CallRequest) (*mcpspec.CallResult, error) {
	n, ok := req.Peer.(mcpspec.Notifier)
	if !ok {
		return &mcpspec.CallResult{Content: []json.RawMessage{json.RawMessage(`{"type":"text","text":"no notifier"}`)}, IsError: true}, nil
	}
	// White space, newlines included, as an upstream may write it: the line framing
	// must survive.
	if err := n.Notify(ctx, "notifications/progress", json.RawMessage("{\n  \"progressToken\": \"tok\",\n  \"progress\": 1\n}")); err != nil {
		return nil, err
	}
	return &mcpspec.CallResult{Content: []json.RawMessage{json.RawMessage(`{"type":"text","text":"done"}`)}}, nil
}

func (t *notifyingTurn) NoteClient(version string, info json.RawMessage) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.version, t.info = version, string(info)
}

// TestStdioNotifyAndNoteClient talks as a client does: the call is sent only
// once the initialize answer has been read. (A call sent before it may run, and
// notify, while that answer is still being written: notifications are not
// ordered with answers, only answers with each other.)
func TestStdioNotifyAndNoteClient(t *testing.T) {
	turn := &notifyingTurn{}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- mcpserver.ServeStdio(context.Background(), inR, outW, turn, mcpserver.StdioOptions{})
		outW.Close()
	}()
	write := func(s string) {
		t.Helper()
		if _, err := io.WriteString(inW, s+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	sc := bufio.NewScanner(outR)
	read := func() string {
		t.Helper()
		if !sc.Scan() {
			t.Fatalf("output ended: %v", sc.Err())
		}
		return sc.Text()
	}
	write(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","clientInfo":{"name":"c","version":"9"}}}`)
	if got := read(); !strings.Contains(got, `"id":1,"result"`) {
		t.Fatalf("initialize answer %s", got)
	}
	write(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	write(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"t","_meta":{"progressToken":"tok"}}}`)
	if got := read(); got != `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"tok","progress":1}}` {
		t.Fatalf("progress line %s", got)
	}
	if got := read(); !strings.Contains(got, `"id":2`) || !strings.Contains(got, "done") {
		t.Fatalf("answer %s", got)
	}
	inW.Close()
	if sc.Scan() {
		t.Fatalf("unexpected line %s", sc.Text())
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	turn.mu.Lock()
	defer turn.mu.Unlock()
	if turn.version != "2025-06-18" || turn.info != `{"name":"c","version":"9"}` {
		t.Fatalf("NoteClient got %q %q", turn.version, turn.info)
	}
}
