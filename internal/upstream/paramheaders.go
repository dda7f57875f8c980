package upstream

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// A tool's inputSchema may annotate a property with "x-mcp-header": "Name";
// over 2026-07-28 HTTP, a tools/call then carries that argument's value in
// the header Mcp-Param-Name too, so intermediaries can route on it without
// reading the body. Only string, integer and boolean properties may be
// annotated, names are HTTP tokens unique without regard to case, and a client
// must not call a tool whose annotations break these rules.

// paramBinding is one annotated property: its path through properties, and
// its header name.
type paramBinding struct {
	path   []string
	header string
}

// toolHeaders is what a tool's schema says about headers, computed once per
// tools/list answer.
type toolHeaders struct {
	bindings []paramBinding
	err      error // the annotations are invalid: the tool is not called
}

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

// schemaNode is the part of a JSON Schema the annotations live in.
type schemaNode struct {
	Type       json.RawMessage            `json:"type"`
	Header     json.RawMessage            `json:"x-mcp-header"`
	Properties map[string]json.RawMessage `json:"properties"`
}

// ValidateToolHeaders checks the x-mcp-header annotations of a tool's
// inputSchema (raw JSON). A catalogue drops a tool for which it returns an
// error when the server speaks 2026-07-28. A schema it cannot read as an
// object is not its business (nil): other code validates schemas.
func ValidateToolHeaders(inputSchema json.RawMessage) error {
	return parseToolHeaders(inputSchema).err
}

func parseToolHeaders(inputSchema json.RawMessage) toolHeaders {
	var th toolHeaders
	seen := map[string]string{}
	var walk func(raw json.RawMessage, path []string, depth int) error
	walk = func(raw json.RawMessage, path []string, depth int) error {
		var n schemaNode
		if depth > 32 || json.Unmarshal(raw, &n) != nil {
			return nil
		}
		if n.Header != nil {
			at := strings.Join(path, ".")
			var name string
			if json.Unmarshal(n.Header, &name) != nil {
				return fmt.Errorf("property %s: x-mcp-header must be a string", at)
			}
			if err := checkHeaderName(name); err != nil {
				return fmt.Errorf("property %s: %w", at, err)
			}
			var typ string
			if json.Unmarshal(n.Type, &typ) != nil || (typ != "string" && typ != "integer" && typ != "boolean") {
				return fmt.Errorf("property %s: x-mcp-header is allowed only on a string, integer or boolean property", at)
			}
			key := strings.ToLower(name)
			if prev, dup := seen[key]; dup {
				return fmt.Errorf("property %s: x-mcp-header %q repeats %q of property %s", at, name, name, prev)
			}
			seen[key] = at
			th.bindings = append(th.bindings, paramBinding{path: append([]string(nil), path...), header: name})
		}
		names := make([]string, 0, len(n.Properties))
		for k := range n.Properties {
			names = append(names, k)
		}
		sort.Strings(names) // deterministic errors
		for _, k := range names {
			if err := walk(n.Properties[k], append(path, k), depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(inputSchema, nil, 0); err != nil {
		return toolHeaders{err: err}
	}
	return th
}

// checkHeaderName: a non-empty HTTP token (RFC 9110 tchar).
func checkHeaderName(name string) error {
	if name == "" {
		return fmt.Errorf("x-mcp-header is empty")
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0 {
			continue
		}
		return fmt.Errorf("x-mcp-header %q holds %q, which is not allowed in a header name", name, rune(c))
	}
	return nil
}

// values returns the header value of each annotated argument present in the
// call's arguments (null and absent ones are left out, as are values of the
// wrong type).
func (th toolHeaders) values(arguments json.RawMessage) map[string]string {
	if len(th.bindings) == 0 || len(arguments) == 0 {
		return nil
	}
	out := map[string]string{}
	for _, b := range th.bindings {
		raw := json.RawMessage(arguments)
		found := true
		for _, step := range b.path {
			var obj map[string]json.RawMessage
			if json.Unmarshal(raw, &obj) != nil {
				found = false
				break
			}
			if raw, found = obj[step]; !found {
				break
			}
		}
		if !found {
			continue
		}
		if v, ok := primitiveHeaderValue(raw); ok {
			out[b.header] = v
		}
	}
	return out
}

// primitiveHeaderValue renders a string, boolean or integer (within the range
// a double holds exactly, as the revision says) for a header.
func primitiveHeaderValue(raw json.RawMessage) (string, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "", false
	}
	switch raw[0] {
	case '"':
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return "", false
		}
		return encodeHeaderValue(s), true
	case 't', 'f':
		var b bool
		if json.Unmarshal(raw, &b) != nil {
			return "", false
		}
		return strconv.FormatBool(b), true
	case 'n':
		return "", false
	}
	if n, err := strconv.ParseInt(string(raw), 10, 64); err == nil {
		if n > 1<<53-1 || n < -(1<<53-1) {
			return "", false
		}
		return strconv.FormatInt(n, 10), true
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	if err != nil || f != math.Trunc(f) || math.Abs(f) > 1<<53-1 {
		return "", false
	}
	return strconv.FormatInt(int64(f), 10), true
}

// encodeHeaderValue sends a value as it is when it is plain visible ASCII with
// no leading or trailing space, and as =?base64?…?= otherwise, or when it
// would itself read as that form.
func encodeHeaderValue(s string) string {
	plain := s == "" || (s[0] != ' ' && s[0] != '\t' && s[len(s)-1] != ' ' && s[len(s)-1] != '\t')
	for i := 0; plain && i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			plain = false
		}
	}
	if plain && strings.HasPrefix(s, "=?base64?") && strings.HasSuffix(s, "?=") {
		plain = false
	}
	if plain {
		return s
	}
	return "=?base64?" + base64.StdEncoding.EncodeToString([]byte(s)) + "?="
}

// toolTable is what one stateless connection learned from tools/list answers:
// each tool's header bindings, so a tools/call costs no schema parsing.
type toolTable struct {
	mu    sync.RWMutex
	tools map[string]toolHeaders
}

func (t *toolTable) get(name string) (toolHeaders, bool) {
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
	learned := make(map[string]toolHeaders, len(page.Tools))
	for _, tool := range page.Tools {
		learned[tool.Name] = parseToolHeaders(tool.InputSchema)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if asked.Cursor == nil || t.tools == nil {
		t.tools = map[string]toolHeaders{}
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
