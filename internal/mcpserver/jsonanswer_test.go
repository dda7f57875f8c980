package mcpserver_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/toolgate/toolgate/internal/mcpserver"
)

// A client that accepts JSON and SSE gets a stream when the call sends something
// before its answer (here a progress notification, as an upstream's are forwarded):
// the notification, then the answer, as events. (A call that sends nothing is
// answered whole as JSON: testdata/wire/post_sse_200.txtar.)
func TestAnswerBecomesAStreamWhenTheCallSends(t *testing.T) {
	h := mcpserver.NewHandler(mcpserver.HandlerOptions{
		OpenTurn: func(context.Context, string) (mcpserver.Turn, error) { return &notifyingTurn{}, nil },
	})
	defer h.Close()
	sid := initSession(t, h)
	call := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"t","_meta":{"progressToken":"tok"}}}`

	rec := post(h, call, "Mcp-Session-Id", sid, "Accept", "application/json, text/event-stream")
	want := "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":\"tok\",\"progress\":1}}\n\n" +
		"event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"done\"}],\"isError\":false}}\n\n"
	if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "text/event-stream" || rec.Body.String() != want {
		t.Errorf("accepting both: %d %q %q", rec.Code, rec.Header().Get("Content-Type"), rec.Body)
	}

}
