package upstream

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"syscall"

	"github.com/toolgate/toolgate/internal/mcpspec"
)

// ErrClosed is matched (errors.Is) by every error that reports a connection that
// has ended: the calls pending when it ended and any call made after.
var ErrClosed = errors.New("upstream: connection closed")

// ClosedError is the error of a call on a connection that has ended. Cause says
// why (an *ExitedError when the process died, an *AuthRequiredError, a transport
// error, or nil when the connection was closed by its owner).
type ClosedError struct {
	Cause error
}

func (e *ClosedError) Error() string {
	if e.Cause == nil {
		return ErrClosed.Error()
	}
	return ErrClosed.Error() + ": " + e.Cause.Error()
}

// Is makes errors.Is(err, ErrClosed) true.
func (e *ClosedError) Is(target error) bool { return target == ErrClosed }

func (e *ClosedError) Unwrap() error { return e.Cause }

// RPCError is a JSON-RPC error the upstream answered, with its data as raw bytes.
type RPCError struct {
	Code    int64
	Message string
	Data    json.RawMessage
}

func (e *RPCError) Error() string {
	return fmt.Sprintf("upstream: error %d: %s", e.Code, e.Message)
}

// AuthRequiredError reports that an HTTP upstream refused the credentials (401,
// or 403 with a Bearer challenge), or that an Authorizer has none to offer. It is
// not retried here: new credentials are needed (docs/upstream-auth.md).
type AuthRequiredError struct {
	StatusCode int
	// Challenge holds the WWW-Authenticate header values as the server sent them.
	Challenge []string
	// URL is the request URL with userinfo and query values redacted.
	URL string
	// Reason is one of the AuthReason constants when an Authorizer decided; empty
	// when the server refused and nothing was tried.
	Reason string
	// Scopes are the scopes a new authorization would ask for (for
	// insufficient_scope: what was granted plus what the server asked for).
	Scopes []string
	// Detail explains Reason to an operator. It never holds a secret.
	Detail string
	// Err is the cause, when there is one (an authorization server's refusal).
	Err error
}

// The reasons an Authorizer gives in AuthRequiredError.Reason.
const (
	// AuthReasonLoginRequired: no credentials; a person has to sign in.
	AuthReasonLoginRequired = "login_required"
	// AuthReasonInsufficientScope: the server wants scopes the grant lacks (a 403
	// insufficient_scope). Only that request failed: the connection goes on.
	AuthReasonInsufficientScope = "insufficient_scope"
	// AuthReasonGrantRevoked: the authorization server refused the refresh token
	// or the grant (invalid_grant).
	AuthReasonGrantRevoked = "grant_revoked"
	// AuthReasonTokenRejected: the server refused a token just issued for it.
	AuthReasonTokenRejected = "token_rejected"
	// AuthReasonClientRejected: the authorization server refused the client's
	// own credentials (invalid_client).
	AuthReasonClientRejected = "client_rejected"
	// AuthReasonAuthorizationFailed: discovery, registration, the authorization
	// response or the token exchange failed in a way retrying will not fix.
	AuthReasonAuthorizationFailed = "authorization_failed"
)

func (e *AuthRequiredError) Error() string {
	s := fmt.Sprintf("upstream: authorization required (HTTP %d) at %s", e.StatusCode, e.URL)
	if e.StatusCode == 0 {
		s = "upstream: authorization required at " + e.URL
	}
	if e.Reason != "" {
		s += " (" + e.Reason + ")"
	}
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	if len(e.Challenge) > 0 {
		s += ": " + strings.Join(e.Challenge, ", ")
	}
	return s
}

func (e *AuthRequiredError) Unwrap() error { return e.Err }

// InsufficientScope reports a 403 insufficient_scope: the request needs more
// scopes, but the credentials are otherwise good, so the connection goes on.
func (e *AuthRequiredError) InsufficientScope() bool {
	return e.Reason == AuthReasonInsufficientScope
}

// MessageTooLargeError reports a message from the upstream over the size cap.
type MessageTooLargeError struct {
	Limit int
}

func (e *MessageTooLargeError) Error() string {
	return fmt.Sprintf("upstream: message exceeds %d bytes", e.Limit)
}

// ExitedError reports that a stdio server's process ended.
type ExitedError struct {
	Status ExitStatus
}

func (e *ExitedError) Error() string { return "upstream: process " + e.Status.String() }

// UnsupportedVersionError reports an initialize answer with a protocol version
// this package does not speak.
type UnsupportedVersionError struct {
	Offered, Answered string
}

func (e *UnsupportedVersionError) Error() string {
	return fmt.Sprintf("upstream: server answered protocol version %q to %q; supported: %s",
		e.Answered, e.Offered, strings.Join(mcpspec.SessionVersions, ", "))
}

// ExitStatus is how a process ended.
type ExitStatus struct {
	// Code is the exit code, or -1 when the process was killed by a signal.
	Code int
	// Signal is the signal that killed the process, or 0.
	Signal syscall.Signal
}

func (s ExitStatus) String() string {
	if s.Signal != 0 {
		return "killed by signal " + s.Signal.String()
	}
	return fmt.Sprintf("exited with code %d", s.Code)
}
