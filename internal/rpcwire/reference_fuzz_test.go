package rpcwire

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// describe renders a decoded body for comparison.
func describe(b *Body, err error) string {
	if err != nil {
		return "body error: " + err.Error()
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "batch=%v\n", b.Batch)
	for _, it := range b.Items {
		if it.Err != nil {
			msg := it.Err.Message
			if i := strings.Index(msg, "unknown member "); i >= 0 {
				// The reference names a random one of several unknown
				// members (a map's order): compare only that there is one.
				msg = msg[:i] + "unknown member"
			}
			fmt.Fprintf(&sb, "error %d %q id=%v\n", it.Err.Code, msg, it.ID.Raw())
			continue
		}
		m := it.Msg
		fmt.Fprintf(&sb, "msg id=%v method=%q params=%s result=%s", m.ID.Raw(), m.Method, m.Params, m.Result)
		if m.Error != nil {
			fmt.Fprintf(&sb, " error=%d %q data=%s", m.Error.Code, m.Error.Message, m.Error.Data)
		}
		sb.WriteString("\n")
	}
	return sb.String()
}

func decodeBoth(data []byte, l Limits) (got, want string) {
	b, e := l.Decode(data)
	rb, re := l.refDecode(data)
	var err, rerr error
	if e != nil {
		err = e
	}
	if re != nil {
		rerr = re
	}
	return describe(b, err), describe(rb, rerr)
}

// FuzzDecodeMatchesReference holds the decoder to the reference it replaced
// (reference_test.go): for any input, the same body error or the same items,
// params and results byte for byte, and the same Param values as a decode of
// the params would give.
func FuzzDecodeMatchesReference(f *testing.F) {
	for _, s := range referenceSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, l := range []Limits{{}, {MaxDepth: 3, MaxBatch: 2}} {
			if got, want := decodeBoth(data, l); got != want {
				t.Fatalf("input %q (limits %+v):\n got %s\nwant %s", data, l, got, want)
			}
		}
		checkParams(t, data)
	})
}

// checkParams: Param returns each member of an object params exactly as a
// decode of Params into a map finds it, and nothing for other names.
func checkParams(t *testing.T, data []byte) {
	body, err := Decode(data)
	if err != nil {
		return
	}
	for _, it := range body.Items {
		if it.Msg == nil || len(it.Msg.Params) == 0 || it.Msg.Params[0] != '{' {
			continue
		}
		var members map[string]json.RawMessage
		if err := json.Unmarshal(it.Msg.Params, &members); err != nil {
			t.Fatalf("params %s: %v", it.Msg.Params, err)
		}
		for k, v := range members {
			if got := it.Msg.Param(k); string(got) != string(v) {
				t.Fatalf("Param(%q) = %s, want %s", k, got, v)
			}
			if got, ok := Member(it.Msg.Params, k); !ok || string(got) != string(v) {
				t.Fatalf("Member(%q) = %s %v, want %s", k, got, ok, v)
			}
		}
		if it.Msg.Param("\x00absent") != nil {
			t.Fatal("Param found an absent member")
		}
	}
}

var referenceSeeds = []string{
	`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}`,
	`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
	`[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":"2","method":"tools/list"}]`,
	`[]`, `[[]]`, `{}`, `null`, `1e999`, `"\ud800"`, "\xff\xfe", `{"a":1}{"b":2}`, `  `, `[`, `[1,]`, `[1 2]`, `01`, `{"a":01}`,
	`truex`, `tru`, `-`, `1.`, `1e`, `1e+`, `-0.0e-0`, `{"a":1,}`, `{1:2}`, `{"a" 1}`, `[1]x`, `[1}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read_file","Name":"bash"}}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read_file","name":"bash"}}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{"status":"ok","ſtatus":"/etc/passwd"}}}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{"path":"ok","path\u0000":"x"}}}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{"kind":1,"\u212aind":2}}}`,
	`{"jsonrpc":"2.0","id":12345678901234567890,"method":"ping"}`,
	`{"jsonrpc":"2.0","id":9007199254740993,"method":"ping"}`, `{"jsonrpc":"2.0","id":1.0,"method":"ping"}`, `{"jsonrpc":"2.0","id":null,"method":"ping"}`,
	`{"jsonrpc":"2.0","id":7,"result":{"action":"accept"}}`,
	`{"jsonrpc":"2.0","id":7,"error":{"code":-1,"message":"x","data":[1]}}`,
	`{"jsonrpc":"2.0","id":7,"error":{"data":{"z":1,"a":[2]},"message":"m","code":3}}`,
	`{"jsonrpc":"2.0","id":7,"error":{"code":1.5}}`, `{"jsonrpc":"2.0","id":7,"error":[]}`, `{"jsonrpc":"2.0","id":7,"error":{"code":"1"}}`,
	`{"jsonrpc":"2.0","id":7,"result":1,"error":{"code":1}}`, `{"jsonrpc":"2.0","id":7}`, `{"jsonrpc":"2.0","result":1}`,
	`{"jsonrpc":"2.0","id":1,"id":2,"method":"ping"}`, `{"jsonrpc":"2.0","id":1,"ID":2,"method":"ping"}`,
	`[{"jsonrpc":"2.0","id":1,"Id":2,"method":"ping"}]`, `{"jsonrpc":"2.0","ID":2,"method":"ping"}`,
	`{"jsonrpc":"2.0","id":1,"method":"ping","extra":1,"other":2}`, `{"jsonrpc":"1.0","id":1,"method":"ping"}`,
	`{"jsonrpc":"2.0","id":1,"method":""}`, `{"jsonrpc":"2.0","id":1,"method":3}`, `{"jsonrpc":"2.0","id":1,"method":"x","params":3}`,
	`{"jsonrpc":"2.0","id":1,"method":"x","params":[3,{"b":1,"a":2}]}`, `{"jsonrpc":"2.0","id":1,"method":"x","result":1}`,
	`{"jsonrpc":"2.0","id":1,"result":1,"params":{}}`,
	`{"jsonrpc":"2.0","id":"\u00e9\u2028\ud83d\ude00\ud800x\"\\\/\b\f\n\r\t\u0001\u007f<&>","method":"x","params":{"s":"\u2029 raw: ` + "\u2028\u2029" + `"}}`,
	`{"jsonrpc":"2.0","id":1,"method":"x","params":{"\u006eame":1,"b":{"d":[1,2,{"c":true,"a":null}],"c":false}}}`,
	`{"jsonrpc":"2.0","id":1,"method":"x","params":{"a":{"b":1,"b":2},"a":3}}`,
	`{"jsonrpc":"2.0","id":1,"method":"x","params":{"k0":0,"k1":1,"k2":2,"k3":3,"k4":4,"k5":5,"k6":6,"k7":7,"k8":8,"k9":9,"ka":10,"kb":11,"kc":12,"kd":13,"ke":14,"kf":15,"kg":16,"K3":17}}`,
	`{"jsonrpc":"2.0","id":1,"method":"x","params":{"a":` + strings.Repeat(`{"a":`, 70) + `1` + strings.Repeat("}", 70) + `}}`,
	strings.Repeat("[", 100) + strings.Repeat("]", 100),
	`[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"method":"ping"},{"jsonrpc":"2.0","id":3,"method":"ping"}]`,
	`[{"jsonrpc":"2.0","id":1,"method":"x","params":{"z":"` + strings.Repeat("z", 70000) + `","a":1,"m":[1]}},{"jsonrpc":"2.0","id":2,"result":{"b":2,"a":1}}]`,
}

// TestDecodeMatchesReferenceSeeds runs the seeds without the fuzzing engine,
// and the size benchmark's payloads.
func TestDecodeMatchesReferenceSeeds(t *testing.T) {
	inputs := append([]string{}, referenceSeeds...)
	inputs = append(inputs, string(largeCall("string", 200_000)), string(largeCall("tree", 200_000)))
	for _, s := range inputs {
		for _, l := range []Limits{{}, {MaxDepth: 3, MaxBatch: 2}} {
			if got, want := decodeBoth([]byte(s), l); got != want {
				t.Errorf("input %.200q (limits %+v):\n got %.500s\nwant %.500s", s, l, got, want)
			}
		}
		checkParams(t, []byte(s))
	}
}
