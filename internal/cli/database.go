package cli

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/toolgate/toolgate/internal/app"
	"github.com/toolgate/toolgate/internal/kernel"
	"github.com/toolgate/toolgate/internal/localtools"
)

// DatabaseURL resolves --database-url, then $TOOLGATE_DATABASE_URL. Empty selects the
// embedded SQLite store in the data directory; anything else must be a PostgreSQL URL
// (docs/deployment.md). A bad value is refused before anything is opened, and the
// error never repeats it: it may hold a password.
func (e *Env) DatabaseURL() (string, error) {
	u, from := e.databaseURL, "--database-url"
	if u == "" {
		u, from = os.Getenv(app.EnvDatabaseURL), app.EnvDatabaseURL
	}
	if u == "" {
		return "", nil
	}
	if err := app.CheckDatabaseURL(u); err != nil {
		return "", fmt.Errorf("%s: %w", from, err)
	}
	return u, nil
}

// openApp opens the App over dataDir (the keystore key, the owner token) and the store
// the command line selects.
func (e *Env) openApp(ctx context.Context, dataDir string, tools []*kernel.Tool, log *slog.Logger) (*app.App, error) {
	return e.openAppWith(ctx, app.Options{DataDir: dataDir, Tools: tools, Logger: log})
}

// openAppWith is openApp with the rest of o given (the store is still the command
// line's).
func (e *Env) openAppWith(ctx context.Context, o app.Options) (*app.App, error) {
	dbURL, err := e.DatabaseURL()
	if err != nil {
		return nil, err
	}
	d, err := e.durability()
	if err != nil {
		return nil, err
	}
	o.DatabaseURL, o.Durability = dbURL, d
	a, err := app.Open(ctx, o)
	if err == nil {
		e.opened.Store(a)
	}
	return a, err
}

// durability resolves --audit-durability, then $TOOLGATE_AUDIT_DURABILITY; neither
// selects the default (docs/performance.md).
func (e *Env) durability() (app.Durability, error) {
	v, from := e.auditDurability, "--audit-durability"
	if v == "" {
		v, from = os.Getenv(app.EnvAuditDurability), app.EnvAuditDurability
	}
	d, err := app.ParseDurability(v)
	if err != nil {
		return "", fmt.Errorf("%s: %w", from, err)
	}
	return d, nil
}

// controlPlane is localtools.Config.ControlPlane: the App this command opened, once it
// has.
func (e *Env) controlPlane() localtools.ControlPlane {
	if a := e.opened.Load(); a != nil {
		return app.ControlPlane{A: a}
	}
	return nil
}
