package app_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/host"
	"github.com/toolgate/toolgate/internal/mgmt"
	"github.com/toolgate/toolgate/internal/upstream/upstreamtest"
)

// TestRemoteServer: an HTTP server installed with a secret header is reached through
// the guarded transport with the header opened at the dial; when it starts refusing
// our credentials (401) the server parks in auth_required and is not tried again until
// a person restarts it (no retry storm).
func TestRemoteServer(t *testing.T) {
	srv := upstreamtest.NewHTTPServer(t, upstreamtest.HTTPServerOptions{})
	a, m, _ := managed(t)
	ctx := context.Background()
	secret := "Bearer tgcanary-" + upstreamtest.Marker(t)
	doc := fmt.Sprintf(`{"mcpServers":{"remote":{"type":"http","url":%q,"headers":{"Authorization":%q}}}}`, srv.URL, secret)
	res, err := m.Install(ctx, owner, mgmt.InstallParams{ConfigJSON: doc})
	if err != nil || res.Status != mgmt.InstallOK {
		t.Fatalf("install: %+v %v", res, err)
	}
	if b, _ := json.Marshal(res); strings.Contains(string(b), secret) {
		t.Fatalf("the header's value is in the answer: %s", b)
	}
	if _, err := a.Upstreams().Call(ctx, "remote", "tools/list", json.RawMessage(`{}`), host.CallOptions{}); err != nil {
		t.Fatalf("call: %v", err)
	}
	reqs := srv.Requests()
	if len(reqs) == 0 || reqs[0].Header.Get("Authorization") != secret {
		t.Fatalf("the server got Authorization %q, want the installed secret", reqs[0].Header.Get("Authorization"))
	}

	srv.Refuse(401, `Bearer realm="x"`)
	if _, err := m.Restart(ctx, owner, mgmt.RestartParams{ServerRef: mgmt.ServerRef{Name: "remote"}}); err != nil {
		t.Fatal(err)
	}
	waitState(t, a, "remote", host.StateAuthRequired)
	n := len(srv.Requests())
	_, err = a.Upstreams().Call(ctx, "remote", "tools/list", json.RawMessage(`{}`), host.CallOptions{})
	if !errors.Is(err, host.ErrAuthRequired) {
		t.Fatalf("call while auth_required: %v", err)
	}
	time.Sleep(300 * time.Millisecond) // several backoff periods of quickHost
	if got := len(srv.Requests()); got != n {
		t.Fatalf("%d requests reached the server while it refused our credentials", got-n)
	}
	det, err := m.Details(ctx, owner, mgmt.DetailsParams{ServerRef: mgmt.ServerRef{Name: "remote"}})
	if err != nil || det.Health.State != "auth_required" || det.Health.StatusReason != "auth_required" {
		t.Fatalf("details: %+v %v", det.Health, err)
	}
	if b, _ := json.Marshal(det); strings.Contains(string(b), secret) {
		t.Fatalf("the header's value is in details: %s", b)
	}
}

// TestRemoteServerReach: the guard refuses an upstream URL it must not reach (the
// cloud metadata address) before any connection, naming the URL without
// its secret query value.
func TestRemoteServerReach(t *testing.T) {
	a, m, _ := managed(t)
	ctx := context.Background()
	doc := `{"mcpServers":{"far":{"url":"https://169.254.169.254/mcp?api_key=tgsecretvalue"}}}`
	if res, err := m.Install(ctx, owner, mgmt.InstallParams{ConfigJSON: doc}); err != nil || res.Status != mgmt.InstallOK {
		t.Fatalf("install: %+v %v", res, err)
	}
	_, err := a.Upstreams().Call(ctx, "far", "tools/list", json.RawMessage(`{}`), host.CallOptions{})
	if err == nil || strings.Contains(err.Error(), "tgsecretvalue") {
		t.Fatalf("call of a refused URL: %v", err)
	}
	st, _, _ := a.Upstreams().Status(ctx, "far")
	if strings.Contains(st.LastError, "tgsecretvalue") || !strings.Contains(st.LastError, "netguard") {
		t.Fatalf("last error %q", st.LastError)
	}
}
