package store

import (
	"context"
	"fmt"
	"time"
)

// TopicSessions wakes subscribers when a session ended on some replica
// (EndSession): they read EndedSessionsSince and end the ones they hold.
const TopicSessions Topic = "sessions"

// MaxEndedBatch bounds one EndedSessionsSince read.
const MaxEndedBatch = 1000

// EndSession records that the session whose id hashes to idHash ended, until expires
// (when its id is refused anyway), and forgets sessions whose expiry has passed.
// Recording one twice is not an error.
func (s *Store) EndSession(ctx context.Context, idHash string, expires time.Time) error {
	if err := checkIdent("session hash", idHash, 128); err != nil {
		return fmt.Errorf("ending a session: %w", err)
	}
	n := now()
	if _, err := s.db.ExecContext(ctx, `INSERT INTO ended_sessions (id_hash, ended_at, expires_at) VALUES ($1, $2, $3)
		ON CONFLICT (id_hash) DO NOTHING`, idHash, formatTime(n), formatTime(expires)); err != nil {
		return fmt.Errorf("ending a session: %w", err)
	}
	if _, err := s.db.ExecContext(ctx, `DELETE FROM ended_sessions WHERE expires_at < $1`, formatTime(n)); err != nil {
		return fmt.Errorf("forgetting expired sessions: %w", err)
	}
	return nil
}

// SessionEnded reports whether EndSession recorded idHash (and it has not expired).
func (s *Store) SessionEnded(ctx context.Context, idHash string) (bool, error) {
	var n int
	if err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM ended_sessions WHERE id_hash = $1`, idHash).Scan(&n); err != nil {
		return false, fmt.Errorf("reading ended sessions: %w", err)
	}
	return n > 0, nil
}

// EndedSessionsSince returns the hashes of sessions ended at or after since (at most
// MaxEndedBatch, oldest first) and the end time of the last one returned (since when
// none). Times are the ending replica's clock: a reader asks from a margin before its
// previous read so that clocks a little apart miss nothing.
func (s *Store) EndedSessionsSince(ctx context.Context, since time.Time) ([]string, time.Time, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id_hash, ended_at FROM ended_sessions WHERE ended_at >= $1
		ORDER BY ended_at LIMIT `+fmt.Sprint(MaxEndedBatch), formatTime(since))
	if err != nil {
		return nil, since, fmt.Errorf("reading ended sessions: %w", err)
	}
	defer rows.Close()
	var out []string
	last := since
	for rows.Next() {
		var h, at string
		if err := rows.Scan(&h, &at); err != nil {
			return nil, since, fmt.Errorf("reading ended sessions: %w", err)
		}
		t, err := parseTime(at)
		if err != nil {
			return nil, since, fmt.Errorf("reading ended sessions: %w", err)
		}
		out = append(out, h)
		last = t
	}
	if err := rows.Err(); err != nil {
		return nil, since, fmt.Errorf("reading ended sessions: %w", err)
	}
	return out, last, nil
}
