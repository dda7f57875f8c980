package testenv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// ErrSessionGone is MCPCall's error for a session the server answered 404: it ended
// (its turn went stale, or it was deleted); the caller opens another.
var ErrSessionGone = errors.New("session ended (404)")

// MCPCall posts one JSON-RPC request with id to base+"/mcp" on the Streamable HTTP
// session *session (empty: none yet; set from the answer's Mcp-Session-Id) and returns
// its result, reading a JSON or an SSE answer. A JSON-RPC error, a missing result or a
// transport failure is an error; a nil client is http.DefaultClient.
func MCPCall(ctx context.Context, c *http.Client, base, token string, session *string, id int, method, params string) (json.RawMessage, error) {
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`, id, method, params)
	req, err := http.NewRequestWithContext(ctx, "POST", base+"/mcp", strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if *session != "" {
		req.Header.Set("Mcp-Session-Id", *session)
		req.Header.Set("MCP-Protocol-Version", "2025-06-18")
	}
	if c == nil {
		c = http.DefaultClient
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound && *session != "" {
		return nil, ErrSessionGone
	}
	if sid := resp.Header.Get("Mcp-Session-Id"); sid != "" {
		*session = sid
	}
	raw, err := ReadAnswer(resp)
	if err != nil {
		return nil, err
	}
	var m struct {
		Result json.RawMessage
		Error  json.RawMessage
	}
	if err := json.Unmarshal(raw, &m); err != nil || m.Error != nil || m.Result == nil {
		return nil, fmt.Errorf("%s: status %d, %.300s", method, resp.StatusCode, raw)
	}
	return m.Result, nil
}

// ReadAnswer reads the JSON-RPC message of a /mcp answer: the body of a JSON answer,
// the last event's data of an SSE one.
func ReadAnswer(resp *http.Response) ([]byte, error) {
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		var last string
		for _, l := range strings.Split(string(raw), "\n") {
			if d, ok := strings.CutPrefix(l, "data: "); ok {
				last = d
			}
		}
		raw = []byte(last)
	}
	return raw, nil
}
