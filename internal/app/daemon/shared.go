package daemon

import (
	"context"
	"time"

	"github.com/toolgate/toolgate/internal/app"
	"github.com/toolgate/toolgate/internal/mcpserver"
)

// sharedSessions is the store-backed mcpserver.SharedSessions of replicas on one
// PostgreSQL database: the signing key every replica reads from the store, and the
// sessions a DELETE ended (docs/deployment.md, "Sessions on any replica").
type sharedSessions struct {
	a   *app.App
	key []byte
}

func (s sharedSessions) Key() []byte { return s.key }
func (s sharedSessions) Ended(ctx context.Context, h string) (bool, error) {
	return s.a.SessionEnded(ctx, h)
}
func (s sharedSessions) End(ctx context.Context, h string, exp time.Time) error {
	return s.a.EndSession(ctx, h, exp)
}

// shareSessions sets opts up so that a's replicas serve each other's sessions, when a's
// store is shared (PostgreSQL); it returns nil on SQLite, where one process serves.
// The returned function starts ending the sessions other replicas ended, on h, and
// returns what stops it.
func shareSessions(a *app.App, opts *mcpserver.HandlerOptions) (watch func(h *mcpserver.Handler) (stop func()), err error) {
	if !a.SharesSessions() {
		return nil, nil
	}
	key, err := a.SessionKey(context.Background())
	if err != nil {
		return nil, err
	}
	opts.Shared = sharedSessions{a: a, key: key}
	opts.ResumeTurn = func(ctx context.Context, principal, state string) (mcpserver.Turn, error) {
		return a.ResumeTurn(ctx, app.TurnRequest{Principal: principal, Transport: "http"}, state)
	}
	return func(h *mcpserver.Handler) func() {
		return a.WatchEndedSessions(func(hs []string) { h.EndShared(hs...) })
	}, nil
}
