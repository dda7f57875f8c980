package store

// ListenerConnects reports how many times c's listener has connected and LISTENed.
func ListenerConnects(c *Changes) int64 { return c.connects.Load() }

// AuditLockKey is the advisory lock key of audit appends on PostgreSQL.
const AuditLockKey = auditLockKey
