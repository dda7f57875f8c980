package daemon_test

import (
	"context"
	"database/sql"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/app"
	"github.com/toolgate/toolgate/internal/app/daemon"
)

func openApp(t *testing.T) *app.App {
	t.Helper()
	a, err := app.Open(context.Background(), app.Options{DataDir: filepath.Join(t.TempDir(), "data")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return a
}

func get(t *testing.T, url, token string) (int, string) { return do(t, "GET", url, token, "") }

// do sends one request (a JSON body when body is set) and returns status and body.
func do(t *testing.T, method, url, token, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// One listener carries every route; the owner token opens /v1, /healthz needs none,
// and Shutdown stops it.
func TestDaemonRoutes(t *testing.T) {
	a := openApp(t)
	d, err := daemon.Start(a, daemon.Options{Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	if !d.Loopback() || !d.CreatedOwnerToken() || !strings.HasPrefix(d.URL(), "http://127.0.0.1:") {
		t.Errorf("loopback %v, created %v, url %s", d.Loopback(), d.CreatedOwnerToken(), d.URL())
	}
	owner, created, err := a.OwnerToken()
	if err != nil || created {
		t.Fatalf("owner token: created again %v, %v", created, err)
	}
	if status, body := get(t, d.URL()+"/healthz", ""); status != 200 || body != "{\"status\":\"ok\"}\n" {
		t.Errorf("healthz: %d %q", status, body)
	}
	if status, _ := get(t, d.URL()+"/v1/tools", ""); status != 401 {
		t.Errorf("/v1/tools without a token: %d", status)
	}
	if status, body := get(t, d.URL()+"/v1/tools", owner); status != 200 || !strings.Contains(body, "toolgate.escalate") {
		t.Errorf("/v1/tools: %d %s", status, body)
	}
	if status, _ := get(t, d.URL()+"/mcp", owner); status != 405 {
		t.Errorf("GET /mcp: %d", status)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := d.Wait(ctx); err != nil {
		t.Errorf("Wait after its context ended: %v", err)
	}
	if n, err := d.Shutdown(context.Background(), time.Second); n != 0 || err != nil {
		t.Errorf("Shutdown: %d %v", n, err)
	}
	if _, err := http.Get(d.URL() + "/healthz"); err == nil {
		t.Error("still serving after Shutdown")
	}
}

// A listen address that names a host, or none at all, is refused before anything
// listens.
func TestDaemonRefusesBadListen(t *testing.T) {
	a := openApp(t)
	for _, bad := range []string{"example.com:7077", "nonsense", "127.0.0.1:99999"} {
		if d, err := daemon.Start(a, daemon.Options{Listen: bad}); err == nil || !strings.Contains(err.Error(), "--listen") {
			t.Errorf("Start(%q) = %v, %v", bad, d, err)
		}
	}
}

// A turn that cannot be opened (here a stored grant the policy cannot compile, which
// fails closed) is answered alike on every surface: 503 catalog_unavailable, the cause
// in the log only.
func TestDaemonCatalogUnavailableEverywhere(t *testing.T) {
	a := openApp(t)
	d, err := daemon.Start(a, daemon.Options{Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Shutdown(context.Background(), time.Second)
	owner, _, _ := a.OwnerToken()
	db, err := sql.Open("sqlite", a.Store().Path())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`INSERT INTO grants (id, principal, tool, action, resource, effect, note, created_at)
		VALUES ('g_secret', 'default', 'local.echo', '*', 'path:a/../../b/', 'deny', '', '2026-01-01T00:00:00.000000Z')`); err != nil {
		t.Fatal(err)
	}
	if status, body := get(t, d.URL()+"/v1/tools", owner); status != 503 || !strings.Contains(body, `"error":"catalog_unavailable"`) || strings.Contains(body, "g_secret") {
		t.Errorf("GET /v1/tools: %d %s", status, body)
	}
	req, _ := http.NewRequest("POST", d.URL()+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}`))
	req.Header.Set("Authorization", "Bearer "+owner)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 503 || string(b) != `{"error":"catalog_unavailable"}` || resp.Header.Get("Mcp-Session-Id") != "" {
		t.Errorf("POST /mcp initialize: %d %s", resp.StatusCode, b)
	}
}
