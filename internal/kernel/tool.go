// Package kernel is the one place toolgate decides anything. Every surface (MCP over
// stdio or HTTP, the /v1 HTTP API, the CLI) turns a request into a ToolCall and hands it
// here; the kernel validates the arguments, re-derives the exact action and resource,
// authorizes them against the caller's grants, runs the tool, and writes one audit
// event per decision. Surfaces never authorize on their own.
package kernel

import (
	"context"
	"encoding/json"

	"github.com/toolgate/toolgate/internal/mcpspec"
)

// Action is what a call does to its resource.
type Action string

const (
	ActionRead    Action = "read"
	ActionWrite   Action = "write"
	ActionExecute Action = "execute"
)

// Access is the exact action and resource one call touches, derived from its parsed
// arguments. Resource is a scheme-prefixed, normalised string: "path:src/main.go"
// (workspace-relative, slash-separated, no "..", "." for the root), "repo:.",
// "url:example.com", or "" for tools that touch nothing nameable.
type Access struct {
	Action   Action
	Resource string
	// Protected marks resources (such as .git/hooks, .git/config, .gitattributes and
	// toolgate's own files) that a broad grant does not cover: only a grant whose
	// resource scope names the protected path itself (or a path inside it) allows them.
	Protected bool
	// ProtectedRoot, for a Protected resource, is the protected path it lies in (for
	// example "path:.git/hooks" for "path:.git/hooks/pre-commit"): a grant must name that
	// path or one inside it. Empty means the resource itself is the protected path.
	ProtectedRoot string
}

// Annotations are the kernel's own hints; they are published as MCP's readOnlyHint,
// destructiveHint and idempotentHint.
type Annotations struct {
	ReadOnly    bool
	Destructive bool
	Idempotent  bool
	// OpenWorld is published as openWorldHint when set.
	OpenWorld *bool
}

// Tool is one registered tool. ID is canonical "namespace.name".
type Tool struct {
	ID          string
	Title       string
	Description string
	// InputSchema is a JSON Schema (2020-12 unless it says otherwise) whose root is an
	// object schema. It is compiled once at registration.
	InputSchema json.RawMessage
	// OutputSchema, when set, makes object outputs travel as structuredContent.
	OutputSchema json.RawMessage
	Annotations  Annotations
	// Source says where the tool comes from ("toolgate", "workspace", an upstream
	// server's name); published as _meta["toolgate/source"].
	Source string
	// Access derives the action and resource from the validated arguments. Nil means
	// Default action with no resource. An error refuses the call (invalid_arguments or
	// the *Error's own code).
	Access func(args map[string]any) (Access, error)
	// DefaultAction is used when Access is nil: read for read-only tools, else execute.
	// Run executes the call. Return an *Error for refusals and failures with a reason
	// code; any other error is reported as failed/tool_failed.
	Run func(ctx context.Context, call *Call) (*Output, error)

	// Raw, when set, is the tool object as another server published it (an upstream's
	// tools/list item, a JSON object). It is published as it is, with "name" replaced
	// by the published name and toolgate's _meta keys spliced into its _meta: every
	// other member keeps its bytes (docs/kernel.md, "Upstream tools"). Description,
	// InputSchema, OutputSchema and Annotations are then ignored: the input schema is
	// the Raw object's inputSchema. A schema the validator cannot compile does not
	// refuse the tool: its calls are checked only for being an object, and the
	// registration reports it (Diagnostic).
	Raw json.RawMessage
	// RawName is the tool's name at its source (the upstream's raw tool name); an
	// mcpTool selection (Selection) names a tool by it.
	RawName string
}

// Namespace returns the part of the ID before the first dot.
func (t *Tool) Namespace() string {
	for i := 0; i < len(t.ID); i++ {
		if t.ID[i] == '.' {
			return t.ID[:i]
		}
	}
	return t.ID
}

// Call is one authorized tool invocation as a tool's Run sees it.
type Call struct {
	// ID is the fresh call id the kernel assigned.
	ID        string
	Principal string
	Tool      *Tool
	// Args is the parsed, schema-validated arguments object (never nil). Numbers are
	// json.Number, exactly as the caller wrote them, so no integer loses precision.
	Args map[string]any
	// Arguments is the encoding Args was read from (canonical: internal/rpcwire), "{}"
	// when none were sent. A tool that forwards its call (to an upstream server)
	// forwards these bytes, never a re-encoding of Args.
	Arguments json.RawMessage
	Access    Access
	// Peer reaches the harness's client (elicitation). Never nil.
	Peer mcpspec.Peer
	// ProtocolVersion is "2026-07-28" for a stateless request, "" otherwise. Only a
	// 2026-07-28 call may answer with Output.InputRequests (multi round-trip).
	ProtocolVersion string
	// InputResponses and RequestState are a 2026-07-28 retry's params.inputResponses
	// and params.requestState, re-encoded; nil when absent. RequestState comes back
	// from the client: treat it as attacker-controlled.
	InputResponses json.RawMessage
	RequestState   json.RawMessage
	// TurnID is the id of the turn the call is made on (an upstream call's session key).
	TurnID string
	// Meta is the request's params._meta as the client sent it (its progressToken), or
	// nil.
	Meta json.RawMessage
}

// Output is what a tool returns. Content blocks are MCP content objects; Text is a
// convenience: when Content is empty, Text becomes one text block. A tool that forwards
// its call returns the answer's bytes in Result instead.
type Output struct {
	Content []json.RawMessage
	Text    string
	// Structured, when the tool declares an OutputSchema and it is a JSON object, is
	// published as structuredContent.
	Structured any
	// IsError marks a tool-level failure that the tool reported itself (for example a
	// bash command exiting non-zero is not an error; a git command that failed is).
	IsError bool
	// InputRequests, for a call whose ProtocolVersion is "2026-07-28", asks the client
	// for input instead of finishing (resultType "input_required"); RequestState, if
	// set, is handed back on the retry. The retry is a new call, authorized again.
	InputRequests json.RawMessage
	RequestState  json.RawMessage
	// ProtocolError, for a 2026-07-28 call, answers it with a JSON-RPC error instead
	// of a result (mcpspec.CallResult.ProtocolError); the call is audited failed.
	ProtocolError *mcpspec.ProtocolError
	// Result, when set, is a whole tools/call result as another server wrote it (an
	// upstream's, a JSON object): it reaches the caller as it is (mcpspec.CallResult.Raw,
	// up to insignificant white space), never rebuilt from the other fields, which are
	// then ignored. It is read once, strictly (a result with duplicate or case-variant
	// members is refused, tool_failed), for its isError (a failure is audited as one)
	// and its resultType.
	Result json.RawMessage

	rawResultType string // Result's resultType, read by the kernel
}
