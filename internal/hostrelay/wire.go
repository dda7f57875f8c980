package hostrelay

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/toolgate/toolgate/internal/canonjson"
)

// Protocol is the relay protocol's version; both ends exchange it in hello and refuse
// each other when they differ (docs/hostrelay.md, "Protocol").
const Protocol = 1

// Requests (client → host).
const (
	mHello      = "hello"
	mCall       = "call"
	mCatalog    = "catalog"
	mRefresh    = "refresh_catalog"
	mStatus     = "status"
	mSnapshot   = "snapshot"
	mRestart    = "restart"
	mWarm       = "warm"
	mEndSession = "end_session"
	mReload     = "reload"
	mWatch      = "watch"
)

// Notifications.
const (
	nCancel   = "cancel"   // client → host: {"id"}
	nProgress = "progress" // host → client: {"id","params"|"params_b64"}
	nEvent    = "event"    // host → client: {"server"|"state"|"catalog": event}
	nResync   = "resync"   // host → client: {"snapshot"}
)

// codeRelay is the JSON-RPC error code of every error the relay or the host reports;
// its data says which (wireErr.Kind).
const codeRelay = -32000

// Messages are written by hand rather than with jsonrpc.EncodeMessage, in the same
// shape, because encoding/json compacts a json.RawMessage it marshals: the upstream's
// bytes would lose their spacing. Raw members are spliced in verbatim instead. One
// message is one line, so a raw value holding a newline (spacing between tokens: a
// JSON string cannot hold one) travels base64-encoded in the member's "_b64" twin, as
// does one with spacing around it (appendRawMember); either way the bytes that arrive
// are the bytes that left.

// appendRequest appends a request line (id > 0) or a notification line (id == 0).
// params must be one valid JSON value without a newline, or nil.
func appendRequest(b []byte, id int64, method string, params []byte) []byte {
	b = append(b, `{"jsonrpc":"2.0",`...)
	if id != 0 {
		b = append(b, `"id":`...)
		b = strconv.AppendInt(b, id, 10)
		b = append(b, ',')
	}
	b = append(b, `"method":`...)
	b = appendString(b, method)
	if params != nil {
		b = append(b, `,"params":`...)
		b = append(b, params...)
	}
	return append(b, '}', '\n')
}

// appendResult appends a response line with result (one valid JSON value, no newline).
func appendResult(b []byte, id int64, result []byte) []byte {
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = strconv.AppendInt(b, id, 10)
	b = append(b, `,"result":`...)
	b = append(b, result...)
	return append(b, '}', '\n')
}

// appendError appends an error response line; id 0 is written as null (the request's
// id could not be read). data is one valid JSON value without a newline, or nil.
func appendError(b []byte, id int64, code int64, message string, data []byte) []byte {
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	if id == 0 {
		b = append(b, "null"...)
	} else {
		b = strconv.AppendInt(b, id, 10)
	}
	b = append(b, `,"error":{"code":`...)
	b = strconv.AppendInt(b, code, 10)
	b = append(b, `,"message":`...)
	b = appendString(b, message)
	if data != nil {
		b = append(b, `,"data":`...)
		b = append(b, data...)
	}
	return append(b, '}', '}', '\n')
}

// appendRawMember appends "name":raw, or "name_b64":"…" when raw holds a newline or
// begins or ends with spacing (a decoder hands a member's value over without the
// spacing around it). raw must be valid JSON.
func appendRawMember(b []byte, name string, raw []byte) []byte {
	b = append(b, '"')
	b = append(b, name...)
	if bytes.IndexByte(raw, '\n') < 0 && !isSpace(raw[0]) && !isSpace(raw[len(raw)-1]) {
		b = append(b, `":`...)
		return append(b, raw...)
	}
	b = append(b, `_b64":"`...)
	b = base64.StdEncoding.AppendEncode(b, raw)
	return append(b, '"')
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

// rawOr returns a raw member's bytes from its two forms.
func rawOr(raw json.RawMessage, b64 []byte) json.RawMessage {
	if b64 != nil {
		return b64
	}
	return raw
}

// appendString appends s as a JSON string (an invalid UTF-8 byte becomes U+FFFD);
// raw upstream bytes never go through here.
var appendString = canonjson.AppendString

// marshal encodes v (which holds no json.RawMessage: it would be compacted) as one
// line-safe JSON value.
func marshal(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		// Only the package's own wire types are marshalled; they always encode.
		panic(fmt.Sprintf("hostrelay: encoding %T: %v", v, err))
	}
	return b
}

// wireMsg is every member a message may have.
type wireMsg struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  *string         `json:"method"`
	Params  json.RawMessage `json:"params"`
	Result  json.RawMessage `json:"result"`
	Error   *jsonrpc.Error  `json:"error"`
}

// decodeLine decodes one message into the go-sdk's types, as jsonrpc.DecodeMessage
// would, but with encoding/json: the go-sdk's decoder allocates two 32 KiB buffers
// per request (it was 96 % of a relayed call's allocations), and it ignores data after
// the message, which this does not. Raw members keep their bytes. Requests carry a
// method; responses an id and a result or an error.
func decodeLine(line []byte) (jsonrpc.Message, error) {
	var m wireMsg
	if err := json.Unmarshal(line, &m); err != nil {
		return nil, err
	}
	if m.JSONRPC != "2.0" {
		return nil, fmt.Errorf("jsonrpc member %q, want \"2.0\"", m.JSONRPC)
	}
	var id jsonrpc.ID
	if len(m.ID) > 0 && string(m.ID) != "null" {
		var err error
		if id, err = decodeID(m.ID); err != nil {
			return nil, err
		}
	}
	if m.Method != nil {
		return &jsonrpc.Request{ID: id, Method: *m.Method, Params: m.Params}, nil
	}
	if !id.IsValid() {
		return nil, errors.New("a response without an id")
	}
	r := &jsonrpc.Response{ID: id, Result: m.Result}
	if m.Error != nil {
		r.Error = m.Error
	}
	return r, nil
}

// decodeID reads an id: a string, or an integer a float64 holds exactly (as the
// go-sdk's ids are).
func decodeID(raw json.RawMessage) (jsonrpc.ID, error) {
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return jsonrpc.ID{}, err
		}
		return jsonrpc.MakeID(s)
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil || n > 1<<53 || n < -(1<<53) {
		return jsonrpc.ID{}, fmt.Errorf("id %s is not an integer of at most 53 bits", raw)
	}
	return jsonrpc.MakeID(float64(n))
}

// intID returns a request id as the positive integer both ends use.
func intID(id jsonrpc.ID) (int64, bool) {
	v, ok := id.Raw().(int64)
	return v, ok && v > 0
}

// unmarshalStrict decodes params into v, refusing unknown members and trailing data.
func unmarshalStrict(params []byte, v any) error {
	if len(params) == 0 {
		params = []byte("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(params))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data after params")
	}
	return nil
}

// lineReader reads newline-terminated messages of at most max bytes. A longer line
// ends the stream (neither end sends one: each checks what it sends against the
// other's cap, exchanged in hello), without being buffered whole.
type lineReader struct {
	r   *bufio.Reader
	max int
	acc []byte
}

func newLineReader(r io.Reader, max int) *lineReader {
	return &lineReader{r: bufio.NewReaderSize(r, 64<<10), max: max}
}

// next returns the next line without its newline; it is valid until the next call.
func (l *lineReader) next() ([]byte, error) {
	l.acc = l.acc[:0]
	for {
		chunk, err := l.r.ReadSlice('\n')
		if len(l.acc)+len(chunk) > l.max+1 {
			return nil, &MessageTooLargeError{Size: len(l.acc) + len(chunk), Limit: l.max}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			l.acc = append(l.acc, chunk...)
			continue
		}
		if err != nil {
			if err == io.EOF && len(l.acc)+len(chunk) > 0 {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
		if len(l.acc) > 0 {
			l.acc = append(l.acc, chunk...)
			chunk = l.acc
		}
		return chunk[:len(chunk)-1], nil
	}
}
