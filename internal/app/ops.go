package app

import "context"

// Ready reports whether the App can serve calls now: its store answers and is at the
// schema version this binary knows (store.CheckReady). toolgate serve's /readyz asks.
func (a *App) Ready(ctx context.Context) error { return a.st.CheckReady(ctx) }
