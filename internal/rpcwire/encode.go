package rpcwire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

func bytesValidUTF8(b []byte) bool { return utf8.Valid(b) }

// marshal is json.Marshal without HTML escaping, so "<&>" in a tool's output
// travels as written.
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// EncodeID returns the wire form of id: a JSON string, integer, or null for the
// zero ID.
func EncodeID(id jsonrpc.ID) json.RawMessage {
	switch v := id.Raw().(type) {
	case string:
		b, _ := json.Marshal(v)
		return b
	case int64:
		return json.RawMessage(fmt.Sprintf("%d", v))
	}
	return json.RawMessage("null")
}

type wireError struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Error   *jsonrpc.Error  `json:"error"`
}

type wireRequest struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params,omitempty"`
}

// Result encodes a success answer. result may be a json.RawMessage or any value
// encoding/json can marshal. The envelope is assembled around the result's bytes, so a
// large result is walked once: a marshalled value is compact and valid by
// construction; raw bytes (an upstream's answer) are checked and compacted in one
// pass, since a line-framed transport cannot carry a line break between tokens.
func Result(id jsonrpc.ID, result any) ([]byte, error) {
	idb := EncodeID(id)
	const head, mid = `{"jsonrpc":"2.0","id":`, `,"result":`
	var buf bytes.Buffer
	switch r := result.(type) {
	case json.RawMessage:
		buf.Grow(len(head) + len(idb) + len(mid) + len(r) + 1)
		buf.WriteString(head)
		buf.Write(idb)
		buf.WriteString(mid)
		if err := json.Compact(&buf, r); err != nil {
			return nil, fmt.Errorf("encoding result: not valid JSON")
		}
	default:
		b, err := marshal(r)
		if err != nil {
			return nil, fmt.Errorf("encoding result: %w", err)
		}
		buf.Grow(len(head) + len(idb) + len(mid) + len(b) + 1)
		buf.WriteString(head)
		buf.Write(idb)
		buf.WriteString(mid)
		buf.Write(b)
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

// Error encodes an error answer. It cannot fail.
func Error(id jsonrpc.ID, e *jsonrpc.Error) []byte {
	if e.Data != nil && !json.Valid(e.Data) {
		e = &jsonrpc.Error{Code: e.Code, Message: e.Message}
	}
	b, err := marshal(wireError{JSONRPC: "2.0", ID: EncodeID(id), Error: e})
	if err != nil {
		// Only a broken Data could fail, and it was dropped above.
		panic(fmt.Sprintf("rpcwire: encoding an error answer: %v", err))
	}
	return b
}

// Request encodes a request (or, with the zero ID, a notification) this side
// sends to its peer.
func Request(id jsonrpc.ID, method string, params any) ([]byte, error) {
	var raw json.RawMessage
	if params != nil {
		switch p := params.(type) {
		case json.RawMessage:
			raw = p
		default:
			b, err := marshal(p)
			if err != nil {
				return nil, fmt.Errorf("encoding %s params: %w", method, err)
			}
			raw = b
		}
	}
	w := wireRequest{JSONRPC: "2.0", Method: method, Params: raw}
	if id.IsValid() {
		w.ID = EncodeID(id)
	}
	b, err := marshal(w)
	if err != nil {
		return nil, fmt.Errorf("encoding %s request: %w", method, err)
	}
	return b, nil
}

// IDKey returns a map key that distinguishes string ids from integer ids ("s:1"
// versus "n:1").
func IDKey(id jsonrpc.ID) string {
	switch v := id.Raw().(type) {
	case string:
		return "s:" + v
	case int64:
		return fmt.Sprintf("n:%d", v)
	}
	return ""
}
