package store

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
)

func rawSQLite(t *testing.T) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "m.db")+"?_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func TestLoadMigrationsRefusesBadNames(t *testing.T) {
	for name, fsys := range map[string]fstest.MapFS{
		"no number":    {"init.sql": {Data: []byte("SELECT 1")}},
		"zero":         {"0000_init.sql": {Data: []byte("SELECT 1")}},
		"no separator": {"0001.sql": {Data: []byte("SELECT 1")}},
		"duplicate":    {"0001_a.sql": {Data: []byte("SELECT 1")}, "001_b.sql": {Data: []byte("SELECT 1")}},
	} {
		if _, err := loadMigrations(fsys); err == nil {
			t.Errorf("%s: loadMigrations accepted it", name)
		}
	}
	ms, err := loadMigrations(fstest.MapFS{
		"0010_c.sql": {Data: []byte("c")}, "0002_b.sql": {Data: []byte("b")}, "README.md": {Data: []byte("x")},
	})
	if err != nil || len(ms) != 2 || ms[0].version != 2 || ms[1].version != 10 {
		t.Errorf("loadMigrations = %+v, %v; want versions 2, 10 in order, README ignored", ms, err)
	}
}

func TestMigrateAppliesInOrderOnce(t *testing.T) {
	ctx := context.Background()
	db := rawSQLite(t)
	v1 := fstest.MapFS{"0001_a.sql": {Data: []byte("CREATE TABLE a (x INTEGER); INSERT INTO a VALUES (1);")}}
	if err := migrate(ctx, db, v1); err != nil {
		t.Fatal(err)
	}
	if err := migrate(ctx, db, v1); err != nil {
		t.Fatalf("re-running: %v", err)
	}
	v2 := fstest.MapFS{
		"0001_a.sql": v1["0001_a.sql"],
		"0002_b.sql": {Data: []byte("INSERT INTO a VALUES (2);")},
	}
	if err := migrate(ctx, db, v2); err != nil {
		t.Fatal(err)
	}
	var n, sum int
	if err := db.QueryRow(`SELECT COUNT(*), SUM(x) FROM a`).Scan(&n, &sum); err != nil || n != 2 || sum != 3 {
		t.Errorf("rows %d sum %d (%v): each migration must run exactly once", n, sum, err)
	}
	// The binary that only knows version 1 now refuses the database.
	err := migrate(ctx, db, v1)
	if !errors.Is(err, ErrSchemaTooNew) || !strings.Contains(err.Error(), "version 2") {
		t.Errorf("older binary: %v, want ErrSchemaTooNew naming version 2", err)
	}
}

func TestMigrateFailureRollsBack(t *testing.T) {
	ctx := context.Background()
	db := rawSQLite(t)
	bad := fstest.MapFS{
		"0001_ok.sql":  {Data: []byte("CREATE TABLE a (x INTEGER);")},
		"0002_bad.sql": {Data: []byte("INSERT INTO a VALUES (1); THIS IS NOT SQL;")},
	}
	err := migrate(ctx, db, bad)
	if err == nil || !strings.Contains(err.Error(), "0002_bad.sql") {
		t.Fatalf("migrate = %v, want an error naming 0002_bad.sql", err)
	}
	var n int
	if err := db.QueryRow(`SELECT COUNT(*) FROM a`).Scan(&n); err != nil || n != 0 {
		t.Errorf("a failed migration left %d rows (%v)", n, err)
	}
	var max int
	if err := db.QueryRow(`SELECT MAX(version) FROM schema_migrations`).Scan(&max); err != nil || max != 1 {
		t.Errorf("recorded version %d (%v), want 1", max, err)
	}
}

// TestEmbeddedMigrations checks the shipped files load and that every dialect
// directory holds the same versions under the same names: a table added for one
// dialect only would leave the other's store without it.
func TestEmbeddedMigrations(t *testing.T) {
	lite, err := loadMigrations(sqliteMigrations)
	if err != nil || len(lite) == 0 || lite[0].version != 1 {
		t.Fatalf("embedded sqlite migrations: %+v, %v", lite, err)
	}
	for i, m := range lite {
		if m.version != i+1 {
			t.Errorf("migration %s: versions must be consecutive from 1", m.name)
		}
	}
	pg, err := loadMigrations(postgresMigrations)
	if err != nil {
		t.Fatalf("embedded postgres migrations: %v", err)
	}
	names := func(ms []migration) (out []string) {
		for _, m := range ms {
			out = append(out, m.name)
		}
		return out
	}
	if a, b := strings.Join(names(lite), " "), strings.Join(names(pg), " "); a != b {
		t.Errorf("dialects disagree:\n  sqlite:   %s\n  postgres: %s", a, b)
	}
}
