package rpcwire

import (
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"strings"
	"unicode/utf8"
)

// Value reads raw, a JSON value, into plain Go values as a JSON Schema validator takes
// them — map[string]any, []any, string, json.Number (exactly as written), bool, nil —
// and returns its canonical encoding beside it (Decode's: compact, members sorted by
// name, strings escaped as encoding/json escapes them without HTML escaping, numbers as
// written).
//
// What Decode produced (a Message's Params, or a member of it) is canonical already:
// Value then builds the tree in one pass over it, checking only that it is canonical,
// and returns raw itself as the encoding, so the bytes decided on, validated, hashed
// and forwarded are one sequence, read once. Any other input (white space, members out
// of order, other escapes) is read by the strict decoder first, with its rules
// (duplicate or case-variant members at any depth, nesting, UTF-8), and its canonical
// encoding returned; input the strict decoder refuses is an error.
func Value(raw []byte) (v any, canonical []byte, err error) {
	r := canonReader{in: raw}
	if v, ok := r.value(1); ok && r.pos == len(raw) {
		return v, raw, nil
	}
	canonical, err = canonicalize(raw, MaxDepth)
	if err != nil {
		return nil, nil, err
	}
	r = canonReader{in: canonical}
	v, ok := r.value(1)
	if !ok || r.pos != len(canonical) {
		// The strict decoder's output is canonical by construction.
		return nil, nil, errors.New("decoding JSON: internal error: the canonical encoding does not read back")
	}
	return v, canonical, nil
}

// Canonical reads data, one JSON value, strictly (Decode's rules: duplicate or
// case-variant members at any depth, nesting within l.MaxDepth, at most l.MaxBytes,
// UTF-8) and returns its canonical encoding, building no tree. Callers read what they
// need of it with Members and Member.
func (l Limits) Canonical(data []byte) (json.RawMessage, error) {
	if len(data) > l.maxBytes() {
		return nil, fmt.Errorf("decoding JSON: larger than %d bytes", l.maxBytes())
	}
	return canonicalize(data, l.maxDepth())
}

// canonicalize reads data with the strict decoder and returns its canonical encoding.
func canonicalize(data []byte, maxDepth int) ([]byte, error) {
	if !utf8.Valid(data) {
		return nil, errors.New("decoding JSON: not valid UTF-8")
	}
	st := &objState{}
	s := &scanner{in: data, maxDepth: maxDepth, st: st}
	if err := s.value(1); err != nil {
		return nil, errors.New("decoding JSON: " + s.parseErr(err).Message)
	}
	if err := s.end(); err != nil {
		return nil, errors.New("decoding JSON: " + s.parseErr(err).Message)
	}
	if st.violation != "" {
		return nil, errors.New("decoding JSON: " + st.violation)
	}
	return s.out, nil
}

// Members iterates over the members of obj, a JSON object in this package's canonical
// encoding (Value's, a Message's Params), in order: each name and its value, a slice of
// obj. Anything else yields nothing.
func Members(obj []byte) iter.Seq2[string, json.RawMessage] {
	return func(yield func(string, json.RawMessage) bool) {
		stop := false
		forEachMember(obj, func(name string, vs, ve int) {
			if !stop && !yield(name, obj[vs:ve:ve]) {
				stop = true
			}
		})
	}
}

// canonReader builds the tree of a value in canonical encoding, and stops (ok false)
// at the first byte that is not: white space, a member out of order or repeated (also
// under case folding), an escape encoding/json would not write, invalid UTF-8, too
// deep. Its caller then goes the strict way.
type canonReader struct {
	in    []byte
	pos   int
	stack []any     // values of the arrays and objects being read
	keys  []string  // names of the objects being read
	names nameCache // short names seen, each allocated once
}

func (r *canonReader) value(depth int) (any, bool) {
	if r.pos >= len(r.in) || depth > MaxDepth {
		return nil, false
	}
	switch c := r.in[r.pos]; {
	case c == '{':
		return r.object(depth)
	case c == '[':
		return r.array(depth)
	case c == '"':
		s, ok := r.str(false)
		return s, ok
	case c == '-' || isDigit(c):
		return r.number()
	case c == 't':
		return true, r.literal("true")
	case c == 'f':
		return false, r.literal("false")
	case c == 'n':
		return nil, r.literal("null")
	}
	return nil, false
}

func (r *canonReader) literal(word string) bool {
	if !strings.HasPrefix(string(r.in[r.pos:min(len(r.in), r.pos+len(word))]), word) {
		return false
	}
	r.pos += len(word)
	return true
}

func (r *canonReader) number() (any, bool) {
	i := numberEnd(r.in, r.pos)
	if i < 0 {
		return nil, false
	}
	n := json.Number(r.in[r.pos:i])
	r.pos = i
	return n, true
}

func (r *canonReader) array(depth int) (any, bool) {
	r.pos++ // '['
	if r.pos < len(r.in) && r.in[r.pos] == ']' {
		r.pos++
		return []any{}, true
	}
	base := len(r.stack)
	defer func() { r.stack = r.stack[:base] }()
	for {
		v, ok := r.value(depth + 1)
		if !ok || r.pos >= len(r.in) {
			return nil, false
		}
		r.stack = append(r.stack, v)
		switch r.in[r.pos] {
		case ',':
			r.pos++
		case ']':
			r.pos++
			return append([]any(nil), r.stack[base:]...), true
		default:
			return nil, false
		}
	}
}

func (r *canonReader) object(depth int) (any, bool) {
	r.pos++ // '{'
	if r.pos < len(r.in) && r.in[r.pos] == '}' {
		r.pos++
		return map[string]any{}, true
	}
	base, kbase := len(r.stack), len(r.keys)
	defer func() { r.stack, r.keys = r.stack[:base], r.keys[:kbase] }()
	for {
		if r.pos >= len(r.in) || r.in[r.pos] != '"' {
			return nil, false
		}
		key, ok := r.str(true)
		if !ok || r.pos >= len(r.in) || r.in[r.pos] != ':' {
			return nil, false
		}
		// Canonical members are sorted by name, strictly: equal names are a
		// duplicate.
		if n := len(r.keys); n > kbase && r.keys[n-1] >= key {
			return nil, false
		}
		r.pos++
		v, ok := r.value(depth + 1)
		if !ok || r.pos >= len(r.in) {
			return nil, false
		}
		r.keys = append(r.keys, key)
		r.stack = append(r.stack, v)
		switch r.in[r.pos] {
		case ',':
			r.pos++
		case '}':
			r.pos++
			keys := r.keys[kbase:]
			if foldCollision(keys) {
				return nil, false
			}
			m := make(map[string]any, len(keys))
			for i, k := range keys {
				m[k] = r.stack[base+i]
			}
			return m, true
		default:
			return nil, false
		}
	}
}

// foldCollision reports whether two names are equal under Unicode simple case folding
// ("name" and "Name"), which the strict decoder refuses.
func foldCollision(keys []string) bool {
	if len(keys) < smallObject {
		for i := 1; i < len(keys); i++ {
			for j := 0; j < i; j++ {
				if foldEqual(keys[i], keys[j]) {
					return true
				}
			}
		}
		return false
	}
	seen := make(map[string]bool, len(keys))
	for _, k := range keys {
		fk := foldKey(k)
		if seen[fk] {
			return true
		}
		seen[fk] = true
	}
	return false
}

// str reads a string in canonical encoding and returns its value; name says it is a
// member name (short names are shared).
func (r *canonReader) str(name bool) (string, bool) {
	in := r.in
	i := r.pos + 1
	// val is the value, once an escape made it differ from the input; it is sized
	// once, to the rest of the string, so a long string costs one allocation.
	var val strings.Builder
	escaped := false
	start := i
	for i < len(in) {
		c := in[i]
		switch {
		case c == '"':
			var s string
			switch {
			case escaped:
				val.Write(in[start:i])
				s = val.String()
			case name:
				s = r.names.get(in[start:i])
			default:
				s = string(in[start:i])
			}
			r.pos = i + 1
			return s, true
		case c < 0x20:
			return "", false
		case c == '\\':
			if i+1 >= len(in) {
				return "", false
			}
			if !escaped {
				escaped = true
				end := skipString(in, r.pos)
				if end < 0 {
					return "", false
				}
				val.Grow(end - r.pos)
			}
			val.Write(in[start:i])
			var short byte
			switch in[i+1] {
			case '"', '\\':
				short = in[i+1]
			case 'b':
				short = '\b'
			case 'f':
				short = '\f'
			case 'n':
				short = '\n'
			case 'r':
				short = '\r'
			case 't':
				short = '\t'
			case 'u':
				cp := hex4(in[i:])
				// encoding/json writes \u only for the control characters it has no
				// short escape for, in lower-case hex, and for U+2028 and U+2029.
				canonical := cp >= 0 && (cp < 0x20 && !strings.ContainsRune("\b\f\n\r\t", cp) || cp == '\u2028' || cp == '\u2029') &&
					string(appendRune(nil, cp)) == string(in[i:i+6])
				if !canonical {
					return "", false
				}
				val.WriteRune(cp)
				i += 6
				start = i
				continue
			default:
				return "", false
			}
			val.WriteByte(short)
			i += 2
			start = i
		case c < utf8.RuneSelf:
			i++
		default:
			cp, size := utf8.DecodeRune(in[i:])
			if cp == utf8.RuneError && size == 1 || cp == '\u2028' || cp == '\u2029' {
				return "", false // invalid UTF-8, or a separator encoding/json escapes
			}
			i += size
		}
	}
	return "", false
}
