package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/host"
	"github.com/toolgate/toolgate/internal/mgmt"
	"github.com/toolgate/toolgate/internal/upstream/upstreamtest"
)

// A server's network member narrows its reach: denied, its loopback URL is refused
// before anything is sent, while the same server installed without it, and the other
// servers, are reached as before.
func TestServerNetworkPolicy(t *testing.T) {
	denied := upstreamtest.NewHTTPServer(t, upstreamtest.HTTPServerOptions{Session: true})
	open := upstreamtest.NewHTTPServer(t, upstreamtest.HTTPServerOptions{Session: true})
	a, m, _ := managed(t)
	ctx := context.Background()
	doc := fmt.Sprintf(`{"mcpServers":{
		"fenced":{"type":"http","url":%q,"network":{"loopback":"deny"}},
		"ranged":{"type":"http","url":%q,"network":{"deny":["127.0.0.0/8"]}},
		"plain":{"type":"http","url":%q}}}`, denied.URL, denied.URL, open.URL)
	if res, err := m.Install(ctx, owner, mgmt.InstallParams{ConfigJSON: doc}); err != nil || res.Status != mgmt.InstallOK {
		t.Fatalf("install: %+v %v", res, err)
	}
	for _, name := range []string{"fenced", "ranged"} {
		_, err := a.Upstreams().Call(ctx, name, "tools/list", json.RawMessage(`{}`), host.CallOptions{})
		if err == nil || !strings.Contains(err.Error(), "refused") {
			t.Fatalf("%s: %v, want the address refused", name, err)
		}
	}
	if n := len(denied.Requests()); n != 0 {
		t.Fatalf("the refused servers' address got %d requests", n)
	}
	if _, err := a.Upstreams().Call(ctx, "plain", "tools/list", json.RawMessage(`{}`), host.CallOptions{}); err != nil {
		t.Fatalf("the server without a network member: %v", err)
	}
}
