package rpcwire

import (
	"encoding/json"
	"strings"
	"testing"
)

// FuzzDecode checks the decoder's invariant on arbitrary input: a documented
// error (-32700 or -32600 for the body; -32700 or -32600 per item) or a valid
// message, never a panic; an accepted message's params re-encode to JSON that
// decodes strictly again to the same bytes.
func FuzzDecode(f *testing.F) {
	seeds := []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":"2","method":"tools/list"}]`,
		`[]`, `[[]]`, `{}`, `null`, `1e999`, `"\ud800"`, "\xff\xfe", `{"a":1}{"b":2}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read_file","Name":"bash"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read_file","name":"bash"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{"status":"ok","ſtatus":"/etc/passwd"}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{"path":"ok","path\u0000":"x"}}}`,
		`{"jsonrpc":"2.0","id":12345678901234567890,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":7,"result":{"action":"accept"}}`,
		`{"jsonrpc":"2.0","id":7,"error":{"code":-1,"message":"x","data":[1]}}`,
		strings.Repeat("[", 100) + strings.Repeat("]", 100),
		`{"jsonrpc":"2.0","id":1,"method":"x","params":{"a":` + strings.Repeat(`{"a":`, 70) + `1` + strings.Repeat("}", 70) + `}}`,
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		body, err := Decode(data)
		if err != nil {
			if err.Code != -32700 && err.Code != -32600 {
				t.Fatalf("body error code %d", err.Code)
			}
			return
		}
		if len(body.Items) == 0 {
			t.Fatal("no items and no error")
		}
		for _, it := range body.Items {
			if (it.Msg == nil) == (it.Err == nil) {
				t.Fatalf("item must be exactly one of message or error: %+v", it)
			}
			if it.Err != nil {
				if it.Err.Code != -32700 && it.Err.Code != -32600 {
					t.Fatalf("item error code %d", it.Err.Code)
				}
				if it.Err.Code == -32700 && it.ID.IsValid() {
					t.Fatal("-32700 with an id")
				}
				continue
			}
			for _, raw := range []json.RawMessage{it.Msg.Params, it.Msg.Result} {
				if raw == nil {
					continue
				}
				v, err := DecodeValue(raw)
				if err != nil {
					t.Fatalf("re-encoded value %s does not decode strictly: %v", raw, err)
				}
				again, err := Encode(v)
				if err != nil || string(again) != string(raw) {
					t.Fatalf("re-encoding is not stable: %s vs %s (%v)", raw, again, err)
				}
			}
		}
	})
}

func BenchmarkDecodeToolsCall(b *testing.B) {
	msg := []byte(`{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"files.read","arguments":{"path":"src/main.go","offset":0,"limit":2000,"options":{"follow":false,"encoding":"utf-8"}}}}`)
	b.SetBytes(int64(len(msg)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Decode(msg); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeLargeArguments(b *testing.B) {
	var sb strings.Builder
	sb.WriteString(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"files.write","arguments":{"path":"a.txt","content":"`)
	sb.WriteString(strings.Repeat("lorem ipsum ", 20000))
	sb.WriteString(`"}}}`)
	msg := []byte(sb.String())
	b.SetBytes(int64(len(msg)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Decode(msg); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeBatch(b *testing.B) {
	var sb strings.Builder
	sb.WriteString("[")
	for i := range 100 {
		if i > 0 {
			sb.WriteString(",")
		}
		sb.WriteString(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	}
	sb.WriteString("]")
	msg := []byte(sb.String())
	b.SetBytes(int64(len(msg)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Decode(msg); err != nil {
			b.Fatal(err)
		}
	}
}
