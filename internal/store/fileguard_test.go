package store_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/store"
	"github.com/toolgate/toolgate/internal/testenv"
)

// A database file removed (or replaced) under an open store refuses audit appends:
// the open descriptors would keep writing to an unlinked file, losing every event at
// the next start.
func TestAppendRefusedWhenTheDatabaseIsGone(t *testing.T) {
	ctx := context.Background()
	for _, how := range []string{"removed", "replaced"} {
		t.Run(how, func(t *testing.T) {
			dir := testenv.PrivateDir(t)
			s, err := store.Open(ctx, dir)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			ev := func() *audit.Event {
				return &audit.Event{CallID: "c", Principal: "p", Tool: "t", Decision: audit.Allowed}
			}
			if err := s.AppendAudit(ctx, ev()); err != nil {
				t.Fatal(err)
			}
			db := filepath.Join(dir, store.DBFile)
			if err := os.Remove(db); err != nil {
				t.Fatal(err)
			}
			if how == "replaced" {
				if err := os.WriteFile(db, nil, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.AppendAudit(ctx, ev()); !errors.Is(err, store.ErrDatabaseGone) {
				t.Fatalf("append after the file was %s: %v", how, err)
			}
		})
	}
}
