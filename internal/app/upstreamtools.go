package app

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"

	"github.com/toolgate/toolgate/internal/host"
	"github.com/toolgate/toolgate/internal/hostrelay"
	"github.com/toolgate/toolgate/internal/kernel"
	"github.com/toolgate/toolgate/internal/names"
	"github.com/toolgate/toolgate/internal/upstreamtools"
)

// UpstreamServer is what the kernel needs to know of one installed upstream server to
// publish its tools: its name (the namespace of its tools), policy.enabled and
// policy.allow_implicit_invocation.
type UpstreamServer struct {
	Name     string
	Enabled  bool
	Implicit bool
}

// upstreamTools is the App's view of the upstream servers' tools: what SyncUpstream
// last published for each server. Its lock serialises SyncUpstream and RemoveUpstream
// (they build and swap in memory only; nothing under it waits for I/O).
type upstreamTools struct {
	// up is what the tools call; nil until the App hosts or relays upstreams.
	up hostrelay.Upstreams

	mu      sync.Mutex
	reg     *names.Registry // every published name, built-in and local tools' included
	own     map[string]bool // namespaces of the tools registered on their own (local, server, toolgate)
	servers map[string]*upstreamState

	tr    trust    // pins, holds and the trust policy's effect per server (trust.go)
	calls inflight // forwarded calls in flight, for the servers' requests (serverrequests.go)
}

// upstreamState is one server as the kernel has it.
type upstreamState struct {
	server  UpstreamServer
	version uint64
	digest  string
	cat     host.Catalog // as the host gave it, before the pins decided (resyncServer)
	key     string       // what the pins decided (screened.key)
	// bindings and diagnostics are from the catalogue's last Build and registration.
	bindings    []upstreamtools.Binding
	diagnostics []upstreamtools.Diagnostic
}

// UpstreamTools is what SyncUpstream published for one server: the callable names
// bound to raw MCP tool names and what Build and the kernel noticed.
type UpstreamTools struct {
	Server         UpstreamServer
	CatalogVersion uint64
	Bindings       []upstreamtools.Binding
	Diagnostics    []upstreamtools.Diagnostic
}

// SyncUpstream publishes server's catalogue cat to new turns, under its policy: its
// tools replace the namespace's previous ones in one step (turns already open keep
// theirs), a disabled server's are published to nobody, and an implicit=false
// server's only to turns that select them (kernel.Selection). A catalogue already
// published (same version and digest) is not built or compiled again: only the
// policy changes. Any change makes the open sessions of toolgate serve stale, as a
// grant change does (their clients re-initialize and get the new catalogue); turns of
// stdio surfaces and bridges keep theirs. The management side calls it whenever a
// server is installed, its policy changes or its catalogue changes.
func (a *App) SyncUpstream(server UpstreamServer, cat host.Catalog) {
	ts := a.trustFor(server.Name)
	ts.serial.Lock()
	defer ts.serial.Unlock()
	a.syncUpstream(server, cat, ts)
}

// syncUpstream is SyncUpstream with the server's serial lock held: the catalogue is
// first reconciled with the server's pins (trust.go: store I/O, no App lock held),
// and only what they publish is built and registered.
func (a *App) syncUpstream(server UpstreamServer, cat host.Catalog, ts *serverTrust) {
	u := &a.ut
	u.mu.Lock()
	a.namesLocked()
	own, reg := u.own[server.Name], u.reg
	u.mu.Unlock()
	if own || server.Name == reservedServerName {
		// Its tools would take the names of toolgate's own (mcpconfig refuses such
		// names; this holds whatever the caller), or those of the grants that let
		// servers make requests (serverrequests.go).
		a.log.Error("an upstream server is named like a namespace of toolgate's own tools: not published", "server", server.Name)
		return
	}
	sc := a.screen(server.Name, cat, ts, func() (map[string]string, []string) { return reg.Others(server.Name) })
	u.mu.Lock()
	defer u.mu.Unlock()
	pol := kernel.NamespacePolicy{Disabled: !server.Enabled, ExplicitOnly: !server.Implicit}
	prev := u.servers[server.Name]
	if prev != nil && prev.version == cat.Version && prev.digest == cat.Digest && prev.key == sc.key {
		if prev.server != server {
			prev.server = server
			a.k.SetNamespacePolicy(server.Name, pol)
			a.policyGen.Add(1) // open sessions of toolgate serve go stale (turn.Stale)
		}
		return
	}
	// A change of what new turns see makes open sessions of toolgate serve stale (turn
	// Stale), as a grant change does: their clients open new turns and see it.
	defer a.policyGen.Add(1)
	sc.opts.Requests = inputPolicy{a}
	c := upstreamtools.BuildWith(server.Name, sc.cat, a.toolCaller(), u.reg, sc.opts)
	st := &upstreamState{server: server, version: cat.Version, digest: cat.Digest, cat: cat, key: sc.key,
		bindings: c.Bindings, diagnostics: append(sc.diags, c.Diagnostics...)}
	kd, err := a.k.ReplaceNamespace(server.Name, pol, c.Tools...)
	if err != nil {
		// Build leaves out what the kernel would refuse, so this is a bug or a name
		// the kernel cannot take: publish nothing of the server rather than part.
		a.log.Error("publishing an upstream server's tools", "server", server.Name, "err", err)
		u.reg.RemoveNamespace(server.Name)
		a.k.RemoveNamespace(server.Name)
		st.bindings = nil
		st.diagnostics = append(st.diagnostics, upstreamtools.Diagnostic{Refused: true, Message: err.Error()})
	}
	for _, d := range kd {
		st.diagnostics = append(st.diagnostics, upstreamtools.Diagnostic{ID: d.Tool, RawName: rawOf(c.Bindings, d.Tool), Message: d.Message})
	}
	for _, d := range st.diagnostics {
		a.log.Warn("upstream tool", "server", server.Name, "raw_name", d.RawName, "callable", d.ID, "refused", d.Refused, "diagnostic", d.Message)
	}
	if u.servers == nil {
		u.servers = map[string]*upstreamState{}
	}
	u.servers[server.Name] = st
}

// RemoveUpstream unpublishes a server's tools (it was uninstalled); open turns keep
// theirs, and their calls then fail upstream_unavailable.
func (a *App) RemoveUpstream(name string) {
	u := &a.ut
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.own[name] {
		return // never an upstream server's (SyncUpstream)
	}
	if u.reg != nil {
		u.reg.RemoveNamespace(name)
	}
	a.k.RemoveNamespace(name)
	delete(u.servers, name)
	a.policyGen.Add(1) // open sessions of toolgate serve go stale (turn.Stale)
}

// UpstreamTools reports what SyncUpstream published, by server name.
func (a *App) UpstreamTools() []UpstreamTools {
	u := &a.ut
	u.mu.Lock()
	defer u.mu.Unlock()
	out := make([]UpstreamTools, 0, len(u.servers))
	for _, st := range u.servers {
		out = append(out, UpstreamTools{Server: st.server, CatalogVersion: st.version,
			Bindings: slices.Clone(st.bindings), Diagnostics: slices.Clone(st.diagnostics)})
	}
	slices.SortFunc(out, func(x, y UpstreamTools) int {
		switch {
		case x.Server.Name < y.Server.Name:
			return -1
		case x.Server.Name > y.Server.Name:
			return 1
		}
		return 0
	})
	return out
}

// namesLocked builds the registry of published names on first use, from the tools
// registered so far (toolgate's own, the local ones, none of an upstream's yet).
func (a *App) namesLocked() {
	u := &a.ut
	if u.reg != nil {
		return
	}
	u.reg = names.New(names.Options{})
	ids := a.k.IDs()
	u.own = map[string]bool{}
	for _, id := range ids {
		ns, _, _ := strings.Cut(id, ".")
		u.own[ns] = true
	}
	for id, err := range u.reg.AddAll(ids) {
		a.log.Warn("a built-in or local tool's names collide", "tool", id, "err", err)
	}
}

// toolCaller is what upstream tools call: this process's host or the relay to the
// process hosting the data directory's servers, read at each call, with the turn that
// called marked so that its close ends its per-session connections.
func (a *App) toolCaller() upstreamtools.Caller { return turnCaller{a} }

// turnCaller is the App's upstreams as its tools call them.
type turnCaller struct{ a *App }

func (c turnCaller) Call(ctx context.Context, server, method string, params json.RawMessage, opts host.CallOptions) (json.RawMessage, error) {
	up := c.a.ut.up
	if up == nil {
		return noUpstreams{}.Call(ctx, server, method, params, opts)
	}
	c.a.cl.usedUpstream(opts.SessionKey)
	if o, ok := upstreamtools.OriginFrom(ctx); ok {
		defer c.a.ut.calls.track(server, o)()
	}
	return up.Call(ctx, server, method, params, opts)
}

func rawOf(bs []upstreamtools.Binding, id string) string {
	for _, b := range bs {
		if b.ID == id {
			return b.RawName
		}
	}
	return ""
}

// noUpstreams answers for an App that hosts and relays no upstream servers.
type noUpstreams struct{}

func (noUpstreams) Call(_ context.Context, server, _ string, _ json.RawMessage, _ host.CallOptions) (json.RawMessage, error) {
	return nil, &host.ServerError{Server: server, Kind: host.ErrUnknownServer}
}

// Selections reports what became of the selections a turn was opened with
// (TurnRequest.Selections), for the caller to show; nil for a turn of another kind.
func Selections(t Turn) []kernel.SelectionDiagnostic {
	if kt, ok := t.(turn); ok {
		return kt.Selections()
	}
	return nil
}

// RawNamer is a TurnRequest.Namer that publishes server's tools under their raw MCP
// names, as the server itself does (toolgate bridge --server): a transparent view of
// one server, each call still authorized and audited under its canonical id. Other ids
// keep their canonical id; a turn using it should be narrowed to the server's tools.
func (a *App) RawNamer(server string) func(string) string {
	u := &a.ut
	u.mu.Lock()
	m := map[string]string{}
	if st := u.servers[server]; st != nil {
		for _, b := range st.bindings {
			m[b.ID] = b.RawName
		}
	}
	u.mu.Unlock()
	return func(id string) string {
		if raw, ok := m[id]; ok {
			return raw
		}
		return id
	}
}

// CallableName is the canonical id server's raw tool name is published under (what
// recent_bindings records): the binding SyncUpstream made, or, for a tool it has not
// published (left out, or not seen yet), the id the name normalises to
// (upstreamtools.Normalize, without the suffix a collision would add).
func (a *App) CallableName(server, raw string) string {
	u := &a.ut
	u.mu.Lock()
	defer u.mu.Unlock()
	if st := u.servers[server]; st != nil {
		for _, b := range st.bindings {
			if b.RawName == raw {
				return b.ID
			}
		}
	}
	return server + "." + upstreamtools.Normalize(raw)
}
