package store

import (
	"context"
	"fmt"
)

const sqlPolicyVersion = `SELECT version FROM policy_version WHERE id = 1`

// PolicyVersion returns the policy change counter: a number that grows with every
// change to what the policy is compiled from (grants and namespace switches), whoever
// makes it, and moves in the same transaction as the change (migration 0002's
// triggers). A process that caches the compiled policy reads it on each request and
// reloads only when it differs from the value it loaded with; that is one indexed
// single-row read instead of two table scans. Values are only compared for equality;
// read the counter before the data it guards, so the data is never older than the
// value remembered with it.
//
// On SQLite the read is not cancellable: it is one row of a WAL database, which no
// writer blocks, and a cancellable context costs the driver a goroutine (and its
// wake-up) on every query, on every request of toolgate serve. A context already
// ended is still refused.
func (s *Store) PolicyVersion(ctx context.Context) (int64, error) {
	var v int64
	if s.d.name != "postgres" {
		if err := ctx.Err(); err != nil {
			return 0, fmt.Errorf("reading the policy version: %w", err)
		}
		ctx = context.WithoutCancel(ctx)
	}
	if err := s.policyVersion.QueryRowContext(ctx).Scan(&v); err != nil {
		return 0, fmt.Errorf("reading the policy version: %w", err)
	}
	return v, nil
}
