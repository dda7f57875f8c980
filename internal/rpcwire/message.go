package rpcwire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// Message is one valid JSON-RPC message: a request (Method and a valid ID), a
// notification (Method, no ID) or a response to a server-initiated request
// (valid ID, Result or Error).
type Message struct {
	ID     jsonrpc.ID
	Method string
	// Params is re-encoded from the parsed value (keys sorted, no insignificant
	// white space, numbers as written); nil when absent.
	Params json.RawMessage
	// Result is the re-encoded result of a response; nil for requests and errors.
	Result json.RawMessage
	// Error is set for an error response.
	Error *jsonrpc.Error

	params []paramSpan // the members of an object Params, for Param
}

// IsRequest reports whether m expects an answer.
func (m *Message) IsRequest() bool { return m.Method != "" && m.ID.IsValid() }

// IsNotification reports whether m is a request without an id.
func (m *Message) IsNotification() bool { return m.Method != "" && !m.ID.IsValid() }

// IsResponse reports whether m answers a request this side sent.
func (m *Message) IsResponse() bool { return m.Method == "" }

// Param returns the value of the member name of m's params object, exactly as
// Params holds it (a slice of it, not a copy), or nil when params is not an
// object or has no such member.
func (m *Message) Param(name string) json.RawMessage {
	for _, p := range m.params {
		if p.name == name {
			return m.Params[p.start:p.end:p.end]
		}
	}
	return nil
}

// paramSpan is where one member's value lies in Message.Params.
type paramSpan struct {
	name       string
	start, end int
}

// envelopeMember is one member of a message's own object, read: its value's
// canonical encoding in scanner.out, and its members when it is an object.
type envelopeMember struct {
	key        string
	start, end int
	members    []member // for params and error: the object's members, copied
}

// message reads one message (an element at depth 1, or 2 inside a batch) and
// decides it by the error table: a value that is not a valid JSON-RPC message
// is -32600 when its id is usable, else -32700 (with a null id). item is its
// index in the body, for the spans it leaves to be set once the body is read.
func (s *scanner) message(depth int, spans *[]span, item int) (Item, error) {
	st := &objState{}
	s.st = st
	if s.peek() != '{' {
		start := len(s.out)
		if err := s.value(depth); err != nil {
			return Item{}, err
		}
		s.out = s.out[:start]
		return Item{Err: ParseError("not a JSON-RPC message: a message must be a JSON object")}, nil
	}
	if depth > s.maxDepth {
		return Item{}, errTooDeep
	}
	// The message's own object, read as any other, then its members looked at
	// in the order they came.
	objStart := len(s.out)
	ms, err := s.object(depth, true)
	if err != nil {
		return Item{}, err
	}
	env := s.envelope(ms)
	// Nothing else of this message is kept in out: what is not a span of it
	// is dropped, so a body costs its params and results, not its envelopes.
	it, keep := decide(s.out, env, st)
	if it.Msg == nil {
		s.out = s.out[:objStart]
		return it, nil
	}
	// Move the kept pieces to the front of the message's output.
	at := objStart
	for _, k := range keep {
		n := copy(s.out[at:], s.out[k.start:k.end])
		*spans = append(*spans, span{item: item, field: k.field, start: at, end: at + n})
		if k.params != nil {
			it.Msg.params = k.params
		}
		at += n
	}
	s.out = s.out[:at]
	return it, nil
}

// envelope lists the members of a message object, sorted by name (so of
// several unknown members the first by name is reported).
func (s *scanner) envelope(ms []member) []envelopeMember {
	env := make([]envelopeMember, len(ms))
	for i, m := range ms {
		vs, ve := m.value()
		env[i] = envelopeMember{key: m.key, start: vs, end: ve}
	}
	return env
}

// kept is a piece of a decided message's output that it keeps.
type kept struct {
	field      func(*Message) *json.RawMessage
	start, end int
	params     []paramSpan
}

func paramsField(m *Message) *json.RawMessage { return &m.Params }
func resultField(m *Message) *json.RawMessage { return &m.Result }
func dataField(m *Message) *json.RawMessage   { return &m.Error.Data }

var envelopeMembers = map[string]bool{
	"jsonrpc": true, "id": true, "method": true, "params": true, "result": true, "error": true,
}

// decide applies the error table to a message object read into out.
func decide(out []byte, env []envelopeMember, st *objState) (Item, []kept) {
	get := func(name string) (envelopeMember, bool) {
		for _, e := range env {
			if e.key == name {
				return e, true
			}
		}
		return envelopeMember{}, false
	}
	raw := func(e envelopeMember) []byte { return out[e.start:e.end] }
	var id jsonrpc.ID
	hasID := false
	if e, ok := get("id"); ok && !st.idAmbiguous {
		id, hasID = usableRawID(raw(e))
	}
	fail := func(msg string) (Item, []kept) {
		if hasID {
			return Item{Err: InvalidRequest(msg), ID: id}, nil
		}
		return Item{Err: ParseError("not a JSON-RPC message: " + msg)}, nil
	}
	if st.violation != "" {
		return fail(st.violation)
	}
	for _, e := range env {
		if !envelopeMembers[e.key] {
			return fail(fmt.Sprintf("unknown member %q", e.key))
		}
	}
	if e, ok := get("jsonrpc"); !ok || string(raw(e)) != `"2.0"` {
		return fail(`"jsonrpc" must be "2.0"`)
	}
	m := &Message{}
	if e, ok := get("id"); ok {
		mid, usable := usableRawID(raw(e))
		if !usable {
			return fail(`"id" must be a string or an integer`)
		}
		m.ID = mid
	}
	result, hasResult := get("result")
	errMember, hasError := get("error")
	if e, ok := get("method"); ok {
		var method string
		if r := raw(e); r[0] != '"' || json.Unmarshal(r, &method) != nil || method == "" {
			return fail(`"method" must be a non-empty string`)
		}
		if hasResult || hasError {
			return fail(`a request cannot carry "result" or "error"`)
		}
		m.Method = method
		var keep []kept
		if p, ok := get("params"); ok {
			r := raw(p)
			if r[0] != '{' && r[0] != '[' {
				return fail(`"params" must be an object or an array`)
			}
			keep = append(keep, kept{field: paramsField, start: p.start, end: p.end, params: paramSpans(out, p)})
		}
		return Item{Msg: m}, keep
	}
	// A response.
	if _, ok := get("params"); ok {
		return fail(`a response cannot carry "params"`)
	}
	if !hasID {
		return fail(`"method" is missing`)
	}
	if hasResult == hasError {
		return fail(`a response carries exactly one of "result" and "error"`)
	}
	if hasResult {
		return Item{Msg: m}, []kept{{field: resultField, start: result.start, end: result.end}}
	}
	eo := raw(errMember)
	if eo[0] != '{' {
		return fail(`"error" must be an object`)
	}
	var code, msg []byte
	var keep []kept
	forEachMember(eo, func(name string, vs, ve int) {
		switch name {
		case "code":
			code = eo[vs:ve]
		case "message":
			msg = eo[vs:ve]
		case "data":
			keep = []kept{{field: dataField, start: errMember.start + vs, end: errMember.start + ve}}
		}
	})
	if len(code) == 0 || code[0] != '-' && (code[0] < '0' || code[0] > '9') {
		return fail(`"error.code" must be an integer`)
	}
	n, err := strconv.ParseInt(string(code), 10, 64)
	if err != nil {
		return fail(`"error.code" must be an integer`)
	}
	m.Error = &jsonrpc.Error{Code: n}
	if len(msg) > 0 && msg[0] == '"' {
		_ = json.Unmarshal(msg, &m.Error.Message)
	}
	return Item{Msg: m}, keep
}

// paramSpans indexes the members of a params object, relative to its start.
func paramSpans(out []byte, p envelopeMember) []paramSpan {
	obj := out[p.start:p.end]
	if obj[0] != '{' {
		return nil
	}
	var spans []paramSpan
	forEachMember(obj, func(name string, vs, ve int) {
		spans = append(spans, paramSpan{name: name, start: vs, end: ve})
	})
	return spans
}

// usableRawID reads an id from its canonical encoding: a string, or an
// integer within ±2^53.
func usableRawID(r []byte) (jsonrpc.ID, bool) {
	switch {
	case len(r) == 0:
	case r[0] == '"':
		var s string
		if json.Unmarshal(r, &s) == nil {
			return usableID(s)
		}
	case r[0] == '-' || r[0] >= '0' && r[0] <= '9':
		return usableID(json.Number(r))
	}
	return jsonrpc.ID{}, false
}

// Member returns the value of the member name of obj, a JSON object as this
// package encodes it (compact, no duplicate names), as a slice of obj; false
// when obj is not such an object or has no such member. It reads obj without
// building anything, so a large sibling member costs one pass over it.
func Member(obj []byte, name string) (json.RawMessage, bool) {
	var v json.RawMessage
	found := false
	forEachMember(obj, func(key string, vs, ve int) {
		if !found && key == name {
			v, found = obj[vs:ve:ve], true
		}
	})
	return v, found
}

// forEachMember calls fn with the name and value span of each member of a
// compact JSON object.
func forEachMember(obj []byte, fn func(name string, start, end int)) {
	if len(obj) < 2 || obj[0] != '{' {
		return
	}
	i := 1
	for i < len(obj) && obj[i] == '"' {
		ke := skipString(obj, i)
		if ke < 0 || ke >= len(obj) || obj[ke] != ':' {
			return
		}
		key, ok := stringValue(obj[i:ke])
		if !ok {
			return
		}
		vs := ke + 1
		ve := skipValue(obj, vs)
		if ve < 0 {
			return
		}
		fn(key, vs, ve)
		if ve >= len(obj) || obj[ve] != ',' {
			return
		}
		i = ve + 1
	}
}

// stringValue decodes a JSON string, without a copy's detour when it holds
// no escape.
func stringValue(q []byte) (string, bool) {
	if bytes.IndexByte(q, '\\') < 0 {
		return string(q[1 : len(q)-1]), true
	}
	var s string
	return s, json.Unmarshal(q, &s) == nil
}

// skipString returns the index just past the string starting at b[i], or -1.
func skipString(b []byte, i int) int {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return -1
}

// skipValue returns the index just past the compact JSON value starting at
// b[i], or -1.
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				if j = skipString(b, j); j < 0 {
					return -1
				}
				j--
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return j + 1
				}
			}
		}
		return -1
	}
	j := i
	for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ']' {
		j++
	}
	return j
}

// Encode re-encodes a parsed value compactly without HTML escaping.
func Encode(v any) (json.RawMessage, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// DecodeValue parses one JSON value strictly (the same rules as messages:
// duplicate or case-variant members, depth) into plain Go values with numbers as
// json.Number. Callers use it for values that did not arrive as a message; it is
// Value without the canonical encoding.
func DecodeValue(data []byte) (any, error) {
	v, _, err := Value(data)
	return v, err
}
