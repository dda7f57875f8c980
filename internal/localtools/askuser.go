package localtools

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/toolgate/toolgate/internal/kernel"
	"github.com/toolgate/toolgate/internal/mcpspec"
)

// AskUserTimeout bounds how long ask_user waits for the person to answer.
const AskUserTimeout = 300 * time.Second

var askUserSchema = mustJSON(map[string]any{
	"$schema":              "https://json-schema.org/draft/2020-12/schema",
	"type":                 "object",
	"additionalProperties": false,
	"required":             []string{"question"},
	"properties": map[string]any{
		"question": map[string]any{"type": "string", "minLength": 1, "maxLength": 4000,
			"description": "The question to show the person."},
	},
})

func askUserTool() *kernel.Tool {
	return &kernel.Tool{
		ID:    "local.ask_user",
		Title: "Ask the user",
		Description: "Ask the person using the harness a question and wait (up to 300 s) for a " +
			"free-text answer. Works only when the harness supports MCP elicitation; otherwise the " +
			"call fails saying so.",
		InputSchema: askUserSchema,
		Annotations: kernel.Annotations{ReadOnly: true, OpenWorld: boolp(true)},
		Source:      "toolgate",
		Run: func(ctx context.Context, call *kernel.Call) (*kernel.Output, error) {
			return askUser(ctx, call)
		},
	}
}

// elicitResult is the part of an elicitation/create answer ask_user reads.
type elicitResult struct {
	Action  string         `json:"action"`
	Content map[string]any `json:"content"`
}

// askParams is the elicitation/create form both eras send: the question and one
// required string answer.
func askParams(q string) map[string]any {
	return map[string]any{
		"message": q,
		"requestedSchema": map[string]any{
			"type": "object",
			"properties": map[string]any{
				"answer": map[string]any{"type": "string", "title": "Answer", "description": "Your answer"},
			},
			"required": []string{"answer"},
		},
	}
}

// askUser asks the way the call's protocol era allows: in the stateless
// 2026-07-28 revision through a multi round-trip (input_required, then a retry
// carrying the answer), in a session opened by initialize through a
// server-to-client elicitation/create request.
func askUser(ctx context.Context, call *kernel.Call) (*kernel.Output, error) {
	q, err := requireString(call.Args, "question")
	if err != nil {
		return nil, err
	}
	if call.ProtocolVersion == mcpspec.ModernVersion {
		return askUserRoundTrip(call, q, processSealer())
	}
	if !canElicit(call.Peer.ClientCapabilities()) {
		return nil, kernel.Failed(kernel.CodeToolFailed,
			"cannot ask the user: the client did not declare the elicitation capability").WithRetryable(false)
	}
	ctx, cancel := context.WithTimeout(ctx, AskUserTimeout)
	defer cancel()
	raw, err := call.Peer.Request(ctx, "elicitation/create", askParams(q))
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return nil, kernel.Failed(kernel.CodeTimeout, "the user did not answer within %s", AskUserTimeout)
		}
		return nil, kernel.Failed(kernel.CodeToolFailed, "cannot ask the user: %v", err).WithRetryable(false)
	}
	return elicitAnswer(raw)
}

// askUserRoundTrip is ask_user in the 2026-07-28 revision. The first call (no
// requestState) answers input_required with the form and a sealed requestState.
// The retry must carry that state, which is verified before its inputResponses
// are read; inputResponses without a state this process issued are ignored and
// the question is asked again. A verified retry without the answer asks again too
// (MRTR: missing input is a new input_required, not an error). Each round is a
// separate call, authorized and audited by the kernel.
func askUserRoundTrip(call *kernel.Call, q string, s *stateSealer) (*kernel.Output, error) {
	if len(call.RequestState) > 0 {
		if err := s.verify(call); err != nil {
			return nil, err
		}
		if raw, ok := inputResponse(call.InputResponses); ok {
			return elicitAnswer(raw)
		}
	}
	// The client must have declared elicitation in this request's
	// clientCapabilities: a server must not ask for input of a kind the client
	// did not declare.
	if !canElicit(call.Peer.ClientCapabilities()) {
		return nil, kernel.Failed(kernel.CodeToolFailed,
			"cannot ask the user: this 2026-07-28 request's clientCapabilities do not declare elicitation").WithRetryable(false)
	}
	state, err := s.issue(call)
	if err != nil {
		return nil, kernel.Failed(kernel.CodeInternal, "cannot ask the user: %v", err)
	}
	reqs, err := json.Marshal(map[string]any{askInputKey: map[string]any{"method": "elicitation/create", "params": askParams(q)}})
	if err != nil {
		return nil, kernel.Failed(kernel.CodeInternal, "cannot ask the user: encoding the input request: %v", err)
	}
	st, _ := json.Marshal(state)
	return &kernel.Output{InputRequests: reqs, RequestState: st}, nil
}

// inputResponse returns the answer to ask_user's input request, if the retry
// carries one. Other keys are ignored.
func inputResponse(responses json.RawMessage) (json.RawMessage, bool) {
	var m map[string]json.RawMessage
	if len(responses) == 0 || json.Unmarshal(responses, &m) != nil {
		return nil, false
	}
	raw, ok := m[askInputKey]
	if !ok || len(raw) == 0 || string(raw) == "null" {
		return nil, false
	}
	return raw, true
}

// elicitAnswer turns the client's ElicitResult into ask_user's output.
func elicitAnswer(raw json.RawMessage) (*kernel.Output, error) {
	var res elicitResult
	if err := json.Unmarshal(raw, &res); err != nil {
		return nil, kernel.Failed(kernel.CodeToolFailed, "the client's elicitation answer is malformed: %v", err)
	}
	switch res.Action {
	case "accept":
		a, ok := res.Content["answer"].(string)
		if !ok {
			return nil, kernel.Failed(kernel.CodeToolFailed, "the client accepted but sent no string answer")
		}
		return &kernel.Output{Text: a}, nil
	case "decline":
		return &kernel.Output{Text: "[the user declined to answer]"}, nil
	case "cancel":
		return &kernel.Output{Text: "[the user dismissed the question without answering]"}, nil
	}
	return nil, kernel.Failed(kernel.CodeToolFailed, "the client answered with unknown action %q", strings.ToValidUTF8(res.Action, "?"))
}

// canElicit reports whether the declared client capabilities include elicitation
// (form mode is the default when the capability is an empty object).
func canElicit(caps json.RawMessage) bool {
	if len(caps) == 0 {
		return false
	}
	var c struct {
		Elicitation *json.RawMessage `json:"elicitation"`
	}
	if err := json.Unmarshal(caps, &c); err != nil || c.Elicitation == nil {
		return false
	}
	var e map[string]any
	if json.Unmarshal(*c.Elicitation, &e) != nil {
		return false
	}
	if _, hasForm := e["form"]; hasForm || len(e) == 0 {
		return true
	}
	_, hasURL := e["url"]
	return !hasURL
}
