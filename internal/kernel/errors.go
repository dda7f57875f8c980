package kernel

import (
	"errors"
	"fmt"

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
//   - workspace.ErrTooManyLinks (a link cycle) is failed, tool_failed.
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
	return nil, false
}
