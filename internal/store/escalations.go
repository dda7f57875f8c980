package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Escalation statuses and decisions.
const (
	EscalationPending  = "pending"
	EscalationApproved = "approved"
	EscalationDenied   = "denied"
)

// Escalation is a turn that ended by asking a human to decide. Status is pending until
// a person resolves it; then Decision (approved or denied), DecidedBy, DecisionNote and
// DecidedAt say how.
type Escalation struct {
	ID, TurnID, CallID, Principal, Reason, Note, Status, Decision, DecidedBy, DecisionNote string
	CreatedAt                                                                              time.Time
	DecidedAt                                                                              *time.Time
}

// AddEscalation records a new escalation. An empty ID is generated ("esc_" + random hex;
// callers that need it should set it themselves), an empty Status is pending and a zero
// CreatedAt is now. Only pending escalations can be added: resolution goes through
// ResolveEscalation, which records who decided.
func (s *Store) AddEscalation(ctx context.Context, e Escalation) error {
	if e.ID == "" {
		e.ID = newID("esc_")
	}
	if e.Status == "" {
		e.Status = EscalationPending
	}
	if e.CreatedAt.IsZero() {
		e.CreatedAt = now()
	}
	if e.Status != EscalationPending || e.Decision != "" || e.DecidedBy != "" || e.DecisionNote != "" || e.DecidedAt != nil {
		return fmt.Errorf("adding escalation: %w: a new escalation must be pending and undecided", ErrInvalid)
	}
	for _, c := range []struct{ name, v string }{{"id", e.ID}, {"principal", e.Principal}} {
		if err := checkIdent(c.name, c.v, maxIdent); err != nil {
			return fmt.Errorf("adding escalation: %w", err)
		}
	}
	for _, c := range []struct{ name, v string }{{"turn id", e.TurnID}, {"call id", e.CallID}} {
		if err := checkLine(c.name, c.v, maxIdent); err != nil {
			return fmt.Errorf("adding escalation: %w", err)
		}
	}
	for _, c := range []struct{ name, v string }{{"reason", e.Reason}, {"note", e.Note}} {
		if err := checkText(c.name, c.v, maxText); err != nil {
			return fmt.Errorf("adding escalation: %w", err)
		}
	}
	_, err := s.db.ExecContext(ctx, `INSERT INTO escalations (id, turn_id, call_id, principal, reason, note, status,
		decision, decided_by, decision_note, created_at, decided_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, '', '', '', $8, NULL)`,
		e.ID, e.TurnID, e.CallID, e.Principal, e.Reason, e.Note, e.Status, formatTime(e.CreatedAt))
	if err != nil {
		return fmt.Errorf("adding escalation %s: %w", e.ID, err)
	}
	return nil
}

// ListEscalations returns escalations with the given status ("" for all), oldest first.
func (s *Store) ListEscalations(ctx context.Context, status string) ([]Escalation, error) {
	switch status {
	case "", EscalationPending, EscalationApproved, EscalationDenied:
	default:
		return nil, fmt.Errorf("listing escalations: %w: status %q: want pending, approved, denied or empty", ErrInvalid, status)
	}
	q := `SELECT id, turn_id, call_id, principal, reason, note, status, decision, decided_by, decision_note,
		created_at, decided_at FROM escalations`
	var params []any
	if status != "" {
		q += ` WHERE status = $1`
		params = append(params, status)
	}
	q += ` ORDER BY created_at, id`
	rows, err := s.db.QueryContext(ctx, q, params...)
	if err != nil {
		return nil, fmt.Errorf("listing escalations: %w", err)
	}
	defer rows.Close()
	var out []Escalation
	for rows.Next() {
		var e Escalation
		var created string
		var decided sql.NullString
		if err := rows.Scan(&e.ID, &e.TurnID, &e.CallID, &e.Principal, &e.Reason, &e.Note, &e.Status, &e.Decision,
			&e.DecidedBy, &e.DecisionNote, &created, &decided); err != nil {
			return nil, fmt.Errorf("listing escalations: %w", err)
		}
		if e.CreatedAt, err = parseTime(created); err != nil {
			return nil, fmt.Errorf("listing escalations: %s: %w", e.ID, err)
		}
		if decided.Valid {
			t, err := parseTime(decided.String)
			if err != nil {
				return nil, fmt.Errorf("listing escalations: %s: %w", e.ID, err)
			}
			e.DecidedAt = &t
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("listing escalations: %w", err)
	}
	return out, nil
}

// ResolveEscalation records a person's decision (approved or denied) on a pending
// escalation. An unknown id wraps ErrNotFound; one already resolved wraps ErrConflict,
// so two people deciding at once cannot overwrite each other.
func (s *Store) ResolveEscalation(ctx context.Context, id, decision, by, note string) error {
	if decision != EscalationApproved && decision != EscalationDenied {
		return fmt.Errorf("resolving escalation %q: %w: decision %q: want approved or denied", id, ErrInvalid, decision)
	}
	if err := checkIdent("decided by", by, maxIdent); err != nil {
		return fmt.Errorf("resolving escalation %q: %w", id, err)
	}
	if err := checkText("decision note", note, maxText); err != nil {
		return fmt.Errorf("resolving escalation %q: %w", id, err)
	}
	res, err := s.db.ExecContext(ctx, `UPDATE escalations SET status = $1, decision = $1, decided_by = $2,
		decision_note = $3, decided_at = $4 WHERE id = $5 AND status = 'pending'`,
		decision, by, note, formatTime(now()), id)
	if err != nil {
		return fmt.Errorf("resolving escalation %q: %w", id, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("resolving escalation %q: %w", id, err)
	}
	if n == 1 {
		return nil
	}
	var status string
	err = s.db.QueryRowContext(ctx, `SELECT status FROM escalations WHERE id = $1`, id).Scan(&status)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("resolving escalation %q: %w", id, ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("resolving escalation %q: %w", id, err)
	}
	return fmt.Errorf("resolving escalation %q: %w: it is already %s", id, ErrConflict, status)
}
