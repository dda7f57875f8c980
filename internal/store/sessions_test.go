package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/store"
)

// An ended session is remembered until its expiry, on both dialects, read back by hash
// and by time; recording it twice is fine, and a malformed hash is refused.
func TestEndedSessions(t *testing.T) {
	for name, s := range map[string]*store.Store{"sqlite": openTemp(t), "postgres": openPG(t)} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			before := time.Now().Add(-time.Second)
			if err := s.EndSession(ctx, "aa11", time.Now().Add(time.Hour)); err != nil {
				t.Fatal(err)
			}
			if err := s.EndSession(ctx, "aa11", time.Now().Add(time.Hour)); err != nil {
				t.Errorf("ending twice: %v", err)
			}
			if err := s.EndSession(ctx, "bb22", time.Now().Add(-time.Minute)); err != nil { // already expired
				t.Fatal(err)
			}
			if ended, err := s.SessionEnded(ctx, "aa11"); err != nil || !ended {
				t.Errorf("aa11 ended: %v %v", ended, err)
			}
			if ended, err := s.SessionEnded(ctx, "cc33"); err != nil || ended {
				t.Errorf("cc33 never ended: %v %v", ended, err)
			}
			// The next insert forgets bb22, whose expiry passed.
			if err := s.EndSession(ctx, "dd44", time.Now().Add(time.Hour)); err != nil {
				t.Fatal(err)
			}
			if ended, _ := s.SessionEnded(ctx, "bb22"); ended {
				t.Error("an expired session is still remembered")
			}
			hs, last, err := s.EndedSessionsSince(ctx, before)
			if err != nil || len(hs) != 2 || hs[0] != "aa11" || hs[1] != "dd44" || !last.After(before) {
				t.Errorf("since: %v %v %v", hs, last, err)
			}
			if hs, _, err := s.EndedSessionsSince(ctx, time.Now().Add(time.Minute)); err != nil || len(hs) != 0 {
				t.Errorf("since the future: %v %v", hs, err)
			}
			if err := s.EndSession(ctx, "", time.Now()); !errors.Is(err, store.ErrInvalid) {
				t.Errorf("empty hash: %v", err)
			}
		})
	}
}
