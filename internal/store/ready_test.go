package store_test

import (
	"context"
	"errors"
	"testing"

	"github.com/toolgate/toolgate/internal/store"
	"github.com/toolgate/toolgate/internal/testenv"
)

// A store is ready at its own schema version, not once another binary migrated the
// database further or it was rolled back, and not once the database stops answering.
func TestCheckReady(t *testing.T) {
	ctx := context.Background()
	url := testenv.Postgres(t)
	s := openPGAt(t, url)
	if err := s.CheckReady(ctx); err != nil {
		t.Fatalf("fresh store: %v", err)
	}
	v, err := s.SchemaVersion(ctx)
	if err != nil {
		t.Fatal(err)
	}
	db := rawPG(t, url)
	if _, err := db.Exec(`INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, 'later', 'now')`, v+1); err != nil {
		t.Fatal(err)
	}
	if err := s.CheckReady(ctx); !errors.Is(err, store.ErrSchemaTooNew) {
		t.Errorf("database migrated by a newer binary: %v, want ErrSchemaTooNew", err)
	}
	if _, err := db.Exec(`DELETE FROM schema_migrations WHERE version >= $1`, v); err != nil {
		t.Fatal(err)
	}
	if err := s.CheckReady(ctx); !errors.Is(err, store.ErrSchemaOutdated) {
		t.Errorf("database rolled back: %v, want ErrSchemaOutdated", err)
	}
	s.Close()
	if err := s.CheckReady(ctx); !errors.Is(err, store.ErrUnreachable) {
		t.Errorf("closed store: %v, want ErrUnreachable", err)
	}
	if err := openTemp(t).CheckReady(ctx); err != nil {
		t.Errorf("fresh SQLite store: %v", err)
	}
}
