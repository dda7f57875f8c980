// Package canonjson parses JSON strictly into a small value tree and writes it back in
// one canonical form, so that two texts meaning the same JSON value have the same bytes
// (and digest) and two texts that could be read differently are refused instead.
//
// It exists for text that comes from strangers and must be compared over time: an
// upstream MCP server's tool definitions (internal/toolpin pins their digest) and the
// strings inside them (internal/textscan walks them). encoding/json is the wrong tool
// for that: it accepts duplicate member names (last wins, while other parsers take the
// first), replaces invalid UTF-8 and lone surrogates with U+FFFD (two different texts
// become one), and reads numbers through float64 (two different numbers become one).
//
// The rules (docs/trust.md, "Canonical form"):
//   - Input is one JSON value (RFC 8259) and nothing else: no BOM, no comments, no
//     trailing data; whitespace is space, tab, LF, CR only.
//   - Refused: duplicate member names in any object, invalid UTF-8, lone surrogate
//     escapes, raw control characters in strings, input over Limits.MaxBytes, nesting
//     over Limits.MaxDepth, exponents of more than 9 digits.
//   - Members are sorted by the bytes of their UTF-8 names (RFC 8785 sorts by UTF-16
//     code units; the two orders differ only between U+E000–U+FFFF and supplementary
//     characters, and this order needs no transcoding).
//   - Strings are written as UTF-8 with only '"', '\\' and U+0000–U+001F escaped (\b \f
//     \n \r \t, else \u00xx).
//   - Numbers are compared by exact decimal value, never through float64: 1.50, 1.5 and
//     15e-1 are one number, written "1.5"; -0 is "0"; 9007199254740993 keeps every
//     digit. The written form follows ECMAScript's Number::toString layout (plain
//     digits when the decimal point falls within 21 digits, else d.ddde±n) but with
//     all significant digits kept.
package canonjson

import (
	"fmt"
	"strings"
)

// Kind is the JSON type of a Value.
type Kind uint8

// The JSON types.
const (
	Null Kind = iota
	Bool
	Number
	String
	Array
	Object
)

var kindNames = [...]string{"null", "boolean", "number", "string", "array", "object"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", k)
}

// Value is one parsed JSON value.
type Value struct {
	Kind Kind
	// Text is the decoded string of a String, the canonical text of a Number, and
	// "true" or "false" for a Bool.
	Text string
	// Elems are an Array's elements, in order.
	Elems []Value
	// Members are an Object's members, sorted by Key (bytewise), without duplicates.
	Members []Member
}

// Member is one member of an object.
type Member struct {
	Key   string
	Value Value
}

// Get returns the value of member key of an object, or nil.
func (v *Value) Get(key string) *Value {
	if v == nil || v.Kind != Object {
		return nil
	}
	lo, hi := 0, len(v.Members)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if v.Members[m].Key < key {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo < len(v.Members) && v.Members[lo].Key == key {
		return &v.Members[lo].Value
	}
	return nil
}

// Equal reports whether v and w are the same JSON value (numbers by exact value).
func (v *Value) Equal(w *Value) bool {
	if v.Kind != w.Kind || v.Text != w.Text || len(v.Elems) != len(w.Elems) || len(v.Members) != len(w.Members) {
		return false
	}
	for i := range v.Elems {
		if !v.Elems[i].Equal(&w.Elems[i]) {
			return false
		}
	}
	for i := range v.Members {
		if v.Members[i].Key != w.Members[i].Key || !v.Members[i].Value.Equal(&w.Members[i].Value) {
			return false
		}
	}
	return true
}

// PointerToken escapes one JSON Pointer reference token (RFC 6901): '~' as "~0", '/'
// as "~1".
func PointerToken(s string) string {
	if !strings.ContainsAny(s, "~/") {
		return s
	}
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(s)
}
