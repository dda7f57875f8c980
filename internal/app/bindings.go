package app

import (
	"context"
	"strings"
	"sync"
	"time"
)

// bindingEvery is how often a callable name's use is written to the store's recent
// bindings (mcp_bindings, what mcp/server/details shows as recent_bindings): a tool
// called a thousand times a second costs one write a minute, not one per call.
const bindingEvery = time.Minute

// bindingNotes remembers when each callable was last written, bounded: at maxNotes it
// starts over (the cost is one extra write per callable).
type bindingNotes struct {
	mu   sync.Mutex
	last map[string]time.Time
}

const maxNotes = 8192

// noteBinding records, at most once per bindingEvery, that the upstream tool published
// as the canonical id was called. It never waits for the store.
func (a *App) noteBinding(id string) {
	server, _, ok := strings.Cut(id, ".")
	if !ok || server == "local" || server == "server" || server == "toolgate" {
		return // toolgate's own tools: no lock taken on their path
	}
	a.ut.mu.Lock()
	st := a.ut.servers[server]
	var raw string
	if st != nil {
		raw = rawOf(st.bindings, id)
	}
	a.ut.mu.Unlock()
	if raw == "" {
		return // not an upstream tool
	}
	now := time.Now()
	n := &a.bnotes
	n.mu.Lock()
	if n.last == nil || len(n.last) >= maxNotes {
		n.last = map[string]time.Time{}
	}
	if t, ok := n.last[id]; ok && now.Sub(t) < bindingEvery {
		n.mu.Unlock()
		return
	}
	n.last[id] = now
	n.mu.Unlock()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := a.RecordBinding(ctx, server, id, raw); err != nil {
			a.log.Debug("recording a binding", "server", server, "tool", id, "err", err)
		}
	}()
}
