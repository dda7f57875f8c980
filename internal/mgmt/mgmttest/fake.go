// Package mgmttest provides an in-memory mgmt.Manager for tests of the management
// protocol's surfaces (the handler, the client, the CLI). It is not a toy: installs
// parse the config with internal/mcpconfig (real validation, real fingerprints,
// redacted transports), policy changes keep what is omitted, restarts of disabled
// servers conflict, and every change bumps the snapshot version and publishes the
// notification the real host would. Its clock is fixed so answers are reproducible
// byte for byte.
package mgmttest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/toolgate/toolgate/internal/keystore"
	"github.com/toolgate/toolgate/internal/mcpconfig"
	"github.com/toolgate/toolgate/internal/mgmt"
)

// DefaultWorkspace is the fake's default (and only) workspace.
const DefaultWorkspace = "ws_000000000000000001"

// Now is the fake's clock: every timestamp it answers with.
const Now = 1777900000

// Manager is the fake. The zero value is not usable; call New or NewSeeded.
type Manager struct {
	mu      sync.Mutex
	version uint64
	nextID  int
	servers []*entry // in install order
	subs    map[int]func(mgmt.Notification)
	nextSub int
	calls   []Call
	// pubMu orders notifications: one goroutine at a time delivers, in change order.
	pubMu sync.Mutex
}

// Call records one method call the fake served.
type Call struct {
	Method string
	Caller mgmt.Caller
	Params any
}

type entry struct {
	workspace string
	srv       mgmt.Server
	details   *mgmt.DetailsResult // nil: built from srv
}

// New returns a fake with no server installed, at snapshot version 0.
func New() *Manager { return &Manager{subs: map[int]func(mgmt.Notification){}} }

// NewSeeded returns a fake holding one ready server, "filesystem" (mcp_…01, four tools),
// at snapshot version 7: the state the protocol documentation's examples show.
func NewSeeded() *Manager {
	m := New()
	m.version = 7
	m.nextID = 1
	srv := mgmt.Server{
		ID: "mcp_000000000000000001", Name: "filesystem", DisplayName: "Filesystem",
		Scope: mgmt.ScopeWorkspace, SourceKind: mgmt.SourceConfig,
		Transport:   mgmt.Transport{Kind: mcpconfig.Stdio, Command: "npx"},
		Policy:      mgmt.Policy{Enabled: true, AllowImplicitInvocation: false},
		Fingerprint: "sha256:4c1f0e6f1a7c2b9d8e3f5a6b7c8d9e0f1a2b3c4d5e6f708192a3b4c5d6e7f809",
		Runtime:     mgmt.Runtime{State: "ready", Live: true, LastSeenAt: Now},
		ToolsCount:  4, Status: "ready",
	}
	m.servers = append(m.servers, &entry{workspace: DefaultWorkspace, srv: srv, details: seedDetails(srv)})
	return m
}

// seedDetails is the seeded server's detail panel.
func seedDetails(srv mgmt.Server) *mgmt.DetailsResult {
	tool := func(name, title, desc string, props, req []string, ann string) mgmt.ToolSummary {
		return mgmt.ToolSummary{
			Name: name, Callable: "filesystem." + name, Title: title, Description: desc,
			InputSchema: mgmt.SchemaSummary{Type: "object", Properties: props, Required: req},
			Annotations: json.RawMessage(ann),
		}
	}
	return &mgmt.DetailsResult{
		Server: srv,
		Catalog: mgmt.Catalog{
			Tools: []mgmt.ToolSummary{
				tool("read_file", "Read File", "Read the complete contents of a file.", []string{"path"}, []string{"path"}, `{"readOnlyHint":true}`),
				tool("write_file", "Write File", "Create or overwrite a file.", []string{"content", "path"}, []string{"path", "content"}, `{"destructiveHint":true,"readOnlyHint":false}`),
				tool("list_directory", "List Directory", "List the entries of a directory.", []string{"path"}, []string{"path"}, `{"readOnlyHint":true}`),
				tool("search_files", "Search Files", "Find files whose names match a pattern.", []string{"excludePatterns", "path", "pattern"}, []string{"path", "pattern"}, `{"readOnlyHint":true}`),
			},
		},
		Health: mgmt.Health{
			State: "ready", StatusReason: "started", Since: Now - 60,
			CatalogVersion: 3, CatalogFetchedAt: Now - 59,
			StderrTail: "Secure MCP Filesystem Server running on stdio\n",
		},
		Audit: []mgmt.AuditEntry{
			{Seq: 41, At: Now - 120, Principal: "default", Tool: "toolgate.mcp_install", Resource: "mcp:filesystem", Action: "write", Decision: "allowed"},
			{Seq: 42, At: Now - 30, Principal: "default", Tool: "filesystem.read_file", Alias: "read_file", Action: "execute", Resource: "mcp:filesystem", Decision: "allowed"},
		},
		RecentBindings: []mgmt.Binding{
			{Callable: "filesystem.read_file", RawName: "read_file", FirstSeenAt: Now - 59, LastSeenAt: Now - 30},
		},
	}
}

// Calls returns the calls served so far.
func (m *Manager) Calls() []Call {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]Call(nil), m.calls...)
}

func (m *Manager) record(method string, c mgmt.Caller, p any) {
	m.calls = append(m.calls, Call{Method: method, Caller: c, Params: p})
}

// lockChange locks m for a change; the notifications the change appends to *notes are
// published, in order, once unlock released the lock (subscribers may call back in).
func (m *Manager) lockChange() (notes *[]mgmt.Notification, unlock func()) {
	notes = new([]mgmt.Notification)
	m.mu.Lock()
	return notes, func() {
		m.mu.Unlock()
		for _, n := range *notes {
			m.Publish(n)
		}
	}
}

// Subscribe implements mgmt.Manager.
func (m *Manager) Subscribe(fn func(mgmt.Notification)) (func(), error) {
	m.mu.Lock()
	id := m.nextSub
	m.nextSub++
	m.subs[id] = fn
	m.mu.Unlock()
	return func() {
		m.pubMu.Lock() // a delivery under way finishes first
		defer m.pubMu.Unlock()
		m.mu.Lock()
		delete(m.subs, id)
		m.mu.Unlock()
	}, nil
}

// Subscribers reports how many subscriptions are open.
func (m *Manager) Subscribers() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.subs)
}

// Publish delivers n to every subscriber, as a change would. Tests use it to push
// notifications the fake's own methods do not make (status and catalogue changes).
func (m *Manager) Publish(n mgmt.Notification) {
	m.pubMu.Lock()
	defer m.pubMu.Unlock()
	m.mu.Lock()
	fns := make([]func(mgmt.Notification), 0, len(m.subs))
	for _, fn := range m.subs {
		fns = append(fns, fn)
	}
	m.mu.Unlock()
	for _, fn := range fns {
		fn(n)
	}
}

// Bump advances the snapshot version and returns it (for notifications a test builds).
func (m *Manager) Bump() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.version++
	return m.version
}

func (m *Manager) checkWorkspace(id string) error {
	if id != "" && id != DefaultWorkspace {
		return &mgmt.Error{Code: mgmt.CodeUnknownWorkspace, Message: fmt.Sprintf("unknown workspace %q", id), Field: "workspace_id"}
	}
	return nil
}

// find resolves a reference under m.mu.
func (m *Manager) find(r mgmt.ServerRef) (int, error) {
	if err := m.checkWorkspace(r.WorkspaceID); err != nil {
		return -1, err
	}
	for i, e := range m.servers {
		switch {
		case r.ServerID != "" && e.srv.ID == r.ServerID && (r.ScopeKind == "" || r.ScopeKind == e.srv.Scope):
			return i, nil
		case r.Name != "" && e.srv.Name == r.Name && r.ScopeKind == e.srv.Scope:
			return i, nil
		}
	}
	if r.ServerID != "" {
		return -1, &mgmt.Error{Code: mgmt.CodeUnknownServer, Message: fmt.Sprintf("unknown server: no server has id %q", r.ServerID), Field: "server_id"}
	}
	return -1, &mgmt.Error{Code: mgmt.CodeUnknownServer,
		Message: fmt.Sprintf("unknown server: no %s server named %q", r.ScopeKind, r.Name), Field: "name"}
}

func notified(e *entry) mgmt.NotifiedServer {
	return mgmt.NotifiedServer{ServerID: e.srv.ID, Name: e.srv.Name, WorkspaceID: e.workspace, Scope: e.srv.Scope}
}

// List implements mgmt.Manager.
func (m *Manager) List(_ context.Context, c mgmt.Caller, p mgmt.ListParams) (*mgmt.ListResult, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.record(mgmt.MethodList, c, p)
	if err := m.checkWorkspace(p.WorkspaceID); err != nil {
		return nil, err
	}
	r := &mgmt.ListResult{SnapshotVersion: m.version, GeneratedAt: Now, Servers: []mgmt.Server{}}
	for _, e := range m.servers {
		r.Servers = append(r.Servers, e.srv)
	}
	return r, nil
}

type hasher struct{}

func (hasher) Digest(s keystore.Secret) string {
	sum := sha256.Sum256(append([]byte("mgmttest:"), s.Reveal()...))
	return hex.EncodeToString(sum[:])
}

// Install implements mgmt.Manager: the config is parsed for real; a valid entry is
// installed, or updated when an entry of that name and scope has another fingerprint,
// or unchanged when it has the same one.
func (m *Manager) Install(_ context.Context, c mgmt.Caller, p mgmt.InstallParams) (*mgmt.InstallResult, error) {
	notes, unlock := m.lockChange()
	defer unlock()
	m.record(mgmt.MethodInstall, c, p)
	if err := m.checkWorkspace(p.WorkspaceID); err != nil {
		return nil, err
	}
	parsed := mcpconfig.Parse([]byte(p.ConfigJSON), hasher{}, nil)
	res := &mgmt.InstallResult{Status: string(parsed.Status()), Diagnostics: parsed.Diagnostics, Servers: []mgmt.InstallServer{}}
	for _, ent := range parsed.Entries {
		out := mgmt.InstallServer{Name: ent.Key, Diagnostics: ent.Diagnostics}
		if !ent.OK() {
			out.Status = mgmt.ServerValidationError
			res.Servers = append(res.Servers, out)
			continue
		}
		def := ent.Server
		out.Name = def.Name
		srv := mgmt.Server{
			Name: def.Name, Scope: p.ScopeKind, SourceKind: mgmt.SourceConfig,
			Transport:   def.Redacted(p.ScopeKind),
			Policy:      mgmt.Policy{Enabled: p.EnabledValue(), AllowImplicitInvocation: p.ImplicitValue()},
			Fingerprint: def.Fingerprint(),
			Runtime:     mgmt.Runtime{State: "starting"},
			Status:      "not_started",
		}
		if !srv.Policy.Enabled {
			srv.Runtime.State, srv.Status = "disabled", "disabled"
		}
		i, _ := m.find(mgmt.ServerRef{Name: def.Name, ScopeKind: p.ScopeKind})
		change := mgmt.ChangeInstalled
		switch {
		case i < 0:
			m.nextID++
			srv.ID = fmt.Sprintf("mcp_%018d", m.nextID)
			m.servers = append(m.servers, &entry{workspace: DefaultWorkspace, srv: srv})
			i = len(m.servers) - 1
			out.Status = mgmt.ServerInstalled
		case m.servers[i].srv.Fingerprint == srv.Fingerprint:
			out.Status = mgmt.ServerUnchanged
			s := m.servers[i].srv
			out.Server = &s
			res.Servers = append(res.Servers, out)
			continue
		default:
			srv.ID = m.servers[i].srv.ID
			srv.DisplayName = m.servers[i].srv.DisplayName
			m.servers[i] = &entry{workspace: m.servers[i].workspace, srv: srv}
			out.Status, change = mgmt.ServerUpdated, mgmt.ChangeUpdated
		}
		s := m.servers[i].srv
		out.Server = &s
		res.Servers = append(res.Servers, out)
		res.Audit.EventsWritten++
		m.version++
		*notes = append(*notes, &mgmt.Changed{SnapshotVersion: m.version, At: Now, NotifiedServer: notified(m.servers[i]), Change: change})
	}
	return res, nil
}

// SetPolicy implements mgmt.Manager. Disabling a server takes it to state disabled;
// enabling a disabled one to not_started.
func (m *Manager) SetPolicy(_ context.Context, c mgmt.Caller, p mgmt.PolicySetParams) (*mgmt.PolicySetResult, error) {
	notes, unlock := m.lockChange()
	defer unlock()
	m.record(mgmt.MethodPolicySet, c, p)
	i, err := m.find(p.ServerRef)
	if err != nil {
		return nil, err
	}
	e := m.servers[i]
	pol := e.srv.Policy
	if p.Enabled != nil {
		pol.Enabled = *p.Enabled
	}
	if p.AllowImplicitInvocation != nil {
		pol.AllowImplicitInvocation = *p.AllowImplicitInvocation
	}
	res := &mgmt.PolicySetResult{}
	if pol != e.srv.Policy {
		was := e.srv.Runtime.State
		e.srv.Policy = pol
		res.Audit.EventsWritten = 1
		m.version++
		*notes = append(*notes, &mgmt.Changed{SnapshotVersion: m.version, At: Now, NotifiedServer: notified(e), Change: mgmt.ChangePolicy})
		switch {
		case !pol.Enabled && was != "disabled":
			e.setState("disabled")
		case pol.Enabled && was == "disabled":
			e.setState("not_started")
		}
		if now := e.srv.Runtime.State; now != was {
			m.version++
			*notes = append(*notes, &mgmt.StatusChanged{SnapshotVersion: m.version, At: Now, NotifiedServer: notified(e),
				PreviousState: was, State: now, Live: false, Status: now, Reason: map[bool]string{true: "enabled", false: "disabled"}[pol.Enabled]})
		}
	}
	res.Server = e.srv
	return res, nil
}

func (e *entry) setState(s string) {
	e.srv.Runtime.State, e.srv.Runtime.Live, e.srv.Status = s, s == "ready" || s == "degraded", s
	if e.details != nil {
		e.details.Server = e.srv
		e.details.Health.State = s
	}
}

// Restart implements mgmt.Manager: an enabled server goes to restarting; a disabled
// one is a conflict.
func (m *Manager) Restart(_ context.Context, c mgmt.Caller, p mgmt.RestartParams) (*mgmt.RestartResult, error) {
	notes, unlock := m.lockChange()
	defer unlock()
	m.record(mgmt.MethodRestart, c, p)
	i, err := m.find(p.ServerRef)
	if err != nil {
		return nil, err
	}
	e := m.servers[i]
	if !e.srv.Policy.Enabled {
		return nil, &mgmt.Error{Code: mgmt.CodeConflict, Message: fmt.Sprintf("conflict: server %q is disabled; enable it with mcp/policy/set first", e.srv.Name)}
	}
	was := e.srv.Runtime.State
	e.setState("restarting")
	m.version++
	*notes = append(*notes, &mgmt.StatusChanged{SnapshotVersion: m.version, At: Now, NotifiedServer: notified(e),
		PreviousState: was, State: "restarting", Status: "restarting", Reason: "restart_requested"})
	return &mgmt.RestartResult{Server: e.srv, Audit: mgmt.Audit{EventsWritten: 1}}, nil
}

// Uninstall implements mgmt.Manager.
func (m *Manager) Uninstall(_ context.Context, c mgmt.Caller, p mgmt.UninstallParams) (*mgmt.UninstallResult, error) {
	notes, unlock := m.lockChange()
	defer unlock()
	m.record(mgmt.MethodUninstall, c, p)
	i, err := m.find(p.ServerRef)
	if err != nil {
		return nil, err
	}
	e := m.servers[i]
	m.servers = append(m.servers[:i], m.servers[i+1:]...)
	m.version++
	*notes = append(*notes, &mgmt.Changed{SnapshotVersion: m.version, At: Now, NotifiedServer: notified(e), Change: mgmt.ChangeRemoved})
	return &mgmt.UninstallResult{Server: e.srv, Audit: mgmt.Audit{EventsWritten: 1}}, nil
}

// Details implements mgmt.Manager. A server the fake installed has an empty catalogue
// and has never run.
func (m *Manager) Details(_ context.Context, c mgmt.Caller, p mgmt.DetailsParams) (*mgmt.DetailsResult, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.record(mgmt.MethodDetails, c, p)
	i, err := m.find(p.ServerRef)
	if err != nil {
		return nil, err
	}
	e := m.servers[i]
	if e.details != nil {
		d := *e.details
		d.Server = e.srv
		return &d, nil
	}
	return &mgmt.DetailsResult{
		Server: e.srv,
		Health: mgmt.Health{State: e.srv.Runtime.State, StatusReason: "installed"},
	}, nil
}

var _ mgmt.Manager = (*Manager)(nil)
