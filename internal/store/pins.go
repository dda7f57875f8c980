package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/toolgate/toolgate/internal/textscan"
	"github.com/toolgate/toolgate/internal/toolpin"
)

// The tool_pins and tool_holds tables are toolpin's Store (docs/trust.md, "Pinning").
// Servers and tool names are stored as bytes and compared exactly: a tool name is the
// upstream's raw name, which a stranger chooses.

var _ toolpin.Store = (*Store)(nil)

const pinCols = `server, tool, digest, canonical, first_seen, approved_by, approved_at`
const holdCols = `server, tool, reason, state, digest, canonical, pinned_digest, findings, first_seen, last_seen, decided_by, decided_at`

// Pin returns the pin of (server, tool).
func (s *Store) Pin(ctx context.Context, server, tool string) (toolpin.Pin, bool, error) {
	p, err := scanPin(s.db.QueryRowContext(ctx, `SELECT `+pinCols+` FROM tool_pins WHERE server = $1 AND tool = $2`, []byte(server), []byte(tool)))
	if errors.Is(err, sql.ErrNoRows) {
		return toolpin.Pin{}, false, nil
	}
	if err != nil {
		return toolpin.Pin{}, false, fmt.Errorf("reading the pin of %s %q: %w", server, tool, err)
	}
	return p, true, nil
}

// Pins lists the pins of server, sorted by tool (byte order).
func (s *Store) Pins(ctx context.Context, server string) ([]toolpin.Pin, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+pinCols+` FROM tool_pins WHERE server = $1 ORDER BY tool`, []byte(server))
	if err != nil {
		return nil, fmt.Errorf("listing the pins of %s: %w", server, err)
	}
	defer rows.Close()
	var out []toolpin.Pin
	for rows.Next() {
		p, err := scanPin(rows)
		if err != nil {
			return nil, fmt.Errorf("listing the pins of %s: %w", server, err)
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("listing the pins of %s: %w", server, err)
	}
	return out, nil
}

// PutPin creates or replaces a pin; the table's trigger deletes the tool's hold in the
// same statement.
func (s *Store) PutPin(ctx context.Context, p toolpin.Pin) error {
	if _, err := s.db.ExecContext(ctx, `INSERT INTO tool_pins (`+pinCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7)
		ON CONFLICT (server, tool) DO UPDATE SET digest = excluded.digest, canonical = excluded.canonical,
		first_seen = excluded.first_seen, approved_by = excluded.approved_by, approved_at = excluded.approved_at`,
		[]byte(p.Server), []byte(p.Tool), p.Digest, []byte(p.Canonical), formatTime(p.FirstSeen), p.ApprovedBy, optTime(p.ApprovedAt)); err != nil {
		return fmt.Errorf("storing the pin of %s %q: %w", p.Server, p.Tool, err)
	}
	return nil
}

// PinIfAbsent stores p only when the tool has no pin (the insert trigger clears its
// hold); otherwise it returns the pin there is. One statement, so two processes that
// both saw no pin cannot both pin (toolpin.Store).
func (s *Store) PinIfAbsent(ctx context.Context, p toolpin.Pin) (toolpin.Pin, bool, error) {
	res, err := s.db.ExecContext(ctx, `INSERT INTO tool_pins (`+pinCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7)
		ON CONFLICT (server, tool) DO NOTHING`,
		[]byte(p.Server), []byte(p.Tool), p.Digest, []byte(p.Canonical), formatTime(p.FirstSeen), p.ApprovedBy, optTime(p.ApprovedAt))
	if err != nil {
		return toolpin.Pin{}, false, fmt.Errorf("storing the pin of %s %q: %w", p.Server, p.Tool, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return toolpin.Pin{}, false, fmt.Errorf("storing the pin of %s %q: %w", p.Server, p.Tool, err)
	} else if n == 1 {
		return p, true, nil
	}
	old, ok, err := s.Pin(ctx, p.Server, p.Tool)
	if err != nil {
		return toolpin.Pin{}, false, err
	}
	if !ok { // deleted between the two statements (an uninstall): nothing is pinned
		return toolpin.Pin{}, false, fmt.Errorf("storing the pin of %s %q: the server's pins were deleted meanwhile", p.Server, p.Tool)
	}
	return old, false, nil
}

// Hold returns the hold of (server, tool).
func (s *Store) Hold(ctx context.Context, server, tool string) (toolpin.Hold, bool, error) {
	h, err := scanHold(s.db.QueryRowContext(ctx, `SELECT `+holdCols+` FROM tool_holds WHERE server = $1 AND tool = $2`, []byte(server), []byte(tool)))
	if errors.Is(err, sql.ErrNoRows) {
		return toolpin.Hold{}, false, nil
	}
	if err != nil {
		return toolpin.Hold{}, false, fmt.Errorf("reading the hold of %s %q: %w", server, tool, err)
	}
	return h, true, nil
}

// Holds lists the holds of server, or of every server when server is "", sorted by
// server then tool.
func (s *Store) Holds(ctx context.Context, server string) ([]toolpin.Hold, error) {
	q, args := `SELECT `+holdCols+` FROM tool_holds ORDER BY server, tool`, []any(nil)
	if server != "" {
		q, args = `SELECT `+holdCols+` FROM tool_holds WHERE server = $1 ORDER BY server, tool`, []any{[]byte(server)}
	}
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("listing holds: %w", err)
	}
	defer rows.Close()
	var out []toolpin.Hold
	for rows.Next() {
		h, err := scanHold(rows)
		if err != nil {
			return nil, fmt.Errorf("listing holds: %w", err)
		}
		out = append(out, h)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("listing holds: %w", err)
	}
	return out, nil
}

// PutHold creates or replaces a hold.
func (s *Store) PutHold(ctx context.Context, h toolpin.Hold) error {
	findings, err := json.Marshal(h.Findings)
	if err != nil {
		return fmt.Errorf("storing the hold of %s %q: %w", h.Server, h.Tool, err)
	}
	if h.Findings == nil {
		findings = []byte("[]")
	}
	if _, err := s.db.ExecContext(ctx, `INSERT INTO tool_holds (`+holdCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
		ON CONFLICT (server, tool) DO UPDATE SET reason = excluded.reason, state = excluded.state, digest = excluded.digest,
		canonical = excluded.canonical, pinned_digest = excluded.pinned_digest, findings = excluded.findings,
		first_seen = excluded.first_seen, last_seen = excluded.last_seen, decided_by = excluded.decided_by, decided_at = excluded.decided_at`,
		[]byte(h.Server), []byte(h.Tool), string(h.Reason), string(h.State), h.Digest, []byte(h.Canonical), h.PinnedDigest,
		string(findings), formatTime(h.FirstSeen), formatTime(h.LastSeen), h.DecidedBy, optTime(h.DecidedAt)); err != nil {
		return fmt.Errorf("storing the hold of %s %q: %w", h.Server, h.Tool, err)
	}
	return nil
}

// DeleteHold removes the hold of (server, tool); none is not an error.
func (s *Store) DeleteHold(ctx context.Context, server, tool string) error {
	if _, err := s.db.ExecContext(ctx, `DELETE FROM tool_holds WHERE server = $1 AND tool = $2`, []byte(server), []byte(tool)); err != nil {
		return fmt.Errorf("deleting the hold of %s %q: %w", server, tool, err)
	}
	return nil
}

// DeleteHoldIf removes the hold of (server, tool) only while its digest is digest.
func (s *Store) DeleteHoldIf(ctx context.Context, server, tool, digest string) error {
	if _, err := s.db.ExecContext(ctx, `DELETE FROM tool_holds WHERE server = $1 AND tool = $2 AND digest = $3`, []byte(server), []byte(tool), digest); err != nil {
		return fmt.Errorf("deleting the hold of %s %q: %w", server, tool, err)
	}
	return nil
}

// DeleteServer removes every pin and hold of server and its trust policy (it was
// uninstalled: a reinstall starts trust over).
func (s *Store) DeleteServer(ctx context.Context, server string) error {
	for _, q := range []struct {
		sql string
		arg any
	}{{`DELETE FROM tool_holds WHERE server = $1`, []byte(server)}, {`DELETE FROM tool_pins WHERE server = $1`, []byte(server)},
		{`DELETE FROM upstream_trust WHERE server = $1`, server}} {
		if _, err := s.db.ExecContext(ctx, q.sql, q.arg); err != nil {
			return fmt.Errorf("deleting the pins of %s: %w", server, err)
		}
	}
	return nil
}

type scanner interface{ Scan(dest ...any) error }

func scanPin(r scanner) (toolpin.Pin, error) {
	var p toolpin.Pin
	var server, tool, canonical []byte
	var first, approvedAt string
	if err := r.Scan(&server, &tool, &p.Digest, &canonical, &first, &p.ApprovedBy, &approvedAt); err != nil {
		return p, err
	}
	p.Server, p.Tool, p.Canonical = string(server), string(tool), json.RawMessage(canonical)
	var err error
	if p.FirstSeen, err = parseTime(first); err != nil {
		return p, err
	}
	p.ApprovedAt, err = parseOptTime(approvedAt)
	return p, err
}

func scanHold(r scanner) (toolpin.Hold, error) {
	var h toolpin.Hold
	var server, tool, canonical []byte
	var reason, state, findings, first, last, decidedAt string
	if err := r.Scan(&server, &tool, &reason, &state, &h.Digest, &canonical, &h.PinnedDigest, &findings, &first, &last, &h.DecidedBy, &decidedAt); err != nil {
		return h, err
	}
	h.Server, h.Tool, h.Canonical = string(server), string(tool), json.RawMessage(canonical)
	h.Reason, h.State = toolpin.HoldReason(reason), toolpin.HoldState(state)
	var fs []textscan.Finding
	if err := json.Unmarshal([]byte(findings), &fs); err != nil {
		return h, fmt.Errorf("stored findings: %w", err)
	}
	if len(fs) > 0 {
		h.Findings = fs
	}
	var err error
	if h.FirstSeen, err = parseTime(first); err != nil {
		return h, err
	}
	if h.LastSeen, err = parseTime(last); err != nil {
		return h, err
	}
	h.DecidedAt, err = parseOptTime(decidedAt)
	return h, err
}

func optTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return formatTime(t)
}

func parseOptTime(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	return parseTime(s)
}

// TrustPolicy is one upstream server's trust policy (docs/trust.md): its pin mode, the
// scanner severity that holds a definition nobody approved, and whether its
// annotations may decide a call's action. It is kept by server name in its own table
// until it folds into the installed server's policy.
type TrustPolicy struct {
	Server string `json:"server"`
	// Pin is "tofu" or "approve" ("" is tofu).
	Pin string `json:"pin"`
	// HoldAt is a textscan severity ("high" …), "never", or "" for the default.
	HoldAt  string `json:"hold_at"`
	Trusted bool   `json:"trusted"`
}

// TrustPolicy returns server's trust policy; ok is false when none was set (the
// defaults apply).
func (s *Store) TrustPolicy(ctx context.Context, server string) (TrustPolicy, bool, error) {
	p := TrustPolicy{Server: server}
	err := s.db.QueryRowContext(ctx, `SELECT pin, hold_at, trusted FROM upstream_trust WHERE server = $1`, server).Scan(&p.Pin, &p.HoldAt, &p.Trusted)
	if errors.Is(err, sql.ErrNoRows) {
		return TrustPolicy{Server: server}, false, nil
	}
	if err != nil {
		return p, false, fmt.Errorf("reading the trust policy of %s: %w", server, err)
	}
	return p, true, nil
}

// SetTrustPolicy creates or replaces server's trust policy.
func (s *Store) SetTrustPolicy(ctx context.Context, p TrustPolicy) error {
	if err := checkIdent("server", p.Server, maxIdent); err != nil {
		return fmt.Errorf("storing a trust policy: %w", err)
	}
	if _, err := s.db.ExecContext(ctx, `INSERT INTO upstream_trust (server, pin, hold_at, trusted, updated_at) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (server) DO UPDATE SET pin = excluded.pin, hold_at = excluded.hold_at, trusted = excluded.trusted, updated_at = excluded.updated_at`,
		p.Server, p.Pin, p.HoldAt, p.Trusted, formatTime(now())); err != nil {
		return fmt.Errorf("storing the trust policy of %s: %w", p.Server, err)
	}
	return nil
}
