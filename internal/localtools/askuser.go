package localtools

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/toolgate/toolgate/internal/kernel"
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

func askUser(ctx context.Context, call *kernel.Call) (*kernel.Output, error) {
	q, err := requireString(call.Args, "question")
	if err != nil {
		return nil, err
	}
	if !canElicit(call.Peer.ClientCapabilities()) {
		return nil, kernel.Failed(kernel.CodeToolFailed,
			"cannot ask the user: the client did not declare the elicitation capability").WithRetryable(false)
	}
	ctx, cancel := context.WithTimeout(ctx, AskUserTimeout)
	defer cancel()
	params := map[string]any{
		"message": q,
		"requestedSchema": map[string]any{
			"type": "object",
			"properties": map[string]any{
				"answer": map[string]any{"type": "string", "title": "Answer", "description": "Your answer"},
			},
			"required": []string{"answer"},
		},
	}
	raw, err := call.Peer.Request(ctx, "elicitation/create", params)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return nil, kernel.Failed(kernel.CodeTimeout, "the user did not answer within %s", AskUserTimeout)
		}
		return nil, kernel.Failed(kernel.CodeToolFailed, "cannot ask the user: %v", err).WithRetryable(false)
	}
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
