package app

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"sync"
	"time"

	"github.com/toolgate/toolgate/internal/kernel"
	"github.com/toolgate/toolgate/internal/mcpspec"
)

// List changes to open sessions (docs/host.md, "List changes to open sessions"): a
// turn implements mcpserver.ListWatcher. While some session watches, one goroutine
// per App looks every listWatchInterval whether anything that decides catalogues
// moved (policyGen: a grant, a namespace switch, an install or uninstall, an
// upstream's catalogue, a quarantine by pinning — each bumps it) and only then
// recomputes what each watching session sees now, telling a session only the lists
// whose digest differs from the one it last saw. A burst of changes inside one
// interval is one pass and at most one notification per list and session.

// listWatchInterval is how often the watcher looks for changes: the coalescing
// window, and the longest a change takes to reach a stream on a process whose store
// does not notify (it also brings the policy up to date, one cheap read).
const listWatchInterval = 500 * time.Millisecond

// listWatch is one session's watch.
type listWatch struct {
	t     turn
	kinds mcpspec.ListKind

	mu      sync.Mutex // held while changed runs, so stop waits for it
	gone    bool
	changed func(mcpspec.ListKind)
	last    [3]string // the digests the session last saw: tools, resources, prompts
}

// listWatchers are an App's watches.
type listWatchers struct {
	mu      sync.Mutex
	next    int
	w       map[int]*listWatch
	running bool
	lastGen int64
	pass    sync.Mutex // one pass at a time (the loop's, a test's)
}

// WatchLists implements mcpserver.ListWatcher.
func (t turn) WatchLists(kinds mcpspec.ListKind, changed func(mcpspec.ListKind)) (stop func()) {
	a := t.a
	w := &listWatch{t: t, kinds: kinds, changed: changed}
	ctx, cancel := context.WithTimeout(context.Background(), relayCatalogTimeout)
	defer cancel()
	w.last = a.listDigests(ctx, t, kinds, a.catalogs(ctx), map[string]string{})
	if kinds&mcpspec.ToolsList != 0 {
		// What the session saw is its turn's own catalogue, fixed at initialize.
		if l, err := t.Turn.ListTools(ctx); err == nil {
			w.last[0] = l.CatalogHash
		}
	}
	lw := &a.lw
	lw.mu.Lock()
	if lw.w == nil {
		lw.w = map[int]*listWatch{}
	}
	id := lw.next
	lw.next++
	lw.w[id] = w
	if !lw.running {
		lw.running = true
		lw.lastGen = a.policyGen.Load()
		go a.watchLists()
	}
	lw.mu.Unlock()
	return func() {
		lw.mu.Lock()
		delete(lw.w, id)
		lw.mu.Unlock()
		w.mu.Lock()
		w.gone = true
		w.mu.Unlock()
	}
}

// watchLists runs passes while some session watches.
func (a *App) watchLists() {
	t := time.NewTicker(listWatchInterval)
	defer t.Stop()
	for range t.C {
		lw := &a.lw
		lw.mu.Lock()
		if len(lw.w) == 0 {
			lw.running = false
			lw.mu.Unlock()
			return
		}
		lw.mu.Unlock()
		a.listPass()
	}
}

// listPass brings the policy up to date and, when anything moved since the last
// pass, tells each watching session the lists that changed for it.
func (a *App) listPass() {
	lw := &a.lw
	lw.pass.Lock()
	defer lw.pass.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := a.refresh(ctx); err != nil {
		a.log.Warn("re-reading grants for the sessions' list changes", "err", err)
	}
	gen := a.policyGen.Load()
	lw.mu.Lock()
	if gen == lw.lastGen {
		lw.mu.Unlock()
		return
	}
	lw.lastGen = gen
	watches := make([]*listWatch, 0, len(lw.w))
	for _, w := range lw.w {
		watches = append(watches, w)
	}
	lw.mu.Unlock()
	cats := a.catalogs(ctx)
	tools := map[string]string{} // one catalogue per principal and transport
	for _, w := range watches {
		now := a.listDigests(ctx, w.t, w.kinds, cats, tools)
		w.mu.Lock()
		var changed mcpspec.ListKind
		for i, k := range []mcpspec.ListKind{mcpspec.ToolsList, mcpspec.ResourcesList, mcpspec.PromptsList} {
			if w.kinds&k != 0 && now[i] != w.last[i] {
				changed |= k
				w.last[i] = now[i]
			}
		}
		if changed != 0 && !w.gone {
			w.changed(changed)
		}
		w.mu.Unlock()
	}
}

// listDigests are the digests of what turn t would list now, for kinds: the tools
// catalogue a turn opened now for its principal would publish (by tools, shared
// within a pass), and its relayed resources (with templates) and prompts.
func (a *App) listDigests(ctx context.Context, t turn, kinds mcpspec.ListKind, cats []serverCatalog, tools map[string]string) (d [3]string) {
	if kinds&mcpspec.ToolsList != 0 {
		key := t.cl.principal + "\x00" + t.surface
		h, ok := tools[key]
		if !ok {
			if kt, err := a.k.OpenTurn(ctx, kernel.TurnOptions{Principal: t.cl.principal, Transport: t.surface}); err == nil {
				if l, err := kt.ListTools(ctx); err == nil {
					h = l.CatalogHash
				}
				kt.Close()
			}
			tools[key] = h
		}
		d[0] = h
	}
	if kinds&(mcpspec.ResourcesList|mcpspec.PromptsList) != 0 {
		servers := t.relayServersOf(cats)
		if kinds&mcpspec.ResourcesList != 0 {
			r, _ := listOf("resources", servers, func(s relayServer) []json.RawMessage { return s.resources })
			tp, _ := listOf("resourceTemplates", servers, func(s relayServer) []json.RawMessage { return s.templates })
			d[1] = digest(r, tp)
		}
		if kinds&mcpspec.PromptsList != 0 {
			p, _ := listOf("prompts", servers, func(s relayServer) []json.RawMessage { return s.prompts })
			d[2] = digest(p)
		}
	}
	return d
}

func digest(parts ...[]byte) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write(p)
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}
