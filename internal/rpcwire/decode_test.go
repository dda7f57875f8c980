package rpcwire

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

func TestDecodeValidMessages(t *testing.T) {
	tests := []struct {
		name, in   string
		method     string
		id         any // int64, string, or nil
		params     string
		request    bool
		notify     bool
		response   bool
		wantResult string
	}{
		{name: "request int id", in: `{"jsonrpc":"2.0","id":1,"method":"ping"}`, method: "ping", id: int64(1), request: true},
		{name: "request string id", in: `{"jsonrpc":"2.0","id":"a","method":"tools/list","params":{}}`, method: "tools/list", id: "a", params: `{}`, request: true},
		{name: "notification", in: ` {"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n", method: "notifications/initialized", notify: true},
		{name: "params re-encoded", in: `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{ "name" : "x", "arguments":{"b":1.50,"a":"<&>","big":12345678901234567890}}}`,
			method: "tools/call", id: int64(2), params: `{"arguments":{"a":"<&>","b":1.50,"big":12345678901234567890},"name":"x"}`, request: true},
		{name: "response", in: `{"jsonrpc":"2.0","id":7,"result":{"action":"accept"}}`, id: int64(7), response: true, wantResult: `{"action":"accept"}`},
		{name: "error response", in: `{"jsonrpc":"2.0","id":"q","error":{"code":-1,"message":"no"}}`, id: "q", response: true},
		{name: "negative id", in: `{"jsonrpc":"2.0","id":-5,"method":"ping"}`, method: "ping", id: int64(-5), request: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body, err := Decode([]byte(tt.in))
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if body.Batch || len(body.Items) != 1 {
				t.Fatalf("got batch=%v items=%d", body.Batch, len(body.Items))
			}
			it := body.Items[0]
			if it.Err != nil {
				t.Fatalf("item error: %v", it.Err)
			}
			m := it.Msg
			if m.Method != tt.method {
				t.Errorf("method = %q, want %q", m.Method, tt.method)
			}
			if m.ID.Raw() != tt.id {
				t.Errorf("id = %#v, want %#v", m.ID.Raw(), tt.id)
			}
			if string(m.Params) != tt.params {
				t.Errorf("params = %s, want %s", m.Params, tt.params)
			}
			if m.IsRequest() != tt.request || m.IsNotification() != tt.notify || m.IsResponse() != tt.response {
				t.Errorf("kind: request=%v notify=%v response=%v", m.IsRequest(), m.IsNotification(), m.IsResponse())
			}
			if tt.wantResult != "" && string(m.Result) != tt.wantResult {
				t.Errorf("result = %s, want %s", m.Result, tt.wantResult)
			}
		})
	}
}

// TestDecodeHostile pins the error table of docs/http-contract.md: not JSON, or no
// usable id and not a message → -32700 with a null id; a usable id but not a request →
// -32600 with that id.
func TestDecodeHostile(t *testing.T) {
	tests := []struct {
		name, in string
		body     int64 // whole-body error code, or 0
		item     int64 // the single item's error code, or 0
		id       any
		contains string
	}{
		{name: "not json", in: `{"jsonrpc":`, body: -32700},
		{name: "garbage", in: `hello`, body: -32700},
		{name: "empty", in: ``, body: -32700},
		{name: "whitespace only", in: " \n\t", body: -32700},
		{name: "trailing data", in: `{"jsonrpc":"2.0","id":1,"method":"ping"} {}`, body: -32700},
		{name: "invalid utf8", in: "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"p\xffing\"}", body: -32700},
		{name: "empty batch", in: `[]`, body: -32600},
		{name: "empty batch with spaces", in: ` [ ] `, body: -32600},
		{name: "number", in: `42`, item: -32700},
		{name: "string", in: `"x"`, item: -32700},
		{name: "null", in: `null`, item: -32700},
		{name: "no id not a message", in: `{"foo":1}`, item: -32700},
		{name: "id but no jsonrpc", in: `{"id":3,"method":"ping"}`, item: -32600, id: int64(3)},
		{name: "wrong version", in: `{"jsonrpc":"1.0","id":3,"method":"ping"}`, item: -32600, id: int64(3)},
		{name: "null id", in: `{"jsonrpc":"2.0","id":null,"method":"ping"}`, item: -32700},
		{name: "float id", in: `{"jsonrpc":"2.0","id":1.5,"method":"ping"}`, item: -32700},
		{name: "exponent id", in: `{"jsonrpc":"2.0","id":1e2,"method":"ping"}`, item: -32700},
		{name: "huge id", in: `{"jsonrpc":"2.0","id":123456789012345678901234,"method":"ping"}`, item: -32700},
		{name: "object id", in: `{"jsonrpc":"2.0","id":{},"method":"ping"}`, item: -32700},
		{name: "method not string", in: `{"jsonrpc":"2.0","id":4,"method":5}`, item: -32600, id: int64(4)},
		{name: "empty method", in: `{"jsonrpc":"2.0","id":4,"method":""}`, item: -32600, id: int64(4)},
		{name: "params scalar", in: `{"jsonrpc":"2.0","id":4,"method":"ping","params":3}`, item: -32600, id: int64(4)},
		{name: "unknown envelope member", in: `{"jsonrpc":"2.0","id":4,"method":"ping","extra":1}`, item: -32600, id: int64(4)},
		{name: "request with result", in: `{"jsonrpc":"2.0","id":4,"method":"ping","result":{}}`, item: -32600, id: int64(4)},
		{name: "response with both", in: `{"jsonrpc":"2.0","id":4,"result":{},"error":{"code":1,"message":"x"}}`, item: -32600, id: int64(4)},
		{name: "response no id", in: `{"jsonrpc":"2.0","result":{}}`, item: -32700},
		{name: "duplicate method", in: `{"jsonrpc":"2.0","id":5,"method":"ping","method":"tools/list"}`, item: -32600, id: int64(5), contains: "duplicate"},
		{name: "case variant top", in: `{"jsonrpc":"2.0","id":5,"method":"ping","Method":"tools/list"}`, item: -32600, id: int64(5), contains: "case"},
		{name: "duplicate name in params", in: `{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"read","name":"bash"}}`, item: -32600, id: int64(6)},
		{name: "case variant name in params", in: `{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"read","Name":"bash"}}`, item: -32600, id: int64(6)},
		{name: "long s folding", in: `{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"a","arguments":{"status":"ok","ſtatus":"x"}}}`, item: -32600, id: int64(6)},
		{name: "long s in ſ vs s", in: `{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"arguments":{"ſ":1,"s":2}}}`, item: -32600, id: int64(6)},
		{name: "kelvin sign", in: `{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"arguments":{"kind":1,"\u212aind":2}}}`, item: -32600, id: int64(6)},
		{name: "duplicate deep in arguments", in: `{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"arguments":{"a":[{"b":{"path":"ok","path":"/etc/passwd"}}]}}}`, item: -32600, id: int64(6)},
		{name: "duplicate id", in: `{"jsonrpc":"2.0","id":1,"id":2,"method":"ping"}`, item: -32700},
		{name: "case variant id", in: `{"jsonrpc":"2.0","id":1,"ID":2,"method":"ping"}`, item: -32700},
		{name: "duplicate in notification", in: `{"jsonrpc":"2.0","method":"notifications/x","params":{"a":1,"a":2}}`, item: -32700},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body, err := Decode([]byte(tt.in))
			if tt.body != 0 {
				if err == nil {
					t.Fatalf("want body error %d, got items %+v", tt.body, body)
				}
				if err.Code != tt.body {
					t.Errorf("code = %d, want %d (%s)", err.Code, tt.body, err.Message)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected body error %v", err)
			}
			it := body.Items[0]
			if it.Err == nil {
				t.Fatalf("want item error %d, got message %+v", tt.item, it.Msg)
			}
			if it.Err.Code != tt.item {
				t.Errorf("code = %d, want %d (%s)", it.Err.Code, tt.item, it.Err.Message)
			}
			if it.ID.Raw() != tt.id {
				t.Errorf("id = %#v, want %#v", it.ID.Raw(), tt.id)
			}
			if tt.contains != "" && !strings.Contains(it.Err.Message, tt.contains) {
				t.Errorf("message %q does not mention %q", it.Err.Message, tt.contains)
			}
		})
	}
}

func TestDecodeBatch(t *testing.T) {
	in := `[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/initialized"},{"foo":1},{"jsonrpc":"2.0","id":9,"method":"x","params":{"a":1,"A":2}},[1]]`
	body, err := Decode([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if !body.Batch || len(body.Items) != 5 {
		t.Fatalf("batch=%v items=%d", body.Batch, len(body.Items))
	}
	if body.Items[0].Msg == nil || !body.Items[0].Msg.IsRequest() {
		t.Errorf("item 0: %+v", body.Items[0])
	}
	if body.Items[1].Msg == nil || !body.Items[1].Msg.IsNotification() {
		t.Errorf("item 1: %+v", body.Items[1])
	}
	if body.Items[2].Err == nil || body.Items[2].Err.Code != -32700 {
		t.Errorf("item 2: %+v", body.Items[2])
	}
	if body.Items[3].Err == nil || body.Items[3].Err.Code != -32600 || body.Items[3].ID.Raw() != int64(9) {
		t.Errorf("item 3: %+v", body.Items[3])
	}
	if body.Items[4].Err == nil || body.Items[4].Err.Code != -32700 {
		t.Errorf("item 4: %+v", body.Items[4])
	}
}

func TestDecodeLimits(t *testing.T) {
	deep := func(n int) string {
		return `{"jsonrpc":"2.0","id":1,"method":"x","params":{"a":` + strings.Repeat("[", n) + strings.Repeat("]", n) + `}}`
	}
	// The top-level object is level 1 and params level 2, so 62 arrays reach 64.
	if body, err := Decode([]byte(deep(MaxDepth - 2))); err != nil || body.Items[0].Err != nil {
		t.Errorf("depth %d refused: %v %+v", MaxDepth, err, body)
	}
	_, err := Decode([]byte(deep(MaxDepth - 1)))
	if err == nil || err.Code != -32700 || !strings.Contains(err.Message, "nesting") {
		t.Errorf("depth %d: got %v", MaxDepth+1, err)
	}
	// Very deep input must not grow the stack: the check happens before recursion.
	if _, err := Decode([]byte(strings.Repeat("[", 1_000_000))); err == nil {
		t.Error("a million brackets accepted")
	}
	batch := func(n int) string {
		return "[" + strings.TrimSuffix(strings.Repeat(`{"jsonrpc":"2.0","id":1,"method":"ping"},`, n), ",") + "]"
	}
	if body, err := Decode([]byte(batch(MaxBatch))); err != nil || len(body.Items) != MaxBatch {
		t.Errorf("batch of %d refused: %v", MaxBatch, err)
	}
	if _, err := Decode([]byte(batch(MaxBatch + 1))); err == nil || err.Code != -32600 || !strings.Contains(err.Message, "at most") {
		t.Errorf("batch of %d: %v", MaxBatch+1, err)
	}
	big := `{"jsonrpc":"2.0","id":1,"method":"x","params":{"s":"` + strings.Repeat("a", 100) + `"}}`
	if _, err := (Limits{MaxBytes: 50}).Decode([]byte(big)); err == nil || err.Code != -32700 {
		t.Errorf("oversize: got %v", err)
	}
	if _, err := (Limits{MaxBytes: len(big)}).Decode([]byte(big)); err != nil {
		t.Errorf("exactly at the limit: %v", err)
	}
}

func TestFoldKey(t *testing.T) {
	same := [][2]string{{"name", "NAME"}, {"s", "ſ"}, {"k", "\u212a"}, {"straße", "STRASSE"[:0] + "STRAßE"}}
	for _, p := range same {
		if foldKey(p[0]) != foldKey(p[1]) {
			t.Errorf("foldKey(%q) != foldKey(%q)", p[0], p[1])
		}
	}
	diff := [][2]string{{"name", "name\x00"}, {"a", "b"}, {"ss", "ß"}}
	for _, p := range diff {
		if foldKey(p[0]) == foldKey(p[1]) {
			t.Errorf("foldKey(%q) == foldKey(%q)", p[0], p[1])
		}
	}
}

func TestEncode(t *testing.T) {
	b, err := Result(IntID(3), map[string]any{})
	if err != nil || string(b) != `{"jsonrpc":"2.0","id":3,"result":{}}` {
		t.Errorf("Result = %s, %v", b, err)
	}
	if _, err := Result(IntID(3), json.RawMessage(`{`)); err == nil {
		t.Error("invalid raw result accepted")
	}
	for _, bad := range []string{``, `{} {}`, `{"a":1,}`, "{\"a\":\"\n\"}"} {
		if b, err := Result(IntID(3), json.RawMessage(bad)); err == nil {
			t.Errorf("invalid raw result %q accepted as %s", bad, b)
		}
	}
	// Raw bytes keep their values exactly (numbers, escapes, unknown fields, HTML
	// characters) and lose only the whitespace between tokens: a line break would end
	// the message on a line-framed transport.
	raw := "{\n  \"n\": 1.50, \"e\": 1e2,\r\n \"s\": \"<&>\\u2028 a\\nb\", \"x\": {\"$ref\": \"#/$defs/y\"}\t}"
	b, err = Result(StringID("q"), json.RawMessage(raw))
	want := `{"jsonrpc":"2.0","id":"q","result":{"n":1.50,"e":1e2,"s":"<&>\u2028 a\nb","x":{"$ref":"#/$defs/y"}}}`
	if err != nil || string(b) != want {
		t.Errorf("Result(raw) = %s, %v\nwant %s", b, err, want)
	}
	if b, err = Result(IntID(4), map[string]string{"h": "<b>&"}); err != nil || string(b) != `{"jsonrpc":"2.0","id":4,"result":{"h":"<b>&"}}` {
		t.Errorf("Result escapes HTML: %s, %v", b, err)
	}
	e := Error(jsonrpc.ID{}, ParseError("x"))
	if string(e) != `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error: x"}}` {
		t.Errorf("Error = %s", e)
	}
	e = Error(StringID("a"), &jsonrpc.Error{Code: 1, Message: "m", Data: json.RawMessage(`{`)})
	if string(e) != `{"jsonrpc":"2.0","id":"a","error":{"code":1,"message":"m"}}` {
		t.Errorf("Error with bad data = %s", e)
	}
	r, err := Request(IntID(1), "elicitation/create", map[string]string{"message": "hi"})
	if err != nil || string(r) != `{"jsonrpc":"2.0","id":1,"method":"elicitation/create","params":{"message":"hi"}}` {
		t.Errorf("Request = %s, %v", r, err)
	}
	if IDKey(IntID(1)) == IDKey(StringID("1")) {
		t.Error("IDKey confuses 1 and \"1\"")
	}
}

func TestDecodeValue(t *testing.T) {
	if _, err := DecodeValue([]byte(`{"a":1,"A":2}`)); err == nil {
		t.Error("case variant accepted")
	}
	v, err := DecodeValue([]byte(`{"a":[1,2]}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := v.(map[string]any)["a"].([]any); !ok {
		t.Errorf("got %#v", v)
	}
}
