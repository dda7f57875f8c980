package reliability

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// streamClient makes tools/call requests whose answers stream as SSE (a progress
// token is sent, so the upstream's progress notifications come first) over its own
// connections: keep-alives are off, so closing an answer's body mid-stream closes
// the TCP connection under the call, as a client that vanishes does. modern sends
// stateless 2026-07-28 requests (per-request _meta and the standard headers);
// otherwise the requests belong to a 2025-06-18 session opened with initialize.
type streamClient struct {
	url, token string
	modern     bool
	hc         *http.Client
	sess       *session // the 2025-06-18 session (nil when modern)
	next       int
}

func newStreamClient(url, token string, modern bool) *streamClient {
	return &streamClient{url: url, token: token, modern: modern,
		hc: &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}}
}

// streamed is what one streamed call gave: the progress notifications read, and
// the answer (unless cut, when the client closed the connection first).
type streamed struct {
	progress int
	cut      bool
	text     string
	code     string // the reason code of an isError result
}

// call calls tool with args; cutAfter > 0 closes the connection once that many
// progress notifications have been read.
func (c *streamClient) call(ctx context.Context, tool, args string, cutAfter int) (streamed, error) {
	if !c.modern && c.sess == nil {
		s := &session{url: c.url, token: c.token, client: c.hc}
		if err := s.open(); err != nil {
			return streamed{}, fmt.Errorf("initialize: %w", err)
		}
		c.sess = s
	}
	c.next++
	meta := fmt.Sprintf(`"progressToken":"p-%d"`, c.next)
	if c.modern {
		meta += `,"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}`
	}
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":%s,"_meta":{%s}}}`, c.next, tool, args, meta)
	req, err := http.NewRequestWithContext(ctx, "POST", c.url+"/mcp", strings.NewReader(body))
	if err != nil {
		return streamed{}, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if c.modern {
		req.Header.Set("MCP-Protocol-Version", "2026-07-28")
		req.Header.Set("Mcp-Method", "tools/call")
		req.Header.Set("Mcp-Name", tool)
	} else {
		req.Header.Set("Mcp-Session-Id", c.sess.id)
		req.Header.Set("MCP-Protocol-Version", "2025-06-18")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return streamed{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound && !c.modern {
		c.sess = nil // the session ended (the next call opens another)
		return streamed{}, errGone
	}
	var out streamed
	answer := func(raw []byte) error {
		var m struct {
			Method string          `json:"method"`
			ID     json.RawMessage `json:"id"`
			Result *struct {
				Content []struct{ Text string }
				IsError bool              `json:"isError"`
				Meta    map[string]string `json:"_meta"`
			} `json:"result"`
			Error json.RawMessage `json:"error"`
		}
		if err := json.Unmarshal(raw, &m); err != nil {
			return fmt.Errorf("status %d: not JSON-RPC: %.300s", resp.StatusCode, raw)
		}
		switch {
		case m.Method == "notifications/progress":
			out.progress++
			return nil
		case m.Method != "":
			return nil // a log message of the call's
		case m.Result == nil:
			return fmt.Errorf("status %d: no result: %.300s", resp.StatusCode, raw)
		}
		if len(m.Result.Content) > 0 {
			out.text = m.Result.Content[0].Text
		}
		if m.Result.IsError {
			if out.code = m.Result.Meta["toolgate/code"]; out.code == "" {
				out.code = "<none>"
			}
		}
		return io.EOF
	}
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		raw, err := io.ReadAll(resp.Body)
		if err != nil {
			return out, err
		}
		if err := answer(raw); err != io.EOF {
			return out, fmt.Errorf("a JSON answer that is no tool result: %v", err)
		}
		return out, nil
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 32<<20)
	for sc.Scan() {
		d, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		switch err := answer([]byte(d)); {
		case err == io.EOF:
			return out, nil
		case err != nil:
			return out, err
		}
		if cutAfter > 0 && out.progress >= cutAfter {
			out.cut = true
			return out, nil // the deferred Close drops the connection mid-stream
		}
	}
	if err := sc.Err(); err != nil {
		return out, err
	}
	return out, fmt.Errorf("the stream ended without an answer (%d progress notifications)", out.progress)
}
