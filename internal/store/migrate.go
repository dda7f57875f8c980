package store

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
)

//go:embed migrations
var migrationFS embed.FS

// sqliteMigrations and postgresMigrations are the dialects' migration directories.
// They hold the same version numbers (TestEmbeddedMigrations checks).
var (
	sqliteMigrations   = mustSub(migrationFS, "migrations/sqlite")
	postgresMigrations = mustSub(migrationFS, "migrations/postgres")
)

func mustSub(f fs.FS, dir string) fs.FS {
	sub, err := fs.Sub(f, dir)
	if err != nil {
		panic(err)
	}
	return sub
}

// ErrSchemaTooNew is wrapped when the database was migrated by a newer toolgate.
var ErrSchemaTooNew = errors.New("database schema is newer than this toolgate understands")

type migration struct {
	version int
	name    string
	sql     string
}

// loadMigrations reads NNNN_name.sql files in version order. Versions must be unique
// and positive.
func loadMigrations(dir fs.FS) ([]migration, error) {
	entries, err := fs.ReadDir(dir, ".")
	if err != nil {
		return nil, fmt.Errorf("reading migrations: %w", err)
	}
	var ms []migration
	seen := map[int]string{}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || path.Ext(name) != ".sql" {
			continue
		}
		num, _, ok := strings.Cut(name, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("migration %s: name must be NNNN_description.sql", name)
		}
		if prev, dup := seen[v]; dup {
			return nil, fmt.Errorf("migrations %s and %s share version %d", prev, name, v)
		}
		seen[v] = name
		body, err := fs.ReadFile(dir, name)
		if err != nil {
			return nil, fmt.Errorf("reading migration %s: %w", name, err)
		}
		ms = append(ms, migration{version: v, name: name, sql: string(body)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].version < ms[j].version })
	return ms, nil
}

// migrator is what migrate runs on: a pool (SQLite) or one connection holding the
// migration advisory lock (PostgreSQL).
type migrator interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	BeginTx(ctx context.Context, opts *sql.TxOptions) (*sql.Tx, error)
}

// migrate applies pending migrations, one transaction per file. Each transaction
// re-reads the applied versions under the write lock (SQLite: the store's transactions
// are IMMEDIATE; PostgreSQL: the caller holds the migration advisory lock), so
// processes opening one database together apply each file once. A database carrying a
// version this binary does not know is refused, not modified.
func migrate(ctx context.Context, db migrator, dir fs.FS) error {
	ms, err := loadMigrations(dir)
	if err != nil {
		return err
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER PRIMARY KEY,
		name       TEXT NOT NULL,
		applied_at TEXT NOT NULL)`); err != nil {
		return fmt.Errorf("creating schema_migrations: %w", err)
	}
	known := 0
	if len(ms) > 0 {
		known = ms[len(ms)-1].version
	}
	for _, m := range ms {
		if err := applyOne(ctx, db, m, known); err != nil {
			return err
		}
	}
	// A database without pending files still has to be checked.
	var max sql.NullInt64
	if err := db.QueryRowContext(ctx, `SELECT MAX(version) FROM schema_migrations`).Scan(&max); err != nil {
		return fmt.Errorf("reading schema version: %w", err)
	}
	if int(max.Int64) > known {
		return fmt.Errorf("%w: database is at version %d, this build knows up to %d", ErrSchemaTooNew, max.Int64, known)
	}
	return nil
}

func applyOne(ctx context.Context, db migrator, m migration, known int) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("migration %s: %w", m.name, err)
	}
	defer tx.Rollback()
	var max sql.NullInt64
	if err := tx.QueryRowContext(ctx, `SELECT MAX(version) FROM schema_migrations`).Scan(&max); err != nil {
		return fmt.Errorf("migration %s: reading schema version: %w", m.name, err)
	}
	if int(max.Int64) > known {
		return fmt.Errorf("%w: database is at version %d, this build knows up to %d", ErrSchemaTooNew, max.Int64, known)
	}
	var applied int
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM schema_migrations WHERE version = $1`, m.version).Scan(&applied); err != nil {
		return fmt.Errorf("migration %s: %w", m.name, err)
	}
	if applied > 0 {
		return nil
	}
	if _, err := tx.ExecContext(ctx, m.sql); err != nil {
		return fmt.Errorf("applying migration %s: %w", m.name, err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)`,
		m.version, m.name, formatTime(now())); err != nil {
		return fmt.Errorf("recording migration %s: %w", m.name, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("committing migration %s: %w", m.name, err)
	}
	return nil
}

// SchemaVersion reports the highest applied migration version.
func (s *Store) SchemaVersion(ctx context.Context) (int, error) {
	var max sql.NullInt64
	if err := s.db.QueryRowContext(ctx, `SELECT MAX(version) FROM schema_migrations`).Scan(&max); err != nil {
		return 0, fmt.Errorf("reading schema version: %w", err)
	}
	return int(max.Int64), nil
}
