package store

// ListenerConnects reports how many times c's listener has connected and LISTENed.
func ListenerConnects(c *Changes) int64 { return c.connects.Load() }

// AuditLockKey is the advisory lock key of audit appends on PostgreSQL.
const AuditLockKey = auditLockKey

// SessionSetting reads a setting as the store's pooled connections see it: SQLite's
// PRAGMA synchronous (0 OFF, 1 NORMAL, 2 FULL) or a PostgreSQL SHOW.
func SessionSetting(s *Store, name string) (string, error) {
	q := "PRAGMA " + name
	if s.d == postgresDialect {
		q = "SHOW " + name
	}
	var v string
	err := s.db.QueryRow(q).Scan(&v)
	return v, err
}
