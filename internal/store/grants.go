package store

import (
	"context"
	"fmt"

	"github.com/toolgate/toolgate/internal/policy"
)

// ValidateGrant checks g as AddGrant would, after AddGrant's defaults ("" action means
// "*"). It is exported so the CLI can refuse a bad grant before opening the store.
//
// The store's own checks bound what a row may hold (lengths, UTF-8, control
// characters); whether the grant means something is the policy's to say, so the grant
// is then put through policy.Validate, the same function policy.Compile applies when a
// turn opens. A grant stored here therefore always compiles: a grant the policy cannot
// match (an unnormalised resource such as "path:docs/../x", a tool pattern outside the
// canonical grammar) is refused at the door instead of failing every later turn closed.
func ValidateGrant(g policy.Grant) error {
	if err := checkIdent("principal", g.Principal, maxIdent); err != nil {
		return err
	}
	if g.Tool == "" {
		return fmt.Errorf("%w: tool pattern is empty", ErrInvalid)
	}
	if err := checkLine("tool pattern", g.Tool, maxIdent); err != nil {
		return err
	}
	switch g.Action {
	case "", "*", "read", "write", "execute":
	default:
		return fmt.Errorf("%w: action %q: want read, write, execute or *", ErrInvalid, g.Action)
	}
	if err := checkLine("resource", g.Resource, maxScope); err != nil {
		return err
	}
	switch g.Effect {
	case policy.Allow, policy.Deny:
	default:
		return fmt.Errorf("%w: effect %q: want allow or deny", ErrInvalid, g.Effect)
	}
	if err := checkText("note", g.Note, maxText); err != nil {
		return err
	}
	if g.Action == "" {
		g.Action = "*"
	}
	if err := policy.Validate(g); err != nil {
		return policyRefusal{err}
	}
	return nil
}

// policyRefusal is a grant policy.Validate refused. It reads as the policy's message
// and matches both ErrInvalid (every store refusal does) and policy.ErrInvalidGrant.
type policyRefusal struct{ err error }

func (e policyRefusal) Error() string   { return e.err.Error() }
func (e policyRefusal) Unwrap() []error { return []error{ErrInvalid, e.err} }

// AddGrant validates g, assigns its ID ("g_" + random hex) and CreatedAt, stores it and
// returns it. An empty Action is stored as "*"; an empty Effect is refused, so a grant
// never allows anything by accident.
func (s *Store) AddGrant(ctx context.Context, g policy.Grant) (policy.Grant, error) {
	if err := ValidateGrant(g); err != nil {
		return policy.Grant{}, fmt.Errorf("adding grant: %w", err)
	}
	if g.Action == "" {
		g.Action = "*"
	}
	g.ID = newID("g_")
	g.CreatedAt = now()
	_, err := s.db.ExecContext(ctx, `INSERT INTO grants (id, principal, tool, action, resource, effect, note, created_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
		g.ID, g.Principal, g.Tool, g.Action, g.Resource, string(g.Effect), g.Note, formatTime(g.CreatedAt))
	if err != nil {
		return policy.Grant{}, fmt.Errorf("adding grant: %w", err)
	}
	return g, nil
}

// ListGrants returns every grant, oldest first.
func (s *Store) ListGrants(ctx context.Context) ([]policy.Grant, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id, principal, tool, action, resource, effect, note, created_at
		FROM grants ORDER BY created_at, id`)
	if err != nil {
		return nil, fmt.Errorf("listing grants: %w", err)
	}
	defer rows.Close()
	var out []policy.Grant
	for rows.Next() {
		var g policy.Grant
		var effect, created string
		if err := rows.Scan(&g.ID, &g.Principal, &g.Tool, &g.Action, &g.Resource, &effect, &g.Note, &created); err != nil {
			return nil, fmt.Errorf("listing grants: %w", err)
		}
		g.Effect = policy.Effect(effect)
		if g.CreatedAt, err = parseTime(created); err != nil {
			return nil, fmt.Errorf("listing grants: grant %s: %w", g.ID, err)
		}
		out = append(out, g)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("listing grants: %w", err)
	}
	return out, nil
}

// RemoveGrant deletes a grant; an unknown id wraps ErrNotFound.
func (s *Store) RemoveGrant(ctx context.Context, id string) error {
	res, err := s.db.ExecContext(ctx, `DELETE FROM grants WHERE id = $1`, id)
	if err != nil {
		return fmt.Errorf("removing grant %q: %w", id, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("removing grant %q: %w", id, err)
	}
	if n == 0 {
		return fmt.Errorf("removing grant %q: %w", id, ErrNotFound)
	}
	return nil
}
