package app

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/host"
	"github.com/toolgate/toolgate/internal/mcpconfig"
	"github.com/toolgate/toolgate/internal/mgmt"
	"github.com/toolgate/toolgate/internal/store"
)

// The management protocol over this App's data directory (docs/management.md): the
// App implements mgmt.Manager, and both /v1/rpc and the in-process CLI commands call
// it through mgmt.Checked. Installs go mcpconfig.Parse → keystore → store →
// Upstreams.Reload (the hosting process re-reads the store) → the kernel side
// (upstreamSync); every change writes one audit event per server it changes.

var _ mgmt.Manager = (*App)(nil)

// Management tool ids: the audit events of changes name them (decision allowed,
// principal the caller, resource mcp:<name>).
const (
	AuditInstall   = "toolgate.mcp_install"
	AuditPolicy    = "toolgate.mcp_policy"
	AuditRestart   = "toolgate.mcp_restart"
	AuditUninstall = "toolgate.mcp_uninstall"
)

// AdminToolID is the reserved tool id an allow grant on which makes a principal an
// administrator of the management protocol. It is never published as a tool.
const AdminToolID = "toolgate.admin"

// DetailsAuditLimit is how many recent audit events mcp/server/details shows.
const DetailsAuditLimit = 20

// ServerResource is the audit resource of everything about an upstream server.
func ServerResource(name string) string { return "mcp:" + name }

// workspace resolves a workspace_id ("" is the default one). Every method starts
// here, so it first brings this process up to date with changes another process made
// (one policy-version read when there is none; refresh).
func (a *App) workspace(ctx context.Context, id string) (string, error) {
	if err := a.refresh(ctx); err != nil {
		a.log.Warn("re-reading the policy before a management request", "err", err)
	}
	if id == "" {
		return store.DefaultWorkspaceID, nil
	}
	ok, err := a.st.WorkspaceExists(ctx, id)
	if err != nil {
		return "", unavailable(err)
	}
	if !ok {
		return "", &mgmt.Error{Code: mgmt.CodeUnknownWorkspace, Field: "workspace_id", Message: fmt.Sprintf("no workspace %q", id)}
	}
	return id, nil
}

// unavailable is a store failure as the protocol answers it; the cause is logged by
// the caller's surface only as internal detail, never sent.
func unavailable(err error) error {
	return fmt.Errorf("%w: %w", &mgmt.Error{Code: mgmt.CodeUnavailable, Message: "the data directory cannot serve the request now"}, err)
}

// resolve finds the server ref addresses (params already Checked).
func (a *App) resolve(ctx context.Context, ref mgmt.ServerRef) (store.MCPServer, error) {
	ws, err := a.workspace(ctx, ref.WorkspaceID)
	if err != nil {
		return store.MCPServer{}, err
	}
	var m store.MCPServer
	field, what := "name", ref.Name
	if ref.ServerID != "" {
		field, what = "server_id", ref.ServerID
		m, err = a.st.MCPServer(ctx, ref.ServerID)
	} else {
		m, err = a.st.MCPServerByName(ctx, ref.Name)
	}
	switch {
	case errors.Is(err, store.ErrNotFound):
	case err != nil:
		return store.MCPServer{}, unavailable(err)
	case ref.ScopeKind != "" && m.Scope != ref.ScopeKind:
	case m.Scope == store.ScopeWorkspace && m.WorkspaceID != ws && (ref.ServerID == "" || ref.WorkspaceID != ""):
	default:
		return m, nil
	}
	scope := ref.ScopeKind
	if scope == "" {
		scope = "any"
	}
	return store.MCPServer{}, &mgmt.Error{Code: mgmt.CodeUnknownServer, Field: field,
		Message: fmt.Sprintf("no server %q installed in workspace %s (scope %s)", what, ws, scope)}
}

// status reads one server's runtime status; ok false when the host does not know it
// (yet) or cannot be reached.
func (a *App) status(ctx context.Context, name string) (host.Status, bool) {
	if a.up == nil {
		return host.Status{}, false
	}
	st, ok, err := a.up.Status(ctx, name)
	if err != nil {
		a.log.Warn("reading a server's status", "server", name, "err", err)
		return host.Status{}, false
	}
	return st, ok
}

// serverObject is m as every answer shows it, with its runtime from st when known.
func serverObject(m *store.MCPServer, st host.Status, known bool) mgmt.Server {
	var def mcpconfig.Server
	_ = json.Unmarshal(m.Definition, &def) // written by Install from a valid definition
	s := mgmt.Server{ID: m.ID, Name: m.Name, Scope: m.Scope, SourceKind: m.SourceKind,
		Transport: def.Redacted(ksScope(m)), Policy: mgmt.Policy{Enabled: m.Enabled, AllowImplicitInvocation: m.Implicit},
		Required: m.Required, Fingerprint: m.Fingerprint}
	if m.DisplayName != m.Name {
		s.DisplayName = m.DisplayName
	}
	state := host.StateNotStarted
	if !m.Enabled {
		state = host.StateDisabled
	}
	if known {
		state = st.State
		s.Runtime.Live = st.Live
		if !st.LastSeenAt.IsZero() {
			s.Runtime.LastSeenAt = st.LastSeenAt.Unix()
		}
		c := st.Catalog.Counts
		s.ToolsCount, s.ResourcesCount, s.ResourceTemplatesCount, s.PromptsCount = c.Tools, c.Resources, c.ResourceTemplates, c.Prompts
	}
	s.Runtime.State = string(state)
	s.Status = string(state)
	return s
}

func (a *App) object(ctx context.Context, m *store.MCPServer) mgmt.Server {
	st, ok := a.status(ctx, m.Name)
	s := serverObject(m, st, ok)
	if !ok {
		a.storedCounts(ctx, m.Name, &s)
	}
	return s
}

// storedCounts fills s's catalogue counts from the persisted catalogue, for a server
// no host reports on (none runs: an in-process management command).
func (a *App) storedCounts(ctx context.Context, name string, s *mgmt.Server) {
	c, ok, err := catalogStore{a.st}.LoadCatalog(ctx, name)
	if err != nil || !ok {
		return
	}
	n := c.Counts()
	s.ToolsCount, s.ResourcesCount, s.ResourceTemplatesCount, s.PromptsCount = n.Tools, n.Resources, n.ResourceTemplates, n.Prompts
}

// catalog is a server's catalogue: the host's, or with no host the persisted one.
func (a *App) catalog(ctx context.Context, name string) host.Catalog {
	if a.up == nil {
		c, _, _ := catalogStore{a.st}.LoadCatalog(ctx, name)
		return c
	}
	c, ok, err := a.up.Catalog(ctx, name)
	if err != nil || !ok {
		return host.Catalog{}
	}
	return c
}

// List implements mgmt.Manager: the servers available in the workspace.
func (a *App) List(ctx context.Context, _ mgmt.Caller, p mgmt.ListParams) (*mgmt.ListResult, error) {
	ws, err := a.workspace(ctx, p.WorkspaceID)
	if err != nil {
		return nil, err
	}
	// The version first: the state below is at least that new (docs/management.md).
	ver, err := a.st.MCPSnapshot(ctx)
	if err != nil {
		return nil, unavailable(err)
	}
	ms, err := a.st.ListMCPServers(ctx, ws)
	if err != nil {
		return nil, unavailable(err)
	}
	byName := map[string]host.Status{}
	if len(ms) > 0 && a.up != nil {
		if snap, err := a.up.Snapshot(ctx); err == nil {
			for _, st := range snap.Servers {
				byName[st.Name] = st
			}
		} else {
			a.log.Warn("reading the upstream servers' states", "err", err)
		}
	}
	res := &mgmt.ListResult{SnapshotVersion: ver, GeneratedAt: time.Now().Unix(), Servers: make([]mgmt.Server, 0, len(ms))}
	for i := range ms {
		st, ok := byName[ms[i].Name]
		s := serverObject(&ms[i], st, ok)
		if a.up == nil {
			a.storedCounts(ctx, ms[i].Name, &s)
		}
		res.Servers = append(res.Servers, s)
	}
	return res, nil
}

// audit writes one management event about server name.
func (a *App) auditChange(ctx context.Context, c mgmt.Caller, tool, name, msg string) error {
	var b [8]byte
	_, _ = rand.Read(b[:])
	e := &audit.Event{CallID: "mgmt-" + hex.EncodeToString(b[:]), Principal: c.Principal, Transport: "mgmt",
		Tool: tool, Action: "write", Resource: ServerResource(name), Decision: audit.Allowed, Message: msg}
	if err := a.st.AppendAudit(ctx, e); err != nil {
		return unavailable(err)
	}
	return nil
}

// afterChange makes the hosting process and the kernel side catch up with the store.
// The pass it waits for (upstreamSync) also sends mcp/changed for what it finds
// changed, so a change's notification is queued before its answer.
func (a *App) afterChange(ctx context.Context, reload bool) {
	if reload && a.up != nil {
		if err := a.up.Reload(ctx); err != nil {
			a.log.Warn("making the upstream host re-read the installed servers", "err", err)
		}
	}
	if a.usync != nil {
		a.usync.request(ctx, true)
	}
}

// Install implements mgmt.Manager. A new server gets the params' policy (enabled
// unless the entry said "disabled": true, or enabled is false); a re-install of an
// installed one is unchanged when its fingerprint is, else updated, and keeps its
// policy (mcp/policy/set changes that). A name installed in another workspace or scope
// is a validation_error for that entry: one name is one namespace per data directory.
func (a *App) Install(ctx context.Context, c mgmt.Caller, p mgmt.InstallParams) (*mgmt.InstallResult, error) {
	ws, err := a.workspace(ctx, p.WorkspaceID)
	if err != nil {
		return nil, err
	}
	parsed := mcpconfig.Parse([]byte(p.ConfigJSON), a.ks, nil)
	res := &mgmt.InstallResult{Diagnostics: parsed.Diagnostics, Servers: []mgmt.InstallServer{}}
	changes := 0
	valid := 0
	var installed []store.MCPServer
	var outIdx []int
	for _, ent := range parsed.Entries {
		out := mgmt.InstallServer{Name: ent.Key, Status: mgmt.ServerValidationError, Diagnostics: ent.Diagnostics}
		if ent.OK() {
			m, status, diag, err := a.installOne(ctx, c, ws, p, &ent)
			if err != nil {
				return nil, err
			}
			if diag != nil {
				out.Diagnostics = append(out.Diagnostics, *diag)
			} else {
				valid++
				out.Name, out.Status = m.Name, status
				if status != mgmt.ServerUnchanged {
					res.Audit.EventsWritten++
					changes++
				}
				installed = append(installed, m)
				outIdx = append(outIdx, len(res.Servers))
			}
		}
		res.Servers = append(res.Servers, out)
	}
	switch {
	case valid == 0:
		res.Status = mgmt.InstallValidationError
	case valid < len(parsed.Entries):
		res.Status = mgmt.InstallPartial
	default:
		res.Status = mgmt.InstallOK
	}
	a.afterChange(ctx, changes > 0)
	for i := range installed {
		s := a.object(ctx, &installed[i])
		res.Servers[outIdx[i]].Server = &s
	}
	return res, nil
}

// installOne installs or updates one valid entry. diag is set (and nothing changed)
// when the entry cannot be installed here.
func (a *App) installOne(ctx context.Context, c mgmt.Caller, ws string, p mgmt.InstallParams, ent *mcpconfig.Entry) (store.MCPServer, string, *mgmt.Diagnostic, error) {
	srv := ent.Server
	def, err := json.Marshal(srv)
	if err != nil {
		return store.MCPServer{}, "", nil, fmt.Errorf("encoding the definition of %q: %w", srv.Name, err)
	}
	m := store.MCPServer{WorkspaceID: ws, Scope: p.ScopeKind, Name: srv.Name, DisplayName: srv.DisplayName,
		SourceKind: mgmt.SourceConfig, Definition: def, Enabled: p.EnabledValue() && !srv.Disabled,
		Implicit: p.ImplicitValue(), Required: srv.Required, Fingerprint: srv.Fingerprint()}
	old, err := a.st.MCPServerByName(ctx, srv.Name)
	switch {
	case errors.Is(err, store.ErrNotFound):
	case err != nil:
		return store.MCPServer{}, "", nil, unavailable(err)
	case old.Scope != m.Scope || old.WorkspaceID != ws && old.Scope == store.ScopeWorkspace:
		return store.MCPServer{}, "", &mgmt.Diagnostic{Path: ent.Key, Severity: mcpconfig.Error,
			Message: fmt.Sprintf("a server named %q is already installed (%s, scope %s, workspace %s): uninstall it first", srv.Name, old.ID, old.Scope, old.WorkspaceID)}, nil
	case old.Fingerprint == m.Fingerprint && old.DisplayName == m.DisplayName:
		return old, mgmt.ServerUnchanged, nil, nil
	}
	if err := a.ks.ReplaceServer(ctx, ksScope(&m), srv.Name, ent.Secrets); err != nil {
		return store.MCPServer{}, "", nil, unavailable(err)
	}
	status := mgmt.ServerInstalled
	if old.ID != "" {
		m.ID, m.Enabled, m.Implicit = old.ID, old.Enabled, old.Implicit
		if m, err = a.st.UpdateMCPServer(ctx, m); err != nil {
			return store.MCPServer{}, "", nil, unavailable(err)
		}
		status = mgmt.ServerUpdated
	} else if m, err = a.st.InsertMCPServer(ctx, m); errors.Is(err, store.ErrConflict) {
		return store.MCPServer{}, "", &mgmt.Diagnostic{Path: ent.Key, Severity: mcpconfig.Error,
			Message: fmt.Sprintf("a server named %q was installed meanwhile: install again to update it", srv.Name)}, nil
	} else if err != nil {
		return store.MCPServer{}, "", nil, unavailable(err)
	}
	if err := a.auditChange(ctx, c, AuditInstall, m.Name, status+" "+m.ID+" "+m.Fingerprint); err != nil {
		return store.MCPServer{}, "", nil, err
	}
	return m, status, nil, nil
}

// SetPolicy implements mgmt.Manager: what is given changes, the rest is kept; nothing
// is written (and no event) when nothing changes.
func (a *App) SetPolicy(ctx context.Context, c mgmt.Caller, p mgmt.PolicySetParams) (*mgmt.PolicySetResult, error) {
	m, err := a.resolve(ctx, p.ServerRef)
	if err != nil {
		return nil, err
	}
	next := m
	if p.Enabled != nil {
		next.Enabled = *p.Enabled
	}
	if p.AllowImplicitInvocation != nil {
		next.Implicit = *p.AllowImplicitInvocation
	}
	res := &mgmt.PolicySetResult{}
	if next.Enabled != m.Enabled || next.Implicit != m.Implicit {
		if next, err = a.st.UpdateMCPServer(ctx, next); err != nil {
			return nil, unavailable(err)
		}
		msg := fmt.Sprintf("enabled=%t allow_implicit_invocation=%t", next.Enabled, next.Implicit)
		if err := a.auditChange(ctx, c, AuditPolicy, m.Name, msg); err != nil {
			return nil, err
		}
		res.Audit.EventsWritten = 1
		a.afterChange(ctx, next.Enabled != m.Enabled)
	}
	res.Server = a.object(ctx, &next)
	return res, nil
}

// Restart implements mgmt.Manager: accepted at once; the transitions follow as
// mcp/server/status_changed. A disabled server is a conflict.
func (a *App) Restart(ctx context.Context, c mgmt.Caller, p mgmt.RestartParams) (*mgmt.RestartResult, error) {
	m, err := a.resolve(ctx, p.ServerRef)
	if err != nil {
		return nil, err
	}
	if !m.Enabled {
		return nil, &mgmt.Error{Code: mgmt.CodeConflict, Message: fmt.Sprintf("server %q is disabled: enable it first (toolgate policy set %s --enabled=true)", m.Name, m.Name)}
	}
	// With no process hosting the servers nothing runs to restart: the next process
	// that hosts starts this one afresh, with its current definition and secrets.
	if a.up != nil {
		if err := a.restartHosted(ctx, m.Name); err != nil {
			return nil, err
		}
	}
	if err := a.auditChange(ctx, c, AuditRestart, m.Name, "restart "+m.ID); err != nil {
		return nil, err
	}
	return &mgmt.RestartResult{Server: a.object(ctx, &m), Audit: mgmt.Audit{EventsWritten: 1}}, nil
}

// restartHosted asks the host to restart name, catching the host up with the store
// first when it does not know the server yet.
func (a *App) restartHosted(ctx context.Context, name string) error {
	err := a.up.Restart(ctx, name)
	if errors.Is(err, host.ErrUnknownServer) {
		_ = a.up.Reload(ctx)
		err = a.up.Restart(ctx, name)
	}
	if err != nil {
		return fmt.Errorf("%w: %w", &mgmt.Error{Code: mgmt.CodeUnavailable, Message: fmt.Sprintf("server %q cannot be restarted now", name)}, err)
	}
	return nil
}

// Uninstall implements mgmt.Manager: the server is stopped and removed with its
// secrets, catalogue and bindings; its audit events stay.
func (a *App) Uninstall(ctx context.Context, c mgmt.Caller, p mgmt.UninstallParams) (*mgmt.UninstallResult, error) {
	m, err := a.resolve(ctx, p.ServerRef)
	if err != nil {
		return nil, err
	}
	was := a.object(ctx, &m)
	if err := a.st.DeleteMCPServer(ctx, m.ID); errors.Is(err, store.ErrNotFound) {
		return nil, &mgmt.Error{Code: mgmt.CodeUnknownServer, Field: "name", Message: fmt.Sprintf("server %q was uninstalled meanwhile", m.Name)}
	} else if err != nil {
		return nil, unavailable(err)
	}
	if err := a.ks.DeleteServer(ctx, ksScope(&m), m.Name); err != nil {
		a.log.Warn("deleting an uninstalled server's secrets", "server", m.Name, "err", err)
	}
	if err := a.auths.forget(ctx, ksScope(&m), m.Name); err != nil {
		a.log.Warn("deleting an uninstalled server's sign-in", "server", m.Name, "err", err)
	}
	// Its pins and holds go too: a server installed again under the name is a stranger
	// (docs/trust.md).
	if err := a.ForgetTrust(ctx, m.Name); err != nil {
		a.log.Warn("deleting an uninstalled server's pins", "server", m.Name, "err", err)
	}
	if err := a.auditChange(ctx, c, AuditUninstall, m.Name, "uninstall "+m.ID); err != nil {
		return nil, err
	}
	a.afterChange(ctx, true)
	return &mgmt.UninstallResult{Server: was, Audit: mgmt.Audit{EventsWritten: 1}}, nil
}

// Details implements mgmt.Manager.
func (a *App) Details(ctx context.Context, _ mgmt.Caller, p mgmt.DetailsParams) (*mgmt.DetailsResult, error) {
	m, err := a.resolve(ctx, p.ServerRef)
	if err != nil {
		return nil, err
	}
	st, known := a.status(ctx, m.Name)
	res := &mgmt.DetailsResult{Server: serverObject(&m, st, known)}
	cat := a.catalog(ctx, m.Name)
	if !known {
		n := cat.Counts()
		s := &res.Server
		s.ToolsCount, s.ResourcesCount, s.ResourceTemplatesCount, s.PromptsCount = n.Tools, n.Resources, n.ResourceTemplates, n.Prompts
	}
	res.Catalog = a.catalogSummary(m.Name, &cat)
	res.Health = mgmt.Health{State: res.Server.Runtime.State, CatalogVersion: cat.Version}
	if !cat.FetchedAt.IsZero() {
		res.Health.CatalogFetchedAt = cat.FetchedAt.Unix()
	}
	if known {
		h := &res.Health
		h.StatusReason, h.LastError, h.CatalogError, h.StderrTail = string(st.Reason), st.LastError, st.Catalog.Error, st.StderrTail
		if !st.Since.IsZero() {
			h.Since = st.Since.Unix()
		}
		h.Retry = mgmt.Retry{Attempts: st.Retry.Attempts, Failures: st.Retry.Failures, CircuitOpen: st.Retry.CircuitOpen}
		if !st.Retry.NextAttempt.IsZero() {
			h.Retry.NextAttemptAt = st.Retry.NextAttempt.Unix()
		}
	} else {
		// No host reports on it: it is in its stored state since its last change.
		res.Health.Since = m.UpdatedAt.Unix()
		res.Health.StatusReason = string(host.ReasonInstalled)
		if !m.Enabled {
			res.Health.StatusReason = string(host.ReasonDisabled)
		}
	}
	if td, err := a.Pins(ctx, m.Name); err != nil {
		a.log.Warn("reading a server's pins for details", "server", m.Name, "err", err)
	} else if b, err := json.Marshal(td); err == nil {
		res.Trust = b
	}
	if signsIn(&m) {
		if s, err := a.authServerOf(ctx, &m); err != nil {
			a.log.Warn("reading a server's sign-in for details", "server", m.Name, "err", err)
		} else if r, err := a.authStatusResult(ctx, s); err != nil {
			a.log.Warn("reading a server's sign-in for details", "server", m.Name, "err", err)
		} else {
			res.Auth = r.Auth
		}
	}
	evs, err := a.st.ListAudit(ctx, audit.Filter{Resource: ServerResource(m.Name), Limit: DetailsAuditLimit, Last: true})
	if err != nil {
		return nil, unavailable(err)
	}
	for i := len(evs) - 1; i >= 0; i-- { // newest first
		e := &evs[i]
		res.Audit = append(res.Audit, mgmt.AuditEntry{Seq: e.Seq, At: e.Time.Unix(), Principal: e.Principal, Tool: e.Tool,
			Alias: e.Alias, Action: e.Action, Resource: e.Resource, Decision: string(e.Decision), Code: e.Code})
	}
	bs, err := a.st.MCPBindings(ctx, m.ID)
	if err != nil {
		return nil, unavailable(err)
	}
	for _, b := range bs {
		res.RecentBindings = append(res.RecentBindings, mgmt.Binding{Callable: b.Callable, RawName: b.RawName,
			FirstSeenAt: b.FirstSeen.Unix(), LastSeenAt: b.LastSeen.Unix()})
	}
	return res, nil
}

// Subscribe implements mgmt.Manager.
func (a *App) Subscribe(fn func(mgmt.Notification)) (func(), error) { return a.subs.add(fn), nil }

// RecordBinding notes that callable was published for server's raw tool rawName (the
// kernel side calls it when a call of an upstream tool is decided), for
// mcp/server/details' recent_bindings.
func (a *App) RecordBinding(ctx context.Context, server, callable, rawName string) error {
	m, ok := a.usync.server(ctx, server)
	if !ok {
		return nil
	}
	return a.st.RecordMCPBinding(ctx, m.ID, callable, rawName, time.Now())
}

// catalogSummary is a catalogue as details shows it: each item's identifying members,
// read from the upstream's raw objects (never re-encoded into what a turn publishes).
func (a *App) catalogSummary(server string, c *host.Catalog) mgmt.Catalog {
	var out mgmt.Catalog
	why := a.publicationDiagnostics(server)
	for _, raw := range c.Tools {
		var t struct {
			Name        string          `json:"name"`
			Title       string          `json:"title"`
			Description string          `json:"description"`
			InputSchema json.RawMessage `json:"inputSchema"`
			Annotations json.RawMessage `json:"annotations"`
		}
		if json.Unmarshal(raw, &t) != nil || t.Name == "" {
			continue
		}
		ts := mgmt.ToolSummary{Name: t.Name, Callable: a.callable(server, t.Name), Title: t.Title, Description: t.Description,
			Diagnostics: why[t.Name]}
		if len(t.Annotations) > 0 && string(t.Annotations) != "null" {
			ts.Annotations = t.Annotations
		}
		var sch struct {
			Type       any                        `json:"type"`
			Properties map[string]json.RawMessage `json:"properties"`
			Required   []string                   `json:"required"`
		}
		if json.Unmarshal(t.InputSchema, &sch) == nil {
			if s, ok := sch.Type.(string); ok {
				ts.InputSchema.Type = s
			}
			for k := range sch.Properties {
				ts.InputSchema.Properties = append(ts.InputSchema.Properties, k)
			}
			sort.Strings(ts.InputSchema.Properties)
			ts.InputSchema.Required = sch.Required
		}
		out.Tools = append(out.Tools, ts)
	}
	for _, raw := range c.Resources {
		var r struct {
			URI, Name, Title, Description, MIMEType string
		}
		if json.Unmarshal(raw, &r) == nil && r.URI != "" {
			out.Resources = append(out.Resources, mgmt.ResourceSummary{URI: r.URI, Name: r.Name, Title: r.Title, Description: r.Description, MIMEType: r.MIMEType})
		}
	}
	for _, raw := range c.ResourceTemplates {
		var r struct {
			URITemplate                        string `json:"uriTemplate"`
			Name, Title, Description, MIMEType string
		}
		if json.Unmarshal(raw, &r) == nil && r.URITemplate != "" {
			out.ResourceTemplates = append(out.ResourceTemplates, mgmt.ResourceTemplateSummary{URITemplate: r.URITemplate, Name: r.Name, Title: r.Title, Description: r.Description, MIMEType: r.MIMEType})
		}
	}
	for _, raw := range c.Prompts {
		var pr struct {
			Name, Title, Description string
			Arguments                []mgmt.PromptArgument `json:"arguments"`
		}
		if json.Unmarshal(raw, &pr) == nil && pr.Name != "" {
			out.Prompts = append(out.Prompts, mgmt.PromptSummary{Name: pr.Name, Title: pr.Title, Description: pr.Description, Arguments: pr.Arguments})
		}
	}
	return out
}
