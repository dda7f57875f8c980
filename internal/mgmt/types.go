package mgmt

import (
	"encoding/json"

	"github.com/toolgate/toolgate/internal/mcpconfig"
)

// Method names, exactly as the protocol spells them.
const (
	MethodList      = "mcp/list"
	MethodInstall   = "mcp/install"
	MethodPolicySet = "mcp/policy/set"
	MethodRestart   = "mcp/server/restart"
	MethodUninstall = "mcp/uninstall"
	MethodDetails   = "mcp/server/details"
)

// Scope kinds: a server installed in one workspace, or for every workspace of the data
// directory.
const (
	ScopeWorkspace = "workspace"
	ScopeUser      = "user"
)

// Install outcomes: the whole config's (InstallResult.Status) and each server's
// (InstallServer.Status). ServerUnchanged is a re-install whose fingerprint did not
// change; the other words are the protocol's.
const (
	InstallOK              = "ok"
	InstallPartial         = "partial"
	InstallValidationError = "validation_error"

	ServerInstalled       = "installed"
	ServerUpdated         = "updated"
	ServerUnchanged       = "unchanged"
	ServerValidationError = "validation_error"
)

// SourceConfig is the only source_kind today: installed from an mcpServers config.
const SourceConfig = "config"

// Transport is a server's transport as every answer shows it: secrets as refs, never
// values (mcpconfig.Server.Redacted builds it).
type Transport = mcpconfig.RedactedTransport

// Diagnostic is one finding about a config entry or a catalogue item: the member it
// is about as the config spells it, its severity, and a message without any value.
type Diagnostic = mcpconfig.Diagnostic

// ServerRef addresses one installed server: by name within (workspace_id, scope_kind),
// or by server_id. Exactly one of Name and ServerID is given. An empty WorkspaceID is
// the data directory's default workspace; an empty ScopeKind is "workspace".
type ServerRef struct {
	WorkspaceID string `json:"workspace_id,omitempty"`
	ScopeKind   string `json:"scope_kind,omitempty"`
	Name        string `json:"name,omitempty"`
	ServerID    string `json:"server_id,omitempty"`
}

// ListParams are mcp/list's params.
type ListParams struct {
	WorkspaceID string `json:"workspace_id,omitempty"`
}

// InstallParams are mcp/install's params. ConfigJSON is an mcpServers document (the
// shapes docs/mcp-config.md accepts) as a string. Enabled (default true) and
// AllowImplicitInvocation (default false) are the policy the installed servers get;
// use EnabledValue and ImplicitValue to read them with their defaults.
type InstallParams struct {
	WorkspaceID             string `json:"workspace_id,omitempty"`
	ScopeKind               string `json:"scope_kind,omitempty"`
	ConfigJSON              string `json:"config_json"`
	Enabled                 *bool  `json:"enabled,omitempty"`
	AllowImplicitInvocation *bool  `json:"allow_implicit_invocation,omitempty"`
}

// EnabledValue is Enabled, or its default (true) when omitted.
func (p InstallParams) EnabledValue() bool { return p.Enabled == nil || *p.Enabled }

// ImplicitValue is AllowImplicitInvocation, or its default (false) when omitted.
func (p InstallParams) ImplicitValue() bool {
	return p.AllowImplicitInvocation != nil && *p.AllowImplicitInvocation
}

// PolicySetParams are mcp/policy/set's params. A nil field keeps the current value.
type PolicySetParams struct {
	ServerRef
	Enabled                 *bool `json:"enabled,omitempty"`
	AllowImplicitInvocation *bool `json:"allow_implicit_invocation,omitempty"`
}

// RestartParams are mcp/server/restart's params.
type RestartParams struct{ ServerRef }

// UninstallParams are mcp/uninstall's params.
type UninstallParams struct{ ServerRef }

// DetailsParams are mcp/server/details' params.
type DetailsParams struct{ ServerRef }

// ListResult is mcp/list's result. SnapshotVersion is the version of the state the
// list reflects: a notification whose snapshot_version is greater is news to a client
// that read this list. GeneratedAt is Unix seconds.
type ListResult struct {
	SnapshotVersion uint64   `json:"snapshot_version"`
	GeneratedAt     int64    `json:"generated_at"`
	Servers         []Server `json:"servers"`
}

// Server is one installed server's summary, the same object in every answer.
type Server struct {
	ID          string `json:"id"`
	Name        string `json:"name"`
	DisplayName string `json:"display_name,omitempty"`
	// Scope is the server's scope kind: "workspace" or "user".
	Scope      string    `json:"scope"`
	SourceKind string    `json:"source_kind"`
	Transport  Transport `json:"transport"`
	Policy     Policy    `json:"policy"`
	Required   bool      `json:"required"`
	// Fingerprint is "sha256:<hex>" over the normalised definition (mcpconfig.Fingerprint).
	Fingerprint            string  `json:"fingerprint"`
	Runtime                Runtime `json:"runtime"`
	ToolsCount             int     `json:"tools_count"`
	ResourcesCount         int     `json:"resources_count"`
	ResourceTemplatesCount int     `json:"resource_templates_count"`
	PromptsCount           int     `json:"prompts_count"`
	// Status is the one word a list row shows, from the runtime states' vocabulary.
	Status string `json:"status"`
}

// Policy is a server's policy.
type Policy struct {
	Enabled                 bool `json:"enabled"`
	AllowImplicitInvocation bool `json:"allow_implicit_invocation"`
}

// Runtime is a server's runtime state. LastSeenAt (Unix seconds) is when the upstream
// last answered; 0 (omitted) when it never did in this process.
type Runtime struct {
	State      string `json:"state"`
	Live       bool   `json:"live"`
	LastSeenAt int64  `json:"last_seen_at,omitempty"`
}

// InstallResult is mcp/install's result. Diagnostics are about the document as a whole
// (not JSON, no server container); omitted when there are none.
type InstallResult struct {
	Status      string          `json:"status"`
	Diagnostics []Diagnostic    `json:"diagnostics,omitempty"`
	Servers     []InstallServer `json:"servers"`
	Audit       Audit           `json:"audit"`
}

// InstallServer is one config entry's outcome. Server is nil (omitted) when the entry
// did not validate.
type InstallServer struct {
	Name        string       `json:"name"`
	Status      string       `json:"status"`
	Diagnostics []Diagnostic `json:"diagnostics"`
	Server      *Server      `json:"server,omitempty"`
}

// Audit says how many audit events a change wrote.
type Audit struct {
	EventsWritten int `json:"events_written"`
}

// PolicySetResult is mcp/policy/set's result: the server with its policy now.
type PolicySetResult struct {
	Server Server `json:"server"`
	Audit  Audit  `json:"audit"`
}

// RestartResult is mcp/server/restart's result. The answer means the restart was
// accepted; Server shows the state right after (typically "restarting"), and
// mcp/server/status_changed reports the transitions that follow.
type RestartResult struct {
	Server Server `json:"server"`
	Audit  Audit  `json:"audit"`
}

// UninstallResult is mcp/uninstall's result: the server as it was when removed.
type UninstallResult struct {
	Server Server `json:"server"`
	Audit  Audit  `json:"audit"`
}

// DetailsResult is mcp/server/details' result.
type DetailsResult struct {
	Server         Server       `json:"server"`
	Catalog        Catalog      `json:"catalog"`
	Health         Health       `json:"health"`
	Audit          []AuditEntry `json:"audit"`
	RecentBindings []Binding    `json:"recent_bindings"`
	// Trust is the server's pins, held definitions (with their differences from the
	// pins), trust policy and the last listing's verdicts: app.TrustDetails, as JSON
	// (docs/trust.md). Deciding a hold is the owner's, from toolgate pins.
	Trust json.RawMessage `json:"trust,omitempty"`
	// Auth is a remote server's OAuth sign-in (upstreamauth.Status, as JSON: state,
	// reason and detail when a sign-in is required, issuer, scopes, expiry; never a
	// secret): docs/upstream-auth.md. Absent for a server that does not sign in.
	Auth json.RawMessage `json:"auth,omitempty"`
}

// Catalog is a server's catalogue as details shows it: summaries, not the upstream's
// whole objects (those are what a turn publishes).
type Catalog struct {
	Tools             []ToolSummary             `json:"tools"`
	Resources         []ResourceSummary         `json:"resources"`
	ResourceTemplates []ResourceTemplateSummary `json:"resource_templates"`
	Prompts           []PromptSummary           `json:"prompts"`
}

// ToolSummary is one upstream tool. Name is the raw MCP name; Callable is the
// canonical id it is published under ("<server>.<tool>"). Annotations are the
// upstream's annotations object as it sent it (hints, never authority). Diagnostics
// say what toolgate could not do with the tool (an input schema it cannot compile).
type ToolSummary struct {
	Name        string          `json:"name"`
	Callable    string          `json:"callable"`
	Title       string          `json:"title,omitempty"`
	Description string          `json:"description,omitempty"`
	InputSchema SchemaSummary   `json:"input_schema"`
	Annotations json.RawMessage `json:"annotations,omitempty"`
	Diagnostics []Diagnostic    `json:"diagnostics,omitempty"`
}

// SchemaSummary is the shape of a tool's input schema: its top-level type, its
// property names (sorted) and which of them are required.
type SchemaSummary struct {
	Type       string   `json:"type,omitempty"`
	Properties []string `json:"properties"`
	Required   []string `json:"required"`
}

// ResourceSummary is one static resource.
type ResourceSummary struct {
	URI         string `json:"uri"`
	Name        string `json:"name,omitempty"`
	Title       string `json:"title,omitempty"`
	Description string `json:"description,omitempty"`
	MIMEType    string `json:"mime_type,omitempty"`
}

// ResourceTemplateSummary is one parameterised resource template.
type ResourceTemplateSummary struct {
	URITemplate string `json:"uri_template"`
	Name        string `json:"name,omitempty"`
	Title       string `json:"title,omitempty"`
	Description string `json:"description,omitempty"`
	MIMEType    string `json:"mime_type,omitempty"`
}

// PromptSummary is one prompt.
type PromptSummary struct {
	Name        string           `json:"name"`
	Title       string           `json:"title,omitempty"`
	Description string           `json:"description,omitempty"`
	Arguments   []PromptArgument `json:"arguments"`
}

// PromptArgument is one argument a prompt takes.
type PromptArgument struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	Required    bool   `json:"required"`
}

// Health is a server's runtime health. Times are Unix seconds, 0 (omitted) when
// unknown. StderrTail is the bounded tail of the upstream's stderr, with every secret
// value the server was given replaced by its redaction.
type Health struct {
	State            string `json:"state"`
	StatusReason     string `json:"status_reason"`
	Since            int64  `json:"since,omitempty"`
	LastError        string `json:"last_error,omitempty"`
	Retry            Retry  `json:"retry"`
	CatalogVersion   uint64 `json:"catalog_version"`
	CatalogFetchedAt int64  `json:"catalog_fetched_at,omitempty"`
	CatalogError     string `json:"catalog_error,omitempty"`
	StderrTail       string `json:"stderr_tail"`
}

// Retry is the restart policy's view of a server: failures since the backoff was
// reset, failures within the crash-loop window, the next automatic start (Unix
// seconds, omitted when none is due) and whether the circuit is open (state failed:
// calls are refused at once until then).
type Retry struct {
	Attempts      int   `json:"attempts"`
	Failures      int   `json:"failures"`
	NextAttemptAt int64 `json:"next_attempt_at,omitempty"`
	CircuitOpen   bool  `json:"circuit_open"`
}

// AuditEntry is one recent decision about the server: a management change
// (tool toolgate.mcp_install, …) or a call of one of its tools.
type AuditEntry struct {
	Seq       int64  `json:"seq"`
	At        int64  `json:"at"`
	Principal string `json:"principal"`
	Tool      string `json:"tool"`
	Alias     string `json:"alias,omitempty"`
	Action    string `json:"action,omitempty"`
	Resource  string `json:"resource,omitempty"`
	Decision  string `json:"decision"`
	Code      string `json:"code,omitempty"`
}

// Binding records that a gateway callable name was bound to a raw MCP tool name.
type Binding struct {
	Callable    string `json:"callable"`
	RawName     string `json:"raw_name"`
	FirstSeenAt int64  `json:"first_seen_at"`
	LastSeenAt  int64  `json:"last_seen_at"`
}
