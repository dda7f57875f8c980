package canonjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func mustParse(t testing.TB, s string) Value {
	t.Helper()
	v, err := Parse([]byte(s), Limits{})
	if err != nil {
		t.Fatalf("Parse(%q): %v", s, err)
	}
	return v
}

func canon(t testing.TB, s string) string {
	t.Helper()
	v := mustParse(t, s)
	return string(Canonical(&v))
}

func TestCanonicalForm(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"b":1,"a":2}`, `{"a":2,"b":1}`},
		{" {\n\t\"a\" :\r [ 1 , 2 ] } ", `{"a":[1,2]}`},
		{`{"a":{"z":null,"y":true,"x":false}}`, `{"a":{"x":false,"y":true,"z":null}}`},
		{`[]`, `[]`},
		{`{}`, `{}`},
		{`""`, `""`},
		// Escapes are decoded and written one way only.
		{`"\u0041\/\"\\\b\f\n\r\t\u0001\u001f\u007f"`, "\"A/\\\"\\\\\\b\\f\\n\\r\\t\\u0001\\u001f\x7f\""},
		{`"\u00e9"`, `"é"`},
		{`"é"`, `"é"`},
		{`"\ud83d\ude00"`, `"😀"`},
		{`"<&>\u2028"`, "\"<&>\u2028\""},
		// Invisible characters are kept, not normalised away: they are what the
		// scanner looks for, and what a changed definition may have added.
		{`"a\u200bb"`, "\"a\u200bb\""},
		// Member names sort by UTF-8 bytes.
		{`{"é":1,"z":2,"Z":3,"":4}`, `{"":4,"Z":3,"z":2,"é":1}`},
	} {
		if got := canon(t, tc.in); got != tc.want {
			t.Errorf("Canonical(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestNumbers(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"0", "0"}, {"-0", "0"}, {"0.0", "0"}, {"-0.000e10", "0"},
		{"1", "1"}, {"1.0", "1"}, {"1.50", "1.5"}, {"15e-1", "1.5"}, {"0.15E1", "1.5"},
		{"100", "100"}, {"1e2", "100"}, {"1E+2", "100"}, {"10.00e1", "100"},
		{"-12.3400", "-12.34"},
		{"0.000001", "0.000001"}, {"1e-6", "0.000001"}, {"1e-7", "1e-7"}, {"12e-8", "1.2e-7"},
		{"123456789012345678901", "123456789012345678901"},
		{"1e20", "100000000000000000000"}, {"1e21", "1e+21"},
		{"9007199254740993", "9007199254740993"}, // float64 would make it ...992
		{"0.1000000000000000055511151231257827", "0.1000000000000000055511151231257827"},
		{"1e999999999", "1e+999999999"},
		{"-1e-999999999", "-1e-999999999"},
		{"1e0000000000005", "100000"}, // leading zeros of an exponent are not digits
		{"123.456e1", "1234.56"},
		{"5e-324", "5e-324"},
	} {
		if got := canon(t, tc.in); got != tc.want {
			t.Errorf("number %s = %s, want %s", tc.in, got, tc.want)
		}
	}
	// Equal values, different texts: one canonical form.
	a, b := mustParse(t, `{"m":1.50,"n":[1e2]}`), mustParse(t, `{"n":[100.0],"m":15e-1}`)
	if !a.Equal(&b) || !bytes.Equal(Canonical(&a), Canonical(&b)) {
		t.Errorf("1.50/1e2 and 15e-1/100.0 should be one value")
	}
	c := mustParse(t, `{"m":1.5000001,"n":[100]}`)
	if a.Equal(&c) {
		t.Errorf("1.5 and 1.5000001 compared equal")
	}
}

func TestRefused(t *testing.T) {
	deep := strings.Repeat("[", 129) + strings.Repeat("]", 129)
	for _, tc := range []struct{ name, in, want string }{
		{"empty", ``, "unexpected end"},
		{"bom", "\xef\xbb\xbf{}", "unexpected character"},
		{"trailing", `{} {}`, "after the value"},
		{"comment", `{} // x`, "after the value"},
		{"duplicate", `{"a":1,"a":2}`, `duplicate member name "a"`},
		{"duplicate after escape", `{"a":1,"\u0061":2}`, `duplicate member name "a"`},
		{"nested duplicate", `{"x":[{"description":"a","description":"b"}]}`, `duplicate member name "description" at /x/0/description`},
		{"invalid utf8", "\"a\xffb\"", "invalid UTF-8"},
		{"overlong utf8", "\"\xc0\xaf\"", "invalid UTF-8"},
		{"utf8 surrogate", "\"\xed\xa0\x80\"", "invalid UTF-8"},
		{"lone high", `"\ud800"`, "lone surrogate"},
		{"lone high then char", `"\ud800x"`, "lone surrogate"},
		{"high then high", `"\ud800\ud800"`, "lone surrogate"},
		{"lone low", `"\udc00"`, "lone surrogate"},
		{"raw newline", "\"a\nb\"", "raw control character"},
		{"raw nul", "\"a\x00b\"", "raw control character"},
		{"bad escape", `"\x41"`, "invalid escape"},
		{"short u", `"\u12"`, "\\u escape"},
		{"bad u", `"\u12zz"`, "invalid \\u escape"},
		{"leading zero", `01`, "after the value"},
		{"plus", `+1`, "unexpected character"},
		{"dot", `1.`, "no digits after"},
		{"lead dot", `.5`, "unexpected character"},
		{"exp", `1e`, "no digits in the exponent"},
		{"hex", `0x10`, "after the value"},
		{"nan", `NaN`, "unexpected character"},
		{"inf", `-Infinity`, "invalid number"},
		{"huge exponent", `1e1000000000`, "more than 9 digits"},
		{"exponent out of range once normalised", `10e999999999`, "once normalised"},
		{"negative exponent out of range once normalised", `0.1e-999999999`, "once normalised"},
		{"single quote", `{'a':1}`, "expected a member name"},
		{"trailing comma", `[1,]`, "unexpected character"},
		{"object trailing comma", `{"a":1,}`, "expected a member name"},
		{"true prefix", `tru`, "invalid literal"},
		{"vertical tab", "\v1", "unexpected character"},
		{"nbsp", "\u00a01", "unexpected character"},
		{"deep", deep, "nesting deeper than 128"},
		{"unterminated", `"abc`, "unterminated string"},
		{"unterminated obj", `{"a":1`, "unexpected end"},
	} {
		_, err := Parse([]byte(tc.in), Limits{})
		var se *SyntaxError
		if err == nil || !errors.As(err, &se) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Parse(%q) = %v, want an error containing %q", tc.name, tc.in, err, tc.want)
		}
	}
	if _, err := Parse(bytes.Repeat([]byte(" "), 100), Limits{MaxBytes: 99}); err == nil || !strings.Contains(err.Error(), "over the limit of 99") {
		t.Errorf("size limit: %v", err)
	}
	if _, err := Parse([]byte(`[[1]]`), Limits{MaxDepth: 1}); err == nil {
		t.Errorf("depth limit 1 accepted [[1]]")
	}
	if _, err := Parse([]byte(`[1]`), Limits{MaxDepth: 1}); err != nil {
		t.Errorf("depth limit 1 refused [1]: %v", err)
	}
}

// TestAgreesWithEncodingJSON: on everything Parse accepts, the canonical form decodes
// (with encoding/json) to the same Go value as the input, so canonicalisation changes
// layout only, never meaning.
func TestAgreesWithEncodingJSON(t *testing.T) {
	for _, s := range []string{
		`{"name":"read_file","description":"Read a file.\nUse it.","inputSchema":{"type":"object","properties":{"path":{"type":"string","minLength":1.0}},"required":["path"]}}`,
		`[1.50, -0, 1e300, "\u00e9\ud83d\ude00", {"": null}, [[]], true]`,
		`{"z":{"y":{"x":[0.1, 0.10, 1E-1]}}}`,
	} {
		v := mustParse(t, s)
		agree(t, []byte(s), Canonical(&v))
	}
}

func agree(t testing.TB, orig, canonical []byte) {
	t.Helper()
	var a, b any
	if err := json.Unmarshal(orig, &a); err != nil {
		return // out of float64 range: encoding/json cannot compare it
	}
	if err := json.Unmarshal(canonical, &b); err != nil {
		t.Fatalf("canonical form %q does not decode: %v", canonical, err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("canonical form changed the value:\n in: %s\nout: %s", orig, canonical)
	}
}

func TestIndent(t *testing.T) {
	v := mustParse(t, `{"b":[1,{"c":"x"}],"a":{},"d":[]}`)
	want := "{\n  \"a\": {},\n  \"b\": [\n    1,\n    {\n      \"c\": \"x\"\n    }\n  ],\n  \"d\": []\n}"
	if got := string(Indent(&v)); got != want {
		t.Errorf("Indent =\n%s\nwant\n%s", got, want)
	}
	w, err := Parse(Indent(&v), Limits{})
	if err != nil || !v.Equal(&w) {
		t.Errorf("Indent output does not parse back to the value: %v", err)
	}
}

func TestGetAndWalk(t *testing.T) {
	v := mustParse(t, `{"inputSchema":{"properties":{"a/b":{"enum":["x~y"]}}},"name":"t"}`)
	if g := v.Get("name"); g == nil || g.Text != "t" {
		t.Errorf("Get(name) = %v", g)
	}
	if v.Get("nope") != nil || v.Get("inputSchema").Get("zzz") != nil {
		t.Errorf("Get of a missing member is not nil")
	}
	var got []string
	Walk(&v, func(p Path, key bool, s string) {
		k := "v"
		if key {
			k = "k"
		}
		got = append(got, k+" "+p.String()+" "+s)
	})
	want := []string{
		"k /inputSchema inputSchema",
		"k /inputSchema/properties properties",
		"k /inputSchema/properties/a~1b a/b",
		"k /inputSchema/properties/a~1b/enum enum",
		"v /inputSchema/properties/a~1b/enum/0 x~y",
		"k /name name",
		"v /name t",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Walk =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if PointerToken("~/") != "~0~1" {
		t.Errorf("PointerToken(~/) = %q", PointerToken("~/"))
	}
}
