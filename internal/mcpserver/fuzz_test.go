package mcpserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/mcpserver"
	"github.com/toolgate/toolgate/internal/mcpserver/mcpservertest"
)

// documented are the statuses docs/http-contract.md lists.
var documented = map[int]bool{200: true, 202: true, 400: true, 401: true, 403: true, 404: true, 405: true, 413: true, 415: true, 429: true, 500: true, 503: true}

// FuzzHTTP drives the multi-session handler with arbitrary bodies and header
// choices. Invariant: a documented status with a well-formed body, never a panic;
// no session is created by a request that failed authentication; a 500 happens
// only for the tool that panics on purpose.
func FuzzHTTP(f *testing.F) {
	seeds := []string{
		initBody,
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"test.echo","arguments":{"a":1}}}`,
		`[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/initialized"}]`,
		`[]`, `[[]]`, `{}`, `null`, "\xff", `{"jsonrpc":"2.0","id":1,`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"test.echo","Name":"test.fail"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{"ſ":1,"s":2},"name":"x"}}`,
		`{"jsonrpc":"2.0","id":"toolgate-1","result":{}}`,
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`,
		strings.Repeat("[", 200),
		`{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"test.ask","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2099-01-01"}}}`,
	}
	for i, s := range seeds {
		f.Add(uint8(i), []byte(s))
	}
	f.Add(uint8(162), []byte(initBody)) // POST, loopback, JSON, a good token, headers twice
	f.Add(uint8(162), []byte(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"test.echo","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`))
	f.Fuzz(func(t *testing.T, choice uint8, body []byte) {
		h := mcpserver.NewHandler(mcpserver.HandlerOptions{
			OpenTurn: func(context.Context, string) (mcpserver.Turn, error) {
				tt := mcpservertest.NewTurn()
				tt.Release()
				return tt, nil
			},
			Authenticate: func(tok string, present bool) (string, bool) {
				return "alice", present && tok == "good"
			},
			MaxBodyBytes: 64 << 10,
		})
		defer h.Close()
		methods := []string{"POST", "POST", "POST", "GET", "DELETE", "PUT"}
		hosts := []string{"127.0.0.1:1", "localhost", "evil.example"}
		ctypes := []string{"application/json", "text/plain", ""}
		tokens := []string{"Bearer good", "", "Bearer bad"}
		c := int(choice)
		method := methods[c%len(methods)]
		req := httptest.NewRequest(method, "/mcp", bytes.NewReader(body))
		req.Host = hosts[(c/6)%len(hosts)]
		if ct := ctypes[(c/18)%len(ctypes)]; ct != "" {
			req.Header.Set("Content-Type", ct)
		}
		auth := tokens[(c/54)%len(tokens)]
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		if c&1 == 1 {
			req.Header.Set("Accept", "application/json, text/event-stream")
		}
		// The top choices send the standard headers twice, each pair starting with
		// a value that alone would be served.
		dup := c >= 162
		if dup {
			req.Header["Mcp-Protocol-Version"] = []string{"2025-11-25", "2026-07-28"}
			req.Header["Mcp-Method"] = []string{"tools/call", "tools/list"}
			req.Header["Mcp-Name"] = []string{"test.echo", "test.fail"}
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		res := rec.Result()
		got, _ := io.ReadAll(res.Body)
		if !documented[res.StatusCode] {
			t.Fatalf("undocumented status %d for %s %q", res.StatusCode, method, body)
		}
		if dup && res.StatusCode < 300 {
			t.Fatalf("headers sent twice were served (status %d)", res.StatusCode)
		}
		if auth != "Bearer good" && h.Sessions() != 0 {
			t.Fatalf("a session was created without authentication (status %d)", res.StatusCode)
		}
		if res.StatusCode == 500 && !bytes.Contains(body, []byte("test.panic")) {
			t.Fatalf("500 for %q", body)
		}
		if bytes.Contains(got, []byte("secret")) {
			t.Fatalf("internal details leaked: %s", got)
		}
		switch ct := res.Header.Get("Content-Type"); {
		case len(got) == 0:
		case ct == "application/json":
			if !json.Valid(got) {
				t.Fatalf("status %d body is not JSON: %q", res.StatusCode, got)
			}
		case ct == "text/event-stream":
			for _, ev := range strings.Split(strings.TrimSpace(string(got)), "\n\n") {
				if ev == ": keep-alive" {
					continue
				}
				data, ok := strings.CutPrefix(ev, "event: message\ndata: ")
				if !ok || !json.Valid([]byte(data)) {
					t.Fatalf("bad SSE event %q", ev)
				}
			}
		default:
			t.Fatalf("status %d with content type %q and body %q", res.StatusCode, ct, got)
		}
	})
}

// benchBridge is a bridge whose session is initialized.
func benchBridge(b *testing.B) *mcpserver.Bridge {
	br, err := mcpserver.NewBridge(mcpservertest.NewTurn(), mcpserver.BridgeOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { br.Close() })
	if rec := post(br, initBody); rec.Code != http.StatusOK {
		b.Fatalf("initialize: %d %s", rec.Code, rec.Body)
	}
	return br
}

// BenchmarkHTTPToolsCall measures one tools/call round trip over a real loopback
// HTTP connection (keep-alive), JSON answers.
func BenchmarkHTTPToolsCall(b *testing.B) {
	br := benchBridge(b)
	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"test.echo","arguments":{"path":"src/main.go","limit":100}}}`)
	client := &http.Client{}
	b.ReportAllocs()
	for b.Loop() {
		req, _ := http.NewRequest(http.MethodPost, br.URL(), bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Mcp-Session-Id", br.SessionID())
		res, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != 200 {
			b.Fatal(res.StatusCode)
		}
	}
}

// BenchmarkHTTPToolsCallParallel is the same with concurrent clients.
func BenchmarkHTTPToolsCallParallel(b *testing.B) {
	br := benchBridge(b)
	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"test.echo","arguments":{"path":"src/main.go"}}}`)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		client := &http.Client{}
		for pb.Next() {
			req, _ := http.NewRequest(http.MethodPost, br.URL(), bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			res, err := client.Do(req)
			if err != nil {
				b.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if res.StatusCode != 200 {
				b.Error(res.StatusCode)
				return
			}
		}
	})
}

// BenchmarkStdioToolsCall measures tools/call throughput over ServeStdio with
// pipes: one request written, its answer read, in a loop.
func BenchmarkStdioToolsCall(b *testing.B) {
	inW, outR, done := pipeStdio(mcpservertest.NewTurn(), mcpserver.StdioOptions{})
	line := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"test.echo","arguments":{"path":"src/main.go","limit":100}}}` + "\n")
	buf := make([]byte, 64<<10)
	roundTrip := func(line []byte) []byte {
		if _, err := inW.Write(line); err != nil {
			b.Fatal(err)
		}
		n := 0
		for {
			m, err := outR.Read(buf[n:])
			if err != nil {
				b.Fatal(err)
			}
			n += m
			if buf[n-1] == '\n' {
				return buf[:n]
			}
		}
	}
	if got := roundTrip([]byte(stdioInit + "\n")); !bytes.Contains(got, []byte(`"result"`)) {
		b.Fatalf("initialize: %s", got)
	}
	if got := roundTrip(line); !bytes.Contains(got, []byte(`"result"`)) {
		b.Fatalf("tools/call: %s", got)
	}
	b.ReportAllocs()
	for b.Loop() {
		roundTrip(line)
	}
	inW.Close()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}
