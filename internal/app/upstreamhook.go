package app

import "github.com/toolgate/toolgate/internal/host"

// UpstreamServerState is what the kernel side needs to know about one installed
// upstream server to publish its tools: its namespace (Name), its policy, and where it
// is installed.
type UpstreamServerState struct {
	ID          string
	Name        string
	WorkspaceID string
	Scope       string
	Enabled     bool
	Implicit    bool // allow_implicit_invocation
}

// The hook points through which the app hands installed servers to the kernel side
// (docs/architecture.md, "The path of one call"): onUpstreamChange is called with a
// server's state and its current catalogue when it is installed, when its policy
// changes and when its catalogue changes, and once for every server when the App
// opens; onUpstreamRemoved when it is uninstalled. They are called from one goroutine
// at a time, in order (upstreamSync), never with a lock held. They are the kernel
// side's SyncUpstream and RemoveUpstream (upstreamtools.go).
func (a *App) initUpstreamHooks() {
	a.onUpstreamChange = func(s UpstreamServerState, cat host.Catalog) {
		a.SyncUpstream(UpstreamServer{Name: s.Name, Enabled: s.Enabled, Implicit: s.Implicit}, cat)
	}
	a.onUpstreamRemoved = a.RemoveUpstream
	a.callableName = a.CallableName
	if testUpstreamHooks != nil {
		testUpstreamHooks(a)
	}
}

// testUpstreamHooks, set by tests only, installs their hooks before anything calls them.
var testUpstreamHooks func(*App)

// callable is the canonical id a server's raw tool name is published under, as the
// kernel side normalises it (callableName; until it is set, "<server>.<raw>").
func (a *App) callable(server, raw string) string { return a.callableName(server, raw) }
