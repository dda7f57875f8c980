package rpcwire

// The decoder as it was before it was rewritten to read without building a
// tree (the json.Decoder token stream, a map per object, params re-encoded by
// encoding/json), kept as the reference the fuzz tests hold the decoder to.
// One change: a case-variant or duplicate "id" makes the id unusable in a
// batch too, not only in a single message.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

var (
	refErrTooDeep  = errors.New("too deep")
	refErrTrailing = errors.New("trailing data")
)

// refDecode is Decode as it was.
func (l Limits) refDecode(data []byte) (*Body, *jsonrpc.Error) {
	if len(data) > l.maxBytes() {
		return nil, ParseError(fmt.Sprintf("message is larger than %d bytes", l.maxBytes()))
	}
	if !utf8.Valid(data) {
		return nil, ParseError("message is not valid UTF-8")
	}
	trimmed := bytes.TrimLeft(data, " \t\r\n")
	if len(trimmed) == 0 {
		return nil, ParseError("empty message")
	}
	p := &refParser{dec: json.NewDecoder(bytes.NewReader(trimmed)), maxDepth: l.maxDepth()}
	p.dec.UseNumber()
	body := &Body{}
	p.top = 1
	if trimmed[0] == '[' {
		body.Batch = true
		p.top = 2
		if _, err := p.dec.Token(); err != nil {
			return nil, ParseError("body is not JSON")
		}
		for p.dec.More() {
			if len(body.Items) == l.maxBatch() {
				return nil, InvalidRequest(fmt.Sprintf("a batch holds at most %d messages", l.maxBatch()))
			}
			st := &objState{}
			v, err := p.value(2, st)
			if err != nil {
				return nil, p.parseErr(err)
			}
			body.Items = append(body.Items, refDecideItem(v, st))
		}
		if _, err := p.dec.Token(); err != nil {
			return nil, ParseError("body is not JSON")
		}
		if len(body.Items) == 0 {
			if err := p.end(); err != nil {
				return nil, p.parseErr(err)
			}
			return nil, InvalidRequest("empty batch")
		}
	} else {
		st := &objState{}
		v, err := p.value(1, st)
		if err != nil {
			return nil, p.parseErr(err)
		}
		body.Items = []Item{refDecideItem(v, st)}
	}
	if err := p.end(); err != nil {
		return nil, p.parseErr(err)
	}
	return body, nil
}

type refParser struct {
	dec      *json.Decoder
	maxDepth int
	top      int // the depth of a message: 1, or 2 in a batch
}

func (p *refParser) parseErr(err error) *jsonrpc.Error {
	switch {
	case errors.Is(err, refErrTooDeep):
		return ParseError(fmt.Sprintf("nesting deeper than %d levels", p.maxDepth))
	case errors.Is(err, refErrTrailing):
		return ParseError("data after the JSON value")
	}
	return ParseError("body is not JSON")
}

// end checks that nothing but white space follows the value.
func (p *refParser) end() error {
	if _, err := p.dec.Token(); err != io.EOF {
		return refErrTrailing
	}
	return nil
}

// value reads one JSON value at the given depth (1 for the top level).
func (p *refParser) value(depth int, st *objState) (any, error) {
	tok, err := p.dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		if depth > p.maxDepth {
			return nil, refErrTooDeep
		}
		switch t {
		case '{':
			obj := make(map[string]any)
			seen := make(map[string]string)
			for p.dec.More() {
				kt, err := p.dec.Token()
				if err != nil {
					return nil, err
				}
				key, ok := kt.(string)
				if !ok {
					return nil, errors.New("object key is not a string")
				}
				v, err := p.value(depth+1, st)
				if err != nil {
					return nil, err
				}
				fk := foldKey(key)
				if prev, dup := seen[fk]; dup {
					if prev == key {
						st.violate(fmt.Sprintf("duplicate member %q", key))
					} else {
						st.violate(fmt.Sprintf("members %q and %q differ only in case", prev, key))
					}
					if depth == p.top && fk == "ID" {
						st.idAmbiguous = true
					}
					continue // the first occurrence stays; the message is rejected anyway
				}
				seen[fk] = key
				obj[key] = v
			}
			if _, err := p.dec.Token(); err != nil { // '}'
				return nil, err
			}
			return obj, nil
		case '[':
			arr := []any{}
			for p.dec.More() {
				v, err := p.value(depth+1, st)
				if err != nil {
					return nil, err
				}
				arr = append(arr, v)
			}
			if _, err := p.dec.Token(); err != nil { // ']'
				return nil, err
			}
			return arr, nil
		}
		return nil, errors.New("unexpected delimiter")
	default:
		return tok, nil
	}
}

// refDecideItem applies the error table of docs/http-contract.md to one parsed element: a message
// that is not a valid JSON-RPC message is -32600 when its id is usable, else
// -32700 (with a null id).
func refDecideItem(v any, st *objState) Item {
	obj, isObj := v.(map[string]any)
	var id jsonrpc.ID
	hasID := false
	if isObj && !st.idAmbiguous {
		if raw, ok := obj["id"]; ok {
			id, hasID = usableID(raw)
		}
	}
	fail := func(msg string) Item {
		if hasID {
			return Item{Err: InvalidRequest(msg), ID: id}
		}
		return Item{Err: ParseError("not a JSON-RPC message: " + msg)}
	}
	if !isObj {
		return fail("a message must be a JSON object")
	}
	if st.violation != "" {
		return fail(st.violation)
	}
	msg, reason := refEnvelope(obj)
	if reason != "" {
		return fail(reason)
	}
	return Item{Msg: msg}
}

var refEnvelopeMembers = map[string]bool{
	"jsonrpc": true, "id": true, "method": true, "params": true, "result": true, "error": true,
}

// envelope turns a parsed object into a Message, or says why it is not one.
func refEnvelope(obj map[string]any) (*Message, string) {
	for k := range obj {
		if !refEnvelopeMembers[k] {
			return nil, fmt.Sprintf("unknown member %q", k)
		}
	}
	if v, ok := obj["jsonrpc"].(string); !ok || v != "2.0" {
		return nil, `"jsonrpc" must be "2.0"`
	}
	m := &Message{}
	rawID, hasID := obj["id"]
	if hasID {
		id, ok := usableID(rawID)
		if !ok {
			return nil, `"id" must be a string or an integer`
		}
		m.ID = id
	}
	_, hasResult := obj["result"]
	rawErr, hasError := obj["error"]
	if rawMethod, ok := obj["method"]; ok {
		method, isStr := rawMethod.(string)
		if !isStr || method == "" {
			return nil, `"method" must be a non-empty string`
		}
		if hasResult || hasError {
			return nil, `a request cannot carry "result" or "error"`
		}
		m.Method = method
		if p, ok := obj["params"]; ok {
			switch p.(type) {
			case map[string]any, []any:
			default:
				return nil, `"params" must be an object or an array`
			}
			enc, err := Encode(p)
			if err != nil {
				return nil, "params cannot be re-encoded"
			}
			m.Params = enc
		}
		return m, ""
	}
	// A response.
	if _, ok := obj["params"]; ok {
		return nil, `a response cannot carry "params"`
	}
	if !hasID {
		return nil, `"method" is missing`
	}
	if hasResult == hasError {
		return nil, `a response carries exactly one of "result" and "error"`
	}
	if hasResult {
		enc, err := Encode(obj["result"])
		if err != nil {
			return nil, "result cannot be re-encoded"
		}
		m.Result = enc
		return m, ""
	}
	eo, ok := rawErr.(map[string]any)
	if !ok {
		return nil, `"error" must be an object`
	}
	code, ok := eo["code"].(json.Number)
	if !ok {
		return nil, `"error.code" must be an integer`
	}
	n, err := strconv.ParseInt(string(code), 10, 64)
	if err != nil {
		return nil, `"error.code" must be an integer`
	}
	msg, _ := eo["message"].(string)
	we := &jsonrpc.Error{Code: n, Message: msg}
	if d, ok := eo["data"]; ok {
		enc, err := Encode(d)
		if err != nil {
			return nil, "error data cannot be re-encoded"
		}
		we.Data = enc
	}
	m.Error = we
	return m, ""
}
