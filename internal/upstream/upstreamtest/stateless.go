package upstreamtest

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// StatelessServer is a hand-written 2026-07-28 (stateless) Streamable HTTP
// server for tests. It checks every request the way the revision tells a
// server to — MCP-Protocol-Version equal to _meta's protocolVersion,
// clientCapabilities present, Mcp-Method equal to the method, Mcp-Name
// (decoded from =?base64?…?=) equal to params.name or params.uri — and answers
// a failed check with 400 and -32020 or -32602, as a strict server does. It
// refuses initialize (a stateless-only server), and it mints an Mcp-Session-Id
// on every answer although it has no sessions, as some servers do, so tests
// can check a stateless client never sends one back. It records every request.
type StatelessServer struct {
	URL string
	srv *httptest.Server

	mu       sync.Mutex
	requests []Request
	handler  StatelessHandler
	reject   int // the next reject server/discover requests are refused with -32022
}

// StatelessHandler answers one checked request with a raw result, or a
// JSON-RPC error code and message (code 0: a result). A nil handler answers
// tools/list with one echo tool and tools/call with the arguments it got.
type StatelessHandler func(method string, params json.RawMessage) (result string, code int, message string)

// NewStatelessServer starts a StatelessServer at URL + "/mcp", closed when the
// test ends.
func NewStatelessServer(t testing.TB, h StatelessHandler) *StatelessServer {
	t.Helper()
	s := &StatelessServer{handler: h}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL + "/mcp"
	t.Cleanup(s.srv.Close)
	return s
}

// Requests returns what the server has received so far.
func (s *StatelessServer) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// RejectDiscover makes the next n server/discover requests fail with -32022
// (the version negotiation a client must follow by asking again).
func (s *StatelessServer) RejectDiscover(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reject = n
}

// DecodeHeaderValue undoes the =?base64?…?= form of a 2026-07-28 header value.
func DecodeHeaderValue(v string) string {
	if inner, ok := strings.CutPrefix(v, "=?base64?"); ok {
		if inner, ok = strings.CutSuffix(inner, "?="); ok {
			if b, err := base64.StdEncoding.DecodeString(inner); err == nil {
				return string(b)
			}
		}
	}
	return v
}

func (s *StatelessServer) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	s.mu.Lock()
	s.requests = append(s.requests, Request{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: string(body)})
	h := s.handler
	s.mu.Unlock()
	w.Header().Set("Mcp-Session-Id", "stateless-servers-have-no-session")
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	if json.Unmarshal(body, &m) != nil {
		reply(w, http.StatusBadRequest, `null`, "", -32700, "parse error")
		return
	}
	if len(m.ID) == 0 {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	if m.Method == "initialize" {
		reply(w, http.StatusBadRequest, string(m.ID), "", -32022, "this server speaks only 2026-07-28", `{"supported":["2026-07-28"],"requested":"legacy"}`)
		return
	}
	var p struct {
		Meta map[string]json.RawMessage `json:"_meta"`
		Name *string                    `json:"name"`
		URI  *string                    `json:"uri"`
	}
	_ = json.Unmarshal(m.Params, &p)
	var version string
	_ = json.Unmarshal(p.Meta["io.modelcontextprotocol/protocolVersion"], &version)
	switch {
	case version == "" || p.Meta["io.modelcontextprotocol/clientCapabilities"] == nil:
		reply(w, http.StatusBadRequest, string(m.ID), "", -32602, "missing _meta protocolVersion or clientCapabilities")
		return
	case len(r.Header.Values("Mcp-Protocol-Version")) != 1 || r.Header.Get("Mcp-Protocol-Version") != version:
		reply(w, http.StatusBadRequest, string(m.ID), "", -32020, "MCP-Protocol-Version does not match _meta")
		return
	case r.Header.Get("Mcp-Method") != m.Method:
		reply(w, http.StatusBadRequest, string(m.ID), "", -32020, "Mcp-Method does not match the method")
		return
	case version != "2026-07-28":
		reply(w, http.StatusBadRequest, string(m.ID), "", -32022, "unsupported version", `{"supported":["2026-07-28"],"requested":`+quote(version)+`}`)
		return
	}
	want := p.Name
	if m.Method == "resources/read" {
		want = p.URI
	}
	if (m.Method == "tools/call" || m.Method == "prompts/get" || m.Method == "resources/read") &&
		(want == nil || DecodeHeaderValue(r.Header.Get("Mcp-Name")) != *want) {
		reply(w, http.StatusBadRequest, string(m.ID), "", -32020, "Mcp-Name does not match the body")
		return
	}
	if m.Method == "server/discover" {
		s.mu.Lock()
		rejected := s.reject > 0
		if rejected {
			s.reject--
		}
		s.mu.Unlock()
		if rejected {
			reply(w, http.StatusBadRequest, string(m.ID), "", -32022, "unsupported version", `{"supported":["2026-07-28"],"requested":"2026-07-28"}`)
			return
		}
		reply(w, http.StatusOK, string(m.ID), `{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{"tools":{"listChanged":true}},"instructions":"stateless test server","ttlMs":0,"cacheScope":"public","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"stateless","version":"1.0.0"}}}`, 0, "")
		return
	}
	if h == nil {
		h = defaultStateless
	}
	result, code, message := h(m.Method, m.Params)
	status := http.StatusOK
	switch {
	case code == -32601:
		status = http.StatusNotFound
	case code != 0:
		status = http.StatusBadRequest
	}
	reply(w, status, string(m.ID), result, code, message)
}

func defaultStateless(method string, params json.RawMessage) (string, int, string) {
	switch method {
	case "tools/list":
		return `{"resultType":"complete","ttlMs":0,"cacheScope":"public","tools":[{"name":"echo","description":"echoes","inputSchema":{"type":"object","properties":{"text":{"type":"string"}}}}]}`, 0, ""
	case "tools/call":
		var p struct {
			Arguments json.RawMessage `json:"arguments"`
		}
		_ = json.Unmarshal(params, &p)
		text, _ := json.Marshal("args " + string(p.Arguments))
		return `{"resultType":"complete","content":[{"type":"text","text":` + string(text) + `}]}`, 0, ""
	}
	return "", -32601, "method not found: " + method
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// reply writes one JSON-RPC answer: a result when code is 0, else an error
// with the optional raw data.
func reply(w http.ResponseWriter, status int, id, result string, code int, message string, data ...string) {
	var msg string
	if code == 0 {
		msg = `{"jsonrpc":"2.0","id":` + id + `,"result":` + result + `}`
	} else {
		d := ""
		if len(data) > 0 {
			d = `,"data":` + data[0]
		}
		msg = fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"error":{"code":%d,"message":%s%s}}`, id, code, quote(message), d)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	io.WriteString(w, msg)
}
