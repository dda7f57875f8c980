package upstream_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolgate/toolgate/internal/mcpspec"
	"github.com/toolgate/toolgate/internal/upstream"
	"github.com/toolgate/toolgate/internal/upstream/upstreamtest"
	"github.com/toolgate/toolgate/internal/upstream/upstreamtest/fixturedata"
)

func dialHTTP(t *testing.T, spec upstream.HTTPSpec, opts upstream.Options) *upstream.Conn {
	t.Helper()
	c, err := upstream.DialHTTP(testCtx(t), spec, opts)
	if err != nil {
		t.Fatalf("DialHTTP: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// recorder keeps, for each request through it, the request body and the
// response body as the server wrote them.
type recorder struct {
	next http.Handler
	mu   sync.Mutex
	ex   []*exchange
}

type exchange struct {
	req  string
	resp bytes.Buffer
}

type teeWriter struct {
	http.ResponseWriter
	r  *recorder
	ex *exchange
}

func (w teeWriter) Write(p []byte) (int, error) {
	w.r.mu.Lock()
	w.ex.resp.Write(p)
	w.r.mu.Unlock()
	return w.ResponseWriter.Write(p)
}

func (w teeWriter) Flush() { w.ResponseWriter.(http.Flusher).Flush() }

func (w teeWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (r *recorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := readAll(req)
	ex := &exchange{req: string(body)}
	r.mu.Lock()
	r.ex = append(r.ex, ex)
	r.mu.Unlock()
	r.next.ServeHTTP(teeWriter{w, r, ex}, req)
}

func readAll(req *http.Request) ([]byte, error) {
	var b bytes.Buffer
	_, err := b.ReadFrom(req.Body)
	req.Body.Close()
	req.Body = ioNopCloser{bytes.NewReader(b.Bytes())}
	return b.Bytes(), err
}

type ioNopCloser struct{ *bytes.Reader }

func (ioNopCloser) Close() error { return nil }

// result returns the raw result the server sent for the request whose body
// holds method, from a JSON body or an SSE stream.
func (r *recorder) result(t *testing.T, method string) json.RawMessage {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, ex := range r.ex {
		if !strings.Contains(ex.req, `"method":"`+method+`"`) {
			continue
		}
		body := ex.resp.Bytes()
		var candidates [][]byte
		if bytes.HasPrefix(bytes.TrimSpace(body), []byte("{")) {
			candidates = append(candidates, body)
		} else {
			sc := bufio.NewScanner(bytes.NewReader(body))
			sc.Buffer(nil, 4<<20)
			for sc.Scan() {
				if d, ok := bytes.CutPrefix(sc.Bytes(), []byte("data: ")); ok {
					candidates = append(candidates, append([]byte(nil), d...))
				}
			}
		}
		for _, c := range candidates {
			var m map[string]json.RawMessage
			if json.Unmarshal(c, &m) == nil && m["result"] != nil {
				return m["result"]
			}
		}
	}
	t.Fatalf("no recorded result for %s", method)
	return nil
}

// sdkServer is the go-sdk's own server with a tool whose schema is raw JSON.
func sdkServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "sdk-server", Version: "1.0.0"}, nil)
	s.AddTool(&mcp.Tool{
		Name:        "raw",
		Description: "schema as written",
		InputSchema: json.RawMessage(`{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","properties":{"n":{"type":"number","default":1.50,"maximum":1e2}},"$defs":{"d":{"type":"string"}},"x-vendor":true}`),
	}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "args " + string(req.Params.Arguments)}}}, nil
	})
	return s
}

func TestStreamableAgainstSDKServer(t *testing.T) {
	for _, opts := range []mcp.StreamableHTTPOptions{{JSONResponse: true}, {}, {Stateless: true}} {
		name := "sse"
		if opts.JSONResponse {
			name = "json"
		}
		if opts.Stateless {
			name = "stateless"
		}
		t.Run(name, func(t *testing.T) {
			server := sdkServer()
			rec := &recorder{next: mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, &opts)}
			srv := httptest.NewServer(rec)
			t.Cleanup(srv.Close) // after the connection closes (cleanups run last first)
			c := dialHTTP(t, upstream.HTTPSpec{URL: srv.URL}, upstream.Options{})
			if c.Transport() != "streamable-http" || c.Handshake().ProtocolVersion != mcpspec.LatestVersion {
				t.Errorf("transport %s, version %s", c.Transport(), c.Handshake().ProtocolVersion)
			}
			list, err := c.Call(testCtx(t), "tools/list", nil)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(list, rec.result(t, "tools/list")) || !bytes.Contains(list, []byte(`"default":1.50`)) {
				t.Errorf("tools/list differs from what the server sent:\n got %s\nsent %s", list, rec.result(t, "tools/list"))
			}
			res, err := c.Call(testCtx(t), "tools/call", json.RawMessage(`{"name":"raw","arguments":{"n":1.50}}`))
			if err != nil || !bytes.Contains(res, []byte(`args {\"n\":1.50}`)) {
				t.Errorf("tools/call: %s %v", res, err)
			}
			if err := c.Ping(testCtx(t)); err != nil {
				t.Errorf("ping: %v", err)
			}
		})
	}
}

func TestStandaloneStreamDeliversListChanged(t *testing.T) {
	server := sdkServer()
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil))
	t.Cleanup(srv.Close)
	got := make(chan upstream.Notification, 10)
	c := dialHTTP(t, upstream.HTTPSpec{URL: srv.URL}, upstream.Options{OnNotification: func(n upstream.Notification) { got <- n }})
	// No request is in flight: only the standalone GET stream can carry it.
	deadline := time.After(10 * time.Second)
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case n := <-got:
			if n.Method != "notifications/tools/list_changed" {
				t.Fatalf("got %s", n.Method)
			}
			list, err := c.Call(testCtx(t), "tools/list", nil)
			if err != nil || !bytes.Contains(list, []byte(`"late-0"`)) {
				t.Errorf("list after the change: %s %v", list, err)
			}
			return
		case <-tick.C: // the stream may not be open yet: change again
			server.AddTool(&mcp.Tool{Name: "late-" + string(rune('0'+i)), InputSchema: json.RawMessage(`{"type":"object"}`)},
				func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
					return &mcp.CallToolResult{}, nil
				})
		case <-deadline:
			t.Fatal("no list_changed through the standalone stream")
		}
	}
}

func TestStandaloneStreamHandWritten(t *testing.T) {
	s := upstreamtest.NewHTTPServer(t, upstreamtest.HTTPServerOptions{Session: true})
	got := make(chan upstream.Notification, 10)
	dialHTTP(t, upstream.HTTPSpec{URL: s.URL, Headers: upstream.StaticHeaders{"X-Api-Key": "k-123"}},
		upstream.Options{OnNotification: func(n upstream.Notification) { got <- n }})
	deadline := time.Now().Add(10 * time.Second)
	for s.Push(`{"jsonrpc":"2.0","method":"notifications/resources/list_changed","params":{"x":1.50}}`) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the standalone stream was never opened")
		}
		time.Sleep(20 * time.Millisecond)
	}
	select {
	case n := <-got:
		if n.Method != "notifications/resources/list_changed" || string(n.Params) != `{"x":1.50}` {
			t.Errorf("got %s %s", n.Method, n.Params)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("pushed notification not delivered")
	}
	for _, r := range s.Requests() {
		if r.Method == http.MethodGet {
			if r.Header.Get("X-Api-Key") != "k-123" || r.Header.Get("Mcp-Protocol-Version") != mcpspec.LatestVersion ||
				!strings.HasPrefix(r.Header.Get("Mcp-Session-Id"), "session-") || r.Header.Get("Accept") != "text/event-stream" {
				t.Errorf("GET stream headers: %v", r.Header)
			}
		}
	}
}

func TestHTTPResultsAreByteExact(t *testing.T) {
	for _, sse := range []bool{false, true} {
		s := upstreamtest.NewHTTPServer(t, upstreamtest.HTTPServerOptions{SSE: sse})
		c := dialHTTP(t, upstream.HTTPSpec{URL: s.URL}, upstream.Options{})
		list, err := c.Call(testCtx(t), "tools/list", nil)
		if err != nil {
			t.Fatal(err)
		}
		if want := `{"tools":[` + fixturedata.AwkwardTool + `],"x-extra-top":true}`; string(list) != want {
			t.Errorf("sse=%v tools/list:\n got %s\nwant %s", sse, list, want)
		}
		res, err := c.Call(testCtx(t), "tools/call", json.RawMessage(`{"name":"awkward"}`))
		if err != nil || string(res) != fixturedata.AwkwardResult {
			t.Errorf("sse=%v tools/call: %s %v", sse, res, err)
		}
		if string(c.Handshake().ServerInfo) != fixturedata.ServerInfo {
			t.Errorf("serverInfo %s", c.Handshake().ServerInfo)
		}
		_, err = c.Call(testCtx(t), "nope", nil)
		var re *upstream.RPCError
		if !errors.As(err, &re) || re.Code != -32601 || string(re.Data) != `{"detail":1.50}` {
			t.Errorf("error answer: %v", err)
		}
	}
}

func TestHTTPHeaders(t *testing.T) {
	s := upstreamtest.NewHTTPServer(t, upstreamtest.HTTPServerOptions{Session: true})
	c := dialHTTP(t, upstream.HTTPSpec{URL: s.URL, NoStandaloneStream: true, Headers: upstream.StaticHeaders{
		"X-Api-Key":      "key-secret",
		"authorization":  "Bearer token-secret",
		"Mcp-Session-Id": "forged", // protocol headers are not configurable
		"Content-Type":   "text/plain",
	}}, upstream.Options{})
	toolText(t, c, "echo", `{"text":"x"}`)
	c.Close()
	reqs := s.Requests()
	if len(reqs) < 4 {
		t.Fatalf("%d requests", len(reqs))
	}
	for i, r := range reqs {
		if r.Header.Get("X-Api-Key") != "key-secret" || r.Header.Get("Authorization") != "Bearer token-secret" {
			t.Errorf("request %d (%s) lacks the configured headers: %v", i, r.Method, r.Header)
		}
		if r.Method == http.MethodPost && r.Header.Get("Content-Type") != "application/json" {
			t.Errorf("request %d content type %q", i, r.Header.Get("Content-Type"))
		}
		pv := r.Header.Get("Mcp-Protocol-Version")
		if i == 0 && (pv != "" || r.Header.Get("Mcp-Session-Id") != "") {
			t.Errorf("initialize carried %q / %q", pv, r.Header.Get("Mcp-Session-Id"))
		}
		if i > 0 && (pv != mcpspec.LatestVersion || !strings.HasPrefix(r.Header.Get("Mcp-Session-Id"), "session-")) {
			t.Errorf("request %d (%s): Mcp-Protocol-Version %q, Mcp-Session-Id %q", i, r.Method, pv, r.Header.Get("Mcp-Session-Id"))
		}
	}
	if last := reqs[len(reqs)-1]; last.Method != http.MethodDelete {
		t.Errorf("Close did not end the session: last request %s", last.Method)
	}
}

func TestRedirectToAnotherOriginDropsHeaders(t *testing.T) {
	target := upstreamtest.NewHTTPServer(t, upstreamtest.HTTPServerOptions{})
	tu, _ := url.Parse(target.URL)
	proxy := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: tu.Scheme, Host: tu.Host})
	mux := http.NewServeMux()
	mux.Handle("/mcp", proxy) // same origin as the configured URL
	mux.HandleFunc("/old", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/mcp", http.StatusTemporaryRedirect)
	})
	mux.HandleFunc("/away", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL, http.StatusTemporaryRedirect)
	})
	front := httptest.NewServer(mux)
	t.Cleanup(front.Close)
	headers := upstream.StaticHeaders{"X-Api-Key": "SECRET-KEY", "Authorization": "Bearer SECRET-TOKEN"}

	// Same origin: the headers follow the redirect.
	c := dialHTTP(t, upstream.HTTPSpec{URL: front.URL + "/old", Headers: headers}, upstream.Options{})
	toolText(t, c, "echo", `{"text":"same"}`)
	for _, r := range target.Requests() {
		if r.Header.Get("X-Api-Key") != "SECRET-KEY" || r.Header.Get("Authorization") != "Bearer SECRET-TOKEN" {
			t.Fatalf("same-origin redirect lost the configured headers: %v", r.Header)
		}
	}
	n := len(target.Requests())

	// Another origin: none of them.
	c2 := dialHTTP(t, upstream.HTTPSpec{URL: front.URL + "/away", Headers: headers}, upstream.Options{})
	toolText(t, c2, "echo", `{"text":"away"}`)
	reqs := target.Requests()[n:]
	if len(reqs) == 0 {
		t.Fatal("the redirect was not followed")
	}
	for _, r := range reqs {
		for name, vs := range r.Header {
			for _, v := range vs {
				if strings.Contains(v, "SECRET") {
					t.Errorf("%s: %s reached another origin", name, v)
				}
			}
		}
	}
}

func TestUnauthorizedIsTypedAndNotRetried(t *testing.T) {
	const challenge = `Bearer resource_metadata="https://mcp.example/.well-known/oauth-protected-resource", scope="files:read"`
	s := upstreamtest.NewHTTPServer(t, upstreamtest.HTTPServerOptions{})
	s.Refuse(http.StatusUnauthorized, challenge)
	_, err := upstream.DialHTTP(testCtx(t), upstream.HTTPSpec{URL: s.URL + "?token=SECRET-Q", Headers: upstream.StaticHeaders{"Authorization": "Bearer SECRET-H"}}, upstream.Options{})
	var auth *upstream.AuthRequiredError
	if !errors.As(err, &auth) || auth.StatusCode != 401 || len(auth.Challenge) != 1 || auth.Challenge[0] != challenge {
		t.Fatalf("DialHTTP against 401: %v", err)
	}
	if strings.Contains(err.Error(), "SECRET") {
		t.Errorf("error reveals a secret: %v", err)
	}
	if n := len(s.Requests()); n != 1 {
		t.Errorf("%d requests: a 401 was retried (or fell back to SSE)", n)
	}

	// 401 in the middle of a session: the call gets it, and the connection
	// ends with it.
	s.Refuse(0, "")
	c := dialHTTP(t, upstream.HTTPSpec{URL: s.URL}, upstream.Options{})
	s.Refuse(http.StatusUnauthorized, challenge)
	_, err = c.Call(testCtx(t), "tools/call", json.RawMessage(`{"name":"echo"}`))
	if !errors.As(err, &auth) {
		t.Fatalf("call answered 401: %v", err)
	}
	select {
	case <-c.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("connection still open after a 401")
	}
	if !errors.As(c.Err(), &auth) {
		t.Errorf("connection ended with %v", c.Err())
	}
}

func TestHTTPErrorsHideURLSecrets(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	for _, u := range []string{
		"http://" + addr + "/mcp?api_key=SECRET-QUERY",
		"http://user:SECRET-PASS@" + addr + "/mcp",
		"http://SECRET-USER@" + addr + "/mcp",
	} {
		_, err := upstream.DialHTTP(testCtx(t), upstream.HTTPSpec{URL: u}, upstream.Options{})
		if err == nil {
			t.Fatalf("dial %s succeeded", u)
		}
		if strings.Contains(err.Error(), "SECRET") {
			t.Errorf("error reveals a URL secret: %v", err)
		}
	}
	if _, err := upstream.DialHTTP(testCtx(t), upstream.HTTPSpec{URL: "ftp://x/SECRET"}, upstream.Options{}); err == nil || strings.Contains(err.Error(), "SECRET") {
		t.Errorf("bad URL: %v", err)
	}
}

func TestHTTPCancellation(t *testing.T) {
	s := upstreamtest.NewHTTPServer(t, upstreamtest.HTTPServerOptions{})
	c := dialHTTP(t, upstream.HTTPSpec{URL: s.URL}, upstream.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := c.Call(ctx, "tools/call", json.RawMessage(`{"name":"hang"}`))
		done <- err
	}()
	time.Sleep(100 * time.Millisecond)
	cancel()
	awaitCancelled(t, done)
	deadline := time.Now().Add(5 * time.Second)
	for {
		var found bool
		for _, r := range s.Requests() {
			found = found || strings.Contains(r.Body, `"method":"notifications/cancelled"`) && strings.Contains(r.Body, `"requestId":2`)
		}
		if found {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no notifications/cancelled for the hanging call: %+v", s.Requests())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got := toolText(t, c, "echo", `{"text":"still"}`); got != "still" {
		t.Errorf("after cancel: %q", got)
	}
}

func TestHTTPOversizedBody(t *testing.T) {
	for _, chunked := range []bool{false, true} {
		s := upstreamtest.NewHTTPServer(t, upstreamtest.HTTPServerOptions{Chunked: chunked})
		c := dialHTTP(t, upstream.HTTPSpec{URL: s.URL}, upstream.Options{MaxMessageBytes: 64 << 10})
		_, err := c.Call(testCtx(t), "tools/call", json.RawMessage(`{"name":"echo","arguments":{"bytes":100000}}`))
		var big *upstream.MessageTooLargeError
		if !errors.As(err, &big) {
			t.Fatalf("chunked=%v: oversized body: %v", chunked, err)
		}
		if got := toolText(t, c, "echo", `{"text":"small"}`); got != "small" {
			t.Errorf("chunked=%v: after an oversized body: %q", chunked, got)
		}
	}
}

func TestHTTPSessionEnded(t *testing.T) {
	s := upstreamtest.NewHTTPServer(t, upstreamtest.HTTPServerOptions{Session: true})
	c := dialHTTP(t, upstream.HTTPSpec{URL: s.URL, NoStandaloneStream: true}, upstream.Options{})
	s.EndSession()
	if _, err := c.Call(testCtx(t), "ping", nil); err == nil {
		t.Fatal("call on an ended session succeeded")
	}
	select {
	case <-c.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("connection still open on an ended session")
	}
	if !errors.Is(c.Err(), mcp.ErrSessionMissing) {
		t.Errorf("connection ended with %v", c.Err())
	}
}

func TestLegacySSEFallback(t *testing.T) {
	server := sdkServer()
	srv := httptest.NewServer(mcp.NewSSEHandler(func(*http.Request) *mcp.Server { return server }, nil))
	t.Cleanup(srv.Close)
	for _, kind := range []upstream.HTTPKind{upstream.HTTPAuto, upstream.HTTPSSE} {
		c := dialHTTP(t, upstream.HTTPSpec{URL: srv.URL, Kind: kind}, upstream.Options{})
		if c.Transport() != "sse" {
			t.Errorf("kind %d: transport %s", kind, c.Transport())
		}
		list, err := c.Call(testCtx(t), "tools/list", nil)
		if err != nil || !bytes.Contains(list, []byte(`"default":1.50`)) {
			t.Errorf("kind %d: tools/list %s %v", kind, list, err)
		}
		res, err := c.Call(testCtx(t), "tools/call", json.RawMessage(`{"name":"raw","arguments":{"n":1e2}}`))
		if err != nil || !bytes.Contains(res, []byte(`1e2`)) {
			t.Errorf("kind %d: tools/call %s %v", kind, res, err)
		}
	}
	if _, err := upstream.DialHTTP(testCtx(t), upstream.HTTPSpec{URL: srv.URL, Kind: upstream.HTTPStreamable}, upstream.Options{}); err == nil {
		t.Error("Streamable-only dial to an SSE server succeeded")
	}
}

// TestConformanceEverythingServer runs the go-sdk's conformance server as a
// process and checks, through a recording proxy, that results arrive as sent.
func TestConformanceEverythingServer(t *testing.T) {
	bin := upstreamtest.EverythingServer(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	cmd := exec.Command(bin, "-http", addr)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	deadline := time.Now().Add(10 * time.Second)
	for {
		conn, err := net.Dial("tcp", addr)
		if err == nil {
			conn.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("conformance server not listening: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	proxy := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: addr})
	rec := &recorder{next: proxy}
	front := httptest.NewServer(rec)
	t.Cleanup(front.Close)

	c := dialHTTP(t, upstream.HTTPSpec{URL: front.URL}, upstream.Options{})
	list, err := c.Call(testCtx(t), "tools/list", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(list, rec.result(t, "tools/list")) || !bytes.Contains(list, []byte(`"test_simple_text"`)) {
		t.Errorf("tools/list differs from what the server sent:\n got %s\nsent %s", list, rec.result(t, "tools/list"))
	}
	if got := toolText(t, c, "test_simple_text", ""); got == "" {
		t.Error("test_simple_text answered nothing")
	}
	res, err := c.Call(testCtx(t), "resources/list", nil)
	if err != nil || !bytes.Equal(res, rec.result(t, "resources/list")) {
		t.Errorf("resources/list: %s %v", res, err)
	}
}

// TestHTTPProgressAndServerRequests: over Streamable HTTP the go-sdk server's
// progress and its roots/list request come on the call's response stream; the
// progress reaches the caller with its own token, the request the handler.
func TestHTTPProgressAndServerRequests(t *testing.T) {
	server := mcp.NewServer(&mcp.Implementation{Name: "sdk-server", Version: "1.0.0"}, nil)
	server.AddTool(&mcp.Tool{Name: "work", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			tok := req.Params.GetProgressToken()
			for i := 1; i <= 3; i++ {
				if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: float64(i), Total: 3}); err != nil {
					return nil, err
				}
			}
			roots, err := req.Session.ListRoots(ctx, nil)
			if err != nil {
				return nil, err
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: roots.Roots[0].URI}}}, nil
		})
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil))
	t.Cleanup(srv.Close)
	handler := func(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
		if method == "roots/list" {
			return json.RawMessage(`{"roots":[{"uri":"file:///workspace","name":"w"}]}`), nil
		}
		return upstream.DefaultRequestHandler(ctx, method, params)
	}
	c := dialHTTP(t, upstream.HTTPSpec{URL: srv.URL}, upstream.Options{OnRequest: handler, Capabilities: json.RawMessage(`{"roots":{}}`)})
	var progress []string
	res, err := c.CallWithProgress(testCtx(t), "tools/call",
		json.RawMessage(`{"name":"work","arguments":{},"_meta":{"progressToken":"caller-7"}}`),
		func(p json.RawMessage) { progress = append(progress, string(p)) })
	if err != nil || !bytes.Contains(res, []byte("file:///workspace")) {
		t.Fatalf("tools/call: %s %v", res, err)
	}
	if len(progress) != 3 || !strings.Contains(progress[2], `"progressToken":"caller-7"`) || !strings.Contains(progress[2], `"progress":3`) {
		t.Errorf("progress %v", progress)
	}
}

func TestFallbackFailureNamesBoth(t *testing.T) {
	s := upstreamtest.NewHTTPServer(t, upstreamtest.HTTPServerOptions{})
	s.Refuse(http.StatusNotFound, "")
	_, err := upstream.DialHTTP(testCtx(t), upstream.HTTPSpec{URL: s.URL}, upstream.Options{})
	if err == nil || !strings.Contains(err.Error(), "HTTP 404") || !strings.Contains(err.Error(), "legacy SSE") {
		t.Fatalf("dial against 404: %v", err)
	}
	reqs := s.Requests()
	if len(reqs) != 2 || reqs[0].Method != http.MethodPost || reqs[1].Method != http.MethodGet {
		t.Errorf("requests %+v, want the POST then the legacy GET", reqs)
	}
}

// TestConformanceEverythingServerStdio runs the same server over stdio.
func TestConformanceEverythingServerStdio(t *testing.T) {
	p, err := upstream.Start(upstream.Spec{Name: "everything", Command: upstreamtest.EverythingServer(t), StopGrace: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Stop(testCtx(t)); err != nil {
			t.Error(err)
		}
	})
	c, err := upstream.DialStdio(testCtx(t), p, upstream.Options{})
	if err != nil {
		t.Fatalf("DialStdio: %v (stderr %s)", err, p.StderrTail())
	}
	if !bytes.Contains(c.Handshake().ServerInfo, []byte("mcp-conformance-test-server")) {
		t.Errorf("serverInfo %s", c.Handshake().ServerInfo)
	}
	list, err := c.Call(testCtx(t), "tools/list", nil)
	if err != nil || !bytes.Contains(list, []byte(`"test_simple_text"`)) {
		t.Fatalf("tools/list: %s %v", list, err)
	}
	if got := toolText(t, c, "test_simple_text", ""); got == "" {
		t.Error("test_simple_text answered nothing")
	}
}

// TestDialWaitsForStandaloneStream: the dial returns once the standalone
// stream is open, so a message the server sends right after the handshake
// (an elicitation for the first call, a list_changed) has a stream to go to,
// even from a server slow to open it.
func TestDialWaitsForStandaloneStream(t *testing.T) {
	s := upstreamtest.NewHTTPServer(t, upstreamtest.HTTPServerOptions{Session: true, StreamDelay: 300 * time.Millisecond})
	got := make(chan upstream.Notification, 1)
	dialHTTP(t, upstream.HTTPSpec{URL: s.URL}, upstream.Options{OnNotification: func(n upstream.Notification) { got <- n }})
	if n := s.Push(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`); n != 1 {
		t.Fatalf("right after the dial the server has %d streams, want 1", n)
	}
	select {
	case <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("not delivered")
	}
}
