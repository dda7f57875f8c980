package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib" // also registers the "pgx" database/sql driver
)

// EnvDatabaseURL names the environment variable that selects a PostgreSQL store when
// --database-url is not given.
const EnvDatabaseURL = "TOOLGATE_DATABASE_URL"

// OpenDatabase opens the store a command was pointed at: PostgreSQL when databaseURL
// is set, else the embedded SQLite database in dataDir.
func OpenDatabase(ctx context.Context, dataDir, databaseURL string, opts ...Option) (*Store, error) {
	if databaseURL != "" {
		return OpenPostgres(ctx, databaseURL, opts...)
	}
	return Open(ctx, dataDir, opts...)
}

// CheckDatabaseURL refuses a value that is not a postgres:// or postgresql:// URL
// pgx can parse. Errors never repeat the value: it may hold a password.
func CheckDatabaseURL(raw string) error {
	scheme, _, ok := strings.Cut(raw, "://")
	if !ok || (scheme != "postgres" && scheme != "postgresql") {
		return errors.New("database URL: want postgres://USER:PASSWORD@HOST:PORT/DATABASE (or postgresql://…)")
	}
	if _, err := url.Parse(raw); err != nil {
		return errors.New("database URL: not a valid URL (special characters in the password must be percent-encoded)")
	}
	if _, err := pgx.ParseConfig(raw); err != nil {
		return fmt.Errorf("database URL: %s", redactParseError(err))
	}
	return nil
}

// redactParseError keeps pgx's reason but not the URL it may quote.
func redactParseError(err error) string {
	msg := err.Error()
	if i := strings.LastIndex(msg, ": "); i >= 0 && strings.Contains(msg, "://") {
		return "cannot parse: " + msg[i+2:]
	}
	if strings.Contains(msg, "://") {
		return "cannot parse it"
	}
	return msg
}

// RedactURL returns the URL with any password — in the user part, or in a password or
// sslpassword parameter, which libpq URLs also accept — replaced by "xxxxx", for
// messages.
func RedactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparseable database URL)"
	}
	q := u.Query()
	for k := range q {
		if strings.EqualFold(k, "password") || strings.EqualFold(k, "sslpassword") {
			q.Set(k, "xxxxx")
			u.RawQuery = q.Encode()
		}
	}
	return u.Redacted()
}

// OpenPostgres opens a PostgreSQL store at databaseURL and applies any pending
// migrations under a session advisory lock, so replicas starting together migrate
// once. The database must use the UTF8 encoding (toolgate stores Unicode principals and
// notes). Several toolgate replicas may share the database: every write is a single
// statement or one transaction, and audit appends serialise on a transaction advisory
// lock (docs/storage.md).
func OpenPostgres(ctx context.Context, databaseURL string, opts ...Option) (*Store, error) {
	o := collectOptions(opts)
	if err := CheckDatabaseURL(databaseURL); err != nil {
		return nil, fmt.Errorf("opening store: %w", err)
	}
	where := RedactURL(databaseURL)
	cfg, err := pgx.ParseConfig(databaseURL)
	if err != nil {
		return nil, fmt.Errorf("opening store %s: %s", where, redactParseError(err))
	}
	if o.durability == DurabilityProcess {
		// Per session, on every pooled connection: the commit returns once it is in
		// the server's WAL buffers (durability.go).
		cfg.RuntimeParams["synchronous_commit"] = "off"
	}
	db := stdlib.OpenDB(*cfg)
	// The same bound as SQLite's: thousands of concurrent calls must not open thousands
	// of server backends (each costs the server a process). The change listener's
	// connection comes on top (changes.go).
	db.SetMaxOpenConns(MaxOpenConns)
	db.SetMaxIdleConns(4)
	db.SetConnMaxIdleTime(5 * time.Minute)
	if err := preparePostgres(ctx, db); err != nil {
		db.Close()
		return nil, fmt.Errorf("opening store %s: %w", where, err)
	}
	s := &Store{db: db, path: where, d: postgresDialect, auditSem: make(chan struct{}, 1), durability: o.durability}
	s.changes = newChanges(databaseURL)
	if s.policyVersion, err = db.PrepareContext(ctx, sqlPolicyVersion); err != nil {
		db.Close()
		return nil, fmt.Errorf("opening store %s: preparing statements: %w", where, err)
	}
	return s, nil
}

func preparePostgres(ctx context.Context, db *sql.DB) error {
	conn, err := db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("connecting: %w", err)
	}
	defer conn.Close()
	var enc string
	if err := conn.QueryRowContext(ctx, `SHOW server_encoding`).Scan(&enc); err != nil {
		return fmt.Errorf("reading the server encoding: %w", err)
	}
	if enc != "UTF8" {
		return fmt.Errorf("the database's encoding is %s; toolgate needs UTF8 (CREATE DATABASE … ENCODING 'UTF8')", enc)
	}
	// A session lock, held across the per-file transactions; a replica that dies
	// holding it releases it with its connection.
	if _, err := conn.ExecContext(ctx, `SELECT pg_advisory_lock($1)`, migrateLockKey); err != nil {
		return fmt.Errorf("taking the migration lock: %w", err)
	}
	err = migrate(ctx, conn, postgresMigrations)
	if _, uerr := conn.ExecContext(context.Background(), `SELECT pg_advisory_unlock($1)`, migrateLockKey); uerr != nil {
		// The lock would outlive this call on a pooled connection: drop the connection.
		conn.Raw(func(any) error { return driver.ErrBadConn })
		err = errors.Join(err, fmt.Errorf("releasing the migration lock: %w", uerr))
	}
	return err
}
