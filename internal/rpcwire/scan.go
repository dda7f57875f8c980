package rpcwire

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// The strict reader. It walks the input once and appends to out the
// canonical encoding of what it reads (compact, object members sorted by name,
// strings escaped as encoding/json escapes them without HTML escaping, numbers
// as written), checking the grammar, the nesting limit and member names on
// the way. It builds no tree: a request costs its body, its canonical params
// (about the same size) and, only for an object whose members must be
// reordered and that has many of them, a scratch copy of that object.

var (
	errSyntax   = errors.New("syntax error")
	errTooDeep  = errors.New("too deep")
	errTrailing = errors.New("trailing data")
)

// objState records strictness violations found while reading one message. The
// read goes on past them so the message's id can still be found for the answer.
type objState struct {
	violation string
	// idAmbiguous is set when the message's own "id" was duplicated or
	// case-varied, so no id is usable.
	idAmbiguous bool
}

func (st *objState) violate(msg string) {
	if st.violation == "" {
		st.violation = msg
	}
}

// member is one member of an object being read: its decoded name and where
// its segment `"name":value,` lies in scanner.out.
type member struct {
	key        string
	start, end int // the segment, trailing comma included
	keyLen     int // the length of `"name":`
}

// value is the span of a member's value within out.
func (m member) value() (start, end int) { return m.start + m.keyLen, m.end - 1 }

type scanner struct {
	in       []byte
	pos      int
	maxDepth int
	out      []byte
	st       *objState
	// members is a stack: each object being read pushes its members above
	// those of the objects enclosing it and pops them when it closes.
	members []member
	scratch []byte
	names   nameCache
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func (s *scanner) skipSpace() {
	for s.pos < len(s.in) && isSpace(s.in[s.pos]) {
		s.pos++
	}
}

// peek returns the next byte after white space, or 0 at the end (which no
// caller mistakes for a NUL byte: none accepts either).
func (s *scanner) peek() byte {
	s.skipSpace()
	if s.pos >= len(s.in) {
		return 0
	}
	return s.in[s.pos]
}

// value reads one value at the given depth (1 for the top level) and appends
// its canonical encoding.
func (s *scanner) value(depth int) error {
	switch c := s.peek(); {
	case c == '{':
		if depth > s.maxDepth {
			return errTooDeep
		}
		_, err := s.object(depth, false)
		return err
	case c == '[':
		if depth > s.maxDepth {
			return errTooDeep
		}
		return s.array(depth)
	case c == '"':
		_, err := s.str(false)
		return err
	case c == '-' || c >= '0' && c <= '9':
		return s.number()
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	}
	return errSyntax
}

func (s *scanner) literal(word string) error {
	if len(s.in)-s.pos < len(word) || string(s.in[s.pos:s.pos+len(word)]) != word {
		return errSyntax
	}
	s.pos += len(word)
	s.out = append(s.out, word...)
	return nil
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// number reads the JSON number grammar, longest match, and keeps it as written.
func (s *scanner) number() error {
	i := numberEnd(s.in, s.pos)
	if i < 0 {
		return errSyntax
	}
	s.out = append(s.out, s.in[s.pos:i]...)
	s.pos = i
	return nil
}

// numberEnd returns the end of the JSON number (the longest match of its grammar) that
// starts at in[i], or -1 when none does.
func numberEnd(in []byte, i int) int {
	digits := func() {
		for i < len(in) && isDigit(in[i]) {
			i++
		}
	}
	if i < len(in) && in[i] == '-' {
		i++
	}
	switch {
	case i < len(in) && in[i] == '0':
		i++
	case i < len(in) && in[i] >= '1' && in[i] <= '9':
		digits()
	default:
		return -1
	}
	if i < len(in) && in[i] == '.' {
		i++
		if i >= len(in) || !isDigit(in[i]) {
			return -1
		}
		digits()
	}
	if i < len(in) && (in[i] == 'e' || in[i] == 'E') {
		i++
		if i < len(in) && (in[i] == '+' || in[i] == '-') {
			i++
		}
		if i >= len(in) || !isDigit(in[i]) {
			return -1
		}
		digits()
	}
	return i
}

func (s *scanner) array(depth int) error {
	s.pos++ // '['
	s.out = append(s.out, '[')
	if s.peek() == ']' {
		s.pos++
		s.out = append(s.out, ']')
		return nil
	}
	for {
		if err := s.value(depth + 1); err != nil {
			return err
		}
		switch s.peek() {
		case ',':
			s.pos++
			s.out = append(s.out, ',')
		case ']':
			s.pos++
			s.out = append(s.out, ']')
			return nil
		default:
			return errSyntax
		}
	}
}

// object reads an object whose '{' is next. top marks a message's own object,
// where a duplicated "id" makes the id unusable. It returns the object's
// members, sorted, valid until the next object is read (the caller copies
// what it keeps).
func (s *scanner) object(depth int, top bool) ([]member, error) {
	s.pos++ // '{'
	s.out = append(s.out, '{')
	if s.peek() == '}' {
		s.pos++
		s.out = append(s.out, '}')
		return nil, nil
	}
	base := len(s.members)
	defer func() { s.members = s.members[:base] }()
	var folded map[string]string // fold key → first name, once the object is large
	for {
		if s.peek() != '"' {
			return nil, errSyntax
		}
		start := len(s.out)
		key, err := s.str(true)
		if err != nil {
			return nil, err
		}
		if s.peek() != ':' {
			return nil, errSyntax
		}
		s.pos++
		s.out = append(s.out, ':')
		keyLen := len(s.out) - start
		// The value first, then the name's check: the first violation
		// reported is the first found reading depth-first, as before.
		if err := s.value(depth + 1); err != nil {
			return nil, err
		}
		s.out = append(s.out, ',')
		if prev, dup := s.duplicate(key, base, &folded); dup {
			if prev == key {
				s.st.violate("duplicate member " + quote(key))
			} else {
				s.st.violate("members " + quote(prev) + " and " + quote(key) + " differ only in case")
			}
			if top && foldKey(key) == "ID" {
				s.st.idAmbiguous = true
			}
		}
		s.members = append(s.members, member{key: key, start: start, end: len(s.out), keyLen: keyLen})
		switch s.peek() {
		case ',':
			s.pos++
		case '}':
			s.pos++
			ms := s.members[base:]
			s.sortMembers(ms)
			s.out[len(s.out)-1] = '}' // the last member's comma
			return ms, nil
		default:
			return nil, errSyntax
		}
	}
}

// smallObject is how many members an object may have before names are
// checked through a map instead of against each other.
const smallObject = 16

// duplicate reports whether key equals, under Unicode simple case folding, the
// name of a member read before it in the object whose members start at base,
// and the first such name.
func (s *scanner) duplicate(key string, base int, folded *map[string]string) (string, bool) {
	prev := s.members[base:]
	if len(prev) < smallObject && *folded == nil {
		for _, m := range prev {
			if foldEqual(m.key, key) {
				return m.key, true
			}
		}
		return "", false
	}
	if *folded == nil {
		*folded = make(map[string]string, 2*len(prev))
		for _, m := range prev {
			if _, seen := (*folded)[foldKey(m.key)]; !seen {
				(*folded)[foldKey(m.key)] = m.key
			}
		}
	}
	fk := foldKey(key)
	if first, seen := (*folded)[fk]; seen {
		return first, true
	}
	(*folded)[fk] = key
	return "", false
}

// foldEqual is foldKey(a) == foldKey(b), without building either for ASCII
// names.
func foldEqual(a, b string) bool {
	if isASCII(a) && isASCII(b) {
		return strings.EqualFold(a, b)
	}
	return foldKey(a) == foldKey(b)
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// rotateLimit is the size above which an object's members are put in order
// by rotating them in place rather than through a scratch copy, when they are
// few (at most rotateMembers): an object holding one large value (params
// with its arguments) then costs no copy of that value.
const (
	rotateLimit   = 64 << 10
	rotateMembers = 8
)

// sortMembers puts the segments of ms (contiguous in out, in this order) in
// the order of their names, as encoding/json sorts map keys.
func (s *scanner) sortMembers(ms []member) {
	if slices.IsSortedFunc(ms, byKey) {
		return
	}
	lo, hi := ms[0].start, ms[len(ms)-1].end
	if hi-lo > rotateLimit && len(ms) <= rotateMembers {
		// Insertion sort by rotations: each swaps two neighbouring segments.
		for i := 1; i < len(ms); i++ {
			for j := i; j > 0 && ms[j-1].key > ms[j].key; j-- {
				a, b := ms[j-1], ms[j]
				rotate(s.out[a.start:b.end], a.end-a.start)
				b.start, b.end = a.start, a.start+(b.end-b.start)
				a.start, a.end = b.end, b.end+(a.end-a.start)
				ms[j-1], ms[j] = b, a
			}
		}
		return
	}
	s.scratch = append(s.scratch[:0], s.out[lo:hi]...)
	slices.SortStableFunc(ms, byKey)
	at := lo
	for i, m := range ms {
		n := copy(s.out[at:], s.scratch[m.start-lo:m.end-lo])
		ms[i].start, ms[i].end = at, at+n
		at += n
	}
	if cap(s.scratch) > rotateLimit {
		s.scratch = nil // do not keep a large copy for the rest of the body
	}
}

func byKey(a, b member) int { return strings.Compare(a.key, b.key) }

// rotate moves the first k bytes of b to its end, in place.
func rotate(b []byte, k int) {
	slices.Reverse(b[:k])
	slices.Reverse(b[k:])
	slices.Reverse(b)
}

// str reads a string and appends its canonical encoding. With decode it also
// returns the string's value (member names are compared and sorted by it).
func (s *scanner) str(decode bool) (string, error) {
	in := s.in
	i := s.pos + 1 // past '"'
	outStart := len(s.out)
	s.out = append(s.out, '"')
	var val []byte // the decoded value, when decode and it differs from out
	plain := true  // out so far is the value itself (no escapes written)
	for {
		// A run of bytes that stay as they are.
		j := i
		for j < len(in) {
			c := in[j]
			if c == '"' || c == '\\' || c < 0x20 {
				break
			}
			if c >= utf8.RuneSelf {
				r, size := utf8.DecodeRune(in[j:])
				if r == '\u2028' || r == '\u2029' {
					break
				}
				j += size
				continue
			}
			j++
		}
		s.out = append(s.out, in[i:j]...)
		if decode && !plain {
			val = append(val, in[i:j]...)
		}
		i = j
		if i >= len(in) {
			return "", errSyntax
		}
		c := in[i]
		switch {
		case c == '"':
			s.pos = i + 1
			s.out = append(s.out, '"')
			if !decode {
				return "", nil
			}
			if plain {
				return s.name(s.out[outStart+1 : len(s.out)-1]), nil
			}
			return string(val), nil
		case c < 0x20:
			return "", errSyntax
		case c != '\\':
			// U+2028 or U+2029, raw: escaped as encoding/json does.
			r, size := utf8.DecodeRune(in[i:])
			if decode {
				val = s.startVal(val, outStart, &plain)
				val = utf8.AppendRune(val, r)
			}
			s.out = appendRune(s.out, r)
			plain = false
			i += size
			continue
		}
		// An escape.
		if i+1 >= len(in) {
			return "", errSyntax
		}
		var r rune
		switch e := in[i+1]; e {
		case '"', '\\', '/':
			r, i = rune(e), i+2
		case 'b':
			r, i = '\b', i+2
		case 'f':
			r, i = '\f', i+2
		case 'n':
			r, i = '\n', i+2
		case 'r':
			r, i = '\r', i+2
		case 't':
			r, i = '\t', i+2
		case 'u':
			r = hex4(in[i:])
			if r < 0 {
				return "", errSyntax
			}
			i += 6
			if utf16.IsSurrogate(r) {
				// A pair combines; anything else is a lone surrogate, which
				// reads as U+FFFD, as encoding/json reads it.
				if dec := utf16.DecodeRune(r, hex4(in[i:])); dec != utf8.RuneError {
					r, i = dec, i+6
				} else {
					r = utf8.RuneError
				}
			}
		default:
			return "", errSyntax
		}
		if decode {
			val = s.startVal(val, outStart, &plain)
			val = utf8.AppendRune(val, r)
		}
		s.out = appendRune(s.out, r)
		plain = false
	}
}

// Member names repeat (an array of objects names the same members in each):
// up to maxNames short names are kept, so each is allocated once per body.
const (
	maxNames   = 256
	maxNameLen = 64
)

// nameCache holds the short member names one read has seen.
type nameCache map[string]string

// get returns b as a string, from the names already seen when it is one.
func (c *nameCache) get(b []byte) string {
	if n, ok := (*c)[string(b)]; ok {
		return n
	}
	n := string(b)
	if len(b) <= maxNameLen && len(*c) < maxNames {
		if *c == nil {
			*c = make(nameCache)
		}
		(*c)[n] = n
	}
	return n
}

// name returns b as a string, from the names already seen when it is one.
func (s *scanner) name(b []byte) string { return s.names.get(b) }

// startVal begins the decoded value with what out holds of it so far, the
// first time the two differ.
func (s *scanner) startVal(val []byte, outStart int, plain *bool) []byte {
	if *plain {
		val = append(val, s.out[outStart+1:]...)
	}
	return val
}

// hex4 reads `\uXXXX` at the start of b, or returns -1.
func hex4(b []byte) rune {
	if len(b) < 6 || b[0] != '\\' || b[1] != 'u' {
		return -1
	}
	var r rune
	for _, c := range b[2:6] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r*16 + rune(c)
	}
	return r
}

const hexDigits = "0123456789abcdef"

// appendRune appends r inside a string as encoding/json writes it (without
// HTML escaping): the short escapes, \u00XX for other control characters,
// \u2028 and \u2029 escaped, everything else as UTF-8.
func appendRune(out []byte, r rune) []byte {
	switch r {
	case '"', '\\':
		return append(out, '\\', byte(r))
	case '\b':
		return append(out, '\\', 'b')
	case '\f':
		return append(out, '\\', 'f')
	case '\n':
		return append(out, '\\', 'n')
	case '\r':
		return append(out, '\\', 'r')
	case '\t':
		return append(out, '\\', 't')
	case '\u2028', '\u2029':
		return append(out, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
	}
	if r < 0x20 {
		return append(out, '\\', 'u', '0', '0', hexDigits[r>>4], hexDigits[r&0xF])
	}
	return utf8.AppendRune(out, r)
}

// quote quotes a name in a violation message.
func quote(s string) string { return strconv.Quote(s) }
