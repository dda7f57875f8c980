package store_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os/exec"
	"reflect"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/audit"

	"github.com/toolgate/toolgate/internal/store"
	"github.com/toolgate/toolgate/internal/store/storetest"
	"github.com/toolgate/toolgate/internal/testenv"
)

// openPG opens a store on a fresh database of the test PostgreSQL server.
func openPG(t testing.TB) *store.Store {
	t.Helper()
	return openPGAt(t, testenv.Postgres(t))
}

func openPGAt(t testing.TB, url string, opts ...store.Option) *store.Store {
	t.Helper()
	s, err := store.OpenPostgres(context.Background(), url, opts...)
	if err != nil {
		t.Fatalf("OpenPostgres: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestPostgres(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Store { return openPG(t) })
}

func TestPostgresTrust(t *testing.T) {
	storetest.RunTrust(t, func(t *testing.T) storetest.TrustStore { return openPG(t) })
}

// rawPG is a plain connection pool on url, outside the store (psql's view).
func rawPG(t testing.TB, url string) *sql.DB {
	t.Helper()
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// Replicas starting together on a fresh database migrate it once (under the
// migration advisory lock) and nobody fails.
func TestPostgresConcurrentOpen(t *testing.T) {
	url := testenv.Postgres(t)
	var cmds []*exec.Cmd
	var stderrs []*strings.Builder
	for i := range 4 {
		cmd := helperCmd(t, fmt.Sprintf("append %s opener-%d 1", url, i))
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds, stderrs = append(cmds, cmd), append(stderrs, &stderr)
	}
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Errorf("replica %d: %v\n%s", i, err, stderrs[i])
		}
	}
	s := openPGAt(t, url)
	evs, err := s.ListAudit(context.Background(), audit.Filter{})
	if err != nil || len(evs) != 4 {
		t.Fatalf("%d events, %v; want 4", len(evs), err)
	}
	if err := audit.Verify(evs); err != nil {
		t.Error(err)
	}
	var n int
	if err := rawPG(t, url).QueryRow(`SELECT COUNT(*) FROM schema_migrations`).Scan(&n); err != nil || n != schemaVersion {
		t.Errorf("schema_migrations has %d rows (%v), want %d", n, err, schemaVersion)
	}
}

// TestPostgresReplicasKeepOneChain appends from three replica processes and from two
// stores (two pools, two writers) in this one at once: the result is one unbroken
// chain holding every event, whichever replica wrote it, and every replica reads the
// same chain and the same keys.
func TestPostgresReplicasKeepOneChain(t *testing.T) {
	ctx := context.Background()
	url := testenv.Postgres(t)
	a, b := openPGAt(t, url), openPGAt(t, url)
	testMultiProcessChain(t, url, a, b)
	ka, err1 := a.Key(ctx, "token")
	kb, err2 := b.Key(ctx, "token")
	if err1 != nil || err2 != nil || string(ka) != string(kb) {
		t.Errorf("replicas hold different token keys (%v, %v)", err1, err2)
	}
}

// Audit strings PostgreSQL TEXT cannot hold are stored escaped, every other string as
// it is (readable in psql), and each reads back exactly.
func TestPostgresAuditStringsAsStored(t *testing.T) {
	ctx := context.Background()
	url := testenv.Postgres(t)
	s := openPGAt(t, url)
	for _, p := range []string{"alice", "nul\x00inside", "\xff\xfe", `\x41`} {
		if err := s.AppendAudit(ctx, &audit.Event{Principal: p, Tool: "files.read", Decision: audit.Allowed}); err != nil {
			t.Fatalf("AppendAudit(%q): %v", p, err)
		}
	}
	rows, err := rawPG(t, url).Query(`SELECT principal FROM audit_events ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var raw []string
	for rows.Next() {
		var p string
		if err := rows.Scan(&p); err != nil {
			t.Fatal(err)
		}
		raw = append(raw, p)
	}
	if want := []string{"alice", `\x6e756c00696e73696465`, `\xfffe`, `\x5c783431`}; !reflect.DeepEqual(raw, want) {
		t.Errorf("stored principals %q, want %q", raw, want)
	}
	for _, p := range []string{"alice", "nul\x00inside", "\xff\xfe", `\x41`} {
		evs, err := s.ListAudit(ctx, audit.Filter{Principal: p})
		if err != nil || len(evs) != 1 || evs[0].Principal != p {
			t.Errorf("filter by %q: %+v, %v", p, evs, err)
		}
	}
	if evs, err := s.ListAudit(ctx, audit.Filter{Principal: `\x616c696365`}); err != nil || len(evs) != 0 {
		t.Errorf("the escaped form of alice found %d events (%v): escaping must not alias", len(evs), err)
	}
}

// A hand edit of grants or namespaces with psql moves the version, as on SQLite.
func TestPostgresPolicyVersionMovesOnRawEdits(t *testing.T) {
	url := testenv.Postgres(t)
	testRawEditsMoveVersion(t, openPGAt(t, url), rawPG(t, url))
}

func TestPostgresNewerSchemaRefused(t *testing.T) {
	url := testenv.Postgres(t)
	s, err := store.OpenPostgres(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := rawPG(t, url).Exec(`INSERT INTO schema_migrations (version, name, applied_at) VALUES (9999, '9999_future.sql', 'x')`); err != nil {
		t.Fatal(err)
	}
	_, err = store.OpenPostgres(context.Background(), url)
	if !errors.Is(err, store.ErrSchemaTooNew) || !strings.Contains(err.Error(), "9999") {
		t.Fatalf("OpenPostgres of a newer schema = %v, want ErrSchemaTooNew naming 9999", err)
	}
}

// Bad URLs, a wrong password, an unreachable server and a database that cannot hold
// UTF-8 are refused with an error that never repeats the password.
func TestOpenPostgresRefuses(t *testing.T) {
	ctx := context.Background()
	good := testenv.Postgres(t)
	u, err := url.Parse(good)
	if err != nil {
		t.Fatal(err)
	}
	pw, _ := u.User.Password()
	wrongPW := *u
	wrongPW.User = url.UserPassword(u.User.Username(), "sekrit-wrong-password")
	closed := *u
	closed.Host = "127.0.0.1:1"
	wrongInQuery := *u
	wrongInQuery.User = url.User(u.User.Username())
	wrongInQuery.RawQuery = "sslmode=disable&password=sekrit-wrong-password"
	for name, raw := range map[string]string{
		"empty":          "",
		"sqlite path":    "/var/lib/toolgate/toolgate.db",
		"mysql":          "mysql://u:" + pw + "@127.0.0.1/db",
		"key=value form": "host=127.0.0.1 password=" + pw,
		"bad escape":     "postgres://u:" + pw + "%zz@127.0.0.1/db",
		"bad port":       "postgres://u:" + pw + "@127.0.0.1:99999/db",
		"wrong password": wrongPW.String(),
		"nobody there":   closed.String(),
		"password param": wrongInQuery.String(),
	} {
		s, err := store.OpenPostgres(ctx, raw)
		if err == nil {
			s.Close()
			t.Errorf("%s: OpenPostgres succeeded", name)
			continue
		}
		for _, secret := range []string{pw, "sekrit-wrong-password"} {
			if strings.Contains(err.Error(), secret) {
				t.Errorf("%s: the error shows the password: %v", name, err)
			}
		}
	}
	admin := rawPG(t, testenv.PostgresAdmin(t))
	if _, err := admin.Exec(`CREATE DATABASE tg_ascii ENCODING 'SQL_ASCII' TEMPLATE template0 OWNER toolgate_app`); err != nil {
		t.Fatal(err)
	}
	ascii := *u
	ascii.Path = "/tg_ascii"
	if s, err := store.OpenPostgres(ctx, ascii.String()); err == nil || !strings.Contains(err.Error(), "UTF8") {
		if s != nil {
			s.Close()
		}
		t.Errorf("SQL_ASCII database: %v, want a refusal naming UTF8", err)
	}
}

// On PostgreSQL too, a batch that fails inside its transaction is rolled back and
// reported as not written, the advisory lock is released with it (another store
// appends at once), and later appends chain on cleanly.
func TestPostgresAuditWriterRecoversFromAFailedBatch(t *testing.T) {
	ctx := context.Background()
	url := testenv.Postgres(t)
	s, other := openPGAt(t, url), openPGAt(t, url)
	ok := func(s *store.Store, id string) {
		t.Helper()
		if err := s.AppendAudit(ctx, &audit.Event{CallID: id, Principal: "p", Tool: "t.x", Decision: audit.Allowed}); err != nil {
			t.Fatalf("AppendAudit(%s): %v", id, err)
		}
	}
	ok(s, "before")
	db := rawPG(t, url)
	if _, err := db.Exec(`CREATE FUNCTION boom() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN RAISE EXCEPTION 'refused by test trigger'; END $$;
		CREATE TRIGGER boom BEFORE INSERT ON audit_events FOR EACH ROW WHEN (NEW.call_id = 'boom') EXECUTE FUNCTION boom();`); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		e := &audit.Event{CallID: "boom", Principal: "p", Tool: "t.x", Decision: audit.Allowed}
		if err := s.AppendAudit(ctx, e); err == nil || !strings.Contains(err.Error(), "refused by test trigger") {
			t.Fatalf("AppendAudit through an aborting trigger = %v", err)
		}
		if e.Seq != 0 || e.Hash != "" {
			t.Errorf("failed append changed the event: seq %d hash %q", e.Seq, e.Hash)
		}
		ok(other, "other")
	}
	if _, err := db.Exec(`DROP TRIGGER boom ON audit_events`); err != nil {
		t.Fatal(err)
	}
	ok(s, "after")
	evs, err := s.ListAudit(ctx, audit.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, e := range evs {
		ids = append(ids, e.CallID)
	}
	if strings.Join(ids, " ") != "before other other other after" {
		t.Errorf("events %v", ids)
	}
	if err := audit.Verify(evs); err != nil {
		t.Error(err)
	}
}

// The PostgreSQL figures of the audit benchmarks (docs/storage.md): one caller at a
// time (a transaction, the advisory lock and a commit per event), 64 callers on one
// store (group commit), and 64 callers spread over three stores on one database (three
// replicas, whose batches queue on the advisory lock).
func BenchmarkAppendAuditPostgres(b *testing.B) {
	eachDurability(b, func(b *testing.B, d store.Option) { benchAppendAudit(b, openPGAt(b, testenv.Postgres(b), d)) })
}

func BenchmarkAppendAuditParallelPostgres(b *testing.B) {
	eachDurability(b, func(b *testing.B, d store.Option) { benchAppendAuditParallel(b, openPGAt(b, testenv.Postgres(b), d)) })
}

func BenchmarkAppendAuditParallelPostgres3Replicas(b *testing.B) {
	eachDurability(b, func(b *testing.B, d store.Option) {
		url := testenv.Postgres(b)
		benchAppendAuditParallel(b, openPGAt(b, url, d), openPGAt(b, url, d), openPGAt(b, url, d))
	})
}

// BenchmarkPostgresAdvisoryLock isolates what the audit lock adds to an uncontended
// append transaction, sent as the writer sends it: "BEGIN; SELECT
// pg_advisory_xact_lock(…)" as one simple query, then COMMIT, against BEGIN, COMMIT.
func BenchmarkPostgresAdvisoryLock(b *testing.B) {
	ctx := context.Background()
	conn, err := rawPG(b, testenv.Postgres(b)).Conn(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	for name, begin := range map[string]string{
		"without": `BEGIN`,
		"with":    fmt.Sprintf(`BEGIN; SELECT pg_advisory_xact_lock(%d)`, store.AuditLockKey),
	} {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				if _, err := conn.ExecContext(ctx, begin); err != nil {
					b.Fatal(err)
				}
				if _, err := conn.ExecContext(ctx, `COMMIT`); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkPolicyVersionPostgres(b *testing.B) {
	s := openPG(b)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.PolicyVersion(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

func TestPostgresMCP(t *testing.T) {
	storetest.RunMCP(t, func(t *testing.T) storetest.MCPStore { return openPG(t) })
}
