package app

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/toolgate/toolgate/internal/store"
)

// Sessions valid on any replica (docs/deployment.md, "Sessions on any replica"): the
// /mcp handler of toolgate serve signs each session id with a key every replica reads
// from the shared store, and carries its turn's SessionState; a replica that does not
// hold the session opens the same turn again with ResumeTurn. This file is the app's
// half: the key, the state, the resumption, and the ended sessions in the store.

// sessionKeyName is the installation key that signs MCP session ids.
const sessionKeyName = "mcp-session-hmac"

// ErrStaleSession is returned by ResumeTurn when the principal's grants give another
// catalogue than the one the session was opened with.
var ErrStaleSession = errors.New("the session's catalogue is no longer the principal's")

// SessionKey is the key that signs MCP session ids, the same on every replica of the
// store (created on first use).
func (a *App) SessionKey(ctx context.Context) ([]byte, error) {
	k, err := a.st.Key(ctx, sessionKeyName)
	if err != nil {
		return nil, fmt.Errorf("reading the session key: %w", err)
	}
	return k, nil
}

// SharesSessions reports whether the App's sessions should be valid on other
// processes: its store is PostgreSQL, shared by replicas. On SQLite one process
// serves, and its sessions end with it.
func (a *App) SharesSessions() bool { return a.st.Dialect() == "postgres" }

// SessionState is what another replica needs to open this turn again: its execution
// id and its catalogue's hash.
func (t turn) SessionState() string {
	l, err := t.Turn.ListTools(context.Background())
	if err != nil {
		return t.ID()
	}
	return t.ID() + " " + l.CatalogHash
}

// ResumeTurn opens the turn of a session another replica opened, from its
// SessionState: the same execution id, and only if the principal's grants give the
// same catalogue now (else ErrStaleSession, and the client initializes again).
func (a *App) ResumeTurn(ctx context.Context, req TurnRequest, state string) (Turn, error) {
	id, hash, ok := strings.Cut(state, " ")
	if !ok || !strings.HasPrefix(id, "exec-") || hash == "" {
		return nil, fmt.Errorf("resuming a session: malformed state")
	}
	req.ID = id
	t, err := a.OpenTurn(ctx, req)
	if err != nil {
		return nil, err
	}
	l, err := t.ListTools(ctx)
	if err != nil || l.CatalogHash != hash {
		t.Close()
		return nil, ErrStaleSession
	}
	return t, nil
}

// EndSession records that the session whose id hashes to idHash ended (store).
func (a *App) EndSession(ctx context.Context, idHash string, expires time.Time) error {
	return a.st.EndSession(ctx, idHash, expires)
}

// SessionEnded reports whether EndSession recorded idHash, on any replica.
func (a *App) SessionEnded(ctx context.Context, idHash string) (bool, error) {
	return a.st.SessionEnded(ctx, idHash)
}

// endedClockMargin is how far before its previous read WatchEndedSessions reads again:
// end times are the ending replica's clock.
const endedClockMargin = time.Minute

// WatchEndedSessions calls f with the hashes of sessions other replicas ended, as
// soon as the store says so (PostgreSQL's notification, and every reconnection of its
// listener), until the returned stop is called. A hash may come more than once. On
// SQLite nothing is watched (one process serves).
func (a *App) WatchEndedSessions(f func(hashes []string)) (stop func()) {
	changes := a.st.Changes()
	if !changes.Notifies() {
		return func() {}
	}
	ctx, cancel := context.WithCancel(context.Background())
	sub := changes.Subscribe(store.TopicSessions)
	done := make(chan struct{})
	go func() {
		defer close(done)
		since := time.Now().Add(-endedClockMargin)
		for range sub.C {
			for {
				read := time.Now()
				hs, last, err := a.st.EndedSessionsSince(ctx, since)
				if err != nil {
					if ctx.Err() == nil {
						a.log.Warn("reading sessions ended elsewhere", "err", err)
					}
					break
				}
				f(hs)
				if len(hs) < store.MaxEndedBatch || !last.After(since) {
					since = read.Add(-endedClockMargin)
					break
				}
				since = last // a full batch: more may follow
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			sub.Close()
			cancel()
			<-done
		})
	}
}
