// Package store is toolgate's persistent state: grants, namespace switches, keys,
// settings, the hash-chained audit log and escalations. It is one implementation over
// database/sql: embedded SQLite (modernc.org/sqlite, pure Go) by default, or PostgreSQL
// (OpenPostgres, pgx) shared by several replicas. Its SQL uses $N placeholders, TEXT
// ids generated here and per-dialect migration files; dialect.go holds what differs.
// The storetest package holds the behavioural suite both dialects pass.
//
// Several processes may open one data directory at once (a daemon plus CLI commands):
// SQLite runs in WAL mode with a busy timeout, every read-modify-write runs in an
// IMMEDIATE transaction, and what a call has written survives the process being killed
// right after it returns; whether it also survives a power cut is the Durability level
// (durability.go).
package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v5"

	"github.com/toolgate/toolgate/internal/datadir"
	"modernc.org/sqlite" // also registers the "sqlite" database/sql driver
	sqlite3 "modernc.org/sqlite/lib"
)

// DBFile is the SQLite database's file name inside the data directory.
const DBFile = datadir.DBFile

// BusyTimeout is how long a writer waits for another process's write lock before
// failing with "database is locked".
const BusyTimeout = 10 * time.Second

// MaxOpenConns bounds the connections one Store opens.
const MaxOpenConns = 16

// ErrNotFound is wrapped by lookups and removals of something that does not exist.
var ErrNotFound = errors.New("not found")

// ErrInvalid is wrapped by every refusal of a malformed value (a grant with an unknown
// action, a NUL byte in a principal, an oversized note…).
var ErrInvalid = errors.New("invalid")

// ErrConflict is wrapped when a change conflicts with the current state, such as
// resolving an escalation that is no longer pending.
var ErrConflict = errors.New("conflict")

// Store is the persistent state of one data directory. It is safe for concurrent use.
type Store struct {
	db   *sql.DB
	path string
	d    *dialect // SQLite or PostgreSQL (dialect.go)

	durability Durability // durability.go
	// fileID is the SQLite database file as opened; zero for PostgreSQL (fileguard.go).
	fileID fileID

	// changes wakes subscribers when another process changed something (changes.go).
	changes *Changes

	// Audit appends are group-committed: see auditq.go.
	auditMu    sync.Mutex
	auditQueue []*pendingAppend
	auditSem   chan struct{}
	// writer is the connection and statements the group-commit writer appends with
	// (writer.go); nil until the first append and after a failed one. Only the holder
	// of auditSem touches it.
	writer *auditWriter
	// onCommit, when set, is told of each group commit (ObserveAuditCommits).
	onCommit atomic.Pointer[func(time.Duration, int, error)]

	// policyVersion reads the policy change counter (policyversion.go), once per
	// request in a long-running process, so it is compiled once per connection.
	policyVersion *sql.Stmt
}

// Open opens the store in dataDir, creating the directory (0700) and database file
// (0600) on first use and applying any pending migrations. The database holds keys and
// the audit trail, so the directory and every secret file in it must be private:
// datadir.Prepare refuses (datadir.ErrUnsafe) a directory or file that group or others
// could open or that belongs to another user, naming the chmod or chown that fixes it.
// Nothing is changed on disk to make a loose file private: the files may have been
// read already, and silently tightening them would hide that.
func Open(ctx context.Context, dataDir string, opts ...Option) (*Store, error) {
	o := collectOptions(opts)
	if dataDir == "" {
		return nil, errors.New("opening store: empty data directory")
	}
	dir, err := datadir.Prepare(dataDir)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, DBFile)
	// Created 0600 before SQLite opens it (SQLite would use 0644, and gives its -wal
	// and -shm files the database file's mode); an existing one is checked through
	// its descriptor.
	f, _, err := datadir.OpenFile("database", path, os.O_RDWR|os.O_CREATE)
	if err != nil {
		return nil, err
	}
	f.Close()
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", BusyTimeout.Milliseconds()))
	q.Add("_pragma", "journal_mode(WAL)")
	// WAL with NORMAL writes each commit to the WAL before returning (so it survives
	// the process) and fsyncs at checkpoints; FULL fsyncs every commit.
	if o.durability == DurabilityPower {
		q.Add("_pragma", "synchronous(FULL)")
	} else {
		q.Add("_pragma", "synchronous(NORMAL)")
	}
	q.Add("_pragma", "foreign_keys(1)")
	q.Set("_txlock", "immediate")
	dsn := (&url.URL{Scheme: "file", Path: path, RawQuery: q.Encode()}).String()
	db, err := openDB(ctx, dsn)
	if err != nil {
		return nil, fmt.Errorf("opening store %s: %w", path, err)
	}
	s := &Store{db: db, path: path, d: sqliteDialect, changes: newChanges(""), auditSem: make(chan struct{}, 1), durability: o.durability}
	if s.fileID, err = statID(path); err != nil {
		db.Close()
		return nil, fmt.Errorf("opening store %s: %w", path, err)
	}
	if s.policyVersion, err = db.PrepareContext(ctx, sqlPolicyVersion); err != nil {
		db.Close()
		return nil, fmt.Errorf("opening store %s: preparing statements: %w", path, err)
	}
	return s, nil
}

// Path is the database file's path, or for PostgreSQL the database URL with any
// password redacted.
func (s *Store) Path() string { return s.path }

// Dialect is "sqlite" or "postgres".
func (s *Store) Dialect() string { return s.d.name }

// Close closes the database. Calls after Close fail. It waits for an audit batch being
// written to finish (appends still queued then fail), so its connection is released
// cleanly rather than cut off mid-transaction.
func (s *Store) Close() error {
	s.changes.close()
	s.auditSem <- struct{}{}
	if s.writer != nil {
		s.writer.close()
		s.writer = nil
	}
	s.policyVersion.Close()
	err := s.db.Close()
	<-s.auditSem
	return err
}

// timeLayout matches audit.TimeLayout: fixed width, so lexical order is time order.
const timeLayout = "2006-01-02T15:04:05.000000Z"

func formatTime(t time.Time) string { return t.UTC().Format(timeLayout) }

func parseTime(s string) (time.Time, error) {
	t, err := time.Parse(timeLayout, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("stored time %q: %w", s, err)
	}
	return t, nil
}

func now() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

// newID returns prefix plus 20 random hex characters.
func newID(prefix string) string {
	var b [10]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("crypto/rand failed: %v", err)) // rand.Read never fails on supported platforms
	}
	return prefix + hex.EncodeToString(b[:])
}

// openDB opens the connection pool and brings the schema up to date. Several processes
// opening a fresh data directory at once can meet SQLITE_BUSY that SQLite's busy handler
// does not cover: switching the file to WAL upgrades a shared lock, and SQLite refuses
// such an upgrade at once rather than risk a deadlock. That step is therefore retried,
// with jittered backoff, for up to BusyTimeout; any other error is final.
func openDB(ctx context.Context, dsn string) (*sql.DB, error) {
	attempt := func() (*sql.DB, error) {
		db, err := sql.Open("sqlite", dsn)
		if err != nil {
			return nil, backoff.Permanent(err)
		}
		// Each SQLite connection holds three descriptors (db, -wal, -shm) and its own
		// page cache; thousands of concurrent calls must not open thousands of them. No
		// store method needs two connections at once, so a bounded pool cannot deadlock.
		db.SetMaxOpenConns(MaxOpenConns)
		db.SetMaxIdleConns(4)
		if err := db.PingContext(ctx); err != nil {
			db.Close()
			return nil, retryIfBusy(err)
		}
		if err := migrate(ctx, db, sqliteMigrations); err != nil {
			db.Close()
			return nil, retryIfBusy(err)
		}
		return db, nil
	}
	b := backoff.NewExponentialBackOff()
	b.InitialInterval, b.MaxInterval = 5*time.Millisecond, 250*time.Millisecond
	return backoff.Retry(ctx, attempt, backoff.WithBackOff(b), backoff.WithMaxElapsedTime(BusyTimeout))
}

// retryIfBusy keeps SQLITE_BUSY and SQLITE_LOCKED (any extended code) retryable and
// makes every other error permanent.
func retryIfBusy(err error) error {
	var se *sqlite.Error
	if errors.As(err, &se) {
		if c := se.Code() & 0xff; c == sqlite3.SQLITE_BUSY || c == sqlite3.SQLITE_LOCKED {
			return err
		}
	}
	return backoff.Permanent(err)
}
