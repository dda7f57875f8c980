package kernel

import (
	"bytes"
	"encoding/json"
	"time"

	"github.com/toolgate/toolgate/internal/mcpspec"
	"github.com/toolgate/toolgate/internal/rpcwire"
)

// errorBody is the text of a refusal result, exactly as docs/reason-codes.md shows it.
type errorBody struct {
	Status    Status `json:"status"`
	Code      Code   `json:"code"`
	Message   string `json:"message"`
	Retryable *bool  `json:"retryable,omitempty"`
	RetryAt   string `json:"retryAt,omitempty"`
	// Details is last: it may quote another server's data.
	Details map[string]any `json:"details,omitempty"`
}

// errorResult renders a refusal or failure as a tool result (never a JSON-RPC error),
// so a client can tell a permission decision from an outage by _meta.
func errorResult(ke *Error) *mcpspec.CallResult {
	eb := errorBody{Status: ke.Status, Code: ke.Code, Message: ke.Message, Retryable: ke.Retryable, Details: ke.Details}
	if !ke.RetryAt.IsZero() {
		eb.RetryAt = ke.RetryAt.UTC().Format(time.RFC3339)
	}
	body, err := json.Marshal(eb)
	if err != nil { // Details that do not encode: drop them rather than the refusal
		eb.Details = nil
		body, _ = json.Marshal(eb)
	}
	return &mcpspec.CallResult{
		Content: []json.RawMessage{textBlock(string(body))},
		IsError: true,
		Meta:    map[string]any{mcpspec.MetaStatus: string(ke.Status), mcpspec.MetaCode: string(ke.Code)},
	}
}

func textBlock(s string) json.RawMessage {
	b, _ := json.Marshal(struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}{"text", s})
	return b
}

// buildResult turns a tool's Output into the published result. structuredContent is
// present only when the tool declares an outputSchema and the output is a JSON object.
func buildResult(t *Tool, out *Output) *mcpspec.CallResult {
	if len(out.Result) > 0 {
		return &mcpspec.CallResult{Raw: out.Result, IsError: out.IsError, ResultType: out.rawResultType}
	}
	if len(out.InputRequests) > 0 || len(out.RequestState) > 0 {
		return &mcpspec.CallResult{ResultType: mcpspec.ResultInputRequired, InputRequests: out.InputRequests,
			RequestState: out.RequestState, Content: []json.RawMessage{}}
	}
	r := &mcpspec.CallResult{IsError: out.IsError}
	if out.IsError {
		// A failure the tool reported itself is still a failure, not a permission
		// decision: say so the way refusals do, so clients can tell them apart.
		r.Meta = map[string]any{mcpspec.MetaStatus: string(StatusFailed), mcpspec.MetaCode: string(CodeToolFailed)}
	}
	var structured json.RawMessage
	if len(t.OutputSchema) > 0 && out.Structured != nil {
		if b, err := json.Marshal(out.Structured); err == nil && len(b) > 0 && b[0] == '{' {
			structured = b
		}
	}
	r.StructuredContent = structured
	switch {
	case len(out.Content) > 0:
		r.Content = append([]json.RawMessage(nil), out.Content...)
	case out.Text != "":
		r.Content = []json.RawMessage{textBlock(out.Text)}
	case structured != nil:
		// MCP asks tools returning structured content to also serialize it as text.
		r.Content = []json.RawMessage{textBlock(string(structured))}
	default:
		r.Content = []json.RawMessage{}
	}
	return r
}

// readRawResult reads a tool's raw Result once, strictly: it must be a JSON object
// without duplicate or case-variant members (else the caller and the audit log could
// read its isError differently). Its isError and resultType are kept; its bytes are
// passed on as they are.
func readRawResult(out *Output) error {
	raw := bytes.TrimSpace(out.Result)
	canon, err := rpcwire.Limits{MaxBytes: len(raw), MaxDepth: rpcwire.MaxDepth}.Canonical(raw)
	if err != nil || len(canon) == 0 || canon[0] != '{' {
		return Failed(CodeToolFailed, "the tool's result is not one JSON object read the same way by everyone")
	}
	isErr, _ := rpcwire.Member(canon, "isError")
	out.IsError = string(isErr) == "true"
	if rt, ok := rpcwire.Member(canon, "resultType"); ok {
		if json.Unmarshal(rt, &out.rawResultType) != nil || out.rawResultType == "" {
			return Failed(CodeToolFailed, "the tool's result has a resultType that is not a name")
		}
	}
	out.Result = raw
	return nil
}
