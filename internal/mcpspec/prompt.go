package mcpspec

import "encoding/json"

// Prompt is a prompt template a server exposes (an item of prompts/list).
type Prompt struct {
	Name        string           `json:"name"`
	Title       string           `json:"title,omitempty"`
	Description string           `json:"description,omitempty"`
	Arguments   []PromptArgument `json:"arguments,omitempty"`
	Meta        json.RawMessage  `json:"_meta,omitempty"`
}

// PromptArgument is one argument a prompt takes.
type PromptArgument struct {
	Name        string `json:"name"`
	Title       string `json:"title,omitempty"`
	Description string `json:"description,omitempty"`
	Required    bool   `json:"required,omitempty"`
}

// GetPromptParams are the params of prompts/get. Argument values are strings.
type GetPromptParams struct {
	Name      string            `json:"name"`
	Arguments map[string]string `json:"arguments,omitempty"`
	Meta      json.RawMessage   `json:"_meta,omitempty"`
}

// GetPromptResult is the body of a prompts/get answer: the prompt's messages, raw.
type GetPromptResult struct {
	Description string            `json:"description,omitempty"`
	Messages    []json.RawMessage `json:"messages"`
	Meta        json.RawMessage   `json:"_meta,omitempty"`
}
