package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// maxSealed bounds one sealed secret blob. The keystore seals values of at most 64 KiB
// plus a few bytes of overhead; the bound sits above that and keeps one row from
// growing the database without bound.
const maxSealed = 128 << 10

// The secrets table is the keystore's backend (keystore.Backend): it keeps sealed
// blobs by (scope, server, name) and never sees a key or a clear value. Names are
// compared exactly (no patterns), so listing one server never reaches another's.

// PutSecret stores a sealed blob under (scope, server, name), replacing any blob there.
func (s *Store) PutSecret(ctx context.Context, scope, server, name string, sealed []byte) error {
	if err := checkSecretRef(scope, server, name); err != nil {
		return fmt.Errorf("storing secret: %w", err)
	}
	if len(sealed) == 0 || len(sealed) > maxSealed {
		return fmt.Errorf("storing secret %s/%s/%s: %w: sealed blob is %d bytes, want 1 to %d", scope, server, name, ErrInvalid, len(sealed), maxSealed)
	}
	if _, err := s.db.ExecContext(ctx, `INSERT INTO secrets (scope, server, name, sealed, updated_at) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (scope, server, name) DO UPDATE SET sealed = excluded.sealed, updated_at = excluded.updated_at`,
		scope, server, name, sealed, formatTime(now())); err != nil {
		return fmt.Errorf("storing secret %s/%s/%s: %w", scope, server, name, err)
	}
	return nil
}

// GetSecret returns the sealed blob under (scope, server, name); ok is false when
// there is none.
func (s *Store) GetSecret(ctx context.Context, scope, server, name string) ([]byte, bool, error) {
	if err := checkSecretRef(scope, server, name); err != nil {
		return nil, false, fmt.Errorf("reading secret: %w", err)
	}
	var b []byte
	err := s.db.QueryRowContext(ctx, `SELECT sealed FROM secrets WHERE scope = $1 AND server = $2 AND name = $3`,
		scope, server, name).Scan(&b)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("reading secret %s/%s/%s: %w", scope, server, name, err)
	}
	return b, true, nil
}

// DeleteSecret removes the blob under (scope, server, name); removing one that is not
// there is not an error.
func (s *Store) DeleteSecret(ctx context.Context, scope, server, name string) error {
	if err := checkSecretRef(scope, server, name); err != nil {
		return fmt.Errorf("deleting secret: %w", err)
	}
	if _, err := s.db.ExecContext(ctx, `DELETE FROM secrets WHERE scope = $1 AND server = $2 AND name = $3`,
		scope, server, name); err != nil {
		return fmt.Errorf("deleting secret %s/%s/%s: %w", scope, server, name, err)
	}
	return nil
}

// ListSecrets returns the names stored for (scope, server), sorted.
func (s *Store) ListSecrets(ctx context.Context, scope, server string) ([]string, error) {
	if err := checkSecretRef(scope, server, "-"); err != nil {
		return nil, fmt.Errorf("listing secrets: %w", err)
	}
	rows, err := s.db.QueryContext(ctx, `SELECT name FROM secrets WHERE scope = $1 AND server = $2 ORDER BY name`, scope, server)
	if err != nil {
		return nil, fmt.Errorf("listing secrets of %s/%s: %w", scope, server, err)
	}
	defer rows.Close()
	names := []string{}
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, fmt.Errorf("listing secrets of %s/%s: %w", scope, server, err)
		}
		names = append(names, n)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("listing secrets of %s/%s: %w", scope, server, err)
	}
	return names, nil
}

func checkSecretRef(scope, server, name string) error {
	if err := checkIdent("secret scope", scope, maxIdent); err != nil {
		return err
	}
	if err := checkIdent("secret server", server, maxIdent); err != nil {
		return err
	}
	return checkIdent("secret name", name, maxIdent)
}
