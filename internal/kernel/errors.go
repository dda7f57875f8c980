package kernel

import (
	"errors"
	"fmt"
	"time"

	"github.com/toolgate/toolgate/internal/host"
	"github.com/toolgate/toolgate/internal/workspace"
)

// Status separates a permission decision from an outage in a refusal result.
type Status string

const (
	StatusDenied Status = "denied"
	StatusFailed Status = "failed"
)

// Code is a stable reason code. Every code is listed in docs/reason-codes.md and
// produced by at least one test.
type Code string

const (
	CodeNoMatchingGrant      Code = "no_matching_grant"      // denied: no grant covers tool × action × resource
	CodeExplicitDeny         Code = "explicit_deny"          // denied: a deny grant matched
	CodeToolUnavailable      Code = "tool_unavailable"       // denied: not published to this caller (unknown, disabled, ungranted)
	CodeNamespaceDisabled    Code = "namespace_disabled"     // denied: used only in audit; callers see tool_unavailable
	CodeEscalationPending    Code = "escalation_pending"     // denied: the turn ended by escalating
	CodeInvalidArguments     Code = "invalid_arguments"      // failed: arguments do not match inputSchema
	CodePathOutsideWorkspace Code = "path_outside_workspace" // denied: a path resolves outside the workspace
	CodeProtectedPath        Code = "protected_path"         // denied: write to a protected path without a grant naming it
	CodeSandboxUnavailable   Code = "sandbox_unavailable"    // failed: confinement promised for bash cannot be provided
	CodeTimeout              Code = "timeout"                // failed: the tool ran past its deadline
	CodeToolFailed           Code = "tool_failed"            // failed: the tool itself failed
	CodeAuditUnavailable     Code = "audit_unavailable"      // failed: the audit event could not be written; nothing ran
	CodeTurnClosed           Code = "turn_closed"            // denied: the turn is over
	CodeOutsideCapability    Code = "outside_capability"     // denied: the turn's capabilities do not cover this tool × action
	CodeInternal             Code = "internal_error"         // failed: unexpected kernel failure
	CodeCancelledByShutdown  Code = "cancelled_by_shutdown"  // failed: toolgate was shutting down: the call was cancelled, or refused before it started
	CodeCancelled            Code = "cancelled"              // failed: the caller or its session ended the call before the tool finished
	CodeNotSelected          Code = "not_selected"           // denied: used only in audit; an explicit-only server's tool this turn did not select
	CodeSelectionRejected    Code = "selection_rejected"     // denied: used only in audit; a turn's mcpServer/mcpTool selection was rejected

	// Upstream servers' tools (internal/upstreamtools, internal/host).
	CodeUpstreamUnavailable  Code = "upstream_unavailable"   // failed: the server is not serving now (disabled, not installed, circuit open, failed or timed-out start); retryable, with the probe time when known
	CodeUpstreamCrashed      Code = "upstream_crashed"       // failed: the server's connection ended during the call
	CodeUpstreamTimeout      Code = "upstream_timeout"       // failed: the server did not answer within its call timeout; the call was cancelled upstream
	CodeUpstreamAuthRequired Code = "upstream_auth_required" // failed: the server refused toolgate's credentials; a person must sign in or change them
	CodeUpstreamError        Code = "upstream_error"         // failed: the server answered the call with a JSON-RPC error (its code and message are in the result)
	CodeOAuthRefused         Code = "oauth_refused"          // denied: used only in audit; an authorization server refused a request of a remote server's sign-in
	CodeOAuthFailed          Code = "oauth_failed"           // failed: used only in audit; a request of a remote server's sign-in failed (network, 5xx, an unusable answer, a failed check)
	CodeToolQuarantined      Code = "tool_quarantined"       // denied: the server's definition of the tool changed since it was pinned (or is held): not sent until the owner approves it

	// Confined commands (bash, declarative tools).
	CodeProtectedPathChanged Code = "protected_path_changed" // denied: the command created or replaced protected paths; they were removed

	// Git tools.
	CodeInvalidRef             Code = "invalid_ref"              // failed: a revision or branch name is malformed, starts with '-', or does not resolve
	CodeUnsafeRepositoryConfig Code = "unsafe_repository_config" // denied: the repository's own config has keys that run programs

	// Multi round-trip requests (2026-07-28).
	CodeInvalidRequestState Code = "invalid_request_state" // failed: a retry's requestState is forged, expired, or was issued for another principal, tool or arguments
)

// Error is a refusal or failure with a reason code. It becomes a tool result with
// isError, never a JSON-RPC error.
type Error struct {
	Status    Status
	Code      Code
	Message   string
	Retryable *bool
	// RetryAt, when set, is when trying again may succeed (an upstream's circuit
	// probe); rendered as "retryAt" (RFC 3339).
	RetryAt time.Time
	// Details, when set, is rendered as "details" (an upstream's JSON-RPC error code,
	// message and data).
	Details map[string]any
}

func (e *Error) Error() string { return fmt.Sprintf("%s: %s: %s", e.Status, e.Code, e.Message) }

// Denied builds a denied *Error.
func Denied(code Code, format string, args ...any) *Error {
	return &Error{Status: StatusDenied, Code: code, Message: fmt.Sprintf(format, args...)}
}

// Failed builds a failed *Error.
func Failed(code Code, format string, args ...any) *Error {
	return &Error{Status: StatusFailed, Code: code, Message: fmt.Sprintf(format, args...)}
}

// WithRetryable sets the retryable flag carried in the result body.
func (e *Error) WithRetryable(r bool) *Error { e.Retryable = &r; return e }

// AsError returns the refusal an error from a tool stands for: the tool's own *Error
// (however wrapped), or an error of a package tools build on mapped to its reason
// code. This is the one place such errors become codes; the packages themselves
// return their own types and know nothing of reason codes:
//
//   - *workspace.OutsideError (a path outside the workspace, or leading out of it)
//     is denied, path_outside_workspace;
//   - workspace.ErrTooManyLinks (a link cycle) is failed, tool_failed;
//   - *host.ServerError (the host decided about an upstream call) is failed:
//     upstream_crashed (ErrCrashed), upstream_timeout (ErrTimeout), upstream_auth_required (ErrAuthRequired, not
//     retryable) or upstream_unavailable (every other kind: not installed, disabled,
//     circuit open, a start that failed or timed out, stopped, shutting down;
//     retryable, with the probe time when the host has one). An authorization failure
//     the session reported (wrapping host.ErrAuthRequired) is upstream_auth_required.
//
// ok is false for any other error; the kernel then reports it with the code of the
// step it came from (invalid_arguments from Access, tool_failed or timeout from Run).
func AsError(err error) (ke *Error, ok bool) {
	if errors.As(err, &ke) {
		return ke, true
	}
	var oe *workspace.OutsideError
	if errors.As(err, &oe) {
		return Denied(CodePathOutsideWorkspace, "%s", oe.Error()), true
	}
	if errors.Is(err, workspace.ErrTooManyLinks) {
		return Failed(CodeToolFailed, "%s", clip(err.Error(), 2000)), true
	}
	var se *host.ServerError
	switch {
	case errors.Is(err, host.ErrAuthRequired):
		return Failed(CodeUpstreamAuthRequired, "%s", clip(err.Error(), 2000)).WithRetryable(false), true
	case errors.As(err, &se) && errors.Is(se.Kind, host.ErrCrashed):
		return Failed(CodeUpstreamCrashed, "%s", clip(err.Error(), 2000)).WithRetryable(true), true
	case errors.As(err, &se) && errors.Is(se.Kind, host.ErrTimeout):
		return Failed(CodeUpstreamTimeout, "%s", clip(err.Error(), 2000)).WithRetryable(true), true
	case errors.As(err, &se):
		ke := Failed(CodeUpstreamUnavailable, "%s", clip(err.Error(), 2000)).WithRetryable(true)
		ke.RetryAt = se.RetryAt
		return ke, true
	}
	return nil, false
}
