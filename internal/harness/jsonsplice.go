package harness

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// The JSON merge edits a user's file as text so that every other key keeps its order,
// spacing and bytes: encoding/json first proves the document valid, then a small
// structural scan over the (already valid) bytes finds the span of the one value we
// replace or the place we insert. JSONC files (VS Code, opencode, Gemini) may carry
// comments; they are blanked to spaces for the scan, which keeps every offset.

// member is one "key": value pair of an object, as byte offsets into the document.
type member struct {
	key              string
	keyStart         int
	valStart, valEnd int
}

// blankComments returns a copy of b with // and /* */ comments outside strings replaced
// by spaces (newlines kept), so offsets stay the same.
func blankComments(b []byte) ([]byte, error) {
	out := append([]byte(nil), b...)
	inStr := false
	for i := 0; i < len(out); i++ {
		c := out[i]
		if inStr {
			if c == '\\' {
				i++
			} else if c == '"' {
				inStr = false
			}
			continue
		}
		switch {
		case c == '"':
			inStr = true
		case c == '/' && i+1 < len(out) && out[i+1] == '/':
			for ; i < len(out) && out[i] != '\n'; i++ {
				out[i] = ' '
			}
		case c == '/' && i+1 < len(out) && out[i+1] == '*':
			end := bytes.Index(out[i+2:], []byte("*/"))
			if end < 0 {
				return nil, errors.New("unterminated /* comment")
			}
			stop := i + 2 + end + 2
			for ; i < stop; i++ {
				if out[i] != '\n' {
					out[i] = ' '
				}
			}
			i--
		}
	}
	return out, nil
}

// jsonDoc is a validated JSON(C) document ready for splicing.
type jsonDoc struct {
	orig []byte // the user's bytes, edited in place
	scan []byte // orig with comments blanked
}

func parseJSONDoc(b []byte, comments bool) (*jsonDoc, error) {
	scan := b
	if comments {
		var err error
		if scan, err = blankComments(b); err != nil {
			return nil, fmt.Errorf("invalid JSON: %w", err)
		}
	}
	var top any
	dec := json.NewDecoder(bytes.NewReader(scan))
	dec.UseNumber()
	if err := dec.Decode(&top); err != nil {
		return nil, fmt.Errorf("invalid JSON: %w", err)
	}
	if off := int(dec.InputOffset()); skipWS(scan, off) != len(scan) {
		return nil, errors.New("invalid JSON: more than one value in the file (or text after it)")
	}
	if _, ok := top.(map[string]any); !ok {
		return nil, errors.New("invalid JSON: the top level must be an object")
	}
	return &jsonDoc{orig: b, scan: scan}, nil
}

func skipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// valueEnd returns the offset just after the value starting at i (b is valid JSON).
func valueEnd(b []byte, i int) int {
	switch b[i] {
	case '"':
		for j := i + 1; j < len(b); j++ {
			if b[j] == '\\' {
				j++
			} else if b[j] == '"' {
				return j + 1
			}
		}
		return len(b)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				j = valueEnd(b, j) - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
		return len(b)
	default:
		j := i
		for j < len(b) && !strings.ContainsRune(" \t\r\n,}]", rune(b[j])) {
			j++
		}
		return j
	}
}

// members lists the members of the object starting at start and returns the offset of
// its closing brace.
func members(b []byte, start int) ([]member, int, error) {
	var out []member
	i := skipWS(b, start+1)
	if b[i] == '}' {
		return nil, i, nil
	}
	for {
		i = skipWS(b, i)
		kEnd := valueEnd(b, i)
		var key string
		if err := json.Unmarshal(b[i:kEnd], &key); err != nil {
			return nil, 0, fmt.Errorf("reading a key: %w", err)
		}
		m := member{key: key, keyStart: i}
		i = skipWS(b, kEnd)
		i = skipWS(b, i+1) // ':'
		m.valStart = i
		m.valEnd = valueEnd(b, i)
		out = append(out, m)
		i = skipWS(b, m.valEnd)
		if b[i] == '}' {
			return out, i, nil
		}
		i++ // ','
	}
}

// lineIndent returns the whitespace that starts the line holding offset i.
func lineIndent(b []byte, i int) string {
	s := bytes.LastIndexByte(b[:i], '\n') + 1
	e := s
	for e < len(b) && (b[e] == ' ' || b[e] == '\t') {
		e++
	}
	return string(b[s:e])
}

// indentUnit guesses the file's indentation step from its first member.
func (d *jsonDoc) indentUnit() string {
	start := skipWS(d.scan, 0)
	ms, _, err := members(d.scan, start)
	if err != nil || len(ms) == 0 {
		return "  "
	}
	ind := lineIndent(d.scan, ms[0].keyStart)
	if ind == "" || bytes.LastIndexByte(d.scan[:ms[0].keyStart], '\n') < start {
		return "  "
	}
	return ind
}

// encodeAt encodes v as indented JSON whose continuation lines start with indent.
func encodeAt(v any, indent, unit string) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent(indent, unit)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// setPath sets the member at path (object keys from the top) to v, creating missing
// objects on the way, and returns the new document bytes.
func (d *jsonDoc) setPath(path []string, v any) ([]byte, error) {
	unit := d.indentUnit()
	obj := skipWS(d.scan, 0)
	for depth, key := range path {
		ms, closing, err := members(d.scan, obj)
		if err != nil {
			return nil, err
		}
		var found *member
		for i := range ms {
			if ms[i].key == key {
				if found != nil {
					return nil, fmt.Errorf("key %q appears twice in %s; fix the file first", key, strings.Join(path[:depth], "."))
				}
				found = &ms[i]
			}
		}
		if found == nil {
			// Insert the rest of the path as one new member of this object.
			var val any = v
			for j := len(path) - 1; j > depth; j-- {
				val = map[string]any{path[j]: val}
			}
			return d.insert(obj, closing, ms, key, val, unit)
		}
		if depth == len(path)-1 {
			ind := lineIndent(d.scan, found.keyStart)
			enc, err := encodeAt(v, ind, unit)
			if err != nil {
				return nil, err
			}
			return splice(d.orig, found.valStart, found.valEnd, enc), nil
		}
		if d.scan[found.valStart] != '{' {
			return nil, fmt.Errorf("%q is not an object; toolgate will not replace it", strings.Join(path[:depth+1], "."))
		}
		obj = found.valStart
	}
	return nil, errors.New("empty path")
}

// insert adds "key": val as the last member of the object at obj (closing brace at
// closing, current members ms).
func (d *jsonDoc) insert(obj, closing int, ms []member, key string, val any, unit string) ([]byte, error) {
	kb, _ := json.Marshal(key)
	if len(ms) > 0 {
		last := ms[len(ms)-1]
		ind := lineIndent(d.scan, last.keyStart)
		enc, err := encodeAt(val, ind, unit)
		if err != nil {
			return nil, err
		}
		sameLine := bytes.IndexByte(d.scan[obj:last.keyStart], '\n') < 0
		if sameLine {
			ins := append([]byte(", "+string(kb)+": "), enc...)
			return splice(d.orig, last.valEnd, last.valEnd, ins), nil
		}
		// A comment after the last member stays on its line: the comma goes right
		// after the value, the new member on the next line.
		eol := last.valEnd
		for eol < len(d.scan) && (d.scan[eol] == ' ' || d.scan[eol] == '\t') {
			eol++
		}
		if eol < len(d.scan) && d.scan[eol] == '\r' {
			eol++
		}
		if eol < len(d.scan) && d.scan[eol] == '\n' && eol > last.valEnd {
			lineEnd := eol
			if d.scan[lineEnd-1] == '\r' {
				lineEnd--
			}
			out := splice(d.orig, lineEnd, lineEnd, append([]byte("\n"+ind+string(kb)+": "), enc...))
			return splice(out, last.valEnd, last.valEnd, []byte(",")), nil
		}
		ins := append([]byte(",\n"+ind+string(kb)+": "), enc...)
		return splice(d.orig, last.valEnd, last.valEnd, ins), nil
	}
	outer := lineIndent(d.scan, obj)
	ind := outer + unit
	enc, err := encodeAt(val, ind, unit)
	if err != nil {
		return nil, err
	}
	ins := []byte("\n" + ind + string(kb) + ": " + string(enc) + "\n" + outer)
	return splice(d.orig, obj+1, closing, ins), nil
}

func splice(b []byte, from, to int, ins []byte) []byte {
	out := make([]byte, 0, len(b)-(to-from)+len(ins))
	out = append(out, b[:from]...)
	out = append(out, ins...)
	return append(out, b[to:]...)
}

// jsonEntry reads the object at path from a JSON(C) document.
func jsonEntry(content []byte, comments bool, path []string) (map[string]any, error) {
	d, err := parseJSONDoc(content, comments)
	if err != nil {
		return nil, err
	}
	var top any
	if err := json.Unmarshal(d.scan, &top); err != nil {
		return nil, fmt.Errorf("invalid JSON: %w", err)
	}
	cur := top
	for _, k := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%s is not an object", k)
		}
		if cur, ok = m[k]; !ok {
			return nil, fmt.Errorf("no %q entry in the file", strings.Join(path, "."))
		}
	}
	m, ok := cur.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%q is not an object", strings.Join(path, "."))
	}
	return m, nil
}
