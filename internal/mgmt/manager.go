package mgmt

import (
	"context"
	"regexp"
)

// Caller is who is asking. The surfaces authenticate before a Manager sees a call and
// pass only administrators: the owner token (Owner true, Principal the principal the
// owner token speaks for) or a principal holding an allow grant on toolgate.admin.
// Audit events of changes name Principal.
type Caller struct {
	Principal string
	Owner     bool
}

// Manager is the management protocol's implementation over one data directory: one
// method per protocol method, plus the notification feed. The app implements it; the
// daemon's [Handler] and the CLI call it, always through [Checked], so params arrive
// validated and with their defaults applied (an empty WorkspaceID still means the
// default workspace, which only the Manager knows).
//
// A method returns an *Error (possibly wrapped) for anything the client should be told
// (unknown_server, unknown_workspace, conflict, unavailable, validation_error); any
// other error is answered as internal_error and logged. Results must not carry a secret
// value anywhere (transports are redacted, diagnostics and stderr tails scrubbed).
type Manager interface {
	List(ctx context.Context, c Caller, p ListParams) (*ListResult, error)
	Install(ctx context.Context, c Caller, p InstallParams) (*InstallResult, error)
	SetPolicy(ctx context.Context, c Caller, p PolicySetParams) (*PolicySetResult, error)
	Restart(ctx context.Context, c Caller, p RestartParams) (*RestartResult, error)
	Uninstall(ctx context.Context, c Caller, p UninstallParams) (*UninstallResult, error)
	Details(ctx context.Context, c Caller, p DetailsParams) (*DetailsResult, error)

	// Subscribe registers fn to receive every notification from now on, in the order
	// the changes happened, until stop is called; once stop returns fn is not called
	// again. fn is called from one goroutine at a time and must return quickly (the
	// Handler only queues the notification for each socket). A Manager that cannot
	// deliver notifications (a client whose daemon went away) returns an error.
	Subscribe(fn func(Notification)) (stop func(), err error)
}

var (
	workspaceIDPattern = regexp.MustCompile(`^ws_[0-9]{18}$`)
	serverIDPattern    = regexp.MustCompile(`^mcp_[0-9]{18}$`)
)

// IsServerID reports whether s has the shape of a server id ("mcp_" and 18 digits).
func IsServerID(s string) bool { return serverIDPattern.MatchString(s) }

// Checked returns m behind the protocol's param rules: each method's params are
// validated (id shapes, scope kinds, exactly one of name and server_id) and defaulted
// (scope_kind "workspace" when a server is named by name or installed), a bad value
// is a validation_error naming the field, and nil lists in results become empty ones
// (so every answer has the same shape whoever built it). Checking checked params again
// changes nothing, so wrapping twice is harmless.
func Checked(m Manager) Manager {
	if c, ok := m.(checked); ok {
		return c
	}
	return checked{m}
}

type checked struct{ m Manager }

func (c checked) Subscribe(fn func(Notification)) (func(), error) { return c.m.Subscribe(fn) }

func (c checked) List(ctx context.Context, who Caller, p ListParams) (*ListResult, error) {
	if err := checkWorkspace(p.WorkspaceID); err != nil {
		return nil, err
	}
	r, err := c.m.List(ctx, who, p)
	if err != nil || r == nil {
		return nil, resultErr(err)
	}
	r.Servers = nonNil(r.Servers)
	for i := range r.Servers {
		fillServer(&r.Servers[i])
	}
	return r, nil
}

func (c checked) Install(ctx context.Context, who Caller, p InstallParams) (*InstallResult, error) {
	if err := checkWorkspace(p.WorkspaceID); err != nil {
		return nil, err
	}
	scope, err := checkScope(p.ScopeKind, true)
	if err != nil {
		return nil, err
	}
	p.ScopeKind = scope
	r, err := c.m.Install(ctx, who, p)
	if err != nil || r == nil {
		return nil, resultErr(err)
	}
	r.Servers = nonNil(r.Servers)
	for i := range r.Servers {
		s := &r.Servers[i]
		s.Diagnostics = nonNil(s.Diagnostics)
		if s.Server != nil {
			fillServer(s.Server)
		}
	}
	return r, nil
}

func (c checked) SetPolicy(ctx context.Context, who Caller, p PolicySetParams) (*PolicySetResult, error) {
	ref, err := checkRef(p.ServerRef)
	if err != nil {
		return nil, err
	}
	p.ServerRef = ref
	r, err := c.m.SetPolicy(ctx, who, p)
	if err != nil || r == nil {
		return nil, resultErr(err)
	}
	fillServer(&r.Server)
	return r, nil
}

func (c checked) Restart(ctx context.Context, who Caller, p RestartParams) (*RestartResult, error) {
	ref, err := checkRef(p.ServerRef)
	if err != nil {
		return nil, err
	}
	r, err := c.m.Restart(ctx, who, RestartParams{ref})
	if err != nil || r == nil {
		return nil, resultErr(err)
	}
	fillServer(&r.Server)
	return r, nil
}

func (c checked) Uninstall(ctx context.Context, who Caller, p UninstallParams) (*UninstallResult, error) {
	ref, err := checkRef(p.ServerRef)
	if err != nil {
		return nil, err
	}
	r, err := c.m.Uninstall(ctx, who, UninstallParams{ref})
	if err != nil || r == nil {
		return nil, resultErr(err)
	}
	fillServer(&r.Server)
	return r, nil
}

func (c checked) Details(ctx context.Context, who Caller, p DetailsParams) (*DetailsResult, error) {
	ref, err := checkRef(p.ServerRef)
	if err != nil {
		return nil, err
	}
	r, err := c.m.Details(ctx, who, DetailsParams{ref})
	if err != nil || r == nil {
		return nil, resultErr(err)
	}
	fillServer(&r.Server)
	cat := &r.Catalog
	cat.Tools = nonNil(cat.Tools)
	for i := range cat.Tools {
		t := &cat.Tools[i]
		t.InputSchema.Properties = nonNil(t.InputSchema.Properties)
		t.InputSchema.Required = nonNil(t.InputSchema.Required)
	}
	cat.Resources = nonNil(cat.Resources)
	cat.ResourceTemplates = nonNil(cat.ResourceTemplates)
	cat.Prompts = nonNil(cat.Prompts)
	for i := range cat.Prompts {
		cat.Prompts[i].Arguments = nonNil(cat.Prompts[i].Arguments)
	}
	r.Audit = nonNil(r.Audit)
	r.RecentBindings = nonNil(r.RecentBindings)
	return r, nil
}

// resultErr is a Manager's error, or internal_error for a Manager that returned
// neither a result nor an error.
func resultErr(err error) error {
	if err != nil {
		return err
	}
	return Errorf(CodeInternal, "internal error")
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func fillServer(s *Server) {
	if s.SourceKind == "" {
		s.SourceKind = SourceConfig
	}
}

func checkWorkspace(id string) error {
	if id != "" && !workspaceIDPattern.MatchString(id) {
		return fieldError(CodeValidation, "workspace_id", `workspace_id must be "ws_" followed by 18 digits`)
	}
	return nil
}

// checkScope validates a scope_kind; def says whether "" becomes "workspace".
func checkScope(s string, def bool) (string, error) {
	switch s {
	case ScopeWorkspace, ScopeUser:
		return s, nil
	case "":
		if def {
			return ScopeWorkspace, nil
		}
		return "", nil
	}
	return "", fieldError(CodeValidation, "scope_kind", `scope_kind must be "workspace" or "user"`)
}

// checkRef validates a server address. A server_id is complete by itself, so its
// scope_kind stays as given ("" matches either scope); a name is looked up in
// scope_kind, "workspace" by default.
func checkRef(r ServerRef) (ServerRef, error) {
	if err := checkWorkspace(r.WorkspaceID); err != nil {
		return r, err
	}
	switch {
	case r.Name == "" && r.ServerID == "":
		return r, fieldError(CodeInvalidParams, "name", "name or server_id is required")
	case r.Name != "" && r.ServerID != "":
		return r, fieldError(CodeValidation, "server_id", "give name or server_id, not both")
	case r.ServerID != "" && !serverIDPattern.MatchString(r.ServerID):
		return r, fieldError(CodeValidation, "server_id", `server_id must be "mcp_" followed by 18 digits`)
	}
	scope, err := checkScope(r.ScopeKind, r.ServerID == "")
	if err != nil {
		return r, err
	}
	r.ScopeKind = scope
	return r, nil
}
