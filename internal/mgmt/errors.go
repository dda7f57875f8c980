package mgmt

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/toolgate/toolgate/internal/httpwire"
)

// Stable error codes: the data.code of every JSON-RPC error the protocol answers with.
// docs/management.md ("Errors") lists them with their JSON-RPC code and HTTP status;
// TestDocsErrorTable keeps the two in step. A client branches on these, never on the
// message.
const (
	CodeParseError       = "parse_error"          // the body or frame is not JSON, or not strictly (duplicate members)
	CodeInvalidRequest   = "invalid_request"      // JSON, but not one JSON-RPC request (a batch, a notification, a response)
	CodeMethodNotFound   = "method_not_found"     // no such method
	CodeInvalidParams    = "invalid_params"       // params are not the method's shape: wrong type, unknown or missing member
	CodeValidation       = "validation_error"     // params have the right shape but a value is not acceptable
	CodeUnauthorized     = "unauthorized"         // no bearer token, or one that is not valid (unknown, expired, revoked)
	CodeForbidden        = "forbidden"            // a valid token whose principal is not an administrator
	CodeUnknownWorkspace = "unknown_workspace"    // workspace_id names no workspace
	CodeUnknownServer    = "unknown_server"       // no server by that name (in that workspace and scope) or id
	CodeConflict         = "conflict"             // the request contradicts the current state (e.g. restarting a disabled server)
	CodeUnavailable      = "unavailable"          // the data directory cannot serve the request now (shutting down, store failure)
	CodeTooLarge         = "request_too_large"    // the body is over the cap
	CodeMethodNotAllowed = "method_not_allowed"   // an HTTP method other than POST, or GET without a WebSocket upgrade
	CodeTooManySockets   = "too_many_connections" // every WebSocket slot is taken
	CodeNotFound         = "not_found"            // a path other than the protocol's
	CodeInternal         = "internal_error"       // a failure inside the server; its detail is in the server's log only
)

// rpcCodes gives each stable code its JSON-RPC error code: the standard ones where
// JSON-RPC has one, toolgate's own in the implementation-defined range otherwise.
var rpcCodes = map[string]int64{
	CodeParseError:       jsonrpc.CodeParseError,
	CodeInvalidRequest:   jsonrpc.CodeInvalidRequest,
	CodeMethodNotFound:   jsonrpc.CodeMethodNotFound,
	CodeInvalidParams:    jsonrpc.CodeInvalidParams,
	CodeValidation:       jsonrpc.CodeInvalidParams,
	CodeUnauthorized:     -32001,
	CodeForbidden:        -32003,
	CodeUnknownWorkspace: -32004,
	CodeUnknownServer:    -32005,
	CodeConflict:         -32009,
	CodeUnavailable:      -32010,
	CodeTooLarge:         jsonrpc.CodeInvalidRequest,
	CodeMethodNotAllowed: jsonrpc.CodeInvalidRequest,
	CodeTooManySockets:   -32011,
	CodeNotFound:         jsonrpc.CodeInvalidRequest,
	CodeInternal:         jsonrpc.CodeInternalError,
}

// httpStatus is the HTTP status of a refusal on /v1/rpc by its stable code, from
// serve's one HTTP error map (httpwire.RPCStatus): a request turned away before it was
// read as a request, or a body that is not one request. Every answer to a request that
// was read, a result or a method's error (unknown_server, unavailable, …), is 200 with
// the error in the body; servePost writes those without asking here. The body of every
// refusal is a JSON-RPC error object too (id null, or the id when the message had a
// usable one), so a client reads one shape.
func httpStatus(code string) int { return httpwire.RPCStatus(code) }

// Error is a management error with its stable code. A Manager returns one (through
// errors.As, so it may be wrapped) for anything a client should be told; any other
// error becomes internal_error, and its text goes to the log, never to the client
// (it may quote a path or a value).
type Error struct {
	// Code is one of the Code* constants.
	Code string
	// Message is for a person; it never carries a secret value.
	Message string
	// Field names the param at fault, for invalid_params and validation_error (and
	// unknown_server: "name" or "server_id").
	Field string
}

func (e *Error) Error() string { return e.Message }

// Errorf returns an *Error with code and a formatted message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// fieldError returns an *Error about one param.
func fieldError(code, field, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...), Field: field}
}

// errorData is the data member of every error answer.
type errorData struct {
	Code  string `json:"code"`
	Field string `json:"field,omitempty"`
}

// rpcError renders e as the JSON-RPC error object answers carry.
func (e *Error) rpcError() *jsonrpc.Error {
	n, ok := rpcCodes[e.Code]
	if !ok {
		n = jsonrpc.CodeInternalError
	}
	data, _ := json.Marshal(errorData{Code: e.Code, Field: e.Field})
	return &jsonrpc.Error{Code: n, Message: e.Message, Data: data}
}

// asError reads err as a management error: an *Error in its chain, else internal_error
// (and internal is true so the caller logs the cause).
func asError(err error) (e *Error, internal bool) {
	if errors.As(err, &e) {
		if _, known := rpcCodes[e.Code]; known {
			return e, false
		}
	}
	return &Error{Code: CodeInternal, Message: "internal error"}, true
}

// fromRPC reads a JSON-RPC error a client received back into an *Error: data.code
// when present, else the code JSON-RPC's number stands for.
func fromRPC(e *jsonrpc.Error) *Error {
	out := &Error{Message: e.Message}
	var d errorData
	if len(e.Data) > 0 && json.Unmarshal(e.Data, &d) == nil && d.Code != "" {
		out.Code, out.Field = d.Code, d.Field
		return out
	}
	for code, n := range rpcCodes {
		if n == e.Code && (out.Code == "" || code < out.Code) {
			out.Code = code
		}
	}
	if out.Code == "" {
		out.Code = CodeInternal
	}
	return out
}
