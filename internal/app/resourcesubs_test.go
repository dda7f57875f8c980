package app_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/app"
	"github.com/toolgate/toolgate/internal/host"
	"github.com/toolgate/toolgate/internal/mcpserver"
	"github.com/toolgate/toolgate/internal/policy"
	"github.com/toolgate/toolgate/internal/upstream/upstreamtest"
	"github.com/toolgate/toolgate/internal/upstream/upstreamtest/fixturedata"
)

// updatesWorld hosts the stdio fixture as "fx", declaring resource subscriptions and
// recording every line it reads in the returned file, with the host handing the
// upstream's notifications to the App as newHost does in production.
func updatesWorld(t *testing.T) (*upstreamWorld, string) {
	t.Helper()
	rec := filepath.Join(t.TempDir(), "in.jsonl")
	caps := strings.Replace(fixturedata.Capabilities, `"resources":{"listChanged":true}`, `"resources":{"listChanged":true,"subscribe":true}`, 1)
	spec, marker := upstreamtest.Spec(t, "-caps", caps, "-record-in", rec)
	spec.Name = "fx"
	w := &upstreamWorld{markers: map[string]string{"fx": marker}}
	var ap atomic.Pointer[app.App]
	newHost := func(ctx context.Context, obs host.Observer) (*host.Host, error) {
		return host.New(host.Options{Dialer: upstreamtest.Dialer{}, Observer: obs, IdleTimeout: -1,
			Health:  host.HealthPolicy{Interval: -1},
			Servers: []host.Definition{{Name: "fx", Fingerprint: "sha256:fx", Config: spec}},
			Notifications: func(server, key, method string, params json.RawMessage) {
				if a := ap.Load(); a != nil {
					a.UpstreamNotification(server, key, method, params)
				}
			}})
	}
	w.open(t, newHost, nil)
	ap.Store(w.a)
	w.sync(t, "fx", true, true)
	return w, rec
}

// told records the URIs a session was told updated.
type told struct {
	mu  sync.Mutex
	n   map[string]int
	got chan string
}

func (c *told) add(uri string) {
	c.mu.Lock()
	c.n[uri]++
	c.mu.Unlock()
	select {
	case c.got <- uri:
	default:
	}
}

func (c *told) count(uri string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[uri]
}

// waitFor waits until the session is told uri.
func (c *told) waitFor(t *testing.T, who, uri string) {
	t.Helper()
	c.waitCount(t, who, uri, 1)
}

// waitCount waits until the session was told uri n times.
func (c *told) waitCount(t *testing.T, who, uri string, n int) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for c.count(uri) < n {
		select {
		case <-c.got:
		case <-deadline:
			t.Fatalf("%s was told %s updated %d times, want %d", who, uri, c.count(uri), n)
		}
	}
}

// subscriber opens principal's session and watches its resource updates.
func subscriber(t *testing.T, w *upstreamWorld, principal string) (app.Turn, *told) {
	t.Helper()
	tr, err := w.a.OpenTurn(context.Background(), app.TurnRequest{Principal: principal, Transport: "http"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	rw, ok := tr.(mcpserver.ResourceWatcher)
	if !ok {
		t.Fatal("an app turn does not implement mcpserver.ResourceWatcher")
	}
	c := &told{n: map[string]int{}, got: make(chan string, 1)}
	t.Cleanup(rw.WatchResources(c.add))
	return tr, c
}

func relay(t *testing.T, tr app.Turn, method, uri string) (string, error) {
	t.Helper()
	p, _ := json.Marshal(map[string]string{"uri": uri})
	res, err := tr.(mcpserver.Relay).Relay(context.Background(), method, p, false, nil)
	return string(res), err
}

// upstreamSaw counts the lines the fixture read that hold method for uri.
func upstreamSaw(t *testing.T, rec, method, uri string) int {
	t.Helper()
	b, err := os.ReadFile(rec)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	n := 0
	for l := range strings.Lines(string(b)) {
		if strings.Contains(l, `"method":"`+method+`"`) && strings.Contains(l, `"uri":"`+uri+`"`) {
			n++
		}
	}
	return n
}

// waitUpstreamSaw waits until the fixture read want such lines.
func waitUpstreamSaw(t *testing.T, rec, method, uri string, want int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for upstreamSaw(t, rec, method, uri) != want {
		if time.Now().After(deadline) {
			t.Fatalf("upstream read %d %s of %s, want %d", upstreamSaw(t, rec, method, uri), method, uri, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// sendUpdates makes the fixture send count notifications/resources/updated of uri.
func sendUpdates(t *testing.T, w *upstreamWorld, uri string, count int) {
	t.Helper()
	args, _ := json.Marshal(map[string]any{"method": "notifications/resources/updated", "count": count, "params": map[string]string{"uri": uri}})
	p := `{"name":"notify","arguments":` + string(args) + `}`
	if _, err := w.up.Call(context.Background(), "fx", "tools/call", json.RawMessage(p), host.CallOptions{}); err != nil {
		t.Fatal(err)
	}
}

func grantResources(t *testing.T, w *upstreamWorld, principal, resource string) policy.Grant {
	t.Helper()
	g, err := w.a.Store().AddGrant(context.Background(), policy.Grant{Principal: principal, Tool: "fx.resources", Action: "read", Resource: resource, Effect: policy.Allow})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestResourceUpdatesReachSubscribers: two sessions subscribing to one URI make one
// upstream subscribe; an update reaches both; one unsubscribing leaves the upstream
// subscribed; the other's session ending unsubscribes it.
func TestResourceUpdatesReachSubscribers(t *testing.T) {
	w, rec := updatesWorld(t)
	const uri = "fixture://readme"
	grantResources(t, w, "alice", "")
	grantResources(t, w, "bob", "")
	alice, at := subscriber(t, w, "alice")
	bob, bt := subscriber(t, w, "bob")
	for _, tr := range []app.Turn{alice, bob, alice} {
		if res, err := relay(t, tr, "resources/subscribe", uri); err != nil || res != "{}" {
			t.Fatalf("subscribe: %s %v", res, err)
		}
	}
	if n := upstreamSaw(t, rec, "resources/subscribe", uri); n != 1 {
		t.Errorf("three subscribes of two sessions made %d upstream subscribes, want 1", n)
	}
	sendUpdates(t, w, uri, 1)
	at.waitFor(t, "alice", uri)
	bt.waitFor(t, "bob", uri)

	if res, err := relay(t, alice, "resources/unsubscribe", uri); err != nil || res != "{}" {
		t.Fatalf("unsubscribe: %s %v", res, err)
	}
	if n := upstreamSaw(t, rec, "resources/unsubscribe", uri); n != 0 {
		t.Errorf("one of two subscribers unsubscribing unsubscribed upstream (%d)", n)
	}
	before := at.count(uri)
	bobBefore := bt.count(uri)
	sendUpdates(t, w, uri, 1)
	bt.waitCount(t, "bob", uri, bobBefore+1)
	if at.count(uri) != before {
		t.Errorf("alice was told after unsubscribing")
	}
	bob.Close()
	waitUpstreamSaw(t, rec, "resources/unsubscribe", uri, 1)
}

// TestResourceUpdatesFollowGrants: a session whose grant is revoked is told nothing
// more; one subscribing to a URI its grant does not cover is refused as for an
// unknown resource, the upstream is not asked, and it is told nothing. A flood of
// 10,000 updates of one URI is coalesced, and each session is told of it after the
// last.
func TestResourceUpdatesFollowGrants(t *testing.T) {
	w, rec := updatesWorld(t)
	const (
		flood    = "fixture://items/1"
		sentinel = "fixture://items/2"
		other    = "fixture://items/9"
	)
	grantResources(t, w, "alice", "")
	g := grantResources(t, w, "bob", "")
	grantResources(t, w, "carol", "mcp:fx/fixture://items/1")
	alice, at := subscriber(t, w, "alice")
	bob, bt := subscriber(t, w, "bob")
	carol, ct := subscriber(t, w, "carol")
	for _, tr := range []app.Turn{alice, bob, carol} {
		for _, u := range []string{flood, sentinel} {
			if _, err := relay(t, tr, "resources/subscribe", u); err != nil && !(tr == carol && u == sentinel) {
				t.Fatalf("subscribe %s: %v", u, err)
			}
		}
	}
	if _, err := relay(t, carol, "resources/subscribe", other); err == nil || !strings.Contains(err.Error(), "resource not found") {
		t.Fatalf("carol's subscribe beyond her grant: %v, want resource not found", err)
	}
	if n := upstreamSaw(t, rec, "resources/subscribe", other); n != 0 {
		t.Errorf("a refused subscribe reached the upstream (%d)", n)
	}

	sendUpdates(t, w, flood, 10000)
	sendUpdates(t, w, sentinel, 1)
	at.waitFor(t, "alice", sentinel)
	bt.waitFor(t, "bob", sentinel)
	ct.waitFor(t, "carol", flood)
	for who, c := range map[string]*told{"alice": at, "bob": bt} {
		if n := c.count(flood); n < 1 || n >= 10000 {
			t.Errorf("%s was told %d times of 10,000 updates, want coalesced (at least once)", who, n)
		} else {
			t.Logf("%s: 10,000 updates told %d times", who, n)
		}
	}
	if n := ct.count(sentinel); n != 0 {
		t.Errorf("carol was told %d updates of a resource her grant does not cover", n)
	}
	sendUpdates(t, w, other, 1)

	if err := w.a.Store().RemoveGrant(context.Background(), g.ID); err != nil {
		t.Fatal(err)
	}
	before, aliceBefore := bt.count(sentinel), at.count(sentinel)
	sendUpdates(t, w, sentinel, 1)
	at.waitCount(t, "alice", sentinel, aliceBefore+1)
	// One pass at a time: once alice is told of a later update, the pass that
	// decided bob's is over.
	floodBefore := at.count(flood)
	sendUpdates(t, w, flood, 1)
	at.waitCount(t, "alice", flood, floodBefore+1)
	if bt.count(sentinel) != before {
		t.Errorf("bob was told after his grant was revoked")
	}
	if ct.count(other) != 0 {
		t.Errorf("carol was told of %s, which she was refused", other)
	}
}

// TestResourceSubscriptionCap: a session's 257th subscription is refused with the
// documented error; the upstream is not asked.
func TestResourceSubscriptionCap(t *testing.T) {
	w, rec := updatesWorld(t)
	grantResources(t, w, "alice", "")
	alice, _ := subscriber(t, w, "alice")
	for i := range 256 {
		if _, err := relay(t, alice, "resources/subscribe", "fixture://items/"+itoa(i)); err != nil {
			t.Fatalf("subscription %d: %v", i, err)
		}
	}
	_, err := relay(t, alice, "resources/subscribe", "fixture://items/x")
	if err == nil || !strings.Contains(err.Error(), "too many subscriptions") {
		t.Fatalf("257th subscription: %v", err)
	}
	if n := upstreamSaw(t, rec, "resources/subscribe", "fixture://items/x"); n != 0 {
		t.Errorf("a refused subscription reached the upstream")
	}
	if _, err := relay(t, alice, "resources/subscribe", "fixture://items/3"); err != nil {
		t.Errorf("subscribing again to a held URI at the cap: %v", err)
	}
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

// TestResourceUpdatesOverTheGetStream: toolgate serve's handler over an App. A
// session that subscribed and opened its GET stream is told
// notifications/resources/updated there; its DELETE unsubscribes the upstream.
func TestResourceUpdatesOverTheGetStream(t *testing.T) {
	w, rec := updatesWorld(t)
	const uri = "fixture://readme"
	grantResources(t, w, "alice", "")
	h := mcpserver.NewHandler(mcpserver.HandlerOptions{
		Authenticate: func(string, bool) (string, bool) { return "alice", true },
		OpenTurn: func(ctx context.Context, principal string) (mcpserver.Turn, error) {
			return w.a.OpenTurn(ctx, app.TurnRequest{Principal: principal, Transport: "http"})
		}})
	defer h.Close()
	srv := httptest.NewServer(h)
	defer srv.Close()
	url := srv.URL + "/mcp"
	do := func(method, sid, body string) (*http.Response, string) {
		req, _ := http.NewRequest(method, url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if sid != "" {
			req.Header.Set("Mcp-Session-Id", sid)
			req.Header.Set("MCP-Protocol-Version", "2025-11-25")
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res, string(b)
	}
	res, init := do(http.MethodPost, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	if !strings.Contains(init, `"subscribe":true`) {
		t.Fatalf("initialize: %s", init)
	}
	sid := res.Header.Get("Mcp-Session-Id")
	do(http.MethodPost, sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	if _, body := do(http.MethodPost, sid, `{"jsonrpc":"2.0","id":2,"method":"resources/subscribe","params":{"uri":"`+uri+`"}}`); !strings.Contains(body, `"result":{}`) {
		t.Fatalf("subscribe: %s", body)
	}
	br, closeStream := openGetStream(t, url, sid)
	defer closeStream()
	// The stream is open once its first bytes came; an update sent before the
	// watch starts is not told (no backlog), so send until one is.
	lines := make(chan string)
	go func() {
		defer close(lines)
		for {
			l, err := br.ReadString('\n')
			if err != nil {
				return
			}
			lines <- l
		}
	}()
	deadline := time.After(10 * time.Second)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for got := false; !got; {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("stream ended before the update")
			}
			if d, ok := strings.CutPrefix(l, "data: "); ok {
				if strings.TrimSpace(d) != `{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"`+uri+`"}}` {
					t.Fatalf("event %s", d)
				}
				got = true
			}
		case <-tick.C:
			sendUpdates(t, w, uri, 1)
		case <-deadline:
			t.Fatal("no update on the GET stream")
		}
	}
	if res, _ := do(http.MethodDelete, sid, ""); res.StatusCode/100 != 2 {
		t.Fatalf("DELETE: %d", res.StatusCode)
	}
	waitUpstreamSaw(t, rec, "resources/unsubscribe", uri, 1)
}
