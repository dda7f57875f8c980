package mcpspec

import "encoding/json"

// CompleteParams are the params of completion/complete: which prompt or resource
// template (Ref, raw: {"type":"ref/prompt","name"} or {"type":"ref/resource","uri"}),
// which of its arguments, what was typed so far, and the arguments already given.
type CompleteParams struct {
	Ref      json.RawMessage    `json:"ref"`
	Argument CompletionArgument `json:"argument"`
	Context  *CompletionContext `json:"context,omitempty"`
	Meta     json.RawMessage    `json:"_meta,omitempty"`
}

// CompletionArgument is the argument being completed and its value so far.
type CompletionArgument struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// CompletionContext holds the arguments already resolved.
type CompletionContext struct {
	Arguments map[string]string `json:"arguments,omitempty"`
}

// CompleteResult is the body of a completion/complete answer.
type CompleteResult struct {
	Completion Completion      `json:"completion"`
	Meta       json.RawMessage `json:"_meta,omitempty"`
}

// Completion is the suggested values (at most 100), how many there are in all when
// known, and whether more exist than were sent.
type Completion struct {
	Values  []string `json:"values"`
	Total   *int     `json:"total,omitempty"`
	HasMore bool     `json:"hasMore,omitempty"`
}
