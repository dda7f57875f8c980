package store

import (
	"encoding/hex"
	"fmt"
	"io/fs"
	"strings"
	"unicode/utf8"
)

// dialect is what differs between the SQLite and PostgreSQL stores. Everything else —
// every query, the group commit, validation — is shared: the SQL uses $N placeholders,
// INSERT … ON CONFLICT, TEXT ids and TEXT times, which both accept (docs/storage.md).
type dialect struct {
	name       string
	migrations fs.FS
	// beginAppend starts an audit batch's transaction and takes the lock that
	// serialises appenders across processes, so the chain head read next is the one
	// the batch extends. SQLite: BEGIN IMMEDIATE takes the database's write lock, a
	// statement prepared once (prepareBegin). PostgreSQL: BEGIN and a
	// transaction-scoped advisory lock, released by COMMIT or ROLLBACK, that every
	// replica's writer takes; two statements sent as one simple query (one round
	// trip), which cannot be prepared.
	beginAppend  string
	prepareBegin bool
	// batchInsert inserts each batch with one statement taking every column as an
	// array, rather than a prepared statement per event: one round trip to a
	// PostgreSQL server per batch, which also shortens how long the lock is held.
	batchInsert bool
	// auditText and auditFromDB map audit event strings to what the database stores
	// and back; see pgAuditText.
	auditText   func(string) string
	auditFromDB func(string) (string, error)
}

var sqliteDialect = &dialect{
	name:         "sqlite",
	migrations:   sqliteMigrations,
	beginAppend:  `BEGIN IMMEDIATE`,
	prepareBegin: true,
	auditText:    func(s string) string { return s },
	auditFromDB:  func(s string) (string, error) { return s, nil },
}

// auditLockKey is the pg_advisory_xact_lock key every PostgreSQL audit writer takes
// (an arbitrary constant: "tgaudit1" as a big-endian int64). migrateLockKey is the
// pg_advisory_lock key replicas migrate under ("tgmigr01").
const (
	auditLockKey   int64 = 0x7467617564697431
	migrateLockKey int64 = 0x74676d6967723031
)

var postgresDialect = &dialect{
	name:        "postgres",
	migrations:  postgresMigrations,
	beginAppend: fmt.Sprintf(`BEGIN; SELECT pg_advisory_xact_lock(%d)`, auditLockKey),
	batchInsert: true,
	auditText:   pgAuditText,
	auditFromDB: pgAuditFromDB,
}

// pgEscape starts an audit string stored in escaped form.
const pgEscape = `\x`

// pgAuditText maps an audit string to PostgreSQL TEXT, one-to-one. Audit events are
// stored exactly as the caller sent them (a hostile tool name must be recorded, not
// refused), but TEXT refuses NUL bytes and invalid UTF-8. A string that is valid
// UTF-8, has no NUL and does not start with `\x` is stored as it is — every string a
// real call produces, readable in psql; any other is stored as `\x` and its bytes in
// lowercase hex (the look of a bytea literal). The mapping is deterministic, so a
// filter value mapped the same way finds exactly the events holding it.
func pgAuditText(s string) string {
	if utf8.ValidString(s) && !strings.ContainsRune(s, 0) && !strings.HasPrefix(s, pgEscape) {
		return s
	}
	return pgEscape + hex.EncodeToString([]byte(s))
}

// pgAuditFromDB reverses pgAuditText.
func pgAuditFromDB(s string) (string, error) {
	if !strings.HasPrefix(s, pgEscape) {
		return s, nil
	}
	b, err := hex.DecodeString(s[len(pgEscape):])
	if err != nil {
		return "", fmt.Errorf("escaped audit string %.40q: %w", s, err)
	}
	return string(b), nil
}
