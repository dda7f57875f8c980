package app

import (
	"github.com/toolgate/toolgate/internal/host"
	"github.com/toolgate/toolgate/internal/hostrelay"
)

// PolicyLoads reports how many times a has read grants and namespaces from its store
// in full (not counting the cheap policy-version reads that found nothing changed).
func PolicyLoads(a *App) int64 { return a.pol.loads.Load() }

// PolicyVersionLoaded reports the store policy version a's kernel policy was loaded at.
func PolicyVersionLoaded(a *App) int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.pol.ver
}

// PolicyReads reports how many times a has read its store's policy version: once per
// refresh, whatever it found.
func PolicyReads(a *App) int64 { return a.pol.reads.Load() }

// UseUpstreams makes a's upstream tools call up (this process's host in a test).
func UseUpstreams(a *App, up hostrelay.Upstreams) { a.ut.up = up }

// SetUpstreamHooks makes every App opened until reset call the hooks hooks returns for
// it where the kernel side's hooks will be; reset restores the no-ops.
func SetUpstreamHooks(hooks func(*App) (change func(UpstreamServerState, host.Catalog), removed func(string))) (reset func()) {
	testUpstreamHooks = func(a *App) { a.onUpstreamChange, a.onUpstreamRemoved = hooks(a) }
	return func() { testUpstreamHooks = nil }
}

// ResyncTrust runs what a moved policy version runs: every published server's
// catalogue reconciled again with the pins as stored.
func ResyncTrust(a *App) { a.resyncTrust() }

// ListPass runs one pass of the sessions' list watcher now (listnotify.go), as its
// ticker does.
func ListPass(a *App) { a.listPass() }
