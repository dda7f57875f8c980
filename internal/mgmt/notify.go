package mgmt

// Notification methods. They are invalidation signals: each names the server and the
// snapshot_version after the change, and a client that read mcp/list at version V
// applies (or refetches for) every notification with a greater one. The state itself
// is always read back with mcp/list or mcp/server/details.
const (
	NotifyChanged        = "mcp/changed"
	NotifyStatusChanged  = "mcp/server/status_changed"
	NotifyCatalogChanged = "mcp/server/catalog_changed"
)

// Notification is one of *Changed, *StatusChanged and *CatalogChanged, the params of
// the notification method it names.
type Notification interface {
	// Method is the notification's method name.
	Method() string
}

// Changes an mcp/changed reports.
const (
	ChangeInstalled = "installed"
	ChangeUpdated   = "updated"
	ChangePolicy    = "policy"
	ChangeRemoved   = "removed"
)

// NotifiedServer names the server a notification is about. WorkspaceID is the
// workspace it is installed in (for scope "user", the workspace it was installed
// from: it is visible in every workspace).
type NotifiedServer struct {
	ServerID    string `json:"server_id"`
	Name        string `json:"name"`
	WorkspaceID string `json:"workspace_id"`
	Scope       string `json:"scope"`
}

// Changed is mcp/changed: a server was installed, updated, uninstalled or had its
// policy changed. At is Unix seconds.
type Changed struct {
	SnapshotVersion uint64 `json:"snapshot_version"`
	At              int64  `json:"at"`
	NotifiedServer
	Change string `json:"change"`
}

// StatusChanged is mcp/server/status_changed: one runtime state transition.
// PreviousState and State are runtime states; Status is the server's status word after
// the transition (Server.Status); Reason is why (the health's status_reason); Error is
// the failure that caused it, if one did.
type StatusChanged struct {
	SnapshotVersion uint64 `json:"snapshot_version"`
	At              int64  `json:"at"`
	NotifiedServer
	PreviousState string `json:"previous_state"`
	State         string `json:"state"`
	Live          bool   `json:"live"`
	Status        string `json:"status"`
	Reason        string `json:"reason"`
	Error         string `json:"error,omitempty"`
}

// CatalogChanged is mcp/server/catalog_changed: a server's catalogue content changed
// and now has CatalogVersion with these counts.
type CatalogChanged struct {
	SnapshotVersion uint64 `json:"snapshot_version"`
	At              int64  `json:"at"`
	NotifiedServer
	CatalogVersion         uint64 `json:"catalog_version"`
	ToolsCount             int    `json:"tools_count"`
	ResourcesCount         int    `json:"resources_count"`
	ResourceTemplatesCount int    `json:"resource_templates_count"`
	PromptsCount           int    `json:"prompts_count"`
}

func (*Changed) Method() string        { return NotifyChanged }
func (*StatusChanged) Method() string  { return NotifyStatusChanged }
func (*CatalogChanged) Method() string { return NotifyCatalogChanged }
