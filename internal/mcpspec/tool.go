package mcpspec

import "encoding/json"

// Tool is an MCP tool definition. Its schemas stay raw: they are compiled by the
// kernel and published or forwarded as written, never rebuilt from a struct.
type Tool struct {
	Name         string           `json:"name"`
	Title        string           `json:"title,omitempty"`
	Description  string           `json:"description,omitempty"`
	InputSchema  json.RawMessage  `json:"inputSchema"`
	OutputSchema json.RawMessage  `json:"outputSchema,omitempty"`
	Annotations  *ToolAnnotations `json:"annotations,omitempty"`
	Meta         json.RawMessage  `json:"_meta,omitempty"`
}

// ToolAnnotations are a tool's hints. A nil hint is one not stated; MCP gives
// destructiveHint and idempotentHint meaning only when readOnlyHint is false, and an
// omitted destructiveHint means "destructive" to a client.
type ToolAnnotations struct {
	Title           string `json:"title,omitempty"`
	ReadOnlyHint    *bool  `json:"readOnlyHint,omitempty"`
	DestructiveHint *bool  `json:"destructiveHint,omitempty"`
	IdempotentHint  *bool  `json:"idempotentHint,omitempty"`
	OpenWorldHint   *bool  `json:"openWorldHint,omitempty"`
}

// ToolList is one turn's catalogue as a turn hands it to a surface: the published tool
// objects, already encoded, and what tools/list serves beside them.
type ToolList struct {
	// Tools are complete MCP tool objects in published form (name, description,
	// inputSchema, annotations, _meta …), already encoded.
	Tools []json.RawMessage
	// CatalogHash is 64 hex characters over the tools alone; served as
	// _meta[MetaCatalogHash].
	CatalogHash string
	// ExecutionID identifies the turn; served as _meta[MetaExecutionID].
	ExecutionID string
	// Encoded, when set, is Tools as one JSON array, encoded once per catalogue and
	// shared by every turn of it (never modify it): a surface answers tools/list by
	// splicing it instead of encoding the tools again. Nil: encode Tools.
	Encoded json.RawMessage
}
