package daemon

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/toolgate/toolgate/internal/store"
)

// Readiness probe timing: a check may take readyTimeout before the store counts as
// unreachable, and one result answers every probe for readyCacheFor, so that any
// number of unauthenticated probes cost the database at most one read per interval.
const (
	readyTimeout  = 2 * time.Second
	readyCacheFor = time.Second
)

// readiness answers /readyz: 200 {"status":"ready"} when the store answers and its
// schema is the one this binary knows, else 503 with a reason (docs/kernel.md,
// "toolgate serve"). Concurrent probes share one check; the lock is never held
// across it.
type readiness struct {
	check func(context.Context) error
	log   *slog.Logger

	mu      sync.Mutex
	at      time.Time     // when reason was decided
	reason  string        // "" when ready
	running chan struct{} // closed when the check under way ends; nil when none runs
}

// readyReason maps a CheckReady error to the reason /readyz names.
func readyReason(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, store.ErrSchemaTooNew):
		return "schema_too_new"
	case errors.Is(err, store.ErrSchemaOutdated):
		return "schema_outdated"
	default:
		return "store_unreachable"
	}
}

func (rd *readiness) current() string {
	rd.mu.Lock()
	if rd.running == nil && !rd.at.IsZero() && time.Since(rd.at) < readyCacheFor {
		r := rd.reason
		rd.mu.Unlock()
		return r
	}
	if ch := rd.running; ch != nil {
		rd.mu.Unlock()
		<-ch
		rd.mu.Lock()
		r := rd.reason
		rd.mu.Unlock()
		return r
	}
	ch := make(chan struct{})
	rd.running = ch
	prev, first := rd.reason, rd.at.IsZero()
	rd.mu.Unlock()

	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	err := rd.check(ctx)
	cancel()
	r := readyReason(err)
	if r != prev || (first && r != "") {
		if r == "" {
			rd.log.Info("ready again: the store answers")
		} else {
			rd.log.Warn("not ready", "reason", r, "err", err)
		}
	}
	rd.mu.Lock()
	rd.reason, rd.at, rd.running = r, time.Now(), nil
	rd.mu.Unlock()
	close(ch)
	return r
}

func (rd *readiness) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	if r := rd.current(); r != "" {
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"status":"unavailable","reason":"` + r + `"}` + "\n"))
		return
	}
	_, _ = w.Write([]byte(`{"status":"ready"}` + "\n"))
}
