package canonjson

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// Limits bound what Parse accepts.
type Limits struct {
	// MaxBytes bounds the input's length.
	MaxBytes int
	// MaxDepth bounds the nesting of arrays and objects (the top value is depth 1).
	MaxDepth int
}

// DefaultLimits: 1 MiB and 128 levels. A tool definition, even with a large schema, is
// a few KiB and a dozen levels deep; the bounds exist so that a hostile upstream cannot
// make the parser's memory or stack grow without limit.
var DefaultLimits = Limits{MaxBytes: 1 << 20, MaxDepth: 128}

// maxExponentDigits bounds an exponent's significant digits: 1e999999999 is accepted
// (and written as 1e+999999999), 1e1000000000 is refused, so exponent arithmetic never
// overflows and no number is ever expanded into its digits.
const maxExponentDigits = 9

// SyntaxError is why Parse refused its input.
type SyntaxError struct {
	// Offset is the byte offset where the problem was found.
	Offset int
	// Pointer is the JSON Pointer of the value being read ("" for the top).
	Pointer string
	Msg     string
}

func (e *SyntaxError) Error() string {
	if e.Pointer != "" {
		return fmt.Sprintf("json: %s at %s (byte %d)", e.Msg, e.Pointer, e.Offset)
	}
	return fmt.Sprintf("json: %s (byte %d)", e.Msg, e.Offset)
}

// Parse reads data as exactly one JSON value under lim (zero fields take
// DefaultLimits' values). See the package doc for what it refuses.
func Parse(data []byte, lim Limits) (Value, error) {
	if lim.MaxBytes <= 0 {
		lim.MaxBytes = DefaultLimits.MaxBytes
	}
	if lim.MaxDepth <= 0 {
		lim.MaxDepth = DefaultLimits.MaxDepth
	}
	if len(data) > lim.MaxBytes {
		return Value{}, &SyntaxError{Offset: lim.MaxBytes, Msg: fmt.Sprintf("input is %d bytes, over the limit of %d", len(data), lim.MaxBytes)}
	}
	p := parser{data: data, maxDepth: lim.MaxDepth}
	p.skipSpace()
	v, err := p.value(0)
	if err != nil {
		return Value{}, err
	}
	p.skipSpace()
	if p.i < len(p.data) {
		return Value{}, p.errorf("unexpected data after the value")
	}
	return v, nil
}

type parser struct {
	data     []byte
	i        int
	maxDepth int
	path     []string // reference tokens of the value being read, for errors
}

func (p *parser) errorf(format string, args ...any) error {
	var b strings.Builder
	for _, t := range p.path {
		b.WriteByte('/')
		b.WriteString(PointerToken(t))
	}
	return &SyntaxError{Offset: p.i, Pointer: b.String(), Msg: fmt.Sprintf(format, args...)}
}

func (p *parser) skipSpace() {
	for p.i < len(p.data) {
		switch p.data[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *parser) value(depth int) (Value, error) {
	if p.i >= len(p.data) {
		return Value{}, p.errorf("unexpected end of input")
	}
	switch c := p.data[p.i]; {
	case c == '{':
		return p.object(depth + 1)
	case c == '[':
		return p.array(depth + 1)
	case c == '"':
		s, err := p.str()
		return Value{Kind: String, Text: s}, err
	case c == '-' || c >= '0' && c <= '9':
		s, err := p.number()
		return Value{Kind: Number, Text: s}, err
	case c == 't':
		return Value{Kind: Bool, Text: "true"}, p.literal("true")
	case c == 'f':
		return Value{Kind: Bool, Text: "false"}, p.literal("false")
	case c == 'n':
		return Value{Kind: Null}, p.literal("null")
	default:
		return Value{}, p.errorf("unexpected character %q", rune(c))
	}
}

func (p *parser) literal(word string) error {
	if !strings.HasPrefix(string(p.data[p.i:min(len(p.data), p.i+len(word))]), word) {
		return p.errorf("invalid literal (want %s)", word)
	}
	p.i += len(word)
	return nil
}

func (p *parser) object(depth int) (Value, error) {
	if depth > p.maxDepth {
		return Value{}, p.errorf("nesting deeper than %d", p.maxDepth)
	}
	p.i++ // '{'
	v := Value{Kind: Object}
	p.skipSpace()
	if p.i < len(p.data) && p.data[p.i] == '}' {
		p.i++
		return v, nil
	}
	for {
		p.skipSpace()
		if p.i >= len(p.data) || p.data[p.i] != '"' {
			return Value{}, p.errorf("expected a member name")
		}
		key, err := p.str()
		if err != nil {
			return Value{}, err
		}
		p.skipSpace()
		if p.i >= len(p.data) || p.data[p.i] != ':' {
			return Value{}, p.errorf("expected ':' after member name %q", key)
		}
		p.i++
		p.skipSpace()
		p.path = append(p.path, key)
		mv, err := p.value(depth)
		p.path = p.path[:len(p.path)-1]
		if err != nil {
			return Value{}, err
		}
		v.Members = append(v.Members, Member{Key: key, Value: mv})
		p.skipSpace()
		if p.i >= len(p.data) {
			return Value{}, p.errorf("unexpected end of input in an object")
		}
		if p.data[p.i] == '}' {
			p.i++
			break
		}
		if p.data[p.i] != ',' {
			return Value{}, p.errorf("expected ',' or '}' in an object")
		}
		p.i++
	}
	if !slices.IsSortedFunc(v.Members, compareMembers) {
		slices.SortFunc(v.Members, compareMembers)
	}
	for i := 1; i < len(v.Members); i++ {
		if v.Members[i].Key == v.Members[i-1].Key {
			p.path = append(p.path, v.Members[i].Key)
			err := p.errorf("duplicate member name %q", v.Members[i].Key)
			p.path = p.path[:len(p.path)-1]
			return Value{}, err
		}
	}
	return v, nil
}

func compareMembers(a, b Member) int { return strings.Compare(a.Key, b.Key) }

func (p *parser) array(depth int) (Value, error) {
	if depth > p.maxDepth {
		return Value{}, p.errorf("nesting deeper than %d", p.maxDepth)
	}
	p.i++ // '['
	v := Value{Kind: Array}
	p.skipSpace()
	if p.i < len(p.data) && p.data[p.i] == ']' {
		p.i++
		v.Elems = []Value{}
		return v, nil
	}
	for n := 0; ; n++ {
		p.skipSpace()
		p.path = append(p.path, itoa(n))
		e, err := p.value(depth)
		p.path = p.path[:len(p.path)-1]
		if err != nil {
			return Value{}, err
		}
		v.Elems = append(v.Elems, e)
		p.skipSpace()
		if p.i >= len(p.data) {
			return Value{}, p.errorf("unexpected end of input in an array")
		}
		if p.data[p.i] == ']' {
			p.i++
			return v, nil
		}
		if p.data[p.i] != ',' {
			return Value{}, p.errorf("expected ',' or ']' in an array")
		}
		p.i++
	}
}

// str reads a string starting at the opening quote and returns it decoded.
func (p *parser) str() (string, error) {
	p.i++ // '"'
	start := p.i
	// Fast path: no escapes.
	for p.i < len(p.data) {
		c := p.data[p.i]
		switch {
		case c == '"':
			s := string(p.data[start:p.i])
			p.i++
			return s, nil
		case c == '\\':
			return p.strSlow(start)
		case c < 0x20:
			return "", p.errorf("raw control character U+%04X in a string (write it escaped)", c)
		case c < utf8.RuneSelf:
			p.i++
		default:
			r, n := utf8.DecodeRune(p.data[p.i:])
			if r == utf8.RuneError && n <= 1 {
				return "", p.errorf("invalid UTF-8 in a string")
			}
			p.i += n
		}
	}
	return "", p.errorf("unterminated string")
}

func (p *parser) strSlow(start int) (string, error) {
	var b strings.Builder
	b.Write(p.data[start:p.i])
	for p.i < len(p.data) {
		c := p.data[p.i]
		switch {
		case c == '"':
			p.i++
			return b.String(), nil
		case c == '\\':
			p.i++
			if p.i >= len(p.data) {
				return "", p.errorf("unterminated escape")
			}
			e := p.data[p.i]
			p.i++
			switch e {
			case '"', '\\', '/':
				b.WriteByte(e)
			case 'b':
				b.WriteByte('\b')
			case 'f':
				b.WriteByte('\f')
			case 'n':
				b.WriteByte('\n')
			case 'r':
				b.WriteByte('\r')
			case 't':
				b.WriteByte('\t')
			case 'u':
				r, err := p.hex4()
				if err != nil {
					return "", err
				}
				if utf16.IsSurrogate(r) {
					if r >= 0xDC00 || p.i+1 >= len(p.data) || p.data[p.i] != '\\' || p.data[p.i+1] != 'u' {
						return "", p.errorf("lone surrogate \\u%04X", r)
					}
					p.i += 2
					lo, err := p.hex4()
					if err != nil {
						return "", err
					}
					if lo < 0xDC00 || lo > 0xDFFF {
						return "", p.errorf("lone surrogate \\u%04X", r)
					}
					r = utf16.DecodeRune(r, lo)
				}
				b.WriteRune(r)
			default:
				return "", p.errorf("invalid escape \\%c", e)
			}
		case c < 0x20:
			return "", p.errorf("raw control character U+%04X in a string (write it escaped)", c)
		case c < utf8.RuneSelf:
			b.WriteByte(c)
			p.i++
		default:
			r, n := utf8.DecodeRune(p.data[p.i:])
			if r == utf8.RuneError && n <= 1 {
				return "", p.errorf("invalid UTF-8 in a string")
			}
			b.Write(p.data[p.i : p.i+n])
			p.i += n
		}
	}
	return "", p.errorf("unterminated string")
}

func (p *parser) hex4() (rune, error) {
	if p.i+4 > len(p.data) {
		return 0, p.errorf("short \\u escape")
	}
	var r rune
	for _, c := range p.data[p.i : p.i+4] {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c - 'a' + 10)
		case c >= 'A' && c <= 'F':
			r |= rune(c - 'A' + 10)
		default:
			return 0, p.errorf("invalid \\u escape")
		}
	}
	p.i += 4
	return r, nil
}

// number reads a number and returns its canonical text.
func (p *parser) number() (string, error) {
	neg := false
	if p.data[p.i] == '-' {
		neg = true
		p.i++
	}
	digitsAt := func() int {
		n := 0
		for p.i < len(p.data) && p.data[p.i] >= '0' && p.data[p.i] <= '9' {
			p.i++
			n++
		}
		return n
	}
	intStart := p.i
	if p.i >= len(p.data) || p.data[p.i] < '0' || p.data[p.i] > '9' {
		return "", p.errorf("invalid number")
	}
	if p.data[p.i] == '0' {
		p.i++
	} else {
		digitsAt()
	}
	intPart := p.data[intStart:p.i]
	var frac []byte
	if p.i < len(p.data) && p.data[p.i] == '.' {
		p.i++
		fs := p.i
		if digitsAt() == 0 {
			return "", p.errorf("invalid number: no digits after '.'")
		}
		frac = p.data[fs:p.i]
	}
	var exp int64
	if p.i < len(p.data) && (p.data[p.i] == 'e' || p.data[p.i] == 'E') {
		p.i++
		eneg := false
		if p.i < len(p.data) && (p.data[p.i] == '+' || p.data[p.i] == '-') {
			eneg = p.data[p.i] == '-'
			p.i++
		}
		es := p.i
		if digitsAt() == 0 {
			return "", p.errorf("invalid number: no digits in the exponent")
		}
		ed := strings.TrimLeft(string(p.data[es:p.i]), "0")
		if len(ed) > maxExponentDigits {
			return "", p.errorf("number exponent has more than %d digits", maxExponentDigits)
		}
		for _, c := range ed {
			exp = exp*10 + int64(c-'0')
		}
		if eneg {
			exp = -exp
		}
	}
	num := canonicalNumber(neg, intPart, frac, exp)
	// The exponent as written can be in range while the value's is not (10e999999999
	// is 1e+1000000000): refuse what the canonical form could not be parsed back from,
	// so that every canonical form is itself accepted.
	if i := strings.IndexByte(num, 'e'); i >= 0 && len(num)-i-2 > maxExponentDigits {
		return "", p.errorf("number exponent has more than %d digits once normalised", maxExponentDigits)
	}
	return num, nil
}

// canonicalNumber writes the value (-1)^neg × int.frac × 10^exp exactly.
func canonicalNumber(neg bool, intPart, frac []byte, exp int64) string {
	digits := make([]byte, 0, len(intPart)+len(frac))
	digits = append(digits, intPart...)
	digits = append(digits, frac...)
	e := exp - int64(len(frac))
	i := 0
	for i < len(digits) && digits[i] == '0' {
		i++
	}
	digits = digits[i:]
	if len(digits) == 0 {
		return "0"
	}
	j := len(digits)
	for digits[j-1] == '0' {
		j--
	}
	e += int64(len(digits) - j)
	digits = digits[:j]
	n := int64(len(digits))
	point := n + e // value = 0.digits × 10^point
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	switch {
	case n <= point && point <= 21:
		b.Write(digits)
		for k := n; k < point; k++ {
			b.WriteByte('0')
		}
	case 0 < point && point <= 21:
		b.Write(digits[:point])
		b.WriteByte('.')
		b.Write(digits[point:])
	case -6 < point && point <= 0:
		b.WriteString("0.")
		for k := point; k < 0; k++ {
			b.WriteByte('0')
		}
		b.Write(digits)
	default:
		b.WriteByte(digits[0])
		if n > 1 {
			b.WriteByte('.')
			b.Write(digits[1:])
		}
		b.WriteByte('e')
		x := point - 1
		if x >= 0 {
			b.WriteByte('+')
		} else {
			b.WriteByte('-')
			x = -x
		}
		b.WriteString(i64toa(x))
	}
	return b.String()
}

func itoa(n int) string { return i64toa(int64(n)) }

func i64toa(n int64) string {
	if n == 0 {
		return "0"
	}
	var buf [20]byte
	i := len(buf)
	for n > 0 {
		i--
		buf[i] = byte('0' + n%10)
		n /= 10
	}
	return string(buf[i:])
}
