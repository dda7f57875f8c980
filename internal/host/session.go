package host

import (
	"context"
	"encoding/json"
)

// Dialer opens connections to upstream servers. The host calls Dial when a server must
// start (first use, a required server, a restart, a half-open probe) and never holds a
// lock while it runs. An adapter over internal/upstream satisfies it in the daemon;
// hosttest.Dialer is the fake the tests use.
//
// Dial must return once ctx is done (its deadline is Options.StartTimeout), having
// released whatever it started. It returns only after the MCP handshake succeeded: the
// Session it returns answers calls at once. An authorization failure (an HTTP 401, a
// refused token) must be returned as an error wrapping [ErrAuthRequired]: the host then
// stops retrying until the definition changes or a person asks for a restart.
type Dialer interface {
	Dial(ctx context.Context, req DialRequest) (Session, error)
}

// DialRequest says what to start.
type DialRequest struct {
	// Server is the installed name, Definition.Name.
	Server string
	// SessionKey is the caller session the connection is for when the server's
	// isolation is "session"; empty for the shared connection.
	SessionKey string
	// Config is Definition.Config, handed over unchanged (the host never reads it).
	Config any
	// Notify receives every notification the upstream sends on this connection
	// (notifications/tools/list_changed, notifications/message …). It may be called
	// before Dial returns and from any goroutine; it returns at once.
	Notify func(method string, params json.RawMessage)
	// Request answers the upstream's requests to the client (sampling/createMessage,
	// elicitation/create, roots/list) through the call in flight they belong to
	// (route.go); a Dialer gives it to its connection as the handler of the
	// upstream's requests. It may block until the client answers or ctx ends.
	Request func(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error)
	// Stateless asks for a connection in the 2026-07-28 revision (no initialize, each
	// request's client capabilities in its own _meta, CallOptions.Stateless), the
	// stateless twin of a live connection (stateless.go); Request is nil. A server
	// that does not speak it fails the dial with an error wrapping ErrNotStateless.
	Stateless bool
}

// Session is one live connection to an upstream server after its handshake. All
// methods are safe for concurrent use.
//
// Timing contract, which the host relies on to keep one server's trouble its own:
//   - Call and Ping return when ctx is done (after telling the upstream, e.g. with
//     notifications/cancelled), and return at once, failing, when the session ends.
//   - When the session ends for any reason (the process exited, the connection
//     dropped, Close was called), Done is closed before pending calls return their
//     error, and Err then says why.
//   - Close stops the upstream (for a process: close stdin, wait, SIGTERM and SIGKILL
//     to its group, reap) and returns by the time ctx is done, having killed what it
//     could. Calling Close on a session that already ended reaps it. Close is called
//     exactly once per session.
//   - Info and StderrTail only read memory and never block.
type Session interface {
	// Info is what the handshake recorded; it does not change afterwards.
	Info() SessionInfo
	// Call sends one request and returns its result bytes unchanged. A JSON-RPC error
	// answer is an error (the adapter's typed error, passed through by the host
	// unchanged); an authorization failure wraps ErrAuthRequired.
	Call(ctx context.Context, method string, params json.RawMessage, opts CallOptions) (json.RawMessage, error)
	// Ping sends an MCP ping. Any answer, even a JSON-RPC error, proves the upstream is
	// alive and returns nil; only no answer (timeout, dead connection) is an error.
	Ping(ctx context.Context) error
	// Close stops the upstream; see the timing contract above.
	Close(ctx context.Context) error
	// Done is closed when the session has ended.
	Done() <-chan struct{}
	// Err says why the session ended; nil while it is live.
	Err() error
	// StderrTail is the last bytes the upstream wrote to stderr (bounded by the
	// session; empty for HTTP servers). It must not hold secrets the adapter knows of.
	StderrTail() string
}

// SessionInfo is the outcome of the MCP handshake, kept verbatim.
type SessionInfo struct {
	ProtocolVersion string          `json:"protocolVersion"`
	ServerInfo      json.RawMessage `json:"serverInfo,omitempty"`
	Capabilities    json.RawMessage `json:"capabilities,omitempty"`
	Instructions    string          `json:"instructions,omitempty"`
}

// CallOptions are per-call settings for [Host.Call], passed on to Session.Call.
type CallOptions struct {
	// SessionKey names the caller session (the downstream MCP session or turn). It
	// selects the connection of a server whose isolation is "session"; shared servers
	// ignore it. [Host.EndSession] closes what it opened.
	SessionKey string
	// Progress, when set, receives the params of every notifications/progress the
	// upstream sends for this call (with the caller's own progressToken restored by
	// the session).
	Progress func(params json.RawMessage)
	// Request, when set, answers the upstream's requests to the client made on the
	// call's connection while this is the only call in flight there that has one
	// (route.go).
	Request func(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error)
	// Notify, when set, receives the upstream's log messages (notifications/message)
	// sent on the call's connection while this is the only call in flight there that
	// has one. It must return at once.
	Notify func(method string, params json.RawMessage)
	// Stateless, when set, sends the call on the server's stateless connection as a
	// 2026-07-28 request declaring Stateless.Capabilities (stateless.go): a server
	// that does not speak that revision answers ErrNotStateless at once. The
	// revision has no server→client request: Request is ignored; Notify takes the
	// log messages the server sends on that connection during the call.
	Stateless *Stateless
}
