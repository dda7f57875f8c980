package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/toolgate/toolgate/internal/audit"
)

// MaxAuditEventBytes bounds the strings of one audit event together. Values come from
// callers (a harness chooses tool names and aliases), and the log must not become a
// way to fill the disk; an event over the bound is refused, which fails its call closed.
const MaxAuditEventBytes = 1 << 20

// AppendAudit appends e to the hash chain. In one IMMEDIATE transaction it reads the
// newest event, sets e.Seq, e.PrevHash and e.Hash, and inserts e; the commit is fsynced
// before it returns, so the event survives the process being killed right after. The
// write lock serialises appenders across processes, which is what keeps one unbroken
// chain however many daemons and CLI commands share the data directory; within one
// process, concurrent appends share a transaction (group commit, see auditq.go), which
// changes neither the chain nor the guarantee. A zero e.Time is set to now; times are
// kept in UTC to the microsecond. Strings are stored exactly, NUL bytes and all;
// argument names and HMACs must be valid UTF-8. On error e is unchanged and the event
// was not written.
func (s *Store) AppendAudit(ctx context.Context, e *audit.Event) error {
	if err := checkEvent(e); err != nil {
		return fmt.Errorf("appending audit event: %w", err)
	}
	ev := *e
	if ev.Time.IsZero() {
		ev.Time = now()
	}
	ev.Time = audit.Truncate(ev.Time)
	if y := ev.Time.Year(); y < 1 || y > 9999 {
		return fmt.Errorf("appending audit event: %w: time %v is out of range", ErrInvalid, ev.Time)
	}
	args := "{}"
	if len(ev.Args) > 0 {
		b, err := json.Marshal(ev.Args)
		if err != nil {
			return fmt.Errorf("appending audit event: encoding args: %w", err)
		}
		args = string(b)
	}
	p := &pendingAppend{ev: ev, args: args, done: make(chan error, 1)}
	if err := s.enqueueAudit(ctx, p); err != nil {
		return fmt.Errorf("appending audit event: %w", err)
	}
	*e = p.ev
	return nil
}

// insertAuditBatch writes batch through the store's audit writer (see writer.go),
// creating it on first use and after a failure. It runs with auditSem held.
func (s *Store) insertAuditBatch(ctx context.Context, batch []*pendingAppend) error {
	if err := s.checkFile(); err != nil {
		return err
	}
	if s.writer == nil {
		w, err := newAuditWriter(ctx, s.db, s.d)
		if err != nil {
			return err
		}
		s.writer = w
	}
	if err := s.writer.writeBatch(ctx, batch); err != nil {
		// Whatever failed, the next batch starts on a fresh connection: this one may be
		// broken or still inside the transaction.
		s.writer.discard()
		s.writer = nil
		return err
	}
	return nil
}

func checkEvent(e *audit.Event) error {
	switch e.Decision {
	case audit.Allowed, audit.Denied, audit.Failed, audit.Escalated:
	default:
		return fmt.Errorf("%w: decision %q: want allowed, denied, failed or escalated", ErrInvalid, e.Decision)
	}
	n := 0
	for _, s := range []string{e.CallID, e.TurnID, e.Principal, e.Transport, e.Tool, e.Alias, e.Action,
		e.Resource, e.GrantID, e.Code, e.Message} {
		n += len(s)
	}
	for k, v := range e.Args {
		if !utf8.ValidString(k) || !utf8.ValidString(v) {
			return fmt.Errorf("%w: argument name or hash %q is not valid UTF-8", ErrInvalid, k)
		}
		n += len(k) + len(v)
	}
	if n > MaxAuditEventBytes {
		return fmt.Errorf("%w: event strings total %d bytes, at most %d", ErrInvalid, n, MaxAuditEventBytes)
	}
	return nil
}

// ListAudit returns the events f selects in ascending seq order.
func (s *Store) ListAudit(ctx context.Context, f audit.Filter) ([]audit.Event, error) {
	var where []string
	var params []any
	add := func(cond string, v any) {
		params = append(params, v)
		where = append(where, fmt.Sprintf(cond, len(params)))
	}
	if f.AfterSeq > 0 {
		add("seq > $%d", f.AfterSeq)
	}
	// Filter values are mapped as the stored strings were (dialect.auditText).
	enc := s.d.auditText
	if f.Principal != "" {
		add("principal = $%d", enc(f.Principal))
	}
	if f.Tool != "" {
		add("tool = $%d", enc(f.Tool))
	}
	if f.Decision != "" {
		add("decision = $%d", enc(f.Decision))
	}
	if f.CallID != "" {
		add("call_id = $%d", enc(f.CallID))
	}
	if f.Resource != "" {
		add("resource = $%d", enc(f.Resource))
	}
	if !f.Since.IsZero() {
		add("time >= $%d", formatTime(audit.Truncate(f.Since)))
	}
	if !f.Until.IsZero() {
		add("time < $%d", formatTime(audit.Truncate(f.Until)))
	}
	q := `SELECT seq, time, call_id, turn_id, principal, transport, tool, alias, action, resource, decision,
		grant_id, code, message, latency_us, args, prev_hash, hash FROM audit_events`
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	if f.Last && f.Limit > 0 {
		q += " ORDER BY seq DESC"
	} else {
		q += " ORDER BY seq"
	}
	if f.Limit > 0 {
		params = append(params, f.Limit)
		q += fmt.Sprintf(" LIMIT $%d", len(params))
	}
	rows, err := s.db.QueryContext(ctx, q, params...)
	if err != nil {
		return nil, fmt.Errorf("listing audit events: %w", err)
	}
	defer rows.Close()
	var out []audit.Event
	for rows.Next() {
		var e audit.Event
		var t, decision, args string
		if err := rows.Scan(&e.Seq, &t, &e.CallID, &e.TurnID, &e.Principal, &e.Transport, &e.Tool, &e.Alias,
			&e.Action, &e.Resource, &decision, &e.GrantID, &e.Code, &e.Message, &e.LatencyMicros, &args,
			&e.PrevHash, &e.Hash); err != nil {
			return nil, fmt.Errorf("listing audit events: %w", err)
		}
		e.Decision = audit.Decision(decision)
		for _, field := range []*string{&e.CallID, &e.TurnID, &e.Principal, &e.Transport, &e.Tool, &e.Alias, &e.Action,
			&e.Resource, &e.GrantID, &e.Code, &e.Message} {
			if *field, err = s.d.auditFromDB(*field); err != nil {
				return nil, fmt.Errorf("listing audit events: seq %d: %w", e.Seq, err)
			}
		}
		if e.Time, err = parseTime(t); err != nil {
			return nil, fmt.Errorf("listing audit events: seq %d: %w", e.Seq, err)
		}
		if args != "{}" {
			if err := json.Unmarshal([]byte(args), &e.Args); err != nil {
				return nil, fmt.Errorf("listing audit events: seq %d: args: %w", e.Seq, err)
			}
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("listing audit events: %w", err)
	}
	if f.Last && f.Limit > 0 {
		slices.Reverse(out)
	}
	return out, nil
}

// AuditHead returns the newest event's seq and hash (0 and "" for an empty log). A
// head recorded outside the data directory lets a later verification notice that
// newest events were removed, which the chain alone cannot show.
func (s *Store) AuditHead(ctx context.Context) (seq int64, hash string, err error) {
	err = s.db.QueryRowContext(ctx, `SELECT seq, hash FROM audit_events ORDER BY seq DESC LIMIT 1`).Scan(&seq, &hash)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, "", nil
	}
	if err != nil {
		return 0, "", fmt.Errorf("reading the audit head: %w", err)
	}
	return seq, hash, nil
}
