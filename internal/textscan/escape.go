package textscan

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Escape returns s safe to show a person on a terminal or in JSON, at most max
// characters long (0: no bound), ending in "…" when cut. Everything a reader could not
// see or could be fooled by is written as \u{XXXX}: controls (so ESC cannot rewrite the
// terminal), bidi controls (so the excerpt cannot reorder itself), invisible and format
// characters, tags, variation selectors, private-use characters, unassigned and
// non-graphic code points, lookalike letters (so "pаypal" shows its Cyrillic а), and
// combining marks not attached to a letter. Newline, tab, CR and backslash are written
// \n, \t, \r and \\. Other text (accented letters, CJK, emoji) is kept as is.
func Escape(s string, max int) string {
	var b strings.Builder
	n := 0
	prevLetter := false
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		var piece string
		switch {
		case r == utf8.RuneError && size == 1:
			piece = fmt.Sprintf(`\x%02x`, s[i])
		case r == '\n':
			piece = `\n`
		case r == '\t':
			piece = `\t`
		case r == '\r':
			piece = `\r`
		case r == '\\':
			piece = `\\`
		case r >= 0x20 && r < 0x7F:
			piece = s[i : i+1]
		case needsEscape(r, prevLetter):
			piece = fmt.Sprintf(`\u{%04X}`, r)
		default:
			piece = s[i : i+size]
		}
		prevLetter = unicode.IsLetter(r)
		i += size
		if max > 0 {
			limit := max
			if i < len(s) {
				limit = max - 1 // keep room for the "…" that will follow
			}
			if n+utf8.RuneCountInString(piece) > limit {
				b.WriteString("…")
				return b.String()
			}
		}
		b.WriteString(piece)
		n += utf8.RuneCountInString(piece)
	}
	return b.String()
}

func needsEscape(r rune, afterLetter bool) bool {
	if classify(r) != classNone {
		return true
	}
	if _, ok := Fold(r); ok {
		return true
	}
	if unicode.In(r, unicode.Cyrillic, unicode.Armenian, unicode.Cherokee) {
		return true // a lone non-Latin letter in an excerpt of English text is the finding
	}
	if unicode.IsMark(r) {
		return !afterLetter
	}
	return !unicode.IsGraphic(r) || unicode.Is(unicode.Zs, r) && r != ' ' && r != 0x00A0
}

// excerpt returns the escaped text around s[start:end], with up to ctx characters of
// context on each side, bounded by ExcerptRunes.
func excerpt(s string, start, end int) string {
	const ctx = 40
	from := start
	for k := 0; k < ctx && from > 0; k++ {
		_, w := utf8.DecodeLastRuneInString(s[:from])
		from -= w
	}
	to := end
	for k := 0; k < ctx && to < len(s); k++ {
		_, w := utf8.DecodeRuneInString(s[to:])
		to += w
	}
	out := Escape(s[from:to], ExcerptRunes)
	if from > 0 {
		out = "…" + out
	}
	if to < len(s) && !strings.HasSuffix(out, "…") {
		out += "…"
	}
	return out
}
