package textscan

import (
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// maxDecoded bounds how much hidden text is decoded (and scanned for phrases) per string.
const maxDecoded = 4096

// tally counts one class of character in a string.
type tally struct {
	count int
	first int    // byte offset of the first occurrence
	end   int    // byte offset just after it
	runes []rune // distinct characters seen, at most 3
	esc   bool   // an ESC or CSI control was seen
}

func (t *tally) add(r rune, at, size int) {
	if t.count == 0 {
		t.first, t.end = at, at+size
	}
	t.count++
	if len(t.runes) < 3 && !containsRune(t.runes, r) {
		t.runes = append(t.runes, r)
	}
	if r == 0x1B || r == 0x9B {
		t.esc = true
	}
}

func containsRune(rs []rune, r rune) bool {
	for _, x := range rs {
		if x == r {
			return true
		}
	}
	return false
}

func (t *tally) names() string {
	var parts []string
	for _, r := range t.runes {
		parts = append(parts, charName(r))
	}
	s := strings.Join(parts, ", ")
	if t.count > 1 {
		s = fmt.Sprintf("%d characters: %s", t.count, s)
	}
	return s
}

// hiddenRun is a decoded run of tag characters or variation selectors.
type hiddenRun struct {
	count      int
	first, end int
	decoded    []byte
}

func (h *hiddenRun) add(at, end int, b ...byte) {
	if h.count == 0 {
		h.first = at
	}
	h.end = end
	h.count++
	if len(h.decoded) < maxDecoded {
		h.decoded = append(h.decoded, b...)
	}
}

// charScan is what one pass over a string's characters found.
type charScan struct {
	control, bidi, marks, invisible, private tally
	tags, variation                          hiddenRun
	// mixed: a word mixing ASCII letters with lookalikes of another script.
	mixed      bool
	mixedStart int
	mixedEnd   int
	mixedRune  rune
	// nonASCII: the first non-ASCII character (for names).
	nonASCII     rune
	nonASCIIAt   int
	lookalike    bool // some character is a lookalike of an ASCII letter
	lookalikeAt  int
	lookalikeRun rune
}

func lookalike(r rune) bool {
	if r < utf8.RuneSelf {
		return false
	}
	if a, ok := Fold(r); ok && (a >= 'a' && a <= 'z' || a >= 'A' && a <= 'Z' || a >= '0' && a <= '9') {
		return true
	}
	return unicode.In(r, unicode.Cyrillic, unicode.Armenian, unicode.Cherokee)
}

func scanChars(s string) *charScan {
	c := &charScan{nonASCII: -1}
	var prev rune = -1
	wordStart, wordASCII, wordOther := -1, false, rune(-1)
	endWord := func(at int) {
		if wordStart >= 0 && wordASCII && wordOther >= 0 && !c.mixed {
			c.mixed, c.mixedStart, c.mixedEnd, c.mixedRune = true, wordStart, at, wordOther
		}
		wordStart, wordASCII, wordOther = -1, false, -1
	}
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r >= utf8.RuneSelf && c.nonASCII < 0 {
			c.nonASCII, c.nonASCIIAt = r, i
		}
		cl := classify(r)
		switch cl {
		case classControl:
			c.control.add(r, i, size)
		case classBidi:
			c.bidi.add(r, i, size)
		case classBidiMark:
			c.marks.add(r, i, size)
		case classPrivate:
			c.private.add(r, i, size)
		case classInvisible:
			if r == 0x200C || r == 0x200D {
				next, _ := utf8.DecodeRuneInString(s[i+size:])
				if (pictographic(prev) || joinsScript(prev)) && (pictographic(next) || joinsScript(next)) {
					break // an emoji sequence or a script that joins this way
				}
			}
			c.invisible.add(r, i, size)
		case classTag:
			j := i
			var run []byte
			for j < len(s) {
				t, n := utf8.DecodeRuneInString(s[j:])
				if classify(t) != classTag {
					break
				}
				run = append(run, byte(t-0xE0000))
				j += n
			}
			if !flagSequence(prev, run) {
				for _, b := range run {
					c.tags.add(i, j, b)
				}
			}
			prev = 0xE007F
			i = j
			continue
		case classVariation:
			j := i
			var run []byte
			for j < len(s) {
				t, n := utf8.DecodeRuneInString(s[j:])
				if classify(t) != classVariation {
					break
				}
				run = append(run, variationByte(t))
				j += n
			}
			if len(run) > 1 {
				for _, b := range run {
					c.variation.add(i, j, b)
				}
			}
			prev = 0xFE0F
			i = j
			continue
		}
		if lookalike(r) && !c.lookalike {
			c.lookalike, c.lookalikeAt, c.lookalikeRun = true, i, r
		}
		switch {
		case cl != classNone:
			// hidden characters do not break a word: "pa\u200bss" is one word
		case unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r) || r == '_':
			if wordStart < 0 {
				wordStart = i
			}
			if r < utf8.RuneSelf && (r|0x20 >= 'a' && r|0x20 <= 'z') {
				wordASCII = true
			} else if lookalike(r) && wordOther < 0 {
				wordOther = r
			}
		default:
			endWord(i)
		}
		prev = r
		i += size
	}
	endWord(len(s))
	return c
}

// flagSequence reports whether a run of tag characters after prev is an emoji
// subdivision flag (U+1F3F4, tag letters or digits, CANCEL TAG), their one ordinary use.
func flagSequence(prev rune, run []byte) bool {
	if prev != 0x1F3F4 || len(run) < 3 || len(run) > 8 || run[len(run)-1] != 0x7F {
		return false
	}
	for _, b := range run[:len(run)-1] {
		if !(b >= 'a' && b <= 'z' || b >= '0' && b <= '9') {
			return false
		}
	}
	return true
}

// decodedText shows hidden bytes: printable ASCII as is, everything else escaped.
func decodedText(b []byte) string {
	return Escape(string(b), ExcerptRunes)
}

func (s *Scanner) scan(out *[]Finding, pointer func() string, key bool, text string, where place) {
	var ptr string
	add := func(f Finding) {
		if ptr == "" {
			ptr = pointer()
		}
		f.Pointer, f.Key = ptr, key
		*out = append(*out, f)
	}
	plain := true
	for i := 0; i < len(text); i++ {
		if c := text[i]; c >= utf8.RuneSelf || c < 0x20 && c != '\t' && c != '\n' && c != '\r' || c == 0x7F {
			plain = false
			break
		}
	}
	if !plain {
		s.charFindings(add, text, where)
	}
	for _, h := range phrases(text) {
		add(Finding{Kind: KindInstruction, Severity: h.severity, Rule: h.rule.id, Detail: h.rule.detail, Count: 1, Excerpt: excerpt(text, h.start, h.end)})
	}
	if where != inName && (len(s.tools) > 0 || len(s.namespaces) > 0) {
		s.references(add, text, plain)
	}
	if where == inName {
		s.impersonation(add, text)
	}
	if n := utf8.RuneCountInString(text); n > s.longText {
		sev := Low
		if n > 4*s.longText {
			sev = Medium
		}
		add(Finding{Kind: KindLong, Severity: sev, Detail: fmt.Sprintf("%d characters long (flagged over %d)", n, s.longText), Count: n, Excerpt: excerpt(text, 0, 0)})
	}
	blobs(add, text)
}

func (s *Scanner) charFindings(add func(Finding), text string, where place) {
	c := scanChars(text)
	inName := where == inName
	raise := func(sev Severity) Severity {
		if inName {
			return High // a hidden character in a tool's name exists only to impersonate
		}
		return sev
	}
	if t := c.control; t.count > 0 {
		sev := Medium
		if t.esc {
			sev = High
		}
		add(Finding{Kind: KindControl, Severity: raise(sev), Detail: "control characters: " + t.names(), Count: t.count, Excerpt: excerpt(text, t.first, t.end)})
	}
	if t := c.bidi; t.count > 0 {
		add(Finding{Kind: KindBidi, Severity: High, Detail: "bidirectional controls reorder how the text is shown: " + t.names(), Count: t.count, Excerpt: excerpt(text, t.first, t.end)})
	}
	if t := c.marks; t.count > 0 {
		add(Finding{Kind: KindBidi, Severity: raise(Medium), Detail: "invisible direction marks: " + t.names(), Count: t.count, Excerpt: excerpt(text, t.first, t.end)})
	}
	if t := c.invisible; t.count > 0 {
		sev := Medium
		if t.count >= 4 {
			sev = High // many invisible characters carry or split something
		}
		add(Finding{Kind: KindInvisible, Severity: raise(sev), Detail: "invisible characters: " + t.names(), Count: t.count, Excerpt: excerpt(text, t.first, t.end)})
	}
	if t := c.private; t.count > 0 {
		add(Finding{Kind: KindPrivateUse, Severity: raise(Low), Detail: "private-use characters (shown as whatever a font draws): " + t.names(), Count: t.count, Excerpt: excerpt(text, t.first, t.end)})
	}
	hiddenText := func(kind Kind, h hiddenRun, what string) {
		if h.count == 0 {
			return
		}
		dec := decodedText(h.decoded)
		add(Finding{Kind: kind, Severity: High, Detail: fmt.Sprintf("%d %s hide text", h.count, what), Count: h.count, Excerpt: excerpt(text, h.first, h.end), Decoded: dec})
		for _, p := range phrases(string(h.decoded)) {
			add(Finding{Kind: KindInstruction, Severity: High, Rule: p.rule.id, Detail: p.rule.detail + ", hidden in " + what, Count: 1, Decoded: dec})
		}
	}
	hiddenText(KindTag, c.tags, "tag characters")
	hiddenText(KindVariation, c.variation, "variation selectors")
	switch {
	case inName && c.lookalike:
		add(Finding{Kind: KindHomoglyph, Severity: High, Detail: fmt.Sprintf("the name contains %s, which passes for the ASCII letter %q", charName(c.lookalikeRun), foldOf(c.lookalikeRun)), Count: 1, Excerpt: Escape(text, ExcerptRunes)})
	case inName && c.nonASCII >= 0:
		add(Finding{Kind: KindHomoglyph, Severity: Medium, Detail: fmt.Sprintf("the name contains %s: MCP tool names are meant to be ASCII letters, digits, '_', '-' and '.'", charName(c.nonASCII)), Count: 1, Excerpt: Escape(text, ExcerptRunes)})
	case c.mixed:
		add(Finding{Kind: KindHomoglyph, Severity: Medium, Detail: fmt.Sprintf("a word mixes Latin letters with %s", charName(c.mixedRune)), Count: 1, Excerpt: excerpt(text, c.mixedStart, c.mixedEnd)})
	}
}

func foldOf(r rune) string {
	if a, ok := Fold(r); ok {
		return string(a)
	}
	return string(r)
}

// references flags tokens that name someone else's tool or namespace. A token is a
// maximal run of [a-z0-9_.-] in the lower-cased text (the skeleton, for text that is
// not plain ASCII), without leading or trailing '.', '-', '_'.
func (s *Scanner) references(add func(Finding), text string, plain bool) {
	low := text
	if !plain {
		low = Skeleton(text)
	}
	var buf [256]byte
	var reported []string
	for i := 0; i < len(low); {
		if !isTokByte(low[i]) {
			i++
			continue
		}
		j := i
		for j < len(low) && isTokByte(low[j]) {
			j++
		}
		raw := strings.Trim(low[i:j], ".-_")
		i = j
		if raw == "" || len(raw) > len(buf) {
			continue
		}
		tok := buf[:len(raw)]
		for k := 0; k < len(raw); k++ {
			c := raw[k]
			if c >= 'A' && c <= 'Z' {
				c += 'a' - 'A'
			}
			tok[k] = c
		}
		if label, ok := s.tools[string(tok)]; ok {
			if !slices.Contains(reported, label) {
				reported = append(reported, label)
				add(Finding{Kind: KindReference, Severity: Medium, Rule: label, Detail: "mentions " + label + ", a tool of another owner", Count: 1, Excerpt: Escape(raw, ExcerptRunes)})
			}
			continue
		}
		if k := indexSep(tok); k > 0 && s.namespaces[string(tok[:k])] {
			ns := string(tok[:k])
			if !slices.Contains(reported, ns) {
				reported = append(reported, ns)
				add(Finding{Kind: KindReference, Severity: Low, Rule: ns, Detail: "mentions a name in the namespace " + ns + ", which belongs to another owner", Count: 1, Excerpt: Escape(raw, ExcerptRunes)})
			}
		}
	}
}

// impersonation flags a tool name that is, exactly, a name another owner's tool is
// published under in a prefixed or namespaced form ("toolgate_escalate",
// "toolgate_local_read_file", "github.create_issue"): the name exists to be mistaken
// for that tool. Sharing a bare name ("read_file") is ordinary and not flagged; the
// names package refuses the names that actually collide.
func (s *Scanner) impersonation(add func(Finding), name string) {
	label, ok := s.tools[strings.ToLower(Skeleton(name))]
	if !ok {
		return
	}
	if _, bare, _ := strings.Cut(label, "."); strings.EqualFold(bare, name) {
		return
	}
	add(Finding{Kind: KindReference, Severity: Medium, Rule: label, Detail: "the name is one " + label + " is published under", Count: 1, Excerpt: Escape(name, ExcerptRunes)})
}

func isTokByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-'
}

func indexSep(b []byte) int {
	for i, c := range b {
		if c == '.' || c == '_' {
			return i
		}
	}
	return -1
}
