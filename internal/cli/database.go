package cli

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/toolgate/toolgate/internal/app"
	"github.com/toolgate/toolgate/internal/kernel"
	"github.com/toolgate/toolgate/internal/store"
)

// DatabaseURL resolves --database-url, then $TOOLGATE_DATABASE_URL. Empty selects the
// embedded SQLite store in the data directory; anything else must be a PostgreSQL URL
// (docs/deployment.md). A bad value is refused before anything is opened, and the
// error never repeats it: it may hold a password.
func (e *Env) DatabaseURL() (string, error) {
	u, from := e.databaseURL, "--database-url"
	if u == "" {
		u, from = os.Getenv(store.EnvDatabaseURL), store.EnvDatabaseURL
	}
	if u == "" {
		return "", nil
	}
	if err := store.CheckDatabaseURL(u); err != nil {
		return "", fmt.Errorf("%s: %w", from, err)
	}
	return u, nil
}

// openStore opens the store the command line selects, for the management commands
// that use the store directly rather than the whole app (so that a grant the kernel
// refuses to compile can still be listed and removed).
func (e *Env) openStore(ctx context.Context) (*store.Store, error) {
	dbURL, err := e.DatabaseURL()
	if err != nil {
		return nil, err
	}
	dir, err := e.DataDir()
	if err != nil {
		return nil, err
	}
	return store.OpenDatabase(ctx, dir, dbURL)
}

// openApp opens the App over dataDir (the keystore key, the owner token) and the store
// the command line selects.
func (e *Env) openApp(ctx context.Context, dataDir string, tools []*kernel.Tool, log *slog.Logger) (*app.App, error) {
	dbURL, err := e.DatabaseURL()
	if err != nil {
		return nil, err
	}
	return app.Open(ctx, app.Options{DataDir: dataDir, DatabaseURL: dbURL, Tools: tools, Logger: log})
}
