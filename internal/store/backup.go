package store

import (
	"context"
	"errors"
	"fmt"
	"os"
)

// ErrBackupUnsupported: the store cannot copy itself (PostgreSQL: take backups with the
// operator's pg_dump, which sees every replica's writes).
var ErrBackupUnsupported = errors.New("the store cannot copy itself: on PostgreSQL, back up with pg_dump")

// BackupTo writes a consistent copy of the SQLite database to path, while the store is
// in use: VACUUM INTO reads one snapshot of the database (writers go on; the copy has
// every transaction committed before it started and none after) and writes a compact
// database file. path must not exist: it is created here owner-only (0600) before
// SQLite writes into it, so the copy is never readable by others, even for a moment.
// On failure the partial file is removed.
func (s *Store) BackupTo(ctx context.Context, path string) error {
	if s.d.name != "sqlite" {
		return ErrBackupUnsupported
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("creating the backup file: %w", err)
	}
	if err := f.Close(); err != nil {
		os.Remove(path)
		return fmt.Errorf("creating the backup file: %w", err)
	}
	// VACUUM INTO accepts an existing empty file.
	if _, err := s.db.ExecContext(ctx, "VACUUM INTO ?", path); err != nil {
		os.Remove(path)
		return fmt.Errorf("copying the database to %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		os.Remove(path)
		return fmt.Errorf("copying the database: %w", err)
	}
	return nil
}
