package app

import (
	"context"
	"sync"
	"time"

	"github.com/toolgate/toolgate/internal/kernel"
)

// warmEvery bounds how often one server is asked to warm: a turn opens per stateless
// request and per session, and asking again within this window only repeats a no-op.
const warmEvery = 2 * time.Second

// warmTimeout bounds one warm request (a relay round trip at most; the start itself
// runs in the host, not waited for).
const warmTimeout = 5 * time.Second

// warmer starts the upstream servers a new turn publishes, in the background, so that
// its first call finds them running: start stays lazy (nothing starts at install or at
// toolgate serve's start, docs/host.md), but a harness that opens a session, lists
// its tools and then thinks for a while should not wait for an npm server's start at
// its first call. Asking is cheap and bounded: at most one request per server per
// warmEvery, from one goroutine at a time per batch.
type warmer struct {
	mu   sync.Mutex
	last map[string]time.Time // when each server was last asked
}

// builtinSource reports a Tool.Source that names no upstream server.
func builtinSource(s string) bool { return s == "toolgate" || s == "workspace" || s == "" }

// warmTurn asks the host to warm the servers t publishes that were not asked
// within warmEvery. It never blocks on I/O.
func (a *App) warmTurn(t *kernel.Turn) {
	up := a.ut.up // what the upstream tools call (upstreamtools.go)
	if up == nil || a.opts.NoWarm {
		return
	}
	var todo []string
	now := time.Now()
	w := &a.warm
	w.mu.Lock()
	for _, s := range t.Sources() {
		if builtinSource(s) {
			continue
		}
		if at, ok := w.last[s]; ok && now.Sub(at) < warmEvery {
			continue
		}
		if w.last == nil {
			w.last = make(map[string]time.Time)
		}
		w.last[s] = now
		todo = append(todo, s)
	}
	w.mu.Unlock()
	if len(todo) == 0 {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), warmTimeout)
		defer cancel()
		for _, s := range todo {
			if err := up.Warm(ctx, s); err != nil {
				a.log.Debug("warming an upstream server", "server", s, "err", err)
			}
		}
	}()
}
