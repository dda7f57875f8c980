package upstreamtest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/upstream/upstreamtest/fixturedata"
)

// HTTPServer is a hand-written Streamable HTTP MCP server for tests: every
// byte it sends is chosen here (fixturedata's awkward JSON among them), and it
// records every request it receives, headers included, so tests can check
// what reached it (a secret header, Mcp-Protocol-Version, a cancellation).
type HTTPServer struct {
	URL         string
	srv         *httptest.Server
	sse         bool
	chunked     bool
	streamDelay time.Duration

	mu       sync.Mutex
	requests []Request
	refuse   int
	chall    string
	session  string
	streams  []chan string
}

// Request is one request an HTTPServer received.
type Request struct {
	Method string
	Path   string
	Header http.Header
	Body   string
}

// HTTPServerOptions shapes an HTTPServer.
type HTTPServerOptions struct {
	// SSE answers requests with text/event-stream instead of application/json.
	SSE bool
	// Session mints an Mcp-Session-Id at initialize, requires it afterwards
	// (404 without it) and offers the standalone GET stream.
	Session bool
	// Chunked sends JSON answers without Content-Length, in two chunks.
	Chunked bool
	// StreamDelay holds each standalone GET stream this long before it is
	// registered and answered (a slow server).
	StreamDelay time.Duration
}

// NewHTTPServer starts an HTTPServer at URL + "/mcp", closed when the test ends.
func NewHTTPServer(t testing.TB, opts HTTPServerOptions) *HTTPServer {
	t.Helper()
	s := &HTTPServer{sse: opts.SSE, chunked: opts.Chunked, streamDelay: opts.StreamDelay}
	if opts.Session {
		s.session = "session-" + Marker(t)
	}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL + "/mcp"
	t.Cleanup(s.srv.Close)
	return s
}

// Requests returns what the server has received so far.
func (s *HTTPServer) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Refuse makes every later request get status (with a WWW-Authenticate
// challenge when challenge is not empty); 0 serves again.
func (s *HTTPServer) Refuse(status int, challenge string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refuse, s.chall = status, challenge
}

// EndSession forgets the session, so its next request gets 404.
func (s *HTTPServer) EndSession() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.session = "ended-" + s.session
}

// Push sends a JSON-RPC message on every open standalone GET stream and
// reports how many streams it reached.
func (s *HTTPServer) Push(msg string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ch := range s.streams {
		ch <- msg
	}
	return len(s.streams)
}

type rpc struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

func (s *HTTPServer) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	s.mu.Lock()
	s.requests = append(s.requests, Request{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: string(body)})
	refuse, chall, session := s.refuse, s.chall, s.session
	s.mu.Unlock()
	if refuse != 0 {
		if chall != "" {
			w.Header().Set("WWW-Authenticate", chall)
		}
		http.Error(w, "refused", refuse)
		return
	}
	var m rpc
	if r.Method == http.MethodPost {
		if err := json.Unmarshal(body, &m); err != nil {
			http.Error(w, "bad JSON", http.StatusBadRequest)
			return
		}
	}
	if session != "" && m.Method != "initialize" && r.Header.Get("Mcp-Session-Id") != session {
		http.Error(w, "session not found", http.StatusNotFound)
		return
	}
	switch r.Method {
	case http.MethodGet:
		if session == "" {
			w.Header().Set("Allow", "POST")
			http.Error(w, "no stream", http.StatusMethodNotAllowed)
			return
		}
		s.stream(w, r)
		return
	case http.MethodDelete:
		w.WriteHeader(http.StatusNoContent)
		return
	case http.MethodPost:
	default:
		http.Error(w, "method", http.StatusMethodNotAllowed)
		return
	}
	if len(m.ID) == 0 || m.Method == "" { // a notification or a response
		w.WriteHeader(http.StatusAccepted)
		return
	}
	var result string
	switch m.Method {
	case "initialize":
		var p struct {
			ProtocolVersion string `json:"protocolVersion"`
		}
		json.Unmarshal(m.Params, &p)
		if session != "" {
			w.Header().Set("Mcp-Session-Id", session)
		}
		v, _ := json.Marshal(p.ProtocolVersion)
		result = `{"protocolVersion":` + string(v) + `,"capabilities":` + fixturedata.Capabilities + `,"serverInfo":` + fixturedata.ServerInfo + `}`
	case "ping":
		result = `{}`
	case "tools/list":
		result = `{"tools":[` + fixturedata.AwkwardTool + `],"x-extra-top":true}`
	case "tools/call":
		var p struct {
			Name      string `json:"name"`
			Arguments struct {
				Text  string `json:"text"`
				Bytes int    `json:"bytes"`
			} `json:"arguments"`
		}
		json.Unmarshal(m.Params, &p)
		switch p.Name {
		case "awkward":
			result = fixturedata.AwkwardResult
		case "hang":
			<-r.Context().Done()
			return
		default:
			t, _ := json.Marshal(p.Arguments.Text + strings.Repeat("x", p.Arguments.Bytes))
			result = `{"content":[{"type":"text","text":` + string(t) + `}]}`
		}
	default:
		result = ""
	}
	var msg string
	if result == "" {
		msg = `{"jsonrpc":"2.0","id":` + string(m.ID) + `,"error":{"code":-32601,"message":"method not found","data":{"detail":1.50}}}`
	} else {
		msg = `{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":` + result + `}`
	}
	if s.sse {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "event: message\ndata: %s\n\n", msg)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if s.chunked {
		io.WriteString(w, msg[:len(msg)/2])
		w.(http.Flusher).Flush()
		io.WriteString(w, msg[len(msg)/2:])
		return
	}
	w.Header().Set("Content-Length", fmt.Sprint(len(msg)))
	io.WriteString(w, msg)
}

func (s *HTTPServer) stream(w http.ResponseWriter, r *http.Request) {
	if s.streamDelay > 0 {
		select {
		case <-time.After(s.streamDelay):
		case <-r.Context().Done():
			return
		}
	}
	ch := make(chan string, 16)
	s.mu.Lock()
	s.streams = append(s.streams, ch)
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		for i, c := range s.streams {
			if c == ch {
				s.streams = append(s.streams[:i], s.streams[i+1:]...)
				break
			}
		}
		s.mu.Unlock()
	}()
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	io.WriteString(w, ": open\n\n")
	w.(http.Flusher).Flush()
	for {
		select {
		case msg := <-ch:
			fmt.Fprintf(w, "event: message\nid: %d\ndata: %s\n\n", len(msg), msg)
			w.(http.Flusher).Flush()
		case <-r.Context().Done():
			return
		}
	}
}
