package mcpserver

import (
	"net/http"
	"strconv"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/toolgate/toolgate/internal/mcpspec"
	"github.com/toolgate/toolgate/internal/rpcwire"
)

// refusal is every way the HTTP surface turns a request away. refusalStatus and
// writeRefusal are the one place that maps a refusal to its HTTP status, body and
// headers; docs/http-contract.md lists them and the golden files pin them.
type refusal int

const (
	refuseNone refusal = iota
	refuseNotFound
	refuseMethodNotAllowed
	refuseUnauthorized
	refuseUnknownSession
	refuseForbiddenHost
	refuseForbiddenOrigin
	refuseUnsupportedMediaType
	refuseTooLarge
	refuseBadProtocolVersion
	refuseMissingSession
	refuseTooManySessions
	refuseTooManyRequests
	refuseInternal
)

type refusalSpec struct {
	status int
	body   string // "" means an empty body
}

var refusals = map[refusal]refusalSpec{
	refuseNotFound:             {http.StatusNotFound, ""},
	refuseMethodNotAllowed:     {http.StatusMethodNotAllowed, `{"error":"method_not_allowed"}`},
	refuseUnauthorized:         {http.StatusUnauthorized, `{"error":"unauthorized"}`},
	refuseUnknownSession:       {http.StatusNotFound, `{"error":"unknown_session"}`},
	refuseForbiddenHost:        {http.StatusForbidden, `{"error":"forbidden_host"}`},
	refuseForbiddenOrigin:      {http.StatusForbidden, `{"error":"forbidden_origin"}`},
	refuseUnsupportedMediaType: {http.StatusUnsupportedMediaType, `{"error":"unsupported_media_type"}`},
	refuseTooLarge:             {http.StatusRequestEntityTooLarge, `{"error":"request_too_large"}`},
	refuseBadProtocolVersion:   {http.StatusBadRequest, `{"error":"unsupported_protocol_version"}`},
	refuseMissingSession:       {http.StatusBadRequest, `{"error":"missing_session"}`},
	refuseTooManySessions:      {http.StatusServiceUnavailable, `{"error":"too_many_sessions"}`},
	refuseTooManyRequests:      {http.StatusTooManyRequests, `{"error":"too_many_requests"}`},
	refuseInternal:             {http.StatusInternalServerError, `{"error":"internal_error"}`},
}

// writeRefusal answers a request the server turned away before (or instead of)
// reading a JSON-RPC message. None of these carry mcp-session-id.
func writeRefusal(w http.ResponseWriter, r refusal) {
	spec, ok := refusals[r]
	if !ok {
		spec = refusals[refuseInternal]
	}
	h := w.Header()
	h.Del(headerSessionID)
	switch r {
	case refuseMethodNotAllowed:
		h.Set("Allow", "POST, DELETE")
	case refuseUnauthorized:
		h.Set("WWW-Authenticate", `Bearer realm="toolgate"`)
	}
	if spec.body == "" {
		w.WriteHeader(spec.status)
		return
	}
	h.Set("Content-Type", "application/json")
	w.WriteHeader(spec.status)
	_, _ = w.Write([]byte(spec.body))
}

// writeRefusalRetry answers a refusal that passes by itself (503
// too_many_sessions, 429 too_many_requests) with Retry-After: after, in whole seconds rounded up, at
// least 1.
func writeRefusalRetry(w http.ResponseWriter, r refusal, after time.Duration) {
	secs := max(int64((after+time.Second-1)/time.Second), 1)
	w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
	writeRefusal(w, r)
}

// writeRPCError answers a body that could not be read as JSON-RPC: 400 with the
// JSON-RPC error (-32700 or -32600). sessionID, when known, is set: the seed
// keeps mcp-session-id on this 400.
func writeRPCError(w http.ResponseWriter, sessionID string, id jsonrpc.ID, e *jsonrpc.Error) {
	if sessionID != "" {
		w.Header().Set(headerSessionID, sessionID)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	_, _ = w.Write(rpcwire.Error(id, e))
}

// modernStatus is the HTTP status of a 2026-07-28 answer carrying a JSON-RPC
// error: an unknown method is 404, a request the server will not serve as sent
// (bad params or _meta, header mismatch, missing capability, unsupported
// version, invalid request) is 400, and an internal failure stays a 200 answer
// like the older versions'.
func modernStatus(code int64) int {
	switch code {
	case jsonrpc.CodeMethodNotFound:
		return http.StatusNotFound
	case jsonrpc.CodeInvalidParams, jsonrpc.CodeInvalidRequest, jsonrpc.CodeParseError,
		mcpspec.CodeHeaderMismatch, mcpspec.CodeMissingClientCapability, mcpspec.CodeUnsupportedProtocolVersion:
		return http.StatusBadRequest
	}
	return http.StatusOK
}
