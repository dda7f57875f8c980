// Package httpwire is the one place every HTTP surface of toolgate (the MCP endpoint
// /mcp of toolgate serve and of a bridge, the HTTP API /v1/tools and /v1/tools/invoke,
// and the management protocol /v1/rpc to come) turns a request away: the table of
// refusals with their statuses, error codes and headers (docs/http-contract.md, "Status
// table"; docs/kernel.md, "The HTTP API"), what an error from below gets (a turn that
// cannot be opened, whatever the kernel or the store said, is CatalogUnavailable; an
// internal failure is Internal), the status of a JSON-RPC error in the stateless
// revision, how a capped body is read, and how the bearer token is read.
//
// A refusal's body is {"error": code} (or {"error": code, "message": text} where a
// surface explains itself); an empty code is an empty body. What a tool call refuses
// is not here: a refusal by the kernel is a tool result (internal/kernel, result.go),
// answered 200, never an HTTP error.
//
// It imports nothing of toolgate's but the MCP vocabulary, so every surface can import
// it, whatever it serves.
package httpwire

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/toolgate/toolgate/internal/mcpspec"
)

// Refusal is one row of the table: an HTTP status and the error code of its body.
type Refusal struct {
	Status int
	// Code is the body's "error"; "" answers with an empty body.
	Code string
	// Allow is the Allow header of a 405.
	Allow string
}

// The table. Each code means one thing on every surface.
var (
	NotFound             = Refusal{Status: http.StatusNotFound}
	MethodNotAllowed     = Refusal{Status: http.StatusMethodNotAllowed, Code: "method_not_allowed", Allow: "POST, DELETE"}
	Unauthorized         = Refusal{Status: http.StatusUnauthorized, Code: "unauthorized"}
	UnknownSession       = Refusal{Status: http.StatusNotFound, Code: "unknown_session"}
	ForbiddenHost        = Refusal{Status: http.StatusForbidden, Code: "forbidden_host"}
	ForbiddenOrigin      = Refusal{Status: http.StatusForbidden, Code: "forbidden_origin"}
	UnsupportedMediaType = Refusal{Status: http.StatusUnsupportedMediaType, Code: "unsupported_media_type"}
	TooLarge             = Refusal{Status: http.StatusRequestEntityTooLarge, Code: "request_too_large"}
	BadProtocolVersion   = Refusal{Status: http.StatusBadRequest, Code: "unsupported_protocol_version"}
	MissingSession       = Refusal{Status: http.StatusBadRequest, Code: "missing_session"}
	InvalidRequest       = Refusal{Status: http.StatusBadRequest, Code: "invalid_request"}
	TooManySessions      = Refusal{Status: http.StatusServiceUnavailable, Code: "too_many_sessions"}
	// CatalogUnavailable answers a request whose turn could not be opened, on every
	// surface: the catalogue cannot be resolved (more than 512 tools, a stored grant
	// the policy cannot compile, the store unreadable). The cause is logged only.
	CatalogUnavailable = Refusal{Status: http.StatusServiceUnavailable, Code: "catalog_unavailable"}
	TooManyRequests    = Refusal{Status: http.StatusTooManyRequests, Code: "too_many_requests"}
	Internal           = Refusal{Status: http.StatusInternalServerError, Code: "internal_error"}
)

// The management protocol (/v1/rpc, internal/mgmt) answers its refusals with a
// JSON-RPC error body carrying a stable data.code; RPCStatus gives each code that is a
// refusal its status, from the rows above where the meaning is the same.
var (
	Forbidden          = Refusal{Status: http.StatusForbidden, Code: "forbidden"}
	Unavailable        = Refusal{Status: http.StatusServiceUnavailable, Code: "unavailable"}
	TooManyConnections = Refusal{Status: http.StatusServiceUnavailable, Code: "too_many_connections"}
)

// RPCStatus is the HTTP status of a /v1/rpc answer whose error has the stable code
// code: a refusal before the request was read (path, method, token, size, sockets,
// shutdown) or a body that is not one request (parse_error, invalid_request). Every
// other answer — a result, or a method's error such as unknown_server — is 200, as
// JSON-RPC over HTTP has it (docs/management.md, "Errors").
func RPCStatus(code string) int {
	for _, r := range []Refusal{Unauthorized, Forbidden, TooLarge, MethodNotAllowed, Unavailable, TooManyConnections, InvalidRequest} {
		if r.Code == code {
			return r.Status
		}
	}
	switch code {
	case "not_found":
		return NotFound.Status
	case "parse_error":
		return Unreadable
	}
	return http.StatusOK
}

// Unreadable is the status of a body that could not be read as JSON-RPC (not JSON, an
// empty batch, a request refused before it runs): the JSON-RPC error is its body.
const Unreadable = http.StatusBadRequest

type body struct {
	Error   string `json:"error"`
	Message string `json:"message,omitempty"`
}

// Write answers r: its status, its headers (WWW-Authenticate for a 401, Allow for a
// 405) and {"error": code}, with "message" when message is set.
func Write(w http.ResponseWriter, r Refusal, message string) {
	h := w.Header()
	switch r.Status {
	case http.StatusUnauthorized:
		h.Set("WWW-Authenticate", `Bearer realm="toolgate"`)
	case http.StatusMethodNotAllowed:
		h.Set("Allow", r.Allow)
	}
	if r.Code == "" {
		w.WriteHeader(r.Status)
		return
	}
	b, _ := json.Marshal(body{Error: r.Code, Message: message})
	h.Set("Content-Type", "application/json")
	w.WriteHeader(r.Status)
	_, _ = w.Write(b)
}

// WriteRetry is Write for a refusal that passes by itself (503 too_many_sessions, 429
// too_many_requests), with Retry-After: after in whole seconds rounded up, at least 1.
func WriteRetry(w http.ResponseWriter, r Refusal, after time.Duration) {
	secs := max(int64((after+time.Second-1)/time.Second), 1)
	w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
	Write(w, r, "")
}

// StatelessStatus is the HTTP status of an answer that carries JSON-RPC error code in
// the stateless revision (2026-07-28; the older revisions answer every error 200): an
// unknown method is 404; a request not served as sent (bad params or _meta, invalid,
// unparsable, header mismatch -32020, missing capability -32021, unsupported version
// -32022) is 400; an internal failure stays 200, as in the older revisions.
func StatelessStatus(code int64) int {
	switch code {
	case jsonrpc.CodeMethodNotFound:
		return http.StatusNotFound
	case jsonrpc.CodeInvalidParams, jsonrpc.CodeInvalidRequest, jsonrpc.CodeParseError,
		mcpspec.CodeHeaderMismatch, mcpspec.CodeMissingClientCapability, mcpspec.CodeUnsupportedProtocolVersion:
		return http.StatusBadRequest
	}
	return http.StatusOK
}

// ReadBody reads a request body of at most max bytes: into one buffer of its size when
// the client declared it (a body over max is refused before any of it is read), through
// a growing buffer otherwise (chunked). A body over max is an *http.MaxBytesError, which
// TooLarge answers.
func ReadBody(w http.ResponseWriter, r *http.Request, max int64) ([]byte, error) {
	if r.ContentLength > max {
		return nil, &http.MaxBytesError{Limit: max}
	}
	b := http.MaxBytesReader(w, r.Body, max)
	if n := r.ContentLength; n > 0 {
		buf := make([]byte, n)
		if _, err := io.ReadFull(b, buf); err != nil {
			return nil, err
		}
		return buf, nil
	}
	return io.ReadAll(b)
}

// IsTooLarge reports whether a ReadBody error is a body over its cap.
func IsTooLarge(err error) bool {
	var e *http.MaxBytesError
	return errors.As(err, &e)
}

// Bearer reads the one Authorization header's bearer token; this is the only place a
// token is read from a request (never the URL). present is false when no Authorization
// header was sent; ok is false when one was sent but holds no bearer token (two
// headers, another scheme, an empty token), which every surface refuses outright.
//
// Only Authorization is read: docs/http-contract.md names no other header, so an
// x-control-token header (another product's equivalent) is ignored here (see
// docs/architecture.md, "Open questions").
func Bearer(r *http.Request) (token string, present, ok bool) {
	h, present := r.Header["Authorization"]
	if !present {
		return "", false, true
	}
	if len(h) != 1 {
		return "", true, false
	}
	scheme, token, found := strings.Cut(h[0], " ")
	if !found || !strings.EqualFold(scheme, "Bearer") {
		return "", true, false
	}
	token = strings.TrimSpace(token)
	return token, true, token != ""
}
