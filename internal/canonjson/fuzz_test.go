package canonjson

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzParse: no input panics or exceeds the limits; whatever Parse accepts is valid
// JSON to encoding/json too (Parse is only ever stricter); its canonical form parses
// back to an equal value, is a fixed point, and decodes to the same Go value as the
// input.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		`{"name":"t","description":"d","inputSchema":{"type":"object"}}`,
		`{"a":1,"a":2}`, `{"a":1,"\u0061":2}`, `"\ud800"`, `"\ud83d\ude00"`, "\"\xff\"",
		`[1.50,15e-1,-0,1e999999999,0.000001,1e-7,9007199254740993]`,
		`{"b":{"d":[],"c":{}},"a":[null,true,false,""]}`, "\xef\xbb\xbf{}", `[[[[[[]]]]]]`,
		`{"description":"\u202eevil\u2066","x":"\udb40\udc41"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := Parse(data, Limits{MaxBytes: 1 << 16, MaxDepth: 32})
		if err != nil {
			return
		}
		if !json.Valid(data) {
			t.Fatalf("Parse accepted what encoding/json calls invalid: %q", data)
		}
		c := Canonical(&v)
		w, err := Parse(c, Limits{MaxBytes: 1 << 20, MaxDepth: 32})
		if err != nil {
			t.Fatalf("canonical form %q does not parse: %v", c, err)
		}
		if !v.Equal(&w) {
			t.Fatalf("canonical form %q parses to another value", c)
		}
		if c2 := Canonical(&w); !bytes.Equal(c, c2) {
			t.Fatalf("canonical form is not a fixed point: %q then %q", c, c2)
		}
		agree(t, data, c)
		if iv, err := Parse(Indent(&v), Limits{MaxBytes: 1 << 22, MaxDepth: 32}); err != nil || !iv.Equal(&v) {
			t.Fatalf("indented form does not parse back: %v", err)
		}
	})
}
