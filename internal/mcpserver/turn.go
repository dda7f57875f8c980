package mcpserver

import (
	"context"
	"encoding/json"

	"github.com/toolgate/toolgate/internal/mcpspec"
)

// Turn is one resolved catalogue serving one harness turn. The MCP layer never decides
// anything itself: it hands tools/list and tools/call to a Turn, which the kernel (or a
// fake in tests) implements. A Turn must be safe for concurrent use. The interface is
// this package's, written in the shared vocabulary (internal/mcpspec): *kernel.Turn
// satisfies it without knowing it exists.
type Turn interface {
	// ListTools returns the published catalogue exactly as tools/list serves it. The
	// result must not change over the Turn's life: a bridge's catalogue is fixed.
	ListTools(ctx context.Context) (*mcpspec.ToolList, error)
	// CallTool runs one tools/call. Refusals and tool failures are returned as a
	// *CallResult with IsError set (they are answers, not protocol errors). A non-nil
	// error means an internal failure and becomes JSON-RPC -32603 with no details.
	CallTool(ctx context.Context, req *mcpspec.CallRequest) (*mcpspec.CallResult, error)
}

// ClientNoter is a Turn that wants to know whom it serves (the control plane's
// server.list_clients): after each successful initialize on it, NoteClient gets the
// negotiated protocol version and the client's clientInfo object as sent (nil when
// absent). It must return at once.
type ClientNoter interface {
	NoteClient(protocolVersion string, clientInfo json.RawMessage)
}
