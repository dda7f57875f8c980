package upstream_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolgate/toolgate/internal/mcpspec"
	"github.com/toolgate/toolgate/internal/upstream"
	"github.com/toolgate/toolgate/internal/upstream/upstreamtest"
)

// statelessDial dials s with EraStateless.
func statelessDial(t *testing.T, url string, opts upstream.Options) *upstream.Conn {
	t.Helper()
	opts.Era = upstream.EraStateless
	return dialHTTP(t, upstream.HTTPSpec{URL: url}, opts)
}

func bodyOf(t *testing.T, r upstreamtest.Request) map[string]json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(r.Body), &m); err != nil {
		t.Fatalf("request body %q: %v", r.Body, err)
	}
	return m
}

// TestStatelessAgainstStrictServer: the handshake is server/discover only,
// every request carries _meta and the headers a strict 2026-07-28 server
// checks, a session id the server hands out is never sent back, and results
// reach the caller byte for byte.
func TestStatelessAgainstStrictServer(t *testing.T) {
	s := upstreamtest.NewStatelessServer(t, nil)
	c := statelessDial(t, s.URL, upstream.Options{ClientInfo: mcpspec.Implementation{Name: "probe", Version: "9"}, Capabilities: json.RawMessage(`{"elicitation":{}}`)})
	hs := c.Handshake()
	if c.Era() != upstream.EraStateless || hs.Era != upstream.EraStateless || hs.ProtocolVersion != "2026-07-28" {
		t.Fatalf("era %v, handshake %+v", c.Era(), hs)
	}
	if string(hs.ServerInfo) != `{"name":"stateless","version":"1.0.0"}` || hs.Instructions != "stateless test server" {
		t.Errorf("server info %s, instructions %q", hs.ServerInfo, hs.Instructions)
	}
	if _, ok := hs.Capability("tools"); !ok {
		t.Errorf("capabilities %s", hs.Capabilities)
	}
	res, err := c.Call(testCtx(t), "tools/call", json.RawMessage(`{"name":"echo","arguments":{"n":1.50,"big":12345678901234567890},"_meta":{"progressToken":"p"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(res, []byte(`args {\"n\":1.50,\"big\":12345678901234567890}`)) {
		t.Errorf("result %s", res)
	}
	if err := c.Ping(testCtx(t)); err != nil {
		t.Errorf("ping: %v", err)
	}
	reqs := s.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests, want discover, tools/call, discover (ping)", len(reqs))
	}
	for i, r := range reqs {
		if r.Header.Get("Mcp-Session-Id") != "" {
			t.Errorf("request %d sent a session id", i)
		}
		if r.Header.Get("Mcp-Protocol-Version") != "2026-07-28" {
			t.Errorf("request %d: MCP-Protocol-Version %q", i, r.Header.Get("Mcp-Protocol-Version"))
		}
		if strings.Contains(r.Body, `"initialize"`) {
			t.Errorf("request %d is an initialize", i)
		}
	}
	var call struct {
		Params struct {
			Meta map[string]json.RawMessage `json:"_meta"`
		} `json:"params"`
	}
	json.Unmarshal([]byte(reqs[1].Body), &call)
	meta := call.Params.Meta
	if string(meta["progressToken"]) == "" || string(meta["io.modelcontextprotocol/clientCapabilities"]) != `{"elicitation":{}}` ||
		string(meta["io.modelcontextprotocol/clientInfo"]) != `{"name":"probe","version":"9"}` {
		t.Errorf("_meta sent: %v", meta)
	}
	if reqs[1].Header.Get("Mcp-Method") != "tools/call" || reqs[1].Header.Get("Mcp-Name") != "echo" {
		t.Errorf("headers %v", reqs[1].Header)
	}
	// The arguments went as written.
	if !strings.Contains(reqs[1].Body, `"arguments":{"n":1.50,"big":12345678901234567890}`) {
		t.Errorf("body %s", reqs[1].Body)
	}
}

// TestStatelessAgainstSDKServer: the go-sdk's own stateless server (which
// checks Mcp-Method and the _meta) serves a stateless connection.
func TestStatelessAgainstSDKServer(t *testing.T) {
	server := sdkServer()
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, &mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true}))
	t.Cleanup(srv.Close)
	c := statelessDial(t, srv.URL, upstream.Options{})
	if c.Handshake().ProtocolVersion != "2026-07-28" {
		t.Fatalf("version %s", c.Handshake().ProtocolVersion)
	}
	list, err := c.Call(testCtx(t), "tools/list", nil)
	if err != nil || !bytes.Contains(list, []byte(`"default":1.50`)) {
		t.Fatalf("tools/list: %s %v", list, err)
	}
	res, err := c.Call(testCtx(t), "tools/call", json.RawMessage(`{"name":"raw","arguments":{"n":1.50}}`))
	if err != nil || !bytes.Contains(res, []byte(`args {\"n\":1.50}`)) {
		t.Errorf("tools/call: %s %v", res, err)
	}
}

// TestStatelessVersionRetry: a server that refuses the first server/discover
// with -32022 naming 2026-07-28 gets it again.
func TestStatelessVersionRetry(t *testing.T) {
	s := upstreamtest.NewStatelessServer(t, nil)
	s.RejectDiscover(1)
	c := statelessDial(t, s.URL, upstream.Options{})
	if c.Handshake().ProtocolVersion != "2026-07-28" || len(s.Requests()) != 2 {
		t.Fatalf("version %q after %d requests", c.Handshake().ProtocolVersion, len(s.Requests()))
	}
	s.RejectDiscover(2)
	_, err := upstream.DialHTTP(testCtx(t), upstream.HTTPSpec{URL: s.URL}, upstream.Options{Era: upstream.EraStateless})
	var rpcErr *upstream.RPCError
	if !errors.As(err, &rpcErr) || rpcErr.Code != -32022 {
		t.Fatalf("refused twice: %v", err)
	}
}

// TestProbe: EraProbe speaks 2026-07-28 to a server that does, and falls back
// to initialize, on a new connection, for one that answers -32601; a
// stateless-only server refuses initialize, so EraLegacy fails on it.
func TestProbe(t *testing.T) {
	modern := upstreamtest.NewStatelessServer(t, nil)
	c := dialHTTP(t, upstream.HTTPSpec{URL: modern.URL}, upstream.Options{Era: upstream.EraProbe})
	if c.Era() != upstream.EraStateless {
		t.Errorf("probe of a stateless server: era %v", c.Era())
	}
	if _, err := upstream.DialHTTP(testCtx(t), upstream.HTTPSpec{URL: modern.URL}, upstream.Options{}); err == nil {
		t.Errorf("initialize to a stateless-only server succeeded")
	}

	old := upstreamtest.NewHTTPServer(t, upstreamtest.HTTPServerOptions{Session: true})
	c = dialHTTP(t, upstream.HTTPSpec{URL: old.URL, NoStandaloneStream: true}, upstream.Options{Era: upstream.EraProbe})
	if c.Era() != upstream.EraLegacy || c.Handshake().ProtocolVersion != mcpspec.LatestVersion {
		t.Fatalf("probe of a legacy server: era %v version %s", c.Era(), c.Handshake().ProtocolVersion)
	}
	if _, err := c.Call(testCtx(t), "tools/list", nil); err != nil {
		t.Fatal(err)
	}
	reqs := old.Requests()
	if len(reqs) < 3 || !strings.Contains(reqs[0].Body, `"server/discover"`) || !strings.Contains(reqs[1].Body, `"initialize"`) {
		t.Fatalf("requests: %v", reqs)
	}
	for _, r := range reqs[1:] {
		if strings.Contains(r.Body, "io.modelcontextprotocol/protocolVersion") || r.Header.Get("Mcp-Method") != "" {
			t.Errorf("a legacy request carries stateless metadata: %s %v", r.Body, r.Header)
		}
	}
}

// TestProbeStdio: over stdio the probe falls back on the same process.
func TestProbeStdio(t *testing.T) {
	c, _, _ := dial(t, upstream.Options{Era: upstream.EraProbe})
	if c.Era() != upstream.EraLegacy || c.Handshake().ProtocolVersion == "" {
		t.Fatalf("era %v, version %q", c.Era(), c.Handshake().ProtocolVersion)
	}
	if _, err := c.Call(testCtx(t), "tools/list", nil); err != nil {
		t.Fatal(err)
	}
}

// TestEraNotMixed: a connection refuses the other era's handshake methods.
func TestEraNotMixed(t *testing.T) {
	s := upstreamtest.NewStatelessServer(t, nil)
	c := statelessDial(t, s.URL, upstream.Options{})
	n := len(s.Requests())
	var eraErr *upstream.EraError
	if _, err := c.Call(testCtx(t), "initialize", json.RawMessage(`{}`)); !errors.As(err, &eraErr) {
		t.Errorf("initialize on a stateless connection: %v", err)
	}
	if err := c.Notify(testCtx(t), "notifications/initialized", nil); !errors.As(err, &eraErr) {
		t.Errorf("notifications/initialized: %v", err)
	}
	if err := c.Notify(testCtx(t), "notifications/roots/list_changed", nil); !errors.As(err, &eraErr) {
		t.Errorf("a notification over stateless HTTP: %v", err)
	}
	if len(s.Requests()) != n {
		t.Errorf("refused messages were sent")
	}
	legacy := dialHTTP(t, upstream.HTTPSpec{URL: upstreamtest.NewHTTPServer(t, upstreamtest.HTTPServerOptions{}).URL}, upstream.Options{})
	if _, err := legacy.Call(testCtx(t), "server/discover", nil); !errors.As(err, &eraErr) {
		t.Errorf("server/discover on a legacy connection: %v", err)
	}
	if _, err := upstream.DialHTTP(testCtx(t), upstream.HTTPSpec{URL: s.URL, Kind: upstream.HTTPSSE}, upstream.Options{Era: upstream.EraStateless}); err == nil {
		t.Errorf("stateless over HTTP+SSE was accepted")
	}
}

const headerTools = `{"resultType":"complete","tools":[
{"name":"route","inputSchema":{"type":"object","properties":{
  "region":{"type":"string","x-mcp-header":"Region"},
  "priority":{"type":"integer","x-mcp-header":"Priority"},
  "verbose":{"type":"boolean","x-mcp-header":"Verbose"},
  "ascii":{"type":"string","x-mcp-header":"Ascii"},
  "padded":{"type":"string","x-mcp-header":"Padded"},
  "crlf":{"type":"string","x-mcp-header":"CrLf"},
  "look":{"type":"string","x-mcp-header":"Look"},
  "method":{"type":"string","x-mcp-header":"Method"},
  "nested":{"type":"object","properties":{"zone":{"type":"string","x-mcp-header":"Zone"}}},
  "float":{"type":"number"},
  "plain":{"type":"string"}}}},
{"name":"bad_dup","inputSchema":{"type":"object","properties":{"a":{"type":"string","x-mcp-header":"X"},"b":{"type":"string","x-mcp-header":"x"}}}},
{"name":"bad_type","inputSchema":{"type":"object","properties":{"a":{"type":"object","x-mcp-header":"A"}}}},
{"name":"bad_name","inputSchema":{"type":"object","properties":{"a":{"type":"string","x-mcp-header":"A B"}}}},
{"name":"名前","inputSchema":{"type":"object"}}]}`

// TestStatelessHeaders: Mcp-Name and each x-mcp-header argument go in
// headers, plain when they are plain visible ASCII and =?base64?…?= otherwise;
// null and unannotated arguments are not mirrored; a tool with invalid
// annotations is not called at all.
func TestStatelessHeaders(t *testing.T) {
	var calls atomic.Int32
	s := upstreamtest.NewStatelessServer(t, func(method string, params json.RawMessage) (string, int, string) {
		switch method {
		case "tools/list":
			return headerTools, 0, ""
		case "tools/call":
			calls.Add(1)
			return `{"resultType":"complete","content":[]}`, 0, ""
		}
		return "", -32601, "no"
	})
	c := statelessDial(t, s.URL, upstream.Options{})
	if _, err := c.Call(testCtx(t), "tools/list", nil); err != nil {
		t.Fatal(err)
	}
	args := `{"region":"us-west1","priority":42,"verbose":null,"ascii":"a b","padded":" x ","crlf":"l1\r\nl2","look":"=?base64?abc?=","method":"m","nested":{"zone":"zürich"},"float":3.5,"plain":"p"}`
	if _, err := c.Call(testCtx(t), "tools/call", json.RawMessage(`{"name":"route","arguments":`+args+`}`)); err != nil {
		t.Fatal(err)
	}
	reqs := s.Requests()
	h := reqs[len(reqs)-1].Header
	want := map[string]string{
		"Mcp-Method":       "tools/call",
		"Mcp-Name":         "route",
		"Mcp-Param-Region": "us-west1", "Mcp-Param-Priority": "42", "Mcp-Param-Ascii": "a b",
		"Mcp-Param-Padded": "=?base64?IHgg?=", "Mcp-Param-Crlf": "=?base64?bDENCmwy?=",
		"Mcp-Param-Look": "=?base64?PT9iYXNlNjQ/YWJjPz0=?=", "Mcp-Param-Method": "m",
		"Mcp-Param-Zone": "=?base64?esO8cmljaA==?=",
	}
	for k, v := range want {
		if h.Get(k) != v {
			t.Errorf("%s: %q, want %q", k, h.Get(k), v)
		}
	}
	for _, k := range []string{"Mcp-Param-Verbose", "Mcp-Param-Float", "Mcp-Param-Plain"} {
		if h.Get(k) != "" {
			t.Errorf("%s sent: %q", k, h.Get(k))
		}
	}
	// A non-ASCII tool name is sent encoded (the strict server decodes it).
	if _, err := c.Call(testCtx(t), "tools/call", json.RawMessage(`{"name":"名前"}`)); err != nil {
		t.Fatal(err)
	}
	reqs = s.Requests()
	if got := reqs[len(reqs)-1].Header.Get("Mcp-Name"); got != "=?base64?5ZCN5YmN?=" {
		t.Errorf("Mcp-Name %q", got)
	}
	// A connection that never listed the tools (the catalogue came from
	// storage) is taught them.
	c2 := statelessDial(t, s.URL, upstream.Options{})
	c2.LearnTools(json.RawMessage(headerTools))
	if _, err := c2.Call(testCtx(t), "tools/call", json.RawMessage(`{"name":"route","arguments":{"region":"eu"}}`)); err != nil {
		t.Fatal(err)
	}
	reqs = s.Requests()
	if got := reqs[len(reqs)-1].Header.Get("Mcp-Param-Region"); got != "eu" {
		t.Errorf("taught connection: Mcp-Param-Region %q", got)
	}
	if _, err := c2.Call(testCtx(t), "tools/call", json.RawMessage(`{"name":"bad_dup"}`)); err == nil {
		t.Errorf("taught connection called an invalid tool")
	}
	before := calls.Load()
	for _, name := range []string{"bad_dup", "bad_type", "bad_name"} {
		_, err := c.Call(testCtx(t), "tools/call", json.RawMessage(`{"name":"`+name+`","arguments":{"a":"v"}}`))
		var inv *upstream.InvalidToolError
		if !errors.As(err, &inv) || inv.Tool != name {
			t.Errorf("%s: %v", name, err)
		}
	}
	if calls.Load() != before {
		t.Errorf("a tool with invalid annotations was called")
	}
}

func TestValidateToolHeaders(t *testing.T) {
	for schema, ok := range map[string]bool{
		`{"type":"object"}`: true,
		`{"type":"object","properties":{"a":{"type":"integer","x-mcp-header":"A-1_.~"}}}`:                                                                         true,
		`{"type":"object","properties":{"a":{"type":"string","x-mcp-header":""}}}`:                                                                                false,
		`{"type":"object","properties":{"a":{"type":"array","x-mcp-header":"A"}}}`:                                                                                false,
		`{"type":"object","properties":{"a":{"type":"number","x-mcp-header":"A"}}}`:                                                                               false,
		`{"type":"object","properties":{"a":{"type":"null","x-mcp-header":"A"}}}`:                                                                                 false,
		`{"type":"object","properties":{"a":{"type":["string","null"],"x-mcp-header":"A"}}}`:                                                                      false,
		`{"type":"object","properties":{"a":{"type":"string","x-mcp-header":"A:B"}}}`:                                                                             false,
		`{"type":"object","properties":{"a":{"type":"string","x-mcp-header":"Ä"}}}`:                                                                               false,
		`{"type":"object","properties":{"a":{"type":"string","x-mcp-header":"A\u0007"}}}`:                                                                         false,
		`{"type":"object","properties":{"a":{"type":"string","x-mcp-header":7}}}`:                                                                                 false,
		`{"type":"object","properties":{"a":{"type":"string","x-mcp-header":"K"},"b":{"type":"string","x-mcp-header":"K"}}}`:                                      false,
		`{"type":"object","properties":{"o":{"type":"object","properties":{"a":{"type":"string","x-mcp-header":"K"}}},"b":{"type":"string","x-mcp-header":"k"}}}`: false,
		`[1,2]`: true,
	} {
		if err := upstream.ValidateToolHeaders(json.RawMessage(schema)); (err == nil) != ok {
			t.Errorf("%s: %v", schema, err)
		}
	}
}

// TestStatelessRoundTripsRawBytes: an input_required result reaches the
// caller byte for byte, and the retry's requestState and inputResponses reach
// the server exactly as the caller wrote them (no re-encoding of escapes or
// numbers); schemas with $ref, to a network URL too, are passed on and never
// fetched.
func TestStatelessRoundTripsRawBytes(t *testing.T) {
	var fetched atomic.Int32
	canary := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fetched.Add(1) }))
	t.Cleanup(canary.Close)
	listed := `{"resultType":"complete","tools":[{"name":"lookup","inputSchema":{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","$defs":{"id":{"type":"string"}},"properties":{"id":{"$ref":"#/$defs/id"},"profile":{"$ref":"` + canary.URL + `/schema.json"}}}}]}`
	state := `"st\u00e9te+1.50\/x"`
	first := `{"resultType":"input_required","inputRequests":{"q":{"method":"elicitation/create","params":{"message":"ok?","requestedSchema":{"type":"object","properties":{}}}}},"requestState":` + state + `}`
	s := upstreamtest.NewStatelessServer(t, func(method string, params json.RawMessage) (string, int, string) {
		switch method {
		case "tools/list":
			return listed, 0, ""
		case "tools/call":
			if bytes.Contains(params, []byte(`"requestState"`)) {
				return `{"resultType":"complete","content":[]}`, 0, ""
			}
			return first, 0, ""
		}
		return "", -32601, "no"
	})
	c := statelessDial(t, s.URL, upstream.Options{Capabilities: json.RawMessage(`{"elicitation":{}}`)})
	list, err := c.Call(testCtx(t), "tools/list", nil)
	if err != nil || string(list) != listed {
		t.Fatalf("tools/list: %v\n got %s\nwant %s", err, list, listed)
	}
	res, err := c.Call(testCtx(t), "tools/call", json.RawMessage(`{"name":"lookup","arguments":{"id":"a"}}`))
	if err != nil || string(res) != first {
		t.Fatalf("first call: %v\n got %s", err, res)
	}
	retry := `{"name":"lookup","arguments":{"id":"a"},"inputResponses":{"q":{"action":"accept","content":{"n":1e2}}},"requestState":` + state + `}`
	if _, err := c.Call(testCtx(t), "tools/call", json.RawMessage(retry)); err != nil {
		t.Fatal(err)
	}
	reqs := s.Requests()
	sent := reqs[len(reqs)-1].Body
	if !strings.Contains(sent, `"inputResponses":{"q":{"action":"accept","content":{"n":1e2}}},"requestState":`+state) {
		t.Errorf("retry body changed: %s", sent)
	}
	if fetched.Load() != 0 {
		t.Errorf("a $ref was fetched %d times", fetched.Load())
	}
}
