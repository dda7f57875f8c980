package mcpserver

import (
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/toolgate/toolgate/internal/httpwire"
	"github.com/toolgate/toolgate/internal/rpcwire"
)

// refusal is every way the HTTP surface turns a request away: rows of the one table
// every HTTP surface shares (internal/httpwire). docs/http-contract.md lists them and
// the golden files pin them.
type refusal = httpwire.Refusal

var (
	refuseNone     refusal
	refuseNotFound = httpwire.NotFound
	// refuseMethodNotAllowed answers a GET where no stream is served (its Allow
	// names what is); refuseOtherMethod any method the endpoint does not serve.
	refuseMethodNotAllowed     = httpwire.MethodNotAllowed
	refuseOtherMethod          = httpwire.Refusal{Status: http.StatusMethodNotAllowed, Code: "method_not_allowed", Allow: "GET, POST, DELETE"}
	refuseUnauthorized         = httpwire.Unauthorized
	refuseUnknownSession       = httpwire.UnknownSession
	refuseForbiddenHost        = httpwire.ForbiddenHost
	refuseForbiddenOrigin      = httpwire.ForbiddenOrigin
	refuseUnsupportedMediaType = httpwire.UnsupportedMediaType
	refuseTooLarge             = httpwire.TooLarge
	refuseBadProtocolVersion   = httpwire.BadProtocolVersion
	refuseMissingSession       = httpwire.MissingSession
	refuseTooManySessions      = httpwire.TooManySessions
	refuseTooManyRequests      = httpwire.TooManyRequests
	refuseInternal             = httpwire.Internal
	// refuseTurnUnavailable answers a request whose Turn could not be opened.
	refuseTurnUnavailable = httpwire.CatalogUnavailable
)

// writeRefusal answers a request the server turned away before (or instead of)
// reading a JSON-RPC message. None of these carry mcp-session-id.
func writeRefusal(w http.ResponseWriter, r refusal) {
	w.Header().Del(headerSessionID)
	httpwire.Write(w, r, "")
}

// writeRefusalRetry answers a refusal that passes by itself (503
// too_many_sessions, 429 too_many_requests) with Retry-After.
func writeRefusalRetry(w http.ResponseWriter, r refusal, after time.Duration) {
	w.Header().Del(headerSessionID)
	httpwire.WriteRetry(w, r, after)
}

// writeRPCError answers a body that could not be read as JSON-RPC: 400 with the
// JSON-RPC error (-32700 or -32600). sessionID, when known, is set: the
// contract keeps mcp-session-id on this 400.
func writeRPCError(w http.ResponseWriter, sessionID string, id jsonrpc.ID, e *jsonrpc.Error) {
	if sessionID != "" {
		w.Header().Set(headerSessionID, sessionID)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(httpwire.Unreadable)
	_, _ = w.Write(rpcwire.Error(id, e))
}
