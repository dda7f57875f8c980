package host

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"
)

// Sentinel kinds of host errors. Every error [Host.Call] produces itself (rather than
// passing an upstream's answer through) is a *[ServerError] whose Kind is one of these,
// so a caller branches with errors.Is and reads details with errors.As. The kernel maps
// each kind to one reason code (docs/host.md, "Errors").
var (
	ErrUnknownServer = errors.New("no such server installed")
	ErrDisabled      = errors.New("server disabled")
	// ErrAuthRequired is also what a Dialer or Session wraps to report an authorization
	// failure.
	ErrAuthRequired = errors.New("upstream requires authorization")
	// ErrUnavailable: the crash-loop circuit is open; Retry says when the next probe is.
	ErrUnavailable = errors.New("server unavailable")
	// ErrStartFailed: the start this call waited for failed (the cause is wrapped).
	ErrStartFailed = errors.New("server failed to start")
	// ErrStartTimeout: the call waited Options.StartTimeout for a start.
	ErrStartTimeout = errors.New("server did not start in time")
	// ErrCrashed: the connection ended while the call was in flight.
	ErrCrashed = errors.New("upstream connection ended during the call")
	// ErrTimeout: the upstream did not answer within the call's deadline
	// (Definition.CallTimeout); the call was cancelled upstream.
	ErrTimeout = errors.New("upstream did not answer the call in time")
	// ErrStopped: the host closed the connection (disable, restart, uninstall, session
	// end) while the call waited or was in flight.
	ErrStopped = errors.New("server stopped")
	// ErrSessionLimit: a "session" server already has Options.MaxSessions connections.
	ErrSessionLimit = errors.New("too many per-session connections")
	// ErrShutdown: the host is shutting down or shut down.
	ErrShutdown = errors.New("host shut down")
	// ErrInvalidDefinition: Install or Update got a definition it cannot host.
	ErrInvalidDefinition = errors.New("invalid server definition")
)

// ServerError is a failure the host produced for one server.
type ServerError struct {
	Server string
	Kind   error  // one of the sentinels above
	State  State  // the server's state when the error was made
	Reason Reason // why it is in that state
	// RetryAt is the next start attempt, when one is scheduled (ErrUnavailable: the
	// circuit's probe).
	RetryAt time.Time
	Err     error // the cause (a dial error, the session's end), when there is one
}

func (e *ServerError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "server %q: %v", e.Server, e.Kind)
	if e.State != "" {
		fmt.Fprintf(&b, " (state %s", e.State)
		if e.Reason != "" {
			fmt.Fprintf(&b, ", %s", e.Reason)
		}
		b.WriteString(")")
	}
	if !e.RetryAt.IsZero() {
		fmt.Fprintf(&b, "; next attempt at %s", e.RetryAt.UTC().Format(time.RFC3339))
	}
	if e.Err != nil {
		fmt.Fprintf(&b, ": %v", e.Err)
	}
	return b.String()
}

// Unwrap makes errors.Is match both the kind and the cause.
func (e *ServerError) Unwrap() []error {
	if e.Err == nil {
		return []error{e.Kind}
	}
	return []error{e.Kind, e.Err}
}

// ShutdownError lists the servers whose connections had not closed when the context
// given to [Host.Shutdown] ended.
type ShutdownError struct {
	Unclosed []string
	Err      error // the context's error
}

func (e *ShutdownError) Error() string {
	return fmt.Sprintf("host shutdown: %d server(s) still closing (%s): %v", len(e.Unclosed), strings.Join(e.Unclosed, ", "), e.Err)
}

func (e *ShutdownError) Unwrap() error { return e.Err }

func newShutdownError(names map[string]bool, err error) *ShutdownError {
	out := make([]string, 0, len(names))
	for n := range names {
		out = append(out, n)
	}
	sort.Strings(out)
	return &ShutdownError{Unclosed: out, Err: err}
}
