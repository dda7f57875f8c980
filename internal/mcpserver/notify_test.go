package mcpserver_test

import (
	"bytes"
	"context"
	"encoding/json"
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

func TestStdioNotifyAndNoteClient(t *testing.T) {
	turn := &notifyingTurn{}
	input := strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","clientInfo":{"name":"c","version":"9"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"t","_meta":{"progressToken":"tok"}}}`,
	}, "\n") + "\n"
	var out bytes.Buffer
	if err := mcpserver.ServeStdio(context.Background(), strings.NewReader(input), &out, turn, mcpserver.StdioOptions{}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("lines %q", lines)
	}
	if lines[1] != `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"tok","progress":1}}` {
		t.Fatalf("progress line %s", lines[1])
	}
	if !strings.Contains(lines[2], `"id":2`) || !strings.Contains(lines[2], "done") {
		t.Fatalf("answer %s", lines[2])
	}
	if turn.version != "2025-06-18" || turn.info != `{"name":"c","version":"9"}` {
		t.Fatalf("NoteClient got %q %q", turn.version, turn.info)
	}
}
