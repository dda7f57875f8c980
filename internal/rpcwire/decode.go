// Package rpcwire reads and writes JSON-RPC 2.0 for toolgate's MCP surfaces.
//
// Decoding is strict on purpose. A policy layer and an executor must never read
// the same bytes two different ways (the name/Name smuggling behind the Go SDK's
// CVE-2026-27896), so a message is rejected as invalid when any object in it, at
// any depth and including tool arguments, has a duplicate member or two members
// whose names are equal under Unicode simple case folding ("name", "Name",
// "naſme"). A message is decided on what was read, and what is passed on
// (params) is re-encoded as it is read (canonical: compact, members sorted by
// name, numbers as written), never forwarded as the received bytes. The reader
// builds no tree, so a request costs about twice its size (see scan.go).
//
// Limits (documented in docs/http-contract.md): a message is at most
// MaxMessageBytes (4 MiB) and nests at most MaxDepth (64) arrays and objects;
// input over either is a -32700 error, decided before any large allocation. A
// batch holds at most MaxBatch (256) messages; a longer one is -32600.
//
// The wire types and ID handling are the Go SDK's jsonrpc package; this package
// adds what the SDK leaves out: batches, strict decoding, and the error mapping of
// docs/http-contract.md's table (-32700, -32600).
package rpcwire

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

const (
	// MaxMessageBytes is the default largest message (an HTTP body or a stdio
	// line) accepted.
	MaxMessageBytes = 4 << 20
	// MaxDepth is the deepest nesting of arrays and objects accepted. A batch's
	// array counts as one level.
	MaxDepth = 64
	// MaxBatch is the most messages one batch may hold. Answers are held until a
	// batch is done, so the cap bounds how much one small request can make the
	// server build (a batch of tools/list calls).
	MaxBatch = 256
)

// Limits bounds what Decode accepts. The zero value means the defaults above.
type Limits struct {
	MaxBytes int
	MaxDepth int
	MaxBatch int
}

func (l Limits) maxBatch() int {
	if l.MaxBatch > 0 {
		return l.MaxBatch
	}
	return MaxBatch
}

func (l Limits) maxBytes() int {
	if l.MaxBytes > 0 {
		return l.MaxBytes
	}
	return MaxMessageBytes
}

func (l Limits) maxDepth() int {
	if l.MaxDepth > 0 {
		return l.MaxDepth
	}
	return MaxDepth
}

// Body is one decoded HTTP body or stdio line: a single message or a batch.
type Body struct {
	// Batch is true when the input was a JSON array; answers then go back as an
	// array too.
	Batch bool
	// Items holds one entry per message, in input order.
	Items []Item
}

// Item is one element of a Body: a valid message, or the error that answers it.
type Item struct {
	// Msg is the decoded message; nil when Err is set.
	Msg *Message
	// Err is the JSON-RPC error answering an invalid message (-32600 when it had a
	// usable id, else -32700).
	Err *jsonrpc.Error
	// ID is the usable id of an invalid message, or the zero ID (encoded null).
	ID jsonrpc.ID
}

// Decode decodes with the default Limits.
func Decode(data []byte) (*Body, *jsonrpc.Error) { return Limits{}.Decode(data) }

// Decode parses one body. A non-nil error concerns the whole body and is the
// answer to send (with a null id): -32700 when it is not JSON, over a limit or
// not UTF-8; -32600 for an empty batch. Otherwise every element is decided on
// its own in Body.Items.
func (l Limits) Decode(data []byte) (*Body, *jsonrpc.Error) {
	if len(data) > l.maxBytes() {
		return nil, ParseError(fmt.Sprintf("message is larger than %d bytes", l.maxBytes()))
	}
	if !utf8.Valid(data) {
		return nil, ParseError("message is not valid UTF-8")
	}
	s := &scanner{in: data, maxDepth: l.maxDepth()}
	if s.skipSpace(); s.pos == len(s.in) {
		return nil, ParseError("empty message")
	}
	// Canonical output is never much longer than the input (only a raw U+2028
	// or U+2029 grows, from 3 bytes to 6), so one allocation usually holds it.
	s.out = make([]byte, 0, len(data)-s.pos)
	body := &Body{}
	var spans []span
	if s.in[s.pos] == '[' {
		body.Batch = true
		s.pos++
		if s.peek() == ']' {
			s.pos++
			if err := s.end(); err != nil {
				return nil, s.parseErr(err)
			}
			return nil, InvalidRequest("empty batch")
		}
		for {
			it, err := s.message(2, &spans, len(body.Items))
			if err != nil {
				return nil, s.parseErr(err)
			}
			body.Items = append(body.Items, it)
			c := s.peek()
			if c == ']' {
				s.pos++
				break
			}
			// Anything that may begin another element counts against the cap
			// before it is read, even if it turns out not to be one.
			if s.pos < len(s.in) && c != '}' && len(body.Items) == l.maxBatch() {
				return nil, InvalidRequest(fmt.Sprintf("a batch holds at most %d messages", l.maxBatch()))
			}
			if c != ',' {
				return nil, s.parseErr(errSyntax)
			}
			s.pos++
		}
	} else {
		it, err := s.message(1, &spans, 0)
		if err != nil {
			return nil, s.parseErr(err)
		}
		body.Items = []Item{it}
	}
	if err := s.end(); err != nil {
		return nil, s.parseErr(err)
	}
	// The output stopped moving: hand out its pieces. Each is capped, so an
	// append by a caller cannot run into its neighbour.
	for _, sp := range spans {
		*sp.field(body.Items[sp.item].Msg) = s.out[sp.start:sp.end:sp.end]
	}
	return body, nil
}

// span is a piece of scanner.out a message keeps: its params, result or error
// data, set once the whole body was read.
type span struct {
	item       int
	field      func(*Message) *json.RawMessage
	start, end int
}

func (s *scanner) parseErr(err error) *jsonrpc.Error {
	switch {
	case errors.Is(err, errTooDeep):
		return ParseError(fmt.Sprintf("nesting deeper than %d levels", s.maxDepth))
	case errors.Is(err, errTrailing):
		return ParseError("data after the JSON value")
	}
	return ParseError("body is not JSON")
}

// end checks that nothing but white space follows the value.
func (s *scanner) end() error {
	if s.skipSpace(); s.pos < len(s.in) {
		return errTrailing
	}
	return nil
}

// ParseError builds a -32700 error.
func ParseError(msg string) *jsonrpc.Error {
	return &jsonrpc.Error{Code: jsonrpc.CodeParseError, Message: "parse error: " + msg}
}

// InvalidRequest builds a -32600 error.
func InvalidRequest(msg string) *jsonrpc.Error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "invalid request: " + msg}
}

// InvalidParams builds a -32602 error.
func InvalidParams(msg string) *jsonrpc.Error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "invalid params: " + msg}
}

// MethodNotFound builds a -32601 error.
func MethodNotFound(method string) *jsonrpc.Error {
	return &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: fmt.Sprintf("method not found: %q", method)}
}

// InternalError builds a -32603 error. It never carries the cause: details stay
// in the server's log.
func InternalError() *jsonrpc.Error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "internal error"}
}

// foldKey maps a member name to a key equal for all names that match under
// Unicode simple case folding: every rune becomes the smallest rune of its
// folding orbit (so 's', 'S' and 'ſ' all become 'S', 'k', 'K' and 'K' become 'K').
func foldKey(s string) string {
	ascii := true
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			ascii = false
			break
		}
	}
	if ascii {
		return strings.ToUpper(s)
	}
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		m := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			if f < m {
				m = f
			}
		}
		b.WriteRune(m)
	}
	return b.String()
}

// usableID reads an id member: a string or an integer that fits int64.
func usableID(v any) (jsonrpc.ID, bool) {
	switch t := v.(type) {
	case string:
		return StringID(t), true
	case json.Number:
		s := string(t)
		if strings.ContainsAny(s, ".eE") {
			return jsonrpc.ID{}, false
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n > maxExactInt || n < -maxExactInt {
			return jsonrpc.ID{}, false
		}
		return IntID(n), true
	}
	return jsonrpc.ID{}, false
}

// maxExactInt is 2^53: the SDK's jsonrpc.MakeID takes integers as float64, so
// ids beyond it could not round-trip exactly and are treated as unusable.
const maxExactInt = 1 << 53

// StringID returns a string id.
func StringID(s string) jsonrpc.ID {
	id, _ := jsonrpc.MakeID(s)
	return id
}

// IntID returns an integer id; n must be within ±2^53.
func IntID(n int64) jsonrpc.ID {
	id, _ := jsonrpc.MakeID(float64(n))
	return id
}
