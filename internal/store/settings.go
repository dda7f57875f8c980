package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"

	"github.com/toolgate/toolgate/internal/policy"
)

// KeySize is the length of every key Key creates.
const KeySize = 32

// SetNamespaceEnabled switches a whole namespace on or off.
func (s *Store) SetNamespaceEnabled(ctx context.Context, ns string, enabled bool) error {
	// The rule tool ids' namespaces follow (policy.ValidNamespace): a switch on any other
	// name could never match a tool, so it is refused rather than silently ignored.
	if !policy.ValidNamespace(ns) {
		return fmt.Errorf("setting namespace: %w: namespace %q must be 1-64 lower-case letters, digits, '_' or '-', starting with a letter or digit", ErrInvalid, ns)
	}
	v := 0
	if enabled {
		v = 1
	}
	if _, err := s.db.ExecContext(ctx, `INSERT INTO namespaces (name, enabled) VALUES ($1, $2)
		ON CONFLICT (name) DO UPDATE SET enabled = excluded.enabled`, ns, v); err != nil {
		return fmt.Errorf("setting namespace %s: %w", ns, err)
	}
	return nil
}

// Namespaces returns every namespace that was ever switched, with its state. A
// namespace absent from the map is enabled.
func (s *Store) Namespaces(ctx context.Context) (map[string]bool, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT name, enabled FROM namespaces`)
	if err != nil {
		return nil, fmt.Errorf("listing namespaces: %w", err)
	}
	defer rows.Close()
	out := map[string]bool{}
	for rows.Next() {
		var name string
		var enabled int
		if err := rows.Scan(&name, &enabled); err != nil {
			return nil, fmt.Errorf("listing namespaces: %w", err)
		}
		out[name] = enabled != 0
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("listing namespaces: %w", err)
	}
	return out, nil
}

// Key returns the named installation key, creating 32 random bytes on first use. When
// several processes ask at once exactly one key is created: each inserts its candidate
// with ON CONFLICT DO NOTHING and then everyone reads the row that won.
func (s *Store) Key(ctx context.Context, name string) ([]byte, error) {
	if err := checkIdent("key name", name, maxIdent); err != nil {
		return nil, fmt.Errorf("getting key: %w", err)
	}
	var k []byte
	err := s.db.QueryRowContext(ctx, `SELECT value FROM keys WHERE name = $1`, name).Scan(&k)
	if err == nil {
		return k, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("getting key %s: %w", name, err)
	}
	candidate := make([]byte, KeySize)
	if _, err := rand.Read(candidate); err != nil {
		return nil, fmt.Errorf("creating key %s: %w", name, err)
	}
	if _, err := s.db.ExecContext(ctx, `INSERT INTO keys (name, value, created_at) VALUES ($1, $2, $3)
		ON CONFLICT (name) DO NOTHING`, name, candidate, formatTime(now())); err != nil {
		return nil, fmt.Errorf("creating key %s: %w", name, err)
	}
	if err := s.db.QueryRowContext(ctx, `SELECT value FROM keys WHERE name = $1`, name).Scan(&k); err != nil {
		return nil, fmt.Errorf("getting key %s: %w", name, err)
	}
	return k, nil
}

// Meta returns a stored setting and whether it exists.
func (s *Store) Meta(ctx context.Context, key string) (string, bool, error) {
	if err := checkIdent("meta key", key, maxIdent); err != nil {
		return "", false, fmt.Errorf("reading meta: %w", err)
	}
	var v string
	err := s.db.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = $1`, key).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("reading meta %s: %w", key, err)
	}
	return v, true, nil
}

// SetMeta stores a setting, replacing any previous value.
func (s *Store) SetMeta(ctx context.Context, key, val string) error {
	if err := checkIdent("meta key", key, maxIdent); err != nil {
		return fmt.Errorf("setting meta: %w", err)
	}
	if err := checkText("meta value", val, maxText); err != nil {
		return fmt.Errorf("setting meta %s: %w", key, err)
	}
	if _, err := s.db.ExecContext(ctx, `INSERT INTO meta (key, value) VALUES ($1, $2)
		ON CONFLICT (key) DO UPDATE SET value = excluded.value`, key, val); err != nil {
		return fmt.Errorf("setting meta %s: %w", key, err)
	}
	return nil
}
