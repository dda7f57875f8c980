package protect

import (
	"path"
	"strings"
	"unicode"
	"unicode/utf8"
)

// compiled is an Entry split into folded elements.
type compiled struct {
	Entry
	elems []string
}

var compiledEntries = func() []compiled {
	out := make([]compiled, len(Entries))
	for i, e := range Entries {
		parts := strings.Split(e.Name, "/")
		for j, p := range parts {
			parts[j] = Fold(p)
		}
		out[i] = compiled{Entry: e, elems: parts}
	}
	return out
}()

// index finds the entries whose first element a path element can match without
// trying every entry: literal first elements through a map, the few with wildcards in a
// list, and 8.3 short names (only elements holding a "~") against all.
type index struct {
	literal map[string][]*compiled
	wild    []*compiled
	all     []*compiled
}

var entryIndex = func() *index {
	ix := &index{literal: map[string][]*compiled{}}
	for i := range compiledEntries {
		c := &compiledEntries[i]
		ix.all = append(ix.all, c)
		if strings.ContainsAny(c.elems[0], "*?[") {
			ix.wild = append(ix.wild, c)
		} else {
			ix.literal[c.elems[0]] = append(ix.literal[c.elems[0]], c)
		}
	}
	return ix
}()

// starts appends to buf every entry whose first element matches the folded element f
// (an entry may appear twice).
func (ix *index) starts(f string, buf []*compiled) []*compiled {
	buf = append(buf, ix.literal[f]...)
	for _, s := range connectSuffixes {
		if base, ok := strings.CutSuffix(f, s); ok && base != "" {
			buf = append(buf, ix.literal[Fold(base)]...)
		}
	}
	for _, c := range ix.wild {
		if elemMatch(c.elems[0], f) {
			buf = append(buf, c)
		}
	}
	if strings.IndexByte(f, '~') >= 0 {
		for _, c := range ix.all {
			if shortNameMatch(c.elems[0], f) {
				buf = append(buf, c)
			}
		}
	}
	return buf
}

// Match reports whether the clean, workspace-relative slash path rel is protected, and
// returns the protected path it lies in (its shortest protected prefix, spelt as in rel),
// which a grant must name or lie inside. "." and "" are not protected: the workspace as
// a whole is not a protected path, each file in it is checked on its own.
func Match(rel string) (root string, ok bool) {
	rel = path.Clean(rel)
	if rel == "." || rel == "" || rel == "/" {
		return "", false
	}
	elems := strings.Split(strings.TrimPrefix(rel, "/"), "/")
	folded := make([]string, len(elems))
	for i, e := range elems {
		folded[i] = Fold(e)
	}
	var buf []*compiled
	for i := range elems {
		n := 0
		buf = entryIndex.starts(folded[i], buf[:0])
		for _, c := range buf {
			if (!c.RootOnly || i == 0) && c.matchAt(folded, i) && (n == 0 || len(c.elems) < n) {
				n = len(c.elems)
			}
		}
		if n > 0 {
			return strings.Join(elems[:i+n], "/"), true
		}
	}
	return "", false
}

// IsProtected is Match without the root.
func IsProtected(rel string) bool {
	_, ok := Match(rel)
	return ok
}

// matchAt reports whether c's elements match folded[i:].
func (c compiled) matchAt(folded []string, i int) bool {
	if i+len(c.elems) > len(folded) {
		return false
	}
	for j, pat := range c.elems {
		if !elemMatch(pat, folded[i+j]) {
			return false
		}
	}
	return true
}

// elemMatch matches one folded path element against one folded entry element: as is,
// without a toolgate connect suffix, or as an 8.3 short name.
func elemMatch(pat, elem string) bool {
	if globMatch(pat, elem) {
		return true
	}
	for _, s := range connectSuffixes {
		if base, ok := strings.CutSuffix(elem, s); ok && base != "" && globMatch(pat, Fold(base)) {
			return true
		}
	}
	return shortNameMatch(pat, elem)
}

func globMatch(pat, elem string) bool {
	if !strings.ContainsAny(pat, "*?[") {
		return pat == elem
	}
	if lit := pat[1:]; pat[0] == '*' && !strings.ContainsAny(lit, "*?[") {
		return strings.HasSuffix(elem, lit) // "*.code-workspace", without path.Match's cost
	}
	ok, _ := path.Match(pat, elem)
	return ok
}

// Fold maps one path element to the form protected names are compared in, so that two
// spellings a file system might treat as the same name fold alike: default-ignorable
// code points (zero-width joiners, bidi marks, variation selectors, a BOM; HFS+ and the
// Linux casefold tables ignore some of them) are dropped, letters are case-folded
// (simple folding through the whole orbit, so the Kelvin sign is k and the long s is s,
// plus the full foldings that yield ASCII: ß → ss, ﬁ → fi, …), and trailing dots and
// spaces, which Windows, SMB and vfat drop, are removed. The result of an ASCII name is
// its lower case without trailing dots and spaces.
func Fold(elem string) string {
	if plainLower(elem) {
		return elem
	}
	var b strings.Builder
	b.Grow(len(elem))
	for i := 0; i < len(elem); {
		r, n := utf8.DecodeRuneInString(elem[i:])
		i += n
		switch {
		case r < utf8.RuneSelf:
			if 'A' <= r && r <= 'Z' {
				r += 'a' - 'A'
			}
			b.WriteRune(r)
		case r == utf8.RuneError && n == 1:
			b.WriteByte(elem[i-1]) // invalid UTF-8 stays as it is
		case ignorable(r):
		default:
			if s, ok := fullFold[r]; ok {
				b.WriteString(s)
				continue
			}
			b.WriteRune(foldRune(r))
		}
	}
	return strings.TrimRight(b.String(), ". ")
}

// plainLower reports whether Fold would return elem unchanged because it is lower-case
// ASCII that does not end in a dot or a space (almost every name in a tree).
func plainLower(elem string) bool {
	for i := 0; i < len(elem); i++ {
		if c := elem[i]; c >= utf8.RuneSelf || ('A' <= c && c <= 'Z') {
			return false
		}
	}
	return elem == "" || (elem[len(elem)-1] != '.' && elem[len(elem)-1] != ' ')
}

// fullFold are the Unicode full case foldings (CaseFolding.txt, status F) whose result
// is ASCII; the others cannot turn a name into an ASCII one.
var fullFold = map[rune]string{
	'ß': "ss", 'ẞ': "ss", 'ﬀ': "ff", 'ﬁ': "fi", 'ﬂ': "fl", 'ﬃ': "ffi", 'ﬄ': "ffl", 'ﬅ': "st", 'ﬆ': "st",
}

// foldRune returns one representative of r's simple case-folding orbit: its ASCII
// member in lower case (so the Kelvin sign is k), else the lower case of its smallest
// member. Every member of an orbit gets the same one.
func foldRune(r rune) rune {
	low := r
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		if f < utf8.RuneSelf {
			return unicode.ToLower(f)
		}
		low = min(low, f)
	}
	return unicode.ToLower(low)
}

func ignorable(r rune) bool {
	return unicode.Is(unicode.Cf, r) || unicode.Is(unicode.Other_Default_Ignorable_Code_Point, r) ||
		unicode.Is(unicode.Variation_Selector, r)
}

// shortNameMatch reports whether elem is the 8.3 short name (vfat, and NTFS without
// its hashed forms) of a name matching pat: "git~1" for ".git", "vscode~1" for
// ".vscode", "mcp~1.jso" for ".mcp.json". Linux's vfat resolves short names on lookup,
// so "GIT~1/config" opens ".git/config" there. The short name is the long name without
// leading dots and spaces, its stem cut so that stem, "~" and the number fit in eight
// characters, and the first three characters of its extension.
func shortNameMatch(pat, elem string) bool {
	tilde := strings.LastIndexByte(elem, '~')
	if tilde < 1 || tilde > 6 {
		return false
	}
	base, rest := elem[:tilde], elem[tilde+1:]
	digits, ext, _ := strings.Cut(rest, ".")
	if digits == "" || len(base)+1+len(digits) > 8 || strings.Trim(digits, "0123456789") != "" || len(ext) > 3 {
		return false
	}
	long := strings.TrimLeft(pat, ". ")
	stem, pext := long, ""
	if j := strings.LastIndexByte(long, '.'); j >= 0 {
		stem, pext = long[:j], long[j+1:]
	}
	stem = strings.NewReplacer(".", "", " ", "").Replace(stem)
	if stem != "*" && stem[:min(len(stem), 7-len(digits))] != base {
		return false
	}
	return ext == pext[:min(len(pext), 3)]
}
