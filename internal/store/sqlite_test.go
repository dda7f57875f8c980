package store_test

import (
	"context"
	"testing"

	"github.com/toolgate/toolgate/internal/store"
	"github.com/toolgate/toolgate/internal/store/storetest"
	"github.com/toolgate/toolgate/internal/testenv"
)

func openTemp(t testing.TB, opts ...store.Option) *store.Store {
	t.Helper()
	s, err := store.Open(context.Background(), testenv.PrivateDir(t), opts...)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestSQLite(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Store { return openTemp(t) })
}

func TestSQLiteMCP(t *testing.T) {
	storetest.RunMCP(t, func(t *testing.T) storetest.MCPStore { return openTemp(t) })
}

func TestSQLiteTrust(t *testing.T) {
	storetest.RunTrust(t, func(t *testing.T) storetest.TrustStore { return openTemp(t) })
}
