package mgmt_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/mgmt"
	"github.com/toolgate/toolgate/internal/mgmt/mgmttest"
)

func clientFor(t *testing.T, m mgmt.Manager, token string) (*mgmt.Client, *httptest.Server) {
	t.Helper()
	stack, _ := serveStack(t, m, mgmt.Options{})
	srv := httptest.NewServer(stack)
	t.Cleanup(srv.Close)
	return mgmt.NewClient(srv.URL, token, nil), srv
}

// Every method through the client returns what the Manager returns in-process.
func TestClientMatchesInProcess(t *testing.T) {
	ctx := context.Background()
	who := mgmt.Caller{Principal: "default", Owner: true}
	remote, _ := clientFor(t, mgmttest.NewSeeded(), ownerToken)
	local := mgmt.Checked(mgmttest.NewSeeded())
	yes := true
	ref := mgmt.ServerRef{Name: "filesystem"}
	steps := []func(m mgmt.Manager) (any, error){
		func(m mgmt.Manager) (any, error) { return m.List(ctx, who, mgmt.ListParams{}) },
		func(m mgmt.Manager) (any, error) { return m.Details(ctx, who, mgmt.DetailsParams{ServerRef: ref}) },
		func(m mgmt.Manager) (any, error) {
			return m.SetPolicy(ctx, who, mgmt.PolicySetParams{ServerRef: ref, AllowImplicitInvocation: &yes})
		},
		func(m mgmt.Manager) (any, error) { return m.Restart(ctx, who, mgmt.RestartParams{ServerRef: ref}) },
		func(m mgmt.Manager) (any, error) {
			return m.Install(ctx, who, mgmt.InstallParams{ConfigJSON: `{"mcpServers":{"m":{"command":"npx"},"b":{}}}`, Enabled: &yes})
		},
		func(m mgmt.Manager) (any, error) { return m.Uninstall(ctx, who, mgmt.UninstallParams{ServerRef: ref}) },
		func(m mgmt.Manager) (any, error) { return m.List(ctx, who, mgmt.ListParams{}) },
	}
	for i, step := range steps {
		got, err := step(remote)
		if err != nil {
			t.Fatalf("step %d through the client: %v", i, err)
		}
		want, err := step(local)
		if err != nil {
			t.Fatalf("step %d in-process: %v", i, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("step %d:\nclient     %+v\nin-process %+v", i, got, want)
		}
	}
}

func TestClientErrors(t *testing.T) {
	ctx := context.Background()
	c, srv := clientFor(t, mgmttest.NewSeeded(), ownerToken)
	_, err := c.Details(ctx, mgmt.Caller{}, mgmt.DetailsParams{ServerRef: mgmt.ServerRef{Name: "nope"}})
	var e *mgmt.Error
	if !errors.As(err, &e) || e.Code != mgmt.CodeUnknownServer || e.Field != "name" {
		t.Fatalf("unknown server: %#v", err)
	}
	_, err = c.List(ctx, mgmt.Caller{}, mgmt.ListParams{WorkspaceID: "ws_1"})
	if !errors.As(err, &e) || e.Code != mgmt.CodeValidation || e.Field != "workspace_id" {
		t.Fatalf("bad workspace id: %#v", err)
	}
	for token, code := range map[string]string{"bad": mgmt.CodeUnauthorized, readerToken: mgmt.CodeForbidden} {
		_, err := mgmt.NewClient(srv.URL, token, nil).List(ctx, mgmt.Caller{}, mgmt.ListParams{})
		if !errors.As(err, &e) || e.Code != code {
			t.Fatalf("token %q: %#v", token, err)
		}
	}

	// serve's guard answers with its own body, before the protocol.
	guard := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		_, _ = w.Write([]byte(`{"error":"forbidden_host"}`))
	}))
	defer guard.Close()
	_, err = mgmt.NewClient(guard.URL, ownerToken, nil).List(ctx, mgmt.Caller{}, mgmt.ListParams{})
	if !errors.As(err, &e) || e.Code != "forbidden_host" {
		t.Fatalf("guard refusal: %#v", err)
	}

	// An answer that is not strictly one JSON-RPC response is refused, not misread.
	for _, body := range []string{`<html>`, `{"jsonrpc":"2.0","id":1,"result":{"servers":[]},"result":{}}`, `{"jsonrpc":"2.0","id":99,"result":{}}`} {
		odd := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(body)) }))
		_, err = mgmt.NewClient(odd.URL, ownerToken, nil).List(ctx, mgmt.Caller{}, mgmt.ListParams{})
		odd.Close()
		if err == nil || errors.As(err, &e) {
			t.Fatalf("answer %s: %#v", body, err)
		}
	}

	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close()
	_, err = mgmt.NewClient(gone.URL, ownerToken, nil).List(ctx, mgmt.Caller{}, mgmt.ListParams{})
	if err == nil || !strings.Contains(err.Error(), "reaching the daemon at "+gone.URL+mgmt.Path) {
		t.Fatalf("unreachable daemon: %v", err)
	}
}

// Subscribe delivers what the Manager publishes, typed, until stop.
func TestClientSubscribe(t *testing.T) {
	fake := mgmttest.NewSeeded()
	c, srv := clientFor(t, fake, ownerToken)
	got := make(chan mgmt.Notification, 16)
	stop, err := c.Subscribe(func(n mgmt.Notification) { got <- n })
	if err != nil {
		t.Fatal(err)
	}
	// The socket is registered once the upgrade is answered, so a change made now is
	// delivered.
	no := false
	if _, err := c.SetPolicy(context.Background(), mgmt.Caller{}, mgmt.PolicySetParams{ServerRef: mgmt.ServerRef{Name: "filesystem"}, Enabled: &no}); err != nil {
		t.Fatal(err)
	}
	first, second := <-got, <-got
	if ch, ok := first.(*mgmt.Changed); !ok || ch.Change != mgmt.ChangePolicy || ch.SnapshotVersion != 8 || ch.Name != "filesystem" {
		t.Fatalf("first: %#v", first)
	}
	if sc, ok := second.(*mgmt.StatusChanged); !ok || sc.State != "disabled" || sc.PreviousState != "ready" || sc.SnapshotVersion != 9 {
		t.Fatalf("second: %#v", second)
	}
	fake.Publish(&mgmt.CatalogChanged{SnapshotVersion: 10, CatalogVersion: 4, ToolsCount: 5})
	if cc, ok := (<-got).(*mgmt.CatalogChanged); !ok || cc.CatalogVersion != 4 || cc.ToolsCount != 5 {
		t.Fatalf("catalog: %#v", cc)
	}
	stop()
	stop()
	if _, err := mgmt.NewClient(srv.URL, "bad", nil).Subscribe(func(mgmt.Notification) {}); err == nil {
		t.Fatal("a bad token subscribed")
	}
}
