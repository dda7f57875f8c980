package mcpserver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/mcpserver"
	"github.com/toolgate/toolgate/internal/mcpserver/mcpservertest"
	"github.com/toolgate/toolgate/internal/mcpspec"
)

// bearerTransport adds a bearer token to every request.
type bearerTransport struct {
	token string
	base  http.RoundTripper
}

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.base.RoundTrip(r)
}

func sdkClient(elicit bool) *mcp.Client {
	opts := &mcp.ClientOptions{}
	if elicit {
		opts.ElicitationHandler = func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"ok": true}}, nil
		}
	}
	return mcp.NewClient(&mcp.Implementation{Name: "sdk-test", Version: "1"}, opts)
}

func textOf(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	if len(res.Content) == 0 {
		t.Fatal("no content")
	}
	tc, ok := res.Content[0].(*mcp.TextContent)
	if !ok {
		t.Fatalf("content is %T", res.Content[0])
	}
	return tc.Text
}

// eras are the two ways the SDK client talks to toolgate: the session-based
// handshake (forced by asking for 2025-11-25) and, by default, the stateless
// 2026-07-28 revision found through server/discover.
// A server with NoStateless makes the SDK's discovery fall back to initialize.
var eras = []struct {
	name      string
	opts      *mcp.ClientSessionOptions
	stateless bool
	version   string
}{
	{"2025-11-25", &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"}, true, mcpspec.LatestVersion},
	{"fallback", nil, false, mcpspec.LatestVersion},
	{"2026-07-28", nil, true, mcpspec.ModernVersion},
}

// exerciseSDK lists and calls tools through a connected Go SDK session.
// Elicitation works only in the session-based era and only when the client
// declared it: 2026-07-28 has no server-to-client requests.
func exerciseSDK(t *testing.T, cs *mcp.ClientSession, version string, elicit bool) {
	t.Helper()
	ctx := context.Background()
	init := cs.InitializeResult()
	if init.ServerInfo == nil || init.ServerInfo.Name != "toolgate" || init.Capabilities.Tools == nil || init.Capabilities.Tools.ListChanged {
		t.Errorf("initialize result: %+v", init)
	}
	if init.ProtocolVersion != version {
		t.Errorf("negotiated %q, want %q", init.ProtocolVersion, version)
	}
	modern := version == mcpspec.ModernVersion
	elicitHandler := elicit
	// ping is gone in 2026-07-28: over HTTP the version header marks it modern
	// (404, -32601); over stdio a ping without _meta is an older-era message.
	if err := cs.Ping(ctx, nil); err != nil && !modern {
		t.Errorf("ping: %v", err)
	}
	elicit = elicit && !modern
	list, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	if len(list.Tools) != 7 || list.Tools[0].Name != mcpservertest.ToolEcho {
		t.Errorf("tools: %+v", list.Tools)
	}
	if list.Meta[mcpspec.MetaCatalogHash] != mcpservertest.CatalogHash || list.Meta[mcpspec.MetaExecutionID] != "execution-test" {
		t.Errorf("_meta: %+v", list.Meta)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: mcpservertest.ToolEcho, Arguments: map[string]any{"path": "a.txt", "n": 2}})
	if err != nil {
		t.Fatalf("tools/call: %v", err)
	}
	if res.IsError || textOf(t, res) != `{"n":2,"path":"a.txt"}` {
		t.Errorf("echo: isError=%v text=%q", res.IsError, textOf(t, res))
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: mcpservertest.ToolFail})
	if err != nil {
		t.Fatalf("tools/call fail: %v", err)
	}
	if !res.IsError || res.Meta["toolgate/status"] != "failed" {
		t.Errorf("fail: %+v", res)
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: mcpservertest.ToolElicit})
	if err != nil {
		t.Fatalf("tools/call elicit: %v", err)
	}
	if elicit {
		if res.IsError || !strings.Contains(textOf(t, res), `"accept"`) {
			t.Errorf("elicit: isError=%v text=%q", res.IsError, textOf(t, res))
		}
	} else if !res.IsError || !strings.Contains(textOf(t, res), "cannot receive requests") {
		t.Errorf("elicit without the capability: isError=%v text=%q", res.IsError, textOf(t, res))
	}
	// test.ask needs input either way: a server-to-client elicitation in the
	// session-based era, an input_required result the SDK resolves through its
	// ElicitationHandler and retries in 2026-07-28.
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: mcpservertest.ToolAsk})
	if err != nil {
		t.Fatalf("tools/call ask: %v", err)
	}
	if wantAnswer := elicit || (modern && elicitHandler); wantAnswer {
		if res.IsError || !strings.Contains(textOf(t, res), `"accept"`) {
			t.Errorf("ask: isError=%v text=%q", res.IsError, textOf(t, res))
		}
	} else if !res.IsError && !strings.Contains(textOf(t, res), "decline") {
		t.Errorf("ask without a way to answer: isError=%v text=%q", res.IsError, textOf(t, res))
	}
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: mcpservertest.ToolBoom}); err == nil || !strings.Contains(err.Error(), "internal error") || strings.Contains(err.Error(), "secret") {
		t.Errorf("boom: %v", err)
	}
}

// TestSDKClientHTTP connects the official Go SDK client to a bridge over
// Streamable HTTP (with a bearer token), lists and calls tools, answers an
// elicitation on the POST's SSE stream, and ends the session with DELETE.
func TestSDKClientHTTP(t *testing.T) {
	for _, era := range eras {
		for _, elicit := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/elicit=%v", era.name, elicit), func(t *testing.T) {
				turn := mcpservertest.NewTurn()
				b, err := mcpserver.NewBridge(turn, mcpserver.BridgeOptions{
					ServerInfo:  mcpspec.Implementation{Name: "toolgate", Version: "test"},
					Authorize:   mcpserver.StaticToken("tok-123"),
					NoStateless: !era.stateless,
				})
				if err != nil {
					t.Fatal(err)
				}
				defer b.Close()
				tr := &mcp.StreamableClientTransport{
					Endpoint:   b.URL(),
					HTTPClient: &http.Client{Transport: bearerTransport{"tok-123", http.DefaultTransport}},
					MaxRetries: -1,
				}
				cs, err := sdkClient(elicit).Connect(context.Background(), tr, era.opts)
				if err != nil {
					t.Fatalf("connect: %v", err)
				}
				exerciseSDK(t, cs, era.version, elicit)
				if era.version == mcpspec.ModernVersion {
					if cs.ID() != "" {
						t.Errorf("a 2026-07-28 client got session %q", cs.ID())
					}
					cs.Close()
					return
				}
				if cs.ID() != b.SessionID() {
					t.Errorf("client session %q, bridge session %q", cs.ID(), b.SessionID())
				}
				if err := cs.Close(); err != nil {
					t.Errorf("close: %v", err)
				}
				// The SDK's DELETE ended its session, not the bridge or its turn.
				if rec := post(b, `{"jsonrpc":"2.0","id":9,"method":"ping"}`, "Mcp-Session-Id", b.SessionID(), "Authorization", "Bearer tok-123"); rec.Code != http.StatusNotFound {
					t.Errorf("the deleted session answers %d %s", rec.Code, rec.Body)
				}
				if b.Sessions() != 0 || turn.Closed() != 0 {
					t.Errorf("after DELETE: %d sessions, turn closed %d times", b.Sessions(), turn.Closed())
				}
				if err := b.Close(); err != nil || turn.Closed() != 1 {
					t.Errorf("Close: %v; turn closed %d times", err, turn.Closed())
				}
			})
		}
	}
}

// TestSDKClientHandler: the SDK against the multi-session handler, in both eras.
func TestSDKClientHandler(t *testing.T) {
	for _, era := range eras {
		t.Run(era.name, func(t *testing.T) {
			var tc turnCounter
			h := mcpserver.NewHandler(mcpserver.HandlerOptions{
				ServerInfo:  mcpspec.Implementation{Name: "toolgate", Version: "test"},
				OpenTurn:    tc.open,
				NoStateless: !era.stateless,
			})
			defer h.Close()
			srv := httptest.NewServer(h)
			defer srv.Close()
			cs, err := sdkClient(true).Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp", MaxRetries: -1}, era.opts)
			if err != nil {
				t.Fatalf("connect: %v", err)
			}
			exerciseSDK(t, cs, era.version, true)
			cs.Close()
			// Once the server has finished every request (httptest's Close
			// waits), the session-based client's DELETE has closed its turn and
			// each stateless request has closed its own.
			srv.Close()
			if open, closed := tc.closed(); open != 0 || closed < 1 {
				t.Errorf("turns open %d, closed %d", open, closed)
			}
		})
	}
}

// TestSDKClientHTTPUnauthorized: without the token the SDK cannot connect.
func TestSDKClientHTTPUnauthorized(t *testing.T) {
	b, err := mcpserver.NewBridge(mcpservertest.NewTurn(), mcpserver.BridgeOptions{Authorize: mcpserver.StaticToken("tok-123")})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	tr := &mcp.StreamableClientTransport{Endpoint: b.URL(), MaxRetries: -1}
	if cs, err := sdkClient(false).Connect(context.Background(), tr, nil); err == nil {
		cs.Close()
		t.Fatal("connected without a token")
	}
}

// TestSDKClientStdio connects the Go SDK client to ServeStdio over pipes.
func TestSDKClientStdio(t *testing.T) {
	for _, era := range eras {
		for _, elicit := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/elicit=%v", era.name, elicit), func(t *testing.T) {
				c2sR, c2sW := io.Pipe()
				s2cR, s2cW := io.Pipe()
				turn := mcpservertest.NewTurn()
				done := make(chan error, 1)
				go func() {
					done <- mcpserver.ServeStdio(context.Background(), c2sR, s2cW, turn, mcpserver.StdioOptions{
						ServerInfo:  mcpspec.Implementation{Name: "toolgate", Version: "test"},
						NoStateless: !era.stateless,
					})
					s2cW.Close()
				}()
				cs, err := sdkClient(elicit).Connect(context.Background(), &mcp.IOTransport{Reader: s2cR, Writer: c2sW}, era.opts)
				if err != nil {
					t.Fatalf("connect: %v", err)
				}
				exerciseSDK(t, cs, era.version, elicit)
				cs.Close()
				if err := <-done; err != nil {
					t.Errorf("ServeStdio: %v", err)
				}
			})
		}
	}
}

// TestSDKRawResultKeepsStructured checks structuredContent survives the SDK.
func TestSDKRawResultKeepsStructured(t *testing.T) {
	b, err := mcpserver.NewBridge(mcpservertest.NewTurn(), mcpserver.BridgeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	cs, err := sdkClient(false).Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: b.URL(), MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: mcpservertest.ToolEcho, Arguments: map[string]any{"k": []int{1, 2}}})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(res.StructuredContent)
	if string(got) != `{"k":[1,2]}` {
		t.Errorf("structuredContent = %s", got)
	}
}
