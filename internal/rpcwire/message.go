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
}

// IsRequest reports whether m expects an answer.
func (m *Message) IsRequest() bool { return m.Method != "" && m.ID.IsValid() }

// IsNotification reports whether m is a request without an id.
func (m *Message) IsNotification() bool { return m.Method != "" && !m.ID.IsValid() }

// IsResponse reports whether m answers a request this side sent.
func (m *Message) IsResponse() bool { return m.Method == "" }

var envelopeMembers = map[string]bool{
	"jsonrpc": true, "id": true, "method": true, "params": true, "result": true, "error": true,
}

// envelope turns a parsed object into a Message, or says why it is not one.
func envelope(obj map[string]any) (*Message, string) {
	for k := range obj {
		if !envelopeMembers[k] {
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
// json.Number. Callers use it for values that did not arrive as a message.
func DecodeValue(data []byte) (any, error) {
	if !bytesValidUTF8(data) {
		return nil, fmt.Errorf("decoding JSON: not valid UTF-8")
	}
	p := &parser{dec: json.NewDecoder(bytes.NewReader(data)), maxDepth: MaxDepth}
	p.dec.UseNumber()
	st := &objState{}
	v, err := p.value(1, st)
	if err != nil {
		return nil, fmt.Errorf("decoding JSON: %s", p.parseErr(err).Message)
	}
	if err := p.end(); err != nil {
		return nil, fmt.Errorf("decoding JSON: %s", p.parseErr(err).Message)
	}
	if st.violation != "" {
		return nil, fmt.Errorf("decoding JSON: %s", st.violation)
	}
	return v, nil
}
