package app_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/toolgate/toolgate/internal/app"
	"github.com/toolgate/toolgate/internal/mcpserver"
	"github.com/toolgate/toolgate/internal/mcpspec"
	"github.com/toolgate/toolgate/internal/policy"
	"github.com/toolgate/toolgate/internal/store"
)

// changes records what a watch was told.
type changes struct {
	mu  sync.Mutex
	got []mcpspec.ListKind
}

func (c *changes) add(k mcpspec.ListKind) {
	c.mu.Lock()
	c.got = append(c.got, k)
	c.mu.Unlock()
}

// take returns what was told since the last take.
func (c *changes) take() []mcpspec.ListKind {
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.got
	c.got = nil
	return g
}

func watch(t *testing.T, tr app.Turn, kinds mcpspec.ListKind) *changes {
	t.Helper()
	lw, ok := tr.(mcpserver.ListWatcher)
	if !ok {
		t.Fatal("an app turn does not implement mcpserver.ListWatcher")
	}
	c := &changes{}
	stop := lw.WatchLists(kinds, c.add)
	t.Cleanup(stop)
	return c
}

// TestListChangedOnlyWhereVisible: a session watching its tools is told when its
// principal's catalogue changes — a grant revoked or added back, a namespace
// switched off, made by another process through its own store handle as `toolgate
// grant` does — never for a change another principal's catalogue alone sees, and a
// burst of 100 changes is one notification. A stopped watch is told nothing.
func TestListChangedOnlyWhereVisible(t *testing.T) {
	ctx := context.Background()
	a, dir, g := openWithAliceGrant(t)
	tr, err := a.OpenTurn(ctx, app.TurnRequest{Principal: "alice", Transport: "http"})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	c := watch(t, tr, mcpspec.ToolsList|mcpspec.ResourcesList|mcpspec.PromptsList)
	other, err := store.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	expect := func(what string, want ...mcpspec.ListKind) {
		t.Helper()
		app.ListPass(a)
		if got := c.take(); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: told %v, want %v", what, got, want)
		}
	}
	expect("nothing changed")
	if _, err := other.AddGrant(ctx, policy.Grant{Principal: "bob", Tool: "local.*", Action: "*", Effect: policy.Allow}); err != nil {
		t.Fatal(err)
	}
	expect("another principal's grant")
	if err := other.RemoveGrant(ctx, g.ID); err != nil {
		t.Fatal(err)
	}
	expect("its grant revoked", mcpspec.ToolsList)
	for i := range 100 {
		_, err := other.AddGrant(ctx, policy.Grant{Principal: "alice", Tool: "local.echo", Action: "*", Effect: policy.Allow, Note: fmt.Sprint(i)})
		if err != nil {
			t.Fatal(err)
		}
	}
	expect("a burst of 100 grants", mcpspec.ToolsList)
	if err := other.SetNamespaceEnabled(ctx, "local", false); err != nil {
		t.Fatal(err)
	}
	expect("its namespace switched off", mcpspec.ToolsList)
	if err := other.SetNamespaceEnabled(ctx, "local", true); err != nil {
		t.Fatal(err)
	}
	expect("switched on again", mcpspec.ToolsList)
}

// TestListChangedResources: revoking the grant that covers an upstream's resources
// changes a session's resources list, not its prompts, and granting it back changes
// it again. A grant added after the session opened never widens what its turn lists
// (the turn's own policy holds too), so it is told nothing: a new session sees it.
func TestListChangedResources(t *testing.T) {
	w := awkwardWorld(t)
	w.grant(t, "fx.prompts")
	g, err := w.a.Store().AddGrant(context.Background(), policy.Grant{Principal: app.DefaultPrincipal, Tool: "fx.resources", Action: "*", Effect: policy.Allow})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := w.a.OpenTurn(context.Background(), app.TurnRequest{Transport: "http"})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	c := watch(t, tr, mcpspec.ResourcesList|mcpspec.PromptsList)
	expect := func(what string, want ...mcpspec.ListKind) {
		t.Helper()
		app.ListPass(w.a)
		if got := c.take(); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: told %v, want %v", what, got, want)
		}
	}
	expect("nothing changed")
	if err := w.a.Store().RemoveGrant(context.Background(), g.ID); err != nil {
		t.Fatal(err)
	}
	expect("resources revoked", mcpspec.ResourcesList)
	if _, err := w.a.Store().AddGrant(context.Background(), policy.Grant{Principal: app.DefaultPrincipal, Tool: "fx.resources", Action: "*", Effect: policy.Allow}); err != nil {
		t.Fatal(err)
	}
	expect("resources granted back", mcpspec.ResourcesList)
	if _, err := w.a.Store().AddGrant(context.Background(), policy.Grant{Principal: app.DefaultPrincipal, Tool: "fx.*", Action: "read", Effect: policy.Allow}); err != nil {
		t.Fatal(err)
	}
	expect("a wider grant added after the session opened")
}

// TestListChangedOverTheGetStream: toolgate serve's handler over an App. A session
// that opened its GET stream is told tools/list_changed when its grant is revoked
// from another process (the watcher's own ticker brings the policy up to date), and
// its next request is 404, so the client initializes again and lists anew.
func TestListChangedOverTheGetStream(t *testing.T) {
	ctx := context.Background()
	a, dir, g := openWithAliceGrant(t)
	h := mcpserver.NewHandler(mcpserver.HandlerOptions{
		Authenticate: func(string, bool) (string, bool) { return "alice", true },
		OpenTurn: func(ctx context.Context, principal string) (mcpserver.Turn, error) {
			return a.OpenTurn(ctx, app.TurnRequest{Principal: principal, Transport: "http"})
		}})
	defer h.Close()
	srv := httptest.NewServer(h)
	defer srv.Close()
	url := srv.URL + "/mcp"
	post := func(sid, body string) (*http.Response, string) {
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if sid != "" {
			req.Header.Set("Mcp-Session-Id", sid)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res, string(b)
	}
	res, init := post("", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	if !strings.Contains(init, `"tools":{"listChanged":true}`) {
		t.Fatalf("initialize: %s", init)
	}
	sid := res.Header.Get("Mcp-Session-Id")
	br, closeStream := openGetStream(t, url, sid)
	defer closeStream()
	other, err := store.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := other.RemoveGrant(ctx, g.ID); err != nil {
		t.Fatal(err)
	}
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("stream ended before the notification: %v", err)
		}
		if d, ok := strings.CutPrefix(line, "data: "); ok {
			if strings.TrimSpace(d) != `{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}` {
				t.Fatalf("event %s", d)
			}
			break
		}
	}
	if res, body := post(sid, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`); res.StatusCode != http.StatusNotFound {
		t.Errorf("the notified session's next request: %d %s", res.StatusCode, body)
	}
}

// openGetStream opens session sid's GET stream on the handler at url; the caller
// closes it before the server (whose Close waits for open requests).
func openGetStream(t *testing.T, url, sid string) (*bufio.Reader, func() error) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	stream, err := http.DefaultClient.Do(req)
	if err != nil || stream.StatusCode != http.StatusOK {
		t.Fatalf("GET: %v %v", stream, err)
	}
	return bufio.NewReader(stream.Body), stream.Body.Close
}
