package store

import (
	"context"
	"errors"
	"fmt"
)

// ErrUnreachable is wrapped by CheckReady when the database does not answer.
var ErrUnreachable = errors.New("database unreachable")

// ErrSchemaOutdated is wrapped by CheckReady when the database lacks migrations this
// binary has (someone rolled the schema back, or restored an older backup under a
// running process): the process would read and write tables it does not expect.
var ErrSchemaOutdated = errors.New("database schema is older than this toolgate")

// CheckReady reports whether the store can serve now: the database answers a read of
// its schema version, and that version is the last migration this binary knows —
// neither older (ErrSchemaOutdated) nor newer (ErrSchemaTooNew: a newer binary on
// another replica migrated it; restart this one on the new binary). It costs one
// single-row read. `toolgate serve`'s /readyz answers with it (docs/kernel.md).
func (s *Store) CheckReady(ctx context.Context) error {
	v, err := s.SchemaVersion(ctx)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrUnreachable, err)
	}
	ms, err := loadMigrations(s.d.migrations)
	if err != nil {
		return err
	}
	known := 0
	if len(ms) > 0 {
		known = ms[len(ms)-1].version
	}
	switch {
	case v > known:
		return fmt.Errorf("%w: database is at version %d, this build knows up to %d", ErrSchemaTooNew, v, known)
	case v < known:
		return fmt.Errorf("%w: database is at version %d, this build needs %d", ErrSchemaOutdated, v, known)
	}
	return nil
}
