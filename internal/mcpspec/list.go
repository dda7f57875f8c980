package mcpspec

import "encoding/json"

// Cache scopes of a stateless list result: whether a cache may share it between
// callers.
const (
	// CacheScopePrivate: the answer is for this caller only (toolgate's catalogues
	// differ per principal).
	CacheScopePrivate = "private"
	// CacheScopePublic: the answer is the same for every caller.
	CacheScopePublic = "public"
)

// CacheHints are the stateless revision's hints on a list-like result (tools/list,
// server/discover, …): how long a client may reuse it, and whether a shared cache may.
// The zero value (the older revisions) writes neither.
type CacheHints struct {
	TTLMs      int    `json:"ttlMs,omitempty"`
	CacheScope string `json:"cacheScope,omitempty"`
}

// ListParams are the params of a list request (tools/list, resources/list, …).
type ListParams struct {
	Cursor string          `json:"cursor,omitempty"`
	Meta   json.RawMessage `json:"_meta,omitempty"`
}

// A list result is its items (raw objects, as the server that listed them wrote them),
// the cursor of the next page, and in the stateless revision resultType and the cache
// hints. Each list has its own type so that its items are named as MCP names them.

// ListToolsResult is the body of a tools/list answer.
type ListToolsResult struct {
	// ResultType is set (ResultComplete) in the stateless revision only.
	ResultType string            `json:"resultType,omitempty"`
	Tools      []json.RawMessage `json:"tools"`
	NextCursor string            `json:"nextCursor,omitempty"`
	CacheHints
	Meta map[string]any `json:"_meta,omitempty"`
}

// ListResourcesResult is the body of a resources/list answer.
type ListResourcesResult struct {
	ResultType string            `json:"resultType,omitempty"`
	Resources  []json.RawMessage `json:"resources"`
	NextCursor string            `json:"nextCursor,omitempty"`
	CacheHints
	Meta map[string]any `json:"_meta,omitempty"`
}

// ListResourceTemplatesResult is the body of a resources/templates/list answer.
type ListResourceTemplatesResult struct {
	ResultType        string            `json:"resultType,omitempty"`
	ResourceTemplates []json.RawMessage `json:"resourceTemplates"`
	NextCursor        string            `json:"nextCursor,omitempty"`
	CacheHints
	Meta map[string]any `json:"_meta,omitempty"`
}

// ListPromptsResult is the body of a prompts/list answer.
type ListPromptsResult struct {
	ResultType string            `json:"resultType,omitempty"`
	Prompts    []json.RawMessage `json:"prompts"`
	NextCursor string            `json:"nextCursor,omitempty"`
	CacheHints
	Meta map[string]any `json:"_meta,omitempty"`
}

// InitializeResult is the body of an initialize answer.
type InitializeResult struct {
	ProtocolVersion string          `json:"protocolVersion"`
	Capabilities    json.RawMessage `json:"capabilities"`
	ServerInfo      Implementation  `json:"serverInfo"`
	Instructions    string          `json:"instructions,omitempty"`
}

// DiscoverResult is the body of a server/discover answer (stateless revision).
type DiscoverResult struct {
	ResultType        string          `json:"resultType"`
	SupportedVersions []string        `json:"supportedVersions"`
	Capabilities      json.RawMessage `json:"capabilities"`
	Instructions      string          `json:"instructions,omitempty"`
	CacheHints
	Meta map[string]any `json:"_meta"`
}
