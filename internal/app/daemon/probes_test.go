package daemon_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/app/daemon"
)

// waitReady polls /readyz until it answers want (a result is reused for a second, so a
// change shows within about that); the bound only keeps a broken probe from hanging.
func waitReady(t *testing.T, url string, want int, wantBody string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		status, body := get(t, url+"/readyz", "")
		if status == want && body == wantBody {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz: %d %q, want %d %q", status, body, want, wantBody)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// /readyz needs no token and says ready while the store answers at this binary's
// schema version; a database migrated by a newer binary, rolled back, or gone makes it
// 503 with a reason, while /healthz (liveness) stays 200.
func TestDaemonReadiness(t *testing.T) {
	a := openApp(t)
	d, err := daemon.Start(a, daemon.Options{Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Shutdown(context.Background(), time.Second)
	waitReady(t, d.URL(), 200, "{\"status\":\"ready\"}\n")
	v, err := a.Store().SchemaVersion(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", a.Store().Path())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, 'later', 'now')`, v+1); err != nil {
		t.Fatal(err)
	}
	waitReady(t, d.URL(), 503, "{\"status\":\"unavailable\",\"reason\":\"schema_too_new\"}\n")
	if _, err := db.Exec(`DELETE FROM schema_migrations WHERE version >= ?`, v); err != nil {
		t.Fatal(err)
	}
	waitReady(t, d.URL(), 503, "{\"status\":\"unavailable\",\"reason\":\"schema_outdated\"}\n")
	if _, err := db.Exec(`INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, 'back', 'now')`, v); err != nil {
		t.Fatal(err)
	}
	waitReady(t, d.URL(), 200, "{\"status\":\"ready\"}\n")
	a.Store().Close()
	waitReady(t, d.URL(), 503, "{\"status\":\"unavailable\",\"reason\":\"store_unreachable\"}\n")
	if status, _ := get(t, d.URL()+"/healthz", ""); status != 200 {
		t.Errorf("/healthz while not ready: %d", status)
	}
	if status, _ := get(t, d.URL()+"/readyz?x=1", ""); status != 503 {
		t.Errorf("/readyz with a query: %d", status)
	}
}
