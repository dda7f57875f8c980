package daemon_test

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/app"
	"github.com/toolgate/toolgate/internal/app/daemon"
	"github.com/toolgate/toolgate/internal/kernel"
	"github.com/toolgate/toolgate/internal/policy"
	"github.com/toolgate/toolgate/internal/testenv"
)

// replicaSet is n toolgate serve daemons on one PostgreSQL database, each with its own
// data directory, behind a round-robin reverse proxy with no stickiness.
type replicaSet struct {
	apps    []*app.App
	daemons []*daemon.Daemon
	proxy   *testenv.RoundRobin
}

func echoTool() *kernel.Tool {
	return &kernel.Tool{ID: "local.echo", InputSchema: json.RawMessage(`{"type":"object"}`),
		Run: func(_ context.Context, c *kernel.Call) (*kernel.Output, error) {
			return &kernel.Output{Text: "echo"}, nil
		}}
}

func startReplicas(t testing.TB, n int) *replicaSet {
	t.Helper()
	dbURL := testenv.Postgres(t)
	rs := &replicaSet{}
	var bases []string
	for i := range n {
		a, err := app.Open(context.Background(), app.Options{DataDir: filepath.Join(t.TempDir(), "data"), DatabaseURL: dbURL,
			Tools: []*kernel.Tool{echoTool()}})
		if err != nil {
			t.Fatalf("replica %d: %v", i, err)
		}
		t.Cleanup(func() { a.Close() })
		d, err := daemon.Start(a, daemon.Options{Listen: "127.0.0.1:0"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Shutdown(context.Background(), time.Second) })
		bases = append(bases, d.URL())
		rs.apps = append(rs.apps, a)
		rs.daemons = append(rs.daemons, d)
	}
	rs.proxy = testenv.NewRoundRobin(t, "", bases...)
	return rs
}

type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

func connectSDK(t *testing.T, endpoint, token string) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "replica-test", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: endpoint,
		HTTPClient: &http.Client{Transport: bearer{token}}, MaxRetries: -1},
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	return cs
}

// rawPost sends one JSON-RPC body straight to a replica, naming sid.
func rawPost(t *testing.T, base, token, sid, body string) int {
	t.Helper()
	req, _ := http.NewRequest("POST", base+"/mcp", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// A legacy session opened through a round-robin proxy keeps working whichever replica
// each request reaches, with one catalogue and execution id; a grant revoked on one
// replica ends it and stops its principal on the others at once; a DELETE through the
// proxy ends it on every replica.
func TestSessionsValidOnAnyReplica(t *testing.T) {
	ctx := context.Background()
	rs := startReplicas(t, 2)
	g, err := rs.apps[0].Store().AddGrant(ctx, policy.Grant{Principal: "ann", Tool: "local.echo", Action: "*", Effect: policy.Allow})
	if err != nil {
		t.Fatal(err)
	}
	token, err := rs.apps[1].MintToken("ann", "s", 600)
	if err != nil {
		t.Fatal(err)
	}
	cs := connectSDK(t, rs.proxy.URL+"/mcp", token)
	sid := cs.ID()
	if !strings.HasPrefix(sid, "tg1.") {
		t.Fatalf("session id %q is not signed", sid)
	}
	var execIDs, hashes []string
	for i := range 6 {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "local.echo", Arguments: map[string]any{"i": i}})
		if err != nil || res.IsError {
			t.Fatalf("call %d through the proxy: %v %+v", i, err, res)
		}
		l, err := cs.ListTools(ctx, nil)
		if err != nil || len(l.Tools) != 1 {
			t.Fatalf("tools/list %d: %v %+v", i, err, l)
		}
		execIDs = append(execIDs, l.Meta["toolgate/executionId"].(string))
		hashes = append(hashes, l.Meta["toolgate/catalogHash"].(string))
	}
	for i := range execIDs {
		if execIDs[i] != execIDs[0] || hashes[i] != hashes[0] {
			t.Errorf("the turn differs between requests: %v %v", execIDs, hashes)
			break
		}
	}
	for i := range rs.proxy.Hits {
		if rs.proxy.Hits[i].Load() < 4 { // 1 initialize, 1 initialized notice, 12 calls and lists, spread
			t.Errorf("replica %d served %d requests: the proxy did not spread them", i, rs.proxy.Hits[i].Load())
		}
		if n := rs.daemons[i].Sessions(); n != 1 {
			t.Errorf("replica %d holds %d sessions, want 1", i, n)
		}
	}

	// Revoked on replica 0: replica 1 refuses the principal's next call at once, and
	// the session (opened under the grant) is stale on both.
	if err := rs.apps[0].Store().RemoveGrant(ctx, g.ID); err != nil {
		t.Fatal(err)
	}
	status, _, body := post(t, rs.daemons[1].URL()+"/v1/tools/invoke", token, `{"name":"local.echo","arguments":{}}`)
	if status != 200 || !strings.Contains(body, `"isError":true`) {
		t.Errorf("invoke on replica 1 after the revocation on replica 0: %d %s", status, body)
	}
	for i, d := range rs.daemons {
		if code := rawPost(t, d.URL(), token, sid, `{"jsonrpc":"2.0","id":9,"method":"tools/list"}`); code != 404 {
			t.Errorf("replica %d serves the session after its grant was revoked: %d", i, code)
		}
	}
	cs.Close()

	// A new session under a new grant; its DELETE (the client's Close) through the
	// proxy ends it on both replicas.
	if _, err := rs.apps[1].Store().AddGrant(ctx, policy.Grant{Principal: "ann", Tool: "local.echo", Action: "*", Effect: policy.Allow}); err != nil {
		t.Fatal(err)
	}
	cs = connectSDK(t, rs.proxy.URL+"/mcp", token)
	sid = cs.ID()
	for range 3 {
		if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "local.echo", Arguments: map[string]any{}}); err != nil || res.IsError {
			t.Fatalf("call on the new session: %v %+v", err, res)
		}
	}
	if err := cs.Close(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second) // the notification's delivery; bounded
	for i, d := range rs.daemons {
		for rawPost(t, d.URL(), token, sid, `{"jsonrpc":"2.0","id":9,"method":"ping"}`) != 404 {
			if time.Now().After(deadline) {
				t.Fatalf("replica %d still serves a deleted session", i)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}
