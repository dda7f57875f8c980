package canonjson

import "unicode/utf8"

// Canonical returns v in the canonical form: no whitespace, members sorted, strings
// and numbers as the package doc describes. Parsing the result gives v back.
func Canonical(v *Value) []byte { return AppendCanonical(nil, v) }

// AppendCanonical appends the canonical form of v to dst.
func AppendCanonical(dst []byte, v *Value) []byte {
	switch v.Kind {
	case Null:
		return append(dst, "null"...)
	case Bool, Number:
		return append(dst, v.Text...)
	case String:
		return AppendString(dst, v.Text)
	case Array:
		dst = append(dst, '[')
		for i := range v.Elems {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = AppendCanonical(dst, &v.Elems[i])
		}
		return append(dst, ']')
	default:
		dst = append(dst, '{')
		for i := range v.Members {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = AppendString(dst, v.Members[i].Key)
			dst = append(dst, ':')
			dst = AppendCanonical(dst, &v.Members[i].Value)
		}
		return append(dst, '}')
	}
}

// Indent returns v canonically but laid out for people: one member or element per line,
// two spaces per level. Diffs of schemas (internal/toolpin) are diffs of this form.
func Indent(v *Value) []byte { return appendIndent(nil, v, 0) }

func appendIndent(dst []byte, v *Value, level int) []byte {
	nl := func(dst []byte, level int) []byte {
		dst = append(dst, '\n')
		for range level {
			dst = append(dst, ' ', ' ')
		}
		return dst
	}
	switch {
	case v.Kind == Array && len(v.Elems) > 0:
		dst = append(dst, '[')
		for i := range v.Elems {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = nl(dst, level+1)
			dst = appendIndent(dst, &v.Elems[i], level+1)
		}
		dst = nl(dst, level)
		return append(dst, ']')
	case v.Kind == Object && len(v.Members) > 0:
		dst = append(dst, '{')
		for i := range v.Members {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = nl(dst, level+1)
			dst = AppendString(dst, v.Members[i].Key)
			dst = append(dst, ':', ' ')
			dst = appendIndent(dst, &v.Members[i].Value, level+1)
		}
		dst = nl(dst, level)
		return append(dst, '}')
	default:
		return AppendCanonical(dst, v)
	}
}

const hexDigits = "0123456789abcdef"

// AppendString appends s as a canonical JSON string. s is valid UTF-8 when it came
// from Parse; any invalid byte is written as U+FFFD so the output is always valid.
func AppendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			r, n := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && n == 1 {
				dst = append(dst, s[start:i]...)
				dst = append(dst, "\uFFFD"...)
				i++
				start = i
				continue
			}
			i += n
			continue
		}
		if c >= 0x20 && c != '"' && c != '\\' {
			i++
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\f':
			dst = append(dst, '\\', 'f')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
		}
		i++
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
