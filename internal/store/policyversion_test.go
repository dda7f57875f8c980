package store_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/toolgate/toolgate/internal/policy"
	"github.com/toolgate/toolgate/internal/store"
	"github.com/toolgate/toolgate/internal/testenv"
)

// policyVersion reads s's policy version or fails the test.
func policyVersion(t *testing.T, s *store.Store) int64 {
	t.Helper()
	v, err := s.PolicyVersion(context.Background())
	if err != nil {
		t.Fatalf("PolicyVersion: %v", err)
	}
	return v
}

// A change made through another Store on the same data directory (another process's
// view: its own pool and its own prepared statements) is seen by the next read, every
// time, whichever pooled connection serves it.
func TestPolicyVersionSeenAcrossStores(t *testing.T) {
	ctx := context.Background()
	dir := testenv.PrivateDir(t)
	a := openDir(t, dir)
	b := openDir(t, dir)
	for i := range 20 {
		before := policyVersion(t, a)
		if i%2 == 0 {
			if _, err := b.AddGrant(ctx, policy.Grant{Principal: fmt.Sprintf("p%d", i), Tool: "*", Effect: policy.Allow}); err != nil {
				t.Fatal(err)
			}
		} else if err := b.SetNamespaceEnabled(ctx, "github", i%4 == 1); err != nil {
			t.Fatal(err)
		}
		if after := policyVersion(t, a); after <= before {
			t.Fatalf("change %d through another store: version %d -> %d, want it to grow", i, before, after)
		}
		if v := policyVersion(t, a); v != policyVersion(t, b) {
			t.Fatalf("the two stores disagree: %d and %d", v, policyVersion(t, b))
		}
	}
}

// A grant added by another process moves the version this process reads.
func TestPolicyVersionAcrossProcesses(t *testing.T) {
	dir := testenv.PrivateDir(t)
	s := openDir(t, dir)
	before := policyVersion(t, s)
	if out, err := helperCmd(t, "grant "+dir+" child").CombinedOutput(); err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if after := policyVersion(t, s); after <= before {
		t.Errorf("grant added by another process: version %d -> %d, want it to grow", before, after)
	}
	gs, err := s.ListGrants(context.Background())
	if err != nil || len(gs) != 1 || gs[0].Principal != "child" {
		t.Errorf("grants = %+v, %v", gs, err)
	}
}

// A hand edit of the grants or namespaces table (the sqlite3 shell, an older tool) moves
// the version too: the counter is kept by triggers, not by the store's methods.
func TestPolicyVersionMovesOnRawEdits(t *testing.T) {
	dir := testenv.PrivateDir(t)
	testRawEditsMoveVersion(t, openDir(t, dir), rawDB(t, dir))
}

// testRawEditsMoveVersion edits both tables through db, outside s, and checks that each
// edit moves the version s reads.
func testRawEditsMoveVersion(t *testing.T, s *store.Store, db *sql.DB) {
	for _, q := range []string{
		`INSERT INTO grants (id, principal, tool, action, resource, effect, note, created_at)
			VALUES ('g_raw', 'bob', 'files.read', '*', '', 'allow', '', '2026-01-01T00:00:00.000000Z')`,
		`UPDATE grants SET effect = 'deny' WHERE id = 'g_raw'`,
		`DELETE FROM grants WHERE id = 'g_raw'`,
		`INSERT INTO namespaces (name, enabled) VALUES ('github', 0)`,
		`UPDATE namespaces SET enabled = 1 WHERE name = 'github'`,
		`DELETE FROM namespaces WHERE name = 'github'`,
	} {
		before := policyVersion(t, s)
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		if after := policyVersion(t, s); after <= before {
			t.Errorf("%s: version %d -> %d, want it to grow", q, before, after)
		}
	}
}

// A database created by a build that had only migration 0001 is upgraded on open: its
// grants are kept and the counter works from then on.
func TestUpgradeFromSchemaVersion1(t *testing.T) {
	ctx := context.Background()
	dir := testenv.PrivateDir(t)
	init, err := os.ReadFile(filepath.Join("migrations", "sqlite", "0001_init.sql"))
	if err != nil {
		t.Fatal(err)
	}
	db := rawDB(t, dir)
	for _, q := range []string{
		string(init),
		`CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)`,
		`INSERT INTO schema_migrations VALUES (1, '0001_init.sql', '2026-01-01T00:00:00.000000Z')`,
		`INSERT INTO grants (id, principal, tool, action, resource, effect, note, created_at)
			VALUES ('g_old', 'alice', 'files.read', '*', '', 'allow', 'from v1', '2026-01-01T00:00:00.000000Z')`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("building a version-1 database: %v", err)
		}
	}
	db.Close()
	s := openDir(t, dir)
	if v, err := s.SchemaVersion(ctx); err != nil || v != schemaVersion {
		t.Fatalf("schema version after upgrade = %d, %v; want %d", v, err, schemaVersion)
	}
	gs, err := s.ListGrants(ctx)
	if err != nil || len(gs) != 1 || gs[0].ID != "g_old" {
		t.Fatalf("grants after upgrade = %+v, %v", gs, err)
	}
	before := policyVersion(t, s)
	if err := s.RemoveGrant(ctx, "g_old"); err != nil {
		t.Fatal(err)
	}
	if after := policyVersion(t, s); after <= before {
		t.Errorf("after upgrade: RemoveGrant moved the version %d -> %d", before, after)
	}
}

func BenchmarkPolicyVersion(b *testing.B) {
	s := openTemp(b)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.PolicyVersion(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
