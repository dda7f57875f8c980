package mcpspec

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// A tool's inputSchema may annotate a property with "x-mcp-header": "Name";
// over 2026-07-28 HTTP, a tools/call then carries that argument's value in
// the header Mcp-Param-Name too, so intermediaries can route on it without
// reading the body. Only string, integer and boolean properties may be
// annotated, names are HTTP tokens unique without regard to case, and a client
// must not call a tool whose annotations break these rules. Both sides read
// the annotations here: internal/upstream to send the headers, internal/mcpserver
// to check them.

// ParamBinding is one annotated property: its path through properties, and
// its header name.
type ParamBinding struct {
	Path   []string
	Header string
}

// ParamHeaders is what a tool's schema says about headers, computed once per
// tools/list answer.
type ParamHeaders struct {
	Bindings []ParamBinding
	Err      error // the annotations are invalid: the tool is not called
}

// schemaNode is the part of a JSON Schema the annotations live in.
type schemaNode struct {
	Type       json.RawMessage            `json:"type"`
	Header     json.RawMessage            `json:"x-mcp-header"`
	Properties map[string]json.RawMessage `json:"properties"`
}

func ParseParamHeaders(inputSchema json.RawMessage) ParamHeaders {
	var th ParamHeaders
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
			th.Bindings = append(th.Bindings, ParamBinding{Path: append([]string(nil), path...), Header: name})
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
		return ParamHeaders{Err: err}
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
func (th ParamHeaders) Values(arguments json.RawMessage) map[string]string {
	if len(th.Bindings) == 0 || len(arguments) == 0 {
		return nil
	}
	out := map[string]string{}
	for _, b := range th.Bindings {
		raw := json.RawMessage(arguments)
		found := true
		for _, step := range b.Path {
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
			out[b.Header] = v
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
		return EncodeHeaderValue(s), true
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

// EncodeHeaderValue sends a value as it is when it is plain visible ASCII with
// no leading or trailing space, and as =?base64?…?= otherwise, or when it
// would itself read as that form.
func EncodeHeaderValue(s string) string {
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

// DecodeHeaderValue reads a header value as a client sends it: plain, or
// =?base64?…?= (standard alphabet, padded). ok is false for that form with
// anything but valid base64 inside: the request is refused, never read as
// the literal text.
func DecodeHeaderValue(v string) (s string, ok bool) {
	inner, found := strings.CutPrefix(v, "=?base64?")
	if !found {
		return v, true
	}
	inner, found = strings.CutSuffix(inner, "?=")
	if !found {
		return v, true // no suffix: a literal value
	}
	b, err := base64.StdEncoding.Strict().DecodeString(inner)
	if err != nil {
		return "", false
	}
	return string(b), true
}
