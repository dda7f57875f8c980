package bridge_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// connectHTTP opens a 2025-11-25 (session-based) Go SDK session on the bridge.
func connectHTTP(t *testing.T, p *bridgeProc) *mcp.ClientSession {
	t.Helper()
	tr := &mcp.StreamableClientTransport{Endpoint: p.url, HTTPClient: &http.Client{Transport: bearer{p.token}}, MaxRetries: -1}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, nil).Connect(context.Background(), tr,
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatalf("connect: %v; stderr:\n%s", err, p.stderr)
	}
	if cs.ID() == "" {
		t.Fatal("no session id")
	}
	return cs
}

// catalogue returns the catalogHash and executionId tools/list reports.
func catalogue(t *testing.T, cs *mcp.ClientSession) (hash, execution string) {
	t.Helper()
	list, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	hash, _ = list.Meta["toolgate/catalogHash"].(string)
	execution, _ = list.Meta["toolgate/executionId"].(string)
	if len(hash) != 64 || execution == "" {
		t.Fatalf("tools/list _meta %v", list.Meta)
	}
	return hash, execution
}

// rawPost sends one JSON-RPC body to the bridge with the token, naming session
// when it is not empty.
func rawPost(t *testing.T, p *bridgeProc, session, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, p.url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+p.token)
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
		req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST: %v; bridge stderr:\n%s", err, p.stderr)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// TestBridgeLivesForItsTurn: `toolgate bridge` serves until it is interrupted,
// not until the first DELETE. Two clients hold sessions of their own at once,
// both on the one turn (same catalogue, catalogHash and executionId); a client
// that closes its session (DELETE) leaves the other working and its own id
// answering 404 unknown_session; a second initialize naming a live session is
// refused; a new initialize opens the bridge's next session on the same turn.
// Before, the first DELETE ended the command and closed the listener.
func TestBridgeLivesForItsTurn(t *testing.T) {
	p := startBridge(t)
	first := connectHTTP(t, p)
	hash, execution := catalogue(t, first)
	second := connectHTTP(t, p)
	if second.ID() == first.ID() {
		t.Fatalf("two clients share session %s", first.ID())
	}
	if h, e := catalogue(t, second); h != hash || e != execution {
		t.Errorf("second session: catalogue %s of %s, want %s of %s", h, e, hash, execution)
	}
	if err := first.Close(); err != nil { // DELETE
		t.Fatalf("closing the first session: %v", err)
	}
	if code, body := rawPost(t, p, first.ID(), `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`); code != http.StatusNotFound || !strings.Contains(body, "unknown_session") {
		t.Errorf("the deleted session answers %d %s, want 404 unknown_session", code, body)
	}
	if res, err := second.CallTool(context.Background(), &mcp.CallToolParams{Name: "server.version", Arguments: map[string]any{}}); err != nil || res.IsError {
		t.Errorf("the other session after a DELETE: %v %+v", err, res)
	}
	init := `{"jsonrpc":"2.0","id":2,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"again","version":"1"}}}`
	if code, body := rawPost(t, p, second.ID(), init); code != http.StatusBadRequest || !strings.Contains(body, "already initialized") {
		t.Errorf("a second initialize on a live session: %d %s, want 400 already initialized", code, body)
	}
	if err := second.Close(); err != nil {
		t.Fatalf("closing the second session: %v", err)
	}
	third := connectHTTP(t, p)
	defer third.Close()
	if third.ID() == first.ID() || third.ID() == second.ID() {
		t.Errorf("a new session reuses an ended id %s", third.ID())
	}
	if h, e := catalogue(t, third); h != hash || e != execution {
		t.Errorf("the next session: catalogue %s of %s, want %s of %s", h, e, hash, execution)
	}
	select {
	case err := <-p.exited:
		p.exited <- err
		t.Fatalf("the bridge exited (%v) while its turn lasts; stderr:\n%s", err, p.stderr)
	default:
	}
}
