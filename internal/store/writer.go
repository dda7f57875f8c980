package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"

	"github.com/toolgate/toolgate/internal/audit"
)

// auditWriter is the connection the group-commit writer appends through, with its
// statements compiled once. Before it existed every batch paid for compiling BEGIN,
// the chain-head query, the INSERT and COMMIT again (SQLite's parser showed up as
// ~14 % of a tools/call's CPU); now a batch only binds and steps.
//
// It holds one pooled connection for as long as it works, outside database/sql's
// transaction bookkeeping: BEGIN IMMEDIATE and COMMIT are statements run on it. Only
// the writer (the holder of Store.auditSem) touches it, so it needs no lock of its own.
// Any failure discards it, connection and all (see discard), and the next batch starts
// a fresh one, so a connection left inside a transaction or broken is never reused.
type auditWriter struct {
	conn                    *sql.Conn
	beginSQL                string    // run as it is when begin is nil (see dialect)
	begin, commit, rollback *sql.Stmt // begin is nil on PostgreSQL
	head, insert            *sql.Stmt
	batchInsert             bool // insert takes the whole batch as arrays (PostgreSQL)
	stmtsForClose           []*sql.Stmt
	text                    func(string) string // the dialect's auditText
}

const (
	sqlCommit      = `COMMIT`
	sqlRollback    = `ROLLBACK`
	sqlAuditHead   = `SELECT seq, hash FROM audit_events ORDER BY seq DESC LIMIT 1`
	sqlAuditInsert = `INSERT INTO audit_events (seq, time, call_id, turn_id, principal, transport,
		tool, alias, action, resource, decision, grant_id, code, message, latency_us, args, prev_hash, hash)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18)`
	// sqlAuditInsertArrays inserts a whole batch in one statement (one round trip to a
	// PostgreSQL server instead of one per event), each column an array.
	sqlAuditInsertArrays = `INSERT INTO audit_events (seq, time, call_id, turn_id, principal, transport,
		tool, alias, action, resource, decision, grant_id, code, message, latency_us, args, prev_hash, hash)
		SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[],
			$8::text[], $9::text[], $10::text[], $11::text[], $12::text[], $13::text[], $14::text[], $15::bigint[],
			$16::text[], $17::text[], $18::text[])`
)

// newAuditWriter takes a connection from the pool and prepares the writer's statements
// on it.
func newAuditWriter(ctx context.Context, db *sql.DB, d *dialect) (*auditWriter, error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("taking the audit writer's connection: %w", err)
	}
	w := &auditWriter{conn: conn, text: d.auditText, beginSQL: d.beginAppend, batchInsert: d.batchInsert}
	insert := sqlAuditInsert
	if d.batchInsert {
		insert = sqlAuditInsertArrays
	}
	stmts := []struct {
		dst **sql.Stmt
		sql string
	}{
		{&w.commit, sqlCommit}, {&w.rollback, sqlRollback}, {&w.head, sqlAuditHead}, {&w.insert, insert},
	}
	if d.prepareBegin {
		stmts = append(stmts, struct {
			dst **sql.Stmt
			sql string
		}{&w.begin, d.beginAppend})
	}
	if d.name == "postgres" {
		// PostgreSQL has no busy timeout: bound the wait for another replica's append
		// the same way, so a stuck replica fails calls closed instead of hanging them.
		if _, err := conn.ExecContext(ctx, fmt.Sprintf(`SET lock_timeout = %d`, BusyTimeout.Milliseconds())); err != nil {
			w.discard()
			return nil, fmt.Errorf("setting the audit writer's lock timeout: %w", err)
		}
	}
	for _, p := range stmts {
		st, err := conn.PrepareContext(ctx, p.sql)
		if err != nil {
			w.discard()
			return nil, fmt.Errorf("preparing %q: %w", p.sql, err)
		}
		*p.dst = st
		w.stmtsForClose = append(w.stmtsForClose, st)
	}
	return w, nil
}

// discard closes the statements and removes the connection from the pool for good
// rather than returning it: it may be inside a transaction that could not be ended, and
// a later user of the pool must not inherit that.
func (w *auditWriter) discard() {
	for _, st := range w.stmtsForClose {
		st.Close()
	}
	// Returning driver.ErrBadConn from Raw makes database/sql close the driver
	// connection instead of putting it back.
	_ = w.conn.Raw(func(any) error { return driver.ErrBadConn })
	w.conn.Close()
}

// close releases the connection to the pool; the writer must be outside a transaction.
func (w *auditWriter) close() {
	for _, st := range w.stmtsForClose {
		st.Close()
	}
	w.conn.Close()
}

// writeBatch writes batch in one transaction that first takes the append lock (see
// dialect.beginAppend), chaining each event to the one before. It sets each event's
// Seq, PrevHash and Hash only in its copy; the caller publishes them after the commit
// succeeded. The transaction ends before it returns, committed or rolled back; if it
// could not be ended, the error says so and the caller discards the writer.
func (w *auditWriter) writeBatch(ctx context.Context, batch []*pendingAppend) (err error) {
	if w.begin != nil {
		_, err = w.begin.ExecContext(ctx)
	} else {
		_, err = w.conn.ExecContext(ctx, w.beginSQL)
	}
	if err != nil {
		// A BEGIN that failed started nothing (or, on PostgreSQL, a transaction whose lock
		// timed out); the connection itself may be what failed. The caller discards it
		// either way, which ends whatever it holds.
		return fmt.Errorf("begin: %w", err)
	}
	committed := false
	defer func() {
		if committed {
			return
		}
		if _, rbErr := w.rollback.ExecContext(context.Background()); rbErr != nil {
			err = errors.Join(err, fmt.Errorf("rollback: %w", rbErr))
		}
	}()
	var last int64
	var prev string
	err = w.head.QueryRowContext(ctx).Scan(&last, &prev)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("reading the chain head: %w", err)
	}
	for _, p := range batch {
		ev := &p.ev
		ev.Seq = last + 1
		ev.PrevHash = prev
		ev.Hash = audit.ComputeHash(prev, ev)
		last, prev = ev.Seq, ev.Hash
	}
	if w.batchInsert {
		err = w.insertArrays(ctx, batch)
	} else {
		err = w.insertRows(ctx, batch)
	}
	if err != nil {
		return err
	}
	if _, err := w.commit.ExecContext(ctx); err != nil {
		// A COMMIT that failed (SQLITE_BUSY, an I/O error) may leave the transaction
		// open; the deferred ROLLBACK ends it. If the COMMIT did end it, the ROLLBACK
		// fails with "no transaction is active", and the writer is discarded anyway.
		return fmt.Errorf("commit: %w", err)
	}
	committed = true
	return nil
}

func (w *auditWriter) insertRows(ctx context.Context, batch []*pendingAppend) error {
	t := w.text
	for _, p := range batch {
		ev := &p.ev
		if _, err := w.insert.ExecContext(ctx, ev.Seq, formatTime(ev.Time), t(ev.CallID), t(ev.TurnID), t(ev.Principal),
			t(ev.Transport), t(ev.Tool), t(ev.Alias), t(ev.Action), t(ev.Resource), string(ev.Decision), t(ev.GrantID),
			t(ev.Code), t(ev.Message), ev.LatencyMicros, p.args, ev.PrevHash, ev.Hash); err != nil {
			return fmt.Errorf("inserting seq %d: %w", ev.Seq, err)
		}
	}
	return nil
}

// insertArrays binds the batch column by column to sqlAuditInsertArrays.
func (w *auditWriter) insertArrays(ctx context.Context, batch []*pendingAppend) error {
	n := len(batch)
	seqs, latencies := make([]int64, n), make([]int64, n)
	const textCols = 16
	cols := make([][]string, textCols)
	for i := range cols {
		cols[i] = make([]string, n)
	}
	t := w.text
	for i, p := range batch {
		ev := &p.ev
		seqs[i], latencies[i] = ev.Seq, ev.LatencyMicros
		for c, v := range [textCols]string{formatTime(ev.Time), t(ev.CallID), t(ev.TurnID), t(ev.Principal),
			t(ev.Transport), t(ev.Tool), t(ev.Alias), t(ev.Action), t(ev.Resource), string(ev.Decision), t(ev.GrantID),
			t(ev.Code), t(ev.Message), p.args, ev.PrevHash, ev.Hash} {
			cols[c][i] = v
		}
	}
	args := []any{seqs}
	for _, c := range cols[:13] {
		args = append(args, c)
	}
	args = append(args, latencies)
	for _, c := range cols[13:] {
		args = append(args, c)
	}
	if _, err := w.insert.ExecContext(ctx, args...); err != nil {
		return fmt.Errorf("inserting seq %d to %d: %w", batch[0].ev.Seq, batch[n-1].ev.Seq, err)
	}
	return nil
}
