package store_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/toolgate/toolgate/internal/policy"
	"github.com/toolgate/toolgate/internal/store"
	"github.com/toolgate/toolgate/internal/testenv"
)

// A backup is a database that opens on its own, holds what was committed, is
// owner-only, and never overwrites a file.
func TestBackupTo(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	if _, err := s.AddGrant(ctx, policy.Grant{Principal: "p", Tool: "local.*", Action: "*", Effect: policy.Allow}); err != nil {
		t.Fatal(err)
	}
	dir := testenv.PrivateDir(t)
	path := filepath.Join(dir, "copy.db")
	if err := s.BackupTo(ctx, path); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 || fi.Size() == 0 {
		t.Fatalf("backup file: %v %v", fi, err)
	}
	if err := s.BackupTo(ctx, path); err == nil {
		t.Fatal("a second backup overwrote the first")
	}
	// The copy opens as a data directory of its own.
	restored := testenv.PrivateDir(t)
	b, _ := os.ReadFile(path)
	if err := os.WriteFile(filepath.Join(restored, store.DBFile), b, 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := store.Open(ctx, restored)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	gs, err := r.ListGrants(ctx)
	if err != nil || len(gs) != 1 || gs[0].Tool != "local.*" {
		t.Fatalf("grants in the copy: %v %v", gs, err)
	}
	if err := s.BackupTo(ctx, filepath.Join(dir, "missing", "x.db")); err == nil {
		t.Fatal("a backup into a missing directory succeeded")
	}
}
