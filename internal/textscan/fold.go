package textscan

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// confusables maps letters of other scripts that look like an ASCII letter to that
// letter. It is deliberately small: the Cyrillic, Greek, Armenian and Latin-extension
// lookalikes used in practice to impersonate ASCII names (UTS #39's confusables.txt has
// thousands of entries; these are the ones that pass for a Latin letter in an ordinary
// font). Fullwidth forms and mathematical letters are folded by arithmetic in Fold.
var confusables = map[rune]rune{
	// Cyrillic
	'а': 'a', 'в': 'b', 'е': 'e', 'ё': 'e', 'һ': 'h', 'і': 'i', 'ї': 'i', 'ј': 'j', 'к': 'k', 'ӏ': 'l',
	'м': 'm', 'н': 'h', 'о': 'o', 'р': 'p', 'ԛ': 'q', 'г': 'r', 'ѕ': 's', 'т': 't', 'ս': 'u', 'ѵ': 'v',
	'ԝ': 'w', 'х': 'x', 'у': 'y', 'ԁ': 'd', 'ɡ': 'g', 'ү': 'y', 'ɩ': 'i',
	'А': 'A', 'В': 'B', 'С': 'C', 'Е': 'E', 'Н': 'H', 'І': 'I', 'Ј': 'J', 'К': 'K', 'М': 'M', 'О': 'O',
	'Р': 'P', 'Ѕ': 'S', 'Т': 'T', 'Х': 'X', 'У': 'Y', 'Ԁ': 'D', 'Ԛ': 'Q', 'Ԝ': 'W', 'с': 'c', 'Ү': 'Y',
	// Greek
	'α': 'a', 'ο': 'o', 'ρ': 'p', 'ν': 'v', 'ι': 'i', 'κ': 'k', 'υ': 'u', 'τ': 't', 'χ': 'x', 'γ': 'y',
	'Α': 'A', 'Β': 'B', 'Ε': 'E', 'Ζ': 'Z', 'Η': 'H', 'Ι': 'I', 'Κ': 'K', 'Μ': 'M', 'Ν': 'N', 'Ο': 'O',
	'Ρ': 'P', 'Τ': 'T', 'Υ': 'Y', 'Χ': 'X', 'ϲ': 'c', 'ϳ': 'j', 'ԍ': 'G',
	// Armenian
	'օ': 'o', 'հ': 'h', 'ո': 'n', 'ց': 'g', 'զ': 'q',
	// Latin extensions that look like plain ASCII letters
	'ı': 'i', 'ȷ': 'j', 'ɑ': 'a', 'ʏ': 'y', 'ℓ': 'l', 'ǀ': 'l', 'ʟ': 'L',
	// Letterlike symbols
	'K': 'K', 'Å': 'A', 'ℎ': 'h', 'ℯ': 'e', 'ℊ': 'g', 'ℴ': 'o',
}

// Fold returns the ASCII letter or digit r impersonates, and whether it is one: a
// confusable letter of another script, a fullwidth form (U+FF01–U+FF5E), or a
// mathematical alphanumeric (U+1D400–U+1D7FF). ASCII itself is not folded.
func Fold(r rune) (rune, bool) {
	switch {
	case r < utf8.RuneSelf:
		return r, false
	case r >= 0xFF01 && r <= 0xFF5E:
		return r - 0xFF01 + '!', true
	case r == 0x3002 || r == 0xFF61: // ideographic and halfwidth full stops
		return '.', true
	case r >= 0x1D400 && r <= 0x1D6A3: // bold, italic, script, … A–Z a–z
		k := (r - 0x1D400) % 52
		if k < 26 {
			return 'A' + k, true
		}
		return 'a' + k - 26, true
	case r >= 0x1D7CE && r <= 0x1D7FF: // mathematical digits
		return '0' + (r-0x1D7CE)%10, true
	}
	if a, ok := confusables[r]; ok {
		return a, true
	}
	return r, false
}

// Skeleton is how a text reads once what cannot be seen is dropped and lookalikes are
// folded: hidden characters (invisible, bidi, tags, variation selectors, controls
// other than whitespace) removed, each Fold-able character replaced by its ASCII
// letter, everything lower-cased. Two names with one skeleton look the same to a
// person and to a model; internal/names compares published names by it.
func Skeleton(s string) string {
	ascii := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= utf8.RuneSelf || c < 0x20 || c == 0x7F {
			ascii = false
			break
		}
	}
	if ascii {
		return strings.ToLower(s)
	}
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		if r == '\t' || r == '\n' || r == '\r' {
			b.WriteRune(r)
			continue
		}
		if hidden(r) {
			continue
		}
		if a, ok := Fold(r); ok {
			r = a
		}
		b.WriteRune(unicode.ToLower(r))
	}
	return b.String()
}
