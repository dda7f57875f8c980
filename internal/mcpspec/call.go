package mcpspec

import (
	"context"
	"encoding/json"
	"errors"
)

// Implementation names a server (initialize's serverInfo, server/discover's
// _meta[MetaServerInfo]) or a client (clientInfo).
type Implementation struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// CallRequest is one decoded tools/call, as a surface hands it to a turn.
type CallRequest struct {
	// Name is the tool name exactly as the client sent it.
	Name string
	// Arguments is the arguments object as the strict decoder re-encoded it
	// (internal/rpcwire: compact, members sorted, no duplicate or case-variant
	// names, numbers as written); nil when absent. It is decided on as it is and,
	// for a tool that forwards its call, forwarded as it is.
	Arguments json.RawMessage
	// Meta is params._meta as sent (progress token, per-request metadata); may be nil.
	Meta json.RawMessage
	// Peer lets a tool ask the client something mid-call (elicitation). Never nil on
	// a request a surface built.
	Peer Peer
	// ProtocolVersion is ModernVersion for a stateless request and "" for a request
	// in an initialized session. Only a stateless request can be answered with
	// ResultType ResultInputRequired (multi round-trip requests); its Peer cannot
	// send requests.
	ProtocolVersion string
	// InputResponses and RequestState are a stateless retry's params.inputResponses
	// and params.requestState, as the strict decoder encoded them; nil when absent.
	// RequestState comes from the client: treat it as attacker-controlled.
	InputResponses json.RawMessage
	RequestState   json.RawMessage
}

// Result types of the stateless revision (resultType).
const (
	ResultComplete      = "complete"
	ResultInputRequired = "input_required"
)

// CallResult is the body of a tools/call answer.
type CallResult struct {
	// Content blocks are MCP content objects, carried as they were made.
	Content           []json.RawMessage `json:"content"`
	StructuredContent json.RawMessage   `json:"structuredContent,omitempty"`
	IsError           bool              `json:"isError"`
	Meta              map[string]any    `json:"_meta,omitempty"`
	// ResultType is the stateless revision's resultType: "" or ResultComplete for a
	// finished call, ResultInputRequired (only for a request whose ProtocolVersion
	// is ModernVersion) with InputRequests and/or RequestState. Surfaces write it
	// (it is not part of the older revisions' result).
	ResultType    string          `json:"-"`
	InputRequests json.RawMessage `json:"inputRequests,omitempty"`
	RequestState  json.RawMessage `json:"requestState,omitempty"`
	// Raw, when set, is the whole result as another server wrote it (an upstream's
	// tools/call answer, passed through): surfaces write these bytes as the result
	// (adding resultType in the stateless revision when they lack it) and ignore the
	// fields above, except IsError and ResultType, which the kernel read from Raw.
	Raw json.RawMessage `json:"-"`
	// ProtocolError, when set on a 2026-07-28 call's result, answers the request with
	// this JSON-RPC error instead (-32021: the call needed a client capability the
	// request did not declare); the fields above are the same failure as a result, for
	// surfaces that answer no JSON-RPC (the HTTP API) and older-era requests.
	ProtocolError *ProtocolError `json:"-"`
}

// ProtocolError is a JSON-RPC error a call is answered with.
type ProtocolError struct {
	Code    int64
	Message string
	Data    json.RawMessage
}

// Peer is the client side of the connection a call arrived on.
type Peer interface {
	// ClientCapabilities returns the capabilities the client declared at initialize
	// (or per request), or nil.
	ClientCapabilities() json.RawMessage
	// Request sends a server-to-client request (for example MethodElicitationCreate)
	// and waits for the answer. It fails with ErrPeerUnsupported when the transport or
	// the client cannot carry one.
	Request(ctx context.Context, method string, params any) (json.RawMessage, error)
}

// Notifier is a Peer that can also send the client notifications mid-call: an
// upstream's notifications/progress for a request whose _meta carried a
// progressToken. A Peer that cannot (the HTTP API, a JSON answer) does not implement
// it, or fails with ErrPeerUnsupported.
type Notifier interface {
	Notify(ctx context.Context, method string, params json.RawMessage) error
}

// ErrPeerUnsupported is returned by Peer.Request when the client cannot be asked. Its
// text reaches clients inside a tool's failure (the golden files of
// internal/mcpserver/testdata/wire pin it), so it keeps the words it always had.
var ErrPeerUnsupported = errors.New("mcpserver: the client cannot receive requests on this connection")

// NoPeer is the Peer of a caller that cannot be asked anything (the HTTP API, a
// stateless request): it declares no capabilities and refuses every request with
// ErrPeerUnsupported.
type NoPeer struct {
	// Capabilities, when set, is what ClientCapabilities reports (a stateless
	// request declares its capabilities per request, though it cannot be asked).
	Capabilities json.RawMessage
}

func (p NoPeer) ClientCapabilities() json.RawMessage { return p.Capabilities }

func (NoPeer) Request(context.Context, string, any) (json.RawMessage, error) {
	return nil, ErrPeerUnsupported
}
