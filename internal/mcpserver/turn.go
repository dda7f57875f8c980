package mcpserver

import (
	"context"
	"encoding/json"
)

// Turn is one resolved catalogue serving one harness turn. The MCP layer never decides
// anything itself: it hands tools/list and tools/call to a Turn, which the kernel (or a
// fake in tests) implements. A Turn must be safe for concurrent use.
type Turn interface {
	// ListTools returns the published catalogue exactly as tools/list serves it. The
	// result must not change over the Turn's life: a bridge's catalogue is fixed.
	ListTools(ctx context.Context) (*ToolList, error)
	// CallTool runs one tools/call. Refusals and tool failures are returned as a
	// *CallResult with IsError set (they are answers, not protocol errors). A non-nil
	// error means an internal failure and becomes JSON-RPC -32603 with no details.
	CallTool(ctx context.Context, req *CallRequest) (*CallResult, error)
}

// ToolList is the body of a tools/list answer.
type ToolList struct {
	// Tools are complete MCP Tool objects in published form (name, description,
	// inputSchema, annotations, _meta …), already encoded.
	Tools []json.RawMessage
	// CatalogHash is 64 hex characters over the tools alone; served as
	// _meta["toolgate/catalogHash"].
	CatalogHash string
	// ExecutionID identifies the turn; served as _meta["toolgate/executionId"].
	ExecutionID string
}

// CallRequest is one decoded tools/call.
type CallRequest struct {
	// Name is the tool name exactly as the client sent it.
	Name string
	// Arguments is the re-encoded, strictly parsed arguments object; nil when absent.
	Arguments json.RawMessage
	// Meta is params._meta as sent (progress token, 2026 per-request metadata); may be nil.
	Meta json.RawMessage
	// Peer lets a tool ask the client something mid-call (elicitation). Never nil.
	Peer Peer
	// ProtocolVersion is "2026-07-28" for a stateless (2026-07-28) request and ""
	// for a request in an initialized session. Only a 2026-07-28 request can be
	// answered with ResultType "input_required" (multi round-trip requests); its
	// Peer cannot send requests.
	ProtocolVersion string
	// InputResponses and RequestState are a 2026-07-28 retry's params.inputResponses
	// and params.requestState, re-encoded; nil when absent. RequestState comes from
	// the client: treat it as attacker-controlled.
	InputResponses json.RawMessage
	RequestState   json.RawMessage
}

// CallResult is the body of a tools/call answer.
type CallResult struct {
	Content           []json.RawMessage `json:"content"`
	StructuredContent json.RawMessage   `json:"structuredContent,omitempty"`
	IsError           bool              `json:"isError"`
	Meta              map[string]any    `json:"_meta,omitempty"`
	// ResultType is 2026-07-28's resultType: "" or "complete" for a finished call,
	// "input_required" (only for a request whose ProtocolVersion is "2026-07-28")
	// with InputRequests and/or RequestState.
	ResultType    string          `json:"-"`
	InputRequests json.RawMessage `json:"inputRequests,omitempty"`
	RequestState  json.RawMessage `json:"requestState,omitempty"`
}

// Peer is the client side of the connection a call arrived on.
type Peer interface {
	// ClientCapabilities returns the capabilities the client declared at initialize
	// (or per request), or nil.
	ClientCapabilities() json.RawMessage
	// Request sends a server-to-client request (for example elicitation/create) and
	// waits for the answer. It fails with ErrPeerUnsupported when the transport or the
	// client cannot carry one.
	Request(ctx context.Context, method string, params any) (json.RawMessage, error)
}
