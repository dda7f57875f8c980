package textscan

import (
	"fmt"
	"unicode"
)

// class is what a character is to the scanner. Most characters are classNone.
type class uint8

const (
	classNone class = iota
	// classControl: C0 controls other than tab, LF and CR; DEL; C1 controls. ESC and
	// CSI can rewrite what a terminal shows (toolgate details prints these texts).
	classControl
	// classBidi: embeddings, overrides and isolates (U+202A–U+202E, U+2066–U+2069),
	// which reorder how text is displayed ("Trojan Source").
	classBidi
	// classBidiMark: LRM, RLM, ALM: invisible direction marks.
	classBidiMark
	// classInvisible: zero-width and other characters that render as nothing (the
	// list in invisibleNames, plus every other format character, category Cf).
	classInvisible
	// classTag: Unicode tag characters U+E0000–U+E007F, invisible copies of ASCII
	// (a whole hidden sentence can ride in them).
	classTag
	// classVariation: variation selectors U+FE00–U+FE0F and U+E0100–U+E01EF. One after
	// an emoji or a CJK ideograph is ordinary; a run of them encodes bytes.
	classVariation
	// classPrivate: private-use characters, which render as whatever a font decides.
	classPrivate
)

// invisibleNames names the characters that draw nothing and have no business in a
// tool's text, beyond the format characters unicode.Cf covers anyway.
var invisibleNames = map[rune]string{
	0x00AD:  "SOFT HYPHEN",
	0x034F:  "COMBINING GRAPHEME JOINER",
	0x061C:  "ARABIC LETTER MARK",
	0x115F:  "HANGUL CHOSEONG FILLER",
	0x1160:  "HANGUL JUNGSEONG FILLER",
	0x17B4:  "KHMER VOWEL INHERENT AQ",
	0x17B5:  "KHMER VOWEL INHERENT AA",
	0x180E:  "MONGOLIAN VOWEL SEPARATOR",
	0x200B:  "ZERO WIDTH SPACE",
	0x200C:  "ZERO WIDTH NON-JOINER",
	0x200D:  "ZERO WIDTH JOINER",
	0x200E:  "LEFT-TO-RIGHT MARK",
	0x200F:  "RIGHT-TO-LEFT MARK",
	0x2028:  "LINE SEPARATOR",
	0x2029:  "PARAGRAPH SEPARATOR",
	0x202A:  "LEFT-TO-RIGHT EMBEDDING",
	0x202B:  "RIGHT-TO-LEFT EMBEDDING",
	0x202C:  "POP DIRECTIONAL FORMATTING",
	0x202D:  "LEFT-TO-RIGHT OVERRIDE",
	0x202E:  "RIGHT-TO-LEFT OVERRIDE",
	0x2060:  "WORD JOINER",
	0x2061:  "FUNCTION APPLICATION",
	0x2062:  "INVISIBLE TIMES",
	0x2063:  "INVISIBLE SEPARATOR",
	0x2064:  "INVISIBLE PLUS",
	0x2066:  "LEFT-TO-RIGHT ISOLATE",
	0x2067:  "RIGHT-TO-LEFT ISOLATE",
	0x2068:  "FIRST STRONG ISOLATE",
	0x2069:  "POP DIRECTIONAL ISOLATE",
	0x2800:  "BRAILLE PATTERN BLANK",
	0x3164:  "HANGUL FILLER",
	0xFEFF:  "ZERO WIDTH NO-BREAK SPACE (BOM)",
	0xFFA0:  "HALFWIDTH HANGUL FILLER",
	0xFFF9:  "INTERLINEAR ANNOTATION ANCHOR",
	0xFFFA:  "INTERLINEAR ANNOTATION SEPARATOR",
	0xFFFB:  "INTERLINEAR ANNOTATION TERMINATOR",
	0x1D173: "MUSICAL SYMBOL BEGIN BEAM",
	0x1D174: "MUSICAL SYMBOL END BEAM",
	0x1D175: "MUSICAL SYMBOL BEGIN TIE",
	0x1D176: "MUSICAL SYMBOL END TIE",
	0x1D177: "MUSICAL SYMBOL BEGIN SLUR",
	0x1D178: "MUSICAL SYMBOL END SLUR",
	0x1D179: "MUSICAL SYMBOL BEGIN PHRASE",
	0x1D17A: "MUSICAL SYMBOL END PHRASE",
}

func classify(r rune) class {
	switch {
	case r < 0x20:
		if r == '\t' || r == '\n' || r == '\r' {
			return classNone
		}
		return classControl
	case r < 0x7F:
		return classNone
	case r <= 0x9F:
		return classControl
	case r == 0x202A, r == 0x202B, r == 0x202C, r == 0x202D, r == 0x202E,
		r == 0x2066, r == 0x2067, r == 0x2068, r == 0x2069:
		return classBidi
	case r == 0x200E, r == 0x200F, r == 0x061C:
		return classBidiMark
	case r >= 0xE0000 && r <= 0xE007F:
		return classTag
	case r >= 0xFE00 && r <= 0xFE0F, r >= 0xE0100 && r <= 0xE01EF:
		return classVariation
	case r >= 0xE000 && r <= 0xF8FF, r >= 0xF0000 && r <= 0xFFFFD, r >= 0x100000 && r <= 0x10FFFD:
		return classPrivate
	}
	if _, ok := invisibleNames[r]; ok {
		return classInvisible
	}
	if unicode.Is(unicode.Cf, r) {
		return classInvisible
	}
	return classNone
}

// hidden reports whether r is dropped from text before phrases are matched: every
// character a reader cannot see, so "ig\u200bnore" still reads "ignore".
func hidden(r rune) bool {
	c := classify(r)
	return c != classNone && c != classPrivate && r != 0x2028 && r != 0x2029
}

// charName is how a finding names a character: "U+200B ZERO WIDTH SPACE".
func charName(r rune) string {
	if n, ok := invisibleNames[r]; ok {
		return fmt.Sprintf("U+%04X %s", r, n)
	}
	switch classify(r) {
	case classControl:
		switch r {
		case 0x1B:
			return "U+001B ESCAPE"
		case 0x9B:
			return "U+009B CONTROL SEQUENCE INTRODUCER"
		case 0x7F:
			return "U+007F DELETE"
		}
		return fmt.Sprintf("U+%04X (control character)", r)
	case classTag:
		return fmt.Sprintf("U+%04X (tag character)", r)
	case classVariation:
		if r < 0xE0100 {
			return fmt.Sprintf("U+%04X VARIATION SELECTOR-%d", r, r-0xFE00+1)
		}
		return fmt.Sprintf("U+%04X VARIATION SELECTOR-%d", r, r-0xE0100+17)
	case classPrivate:
		return fmt.Sprintf("U+%04X (private-use character)", r)
	}
	if unicode.Is(unicode.Cf, r) {
		return fmt.Sprintf("U+%04X (format character)", r)
	}
	// A lookalike or other visible character: its script says what it passes for.
	for _, sc := range []string{"Cyrillic", "Greek", "Armenian", "Cherokee", "Coptic", "Latin"} {
		if unicode.Is(unicode.Scripts[sc], r) {
			return fmt.Sprintf("U+%04X (%s letter)", r, sc)
		}
	}
	if unicode.IsLetter(r) {
		return fmt.Sprintf("U+%04X (letter)", r)
	}
	return fmt.Sprintf("U+%04X (character)", r)
}

// pictographic reports, roughly and without tables, whether r is an emoji or a symbol
// that joins into emoji sequences: the places a zero-width joiner or a variation
// selector is ordinary.
func pictographic(r rune) bool {
	return r >= 0x1F000 && r <= 0x1FAFF || r >= 0x2600 && r <= 0x27BF || r >= 0x2190 && r <= 0x21FF ||
		r >= 0x2B00 && r <= 0x2BFF || r >= 0x2300 && r <= 0x23FF || r == 0x00A9 || r == 0x00AE ||
		r >= 0x2100 && r <= 0x214F || r == 0x203C || r == 0x2049 || r >= 0x3030 && r <= 0x303D || r == 0x3297 || r == 0x3299 ||
		r >= 0xFE00 && r <= 0xFE0F // a VS16 before a joiner: "❤️‍🔥"
}

// joinsScript reports whether r is a letter or mark of a script that uses ZWJ/ZWNJ in
// ordinary writing (anything but Latin and ASCII: Arabic and Persian, the Indic
// scripts, …).
func joinsScript(r rune) bool {
	return r >= 0x0370 && (unicode.IsLetter(r) || unicode.IsMark(r)) && !unicode.Is(unicode.Latin, r)
}

// variationByte is the byte a variation selector stands for in the "emoji smuggling"
// encoding: VS1–VS16 are 0–15, VS17–VS256 are 16–255.
func variationByte(r rune) byte {
	if r < 0xE0100 {
		return byte(r - 0xFE00)
	}
	return byte(r - 0xE0100 + 16)
}
