package rpcwire

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/rpcwire/rpcwiretest"
)

// reference is the tree encoding/json builds from the strict decoder's canonical
// encoding: what Value must build, whichever way it reads.
func reference(t testing.TB, canonical []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(canonical))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("reference decode of %s: %v", canonical, err)
	}
	return v
}

func sameSlice(a, b []byte) bool {
	return len(a) > 0 && len(b) > 0 && &a[0] == &b[0] && len(a) == len(b)
}

var valueCases = []string{
	`{}`, `[]`, `""`, `0`, `-0.5e+10`, `true`, `false`, `null`,
	`{"a":1,"b":[1,2,{"c":null}],"d":{"e":"f"}}`,
	`{"big":12345678901234567890,"n":1.50,"obj":{"a":"<&>","z":1},"path":"docs/a.md"}`,
	`{"s":"tab\there \"quoted\" back\\slash \u0001 \u001f \u2028 \u2029 é 😀"}`,
	`{"":1,"A":2,"a_":3,"b":4}`,
	`[[[[["deep"]]]]]`,
}

// Decode's output is canonical: Value reads it on the fast path (no re-encoding: the
// encoding it returns is its input) and builds what encoding/json would.
func TestValueOfCanonical(t *testing.T) {
	for _, c := range valueCases {
		body, jerr := Decode([]byte(`{"jsonrpc":"2.0","id":1,"method":"x","params":{"v":` + c + `}}`))
		if jerr != nil || body.Items[0].Msg == nil {
			t.Fatalf("%s: %v %+v", c, jerr, body)
		}
		raw := body.Items[0].Msg.Param("v")
		v, canon, err := Value(raw)
		if err != nil {
			t.Fatalf("Value(%s): %v", raw, err)
		}
		if !sameSlice(canon, raw) {
			t.Errorf("Value(%s) re-encoded a canonical input into %s", raw, canon)
		}
		if want := reference(t, raw); !reflect.DeepEqual(v, want) {
			t.Errorf("Value(%s) = %#v, want %#v", raw, v, want)
		}
	}
}

// Input in another form is read strictly and comes back canonical.
func TestValueOfOtherInput(t *testing.T) {
	for in, want := range map[string]string{
		` {"b" : 1, "a":[ 1 , 2 ]} `: `{"a":[1,2],"b":1}`,
		`{"a":"\u0041\/"}`:           `{"a":"A/"}`,
		`{"a":"\u001F"}`:             `{"a":"\u001f"}`,
		`"\ud83d\ude00"`:             `"😀"`,
		"\"\u2028\"":                 `"\u2028"`,
		`{"z":1,"a":2}`:              `{"a":2,"z":1}`,
	} {
		v, canon, err := Value([]byte(in))
		if err != nil || string(canon) != want {
			t.Errorf("Value(%s) = %s, %v; want %s", in, canon, err, want)
			continue
		}
		if ref := reference(t, []byte(want)); !reflect.DeepEqual(v, ref) {
			t.Errorf("Value(%s) = %#v, want %#v", in, v, ref)
		}
	}
}

// What the strict decoder refuses, Value refuses, canonical-looking or not.
func TestValueRefuses(t *testing.T) {
	for _, in := range []string{
		`{"a":1,"a":2}`, `{"Name":1,"name":2}`, `{"status":1,"ſtatus":2}`, `{"a":{"k":1,"K":2}}`,
		`{"a":1`, `{"a":1}x`, "\"\xff\"", `[` + strings.Repeat("[", 70) + strings.Repeat("]", 71),
		`{"a":"` + "\x01" + `"}`, ``, `nul`,
	} {
		if v, canon, err := Value([]byte(in)); err == nil {
			t.Errorf("Value(%q) = %v, %s; want an error", in, v, canon)
		}
	}
}

// FuzzValue: whatever the input, Value agrees with the strict decoder (the same
// refusals; the same canonical encoding), and what it builds is what encoding/json
// builds from that encoding; a canonical input is never re-encoded.
func FuzzValue(f *testing.F) {
	for _, c := range valueCases {
		f.Add([]byte(c))
	}
	for _, c := range []string{` {"b":1,"a":2}`, `{"a":1,"A":2}`, `"\u0041"`, "\"\u2028\"", `{"a":[1,{"b":"\n"}]}`} {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, canon, err := Value(data)
		strict, serr := canonicalize(data, MaxDepth)
		if (err == nil) != (serr == nil) {
			t.Fatalf("Value error %v, strict decoder error %v", err, serr)
		}
		if err != nil {
			return
		}
		if !bytes.Equal(canon, strict) {
			t.Fatalf("Value's encoding %s, the strict decoder's %s", canon, strict)
		}
		if !reflect.DeepEqual(v, reference(t, canon)) {
			t.Fatalf("Value(%s) built %#v", data, v)
		}
		if _, again, err := Value(canon); err != nil || !sameSlice(again, canon) {
			t.Fatalf("the canonical encoding %s was not read as canonical: %v", canon, err)
		}
	})
}

func TestMembers(t *testing.T) {
	obj := []byte(`{"a":1,"b":{"c":[2,3]},"d":"x,y"}`)
	var got []string
	for k, v := range Members(obj) {
		got = append(got, k+"="+string(v))
	}
	if strings.Join(got, " ") != `a=1 b={"c":[2,3]} d="x,y"` {
		t.Errorf("members %q", got)
	}
	for k := range Members(obj) {
		if k != "a" {
			t.Errorf("iteration went on after a break: %s", k)
		}
		break
	}
	for range Members([]byte(`[1]`)) {
		t.Error("a member in an array")
	}
}

// BenchmarkValueLargeArguments is what the kernel pays to read a 3 MiB call's
// arguments: the tree, from the canonical encoding Decode produced.
func BenchmarkValueLargeArguments(b *testing.B) {
	for _, shape := range rpcwiretest.Shapes {
		b.Run(shape, func(b *testing.B) {
			body, jerr := Decode(rpcwiretest.LargeCall("t.x", shape, 3<<20))
			if jerr != nil {
				b.Fatal(jerr)
			}
			args := body.Items[0].Msg.Param("arguments")
			b.SetBytes(int64(len(args)))
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := Value(args); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
