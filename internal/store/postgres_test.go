package store_test

import (
	"context"
	"testing"

	"github.com/toolgate/toolgate/internal/store"
	"github.com/toolgate/toolgate/internal/store/storetest"
	"github.com/toolgate/toolgate/internal/testenv"
)

// openPG opens a store on a fresh database of the test PostgreSQL server.
func openPG(t testing.TB) *store.Store {
	t.Helper()
	return openPGAt(t, testenv.Postgres(t))
}

func openPGAt(t testing.TB, url string) *store.Store {
	t.Helper()
	s, err := store.OpenPostgres(context.Background(), url)
	if err != nil {
		t.Fatalf("OpenPostgres: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestPostgres(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Store { return openPG(t) })
}
