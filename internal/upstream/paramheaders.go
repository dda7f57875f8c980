package upstream

import (
	"encoding/json"
	"fmt"
	"sync"

	"github.com/toolgate/toolgate/internal/mcpspec"
)

// The x-mcp-header annotations (mcpspec.ParseParamHeaders): a stateless
// connection learns each tool's from tools/list and sends the headers with its
// tools/call requests (era.go).

// InvalidToolError reports a tools/call refused before it was sent, because
// the tool's inputSchema has an invalid x-mcp-header annotation: such a tool
// must not be called (docs/upstream.md).
type InvalidToolError struct {
	Tool string
	Err  error
}

func (e *InvalidToolError) Error() string {
	return fmt.Sprintf("upstream: tool %q is not called: %v", e.Tool, e.Err)
}

func (e *InvalidToolError) Unwrap() error { return e.Err }

// ValidateToolHeaders checks the x-mcp-header annotations of a tool's
// inputSchema (raw JSON). A catalogue drops a tool for which it returns an
// error when the server speaks 2026-07-28. A schema it cannot read as an
// object is not its business (nil): other code validates schemas.
func ValidateToolHeaders(inputSchema json.RawMessage) error {
	return mcpspec.ParseParamHeaders(inputSchema).Err
}

// toolTable is what one stateless connection learned from tools/list answers:
// each tool's header bindings, so a tools/call costs no schema parsing.
type toolTable struct {
	mu    sync.RWMutex
	tools map[string]mcpspec.ParamHeaders
}

func (t *toolTable) get(name string) (mcpspec.ParamHeaders, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	th, ok := t.tools[name]
	return th, ok
}

// learn reads a tools/list answer. The first page (no cursor asked) starts
// the table over, so a tool that went away does not linger.
func (t *toolTable) learn(params, result json.RawMessage) {
	var page struct {
		Tools []struct {
			Name        string          `json:"name"`
			InputSchema json.RawMessage `json:"inputSchema"`
		} `json:"tools"`
	}
	if json.Unmarshal(result, &page) != nil {
		return
	}
	var asked struct {
		Cursor *string `json:"cursor"`
	}
	_ = json.Unmarshal(params, &asked)
	learned := make(map[string]mcpspec.ParamHeaders, len(page.Tools))
	for _, tool := range page.Tools {
		learned[tool.Name] = mcpspec.ParseParamHeaders(tool.InputSchema)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if asked.Cursor == nil || t.tools == nil {
		t.tools = map[string]mcpspec.ParamHeaders{}
	}
	for k, v := range learned {
		t.tools[k] = v
	}
}

// LearnTools tells a stateless connection the tools of a tools/list answer
// it did not fetch itself (a catalogue loaded from storage, a page fetched
// on another connection), so its tools/call requests carry their
// x-mcp-header headers. The answer replaces what the connection knew. It
// does nothing on a legacy connection, whose requests carry no such headers.
func (c *Conn) LearnTools(toolsListResult json.RawMessage) {
	if c.era == EraStateless {
		c.tools.learn(nil, toolsListResult)
	}
}
