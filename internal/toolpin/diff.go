package toolpin

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/toolgate/toolgate/internal/canonjson"
	"github.com/toolgate/toolgate/internal/textscan"
)

// Bounds of a diff. A changed definition can be a megabyte of new text; what a person
// is shown must stay readable and what is stored must stay small.
const (
	// MaxDiffPaths bounds the changed JSON Pointers listed per member.
	MaxDiffPaths = 32
	// MaxDiffLines bounds the unified diff lines per member.
	MaxDiffLines = 120
	// MaxDiffBytes bounds the rendered diff (String) as a whole.
	MaxDiffBytes = 16 << 10
	// diffLineRunes bounds one shown line; longer lines are cut with "…".
	diffLineRunes = 160
	// segmentRunes is the length over which a sentence is split for diffing, so that a
	// change inside a one-line, 50 KiB description shows as one short hunk.
	segmentRunes = 120
	// maxEdits bounds the diff algorithm's work (Myers' D). Past it, the member is
	// shown as all removed and all added.
	maxEdits = 500
	// excerptRunes bounds the old and new values shown for a path.
	excerptRunes = 100
)

// Change is what happened to a member or a value.
type Change string

// The changes.
const (
	MemberAdded   Change = "added"
	MemberRemoved Change = "removed"
	MemberChanged Change = "changed"
)

// Diff is the difference between two definitions, member by member.
type Diff struct {
	Fields []FieldDiff `json:"fields"`
}

// FieldDiff is how one member of the tool object differs.
type FieldDiff struct {
	// Field is the member's name ("description", "inputSchema", "annotations", …).
	Field  string `json:"field"`
	Change Change `json:"change"`
	// Paths are the values that differ inside the member (its JSON Pointers relative
	// to the tool object), at most MaxDiffPaths; MorePaths counts the rest.
	Paths     []PathChange `json:"paths,omitempty"`
	MorePaths int          `json:"more_paths,omitempty"`
	// Unified is a unified diff of the member's text: a string member's text itself,
	// split into lines and sentences; any other member's indented canonical JSON. Every
	// line is escaped (textscan.Escape) and at most MaxDiffLines are kept.
	Unified string `json:"unified"`
	// Truncated: Unified was cut to MaxDiffLines (or the edit was too large to diff
	// line by line and is shown whole).
	Truncated bool `json:"truncated,omitempty"`
}

// PathChange is one value that differs. Old and New are JSON texts, escaped and
// bounded (a long string shows the part around the first difference); "" means absent.
type PathChange struct {
	Pointer string `json:"pointer"`
	Old     string `json:"old,omitempty"`
	New     string `json:"new,omitempty"`
}

// memberOrder is the order members are reported in: the ones people read first.
var memberOrder = []string{"name", "title", "description", "inputSchema", "outputSchema", "annotations"}

// Compare diffs two canonical definitions (Pin.Canonical, Definition.Canonical).
func Compare(oldCanonical, newCanonical []byte) (Diff, error) {
	lim := canonjson.Limits{MaxBytes: MaxDefinitionBytes, MaxDepth: MaxDepth}
	a, err := canonjson.Parse(oldCanonical, lim)
	if err != nil {
		return Diff{}, fmt.Errorf("old definition: %w", err)
	}
	b, err := canonjson.Parse(newCanonical, lim)
	if err != nil {
		return Diff{}, fmt.Errorf("new definition: %w", err)
	}
	if a.Kind != canonjson.Object || b.Kind != canonjson.Object {
		return Diff{}, fmt.Errorf("definitions must be objects")
	}
	var names []string
	seen := map[string]bool{}
	for _, n := range memberOrder {
		names, seen[n] = append(names, n), true
	}
	var rest []string
	for _, v := range []*canonjson.Value{&a, &b} {
		for _, m := range v.Members {
			if !seen[m.Key] {
				rest, seen[m.Key] = append(rest, m.Key), true
			}
		}
	}
	slices.Sort(rest)
	var d Diff
	for _, n := range append(names, rest...) {
		ov, nv := a.Get(n), b.Get(n)
		if ov == nil && nv == nil || ov != nil && nv != nil && ov.Equal(nv) {
			continue
		}
		fd := FieldDiff{Field: n, Change: MemberChanged}
		switch {
		case ov == nil:
			fd.Change = MemberAdded
		case nv == nil:
			fd.Change = MemberRemoved
		}
		var paths []PathChange
		more := 0
		diffValues(ov, nv, canonjson.Path{n}, &paths, &more)
		fd.Paths, fd.MorePaths = paths, more
		fd.Unified, fd.Truncated = unified(memberLines(ov), memberLines(nv))
		d.Fields = append(d.Fields, fd)
	}
	return d, nil
}

// diffValues records the pointers under path where a and b differ (nil: absent).
func diffValues(a, b *canonjson.Value, path canonjson.Path, out *[]PathChange, more *int) {
	switch {
	case a != nil && b != nil && a.Equal(b):
		return
	case a != nil && b != nil && a.Kind == canonjson.Object && b.Kind == canonjson.Object:
		i, j := 0, 0
		for i < len(a.Members) || j < len(b.Members) {
			switch {
			case j >= len(b.Members) || i < len(a.Members) && a.Members[i].Key < b.Members[j].Key:
				diffValues(&a.Members[i].Value, nil, append(path, a.Members[i].Key), out, more)
				i++
			case i >= len(a.Members) || a.Members[i].Key > b.Members[j].Key:
				diffValues(nil, &b.Members[j].Value, append(path, b.Members[j].Key), out, more)
				j++
			default:
				diffValues(&a.Members[i].Value, &b.Members[j].Value, append(path, a.Members[i].Key), out, more)
				i, j = i+1, j+1
			}
		}
		return
	case a != nil && b != nil && a.Kind == canonjson.Array && b.Kind == canonjson.Array:
		for k := 0; k < max(len(a.Elems), len(b.Elems)); k++ {
			var x, y *canonjson.Value
			if k < len(a.Elems) {
				x = &a.Elems[k]
			}
			if k < len(b.Elems) {
				y = &b.Elems[k]
			}
			diffValues(x, y, append(path, fmt.Sprint(k)), out, more)
		}
		return
	}
	if len(*out) >= MaxDiffPaths {
		*more++
		return
	}
	pc := PathChange{Pointer: path.String()}
	if a != nil && b != nil && a.Kind == canonjson.String && b.Kind == canonjson.String {
		pc.Old, pc.New = aroundDifference(a.Text, b.Text)
	} else {
		pc.Old, pc.New = shown(a), shown(b)
	}
	*out = append(*out, pc)
}

// shown is a value's canonical JSON, escaped and bounded; "" for absent.
func shown(v *canonjson.Value) string {
	if v == nil {
		return ""
	}
	return textscan.Escape(string(canonjson.Canonical(v)), excerptRunes)
}

// aroundDifference shows two strings from a little before their first difference, so
// a one-word change at the end of a long text is visible.
func aroundDifference(a, b string) (string, string) {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	for i > 0 && i < len(a) && !utf8.RuneStart(a[i]) {
		i-- // a[:i] == b[:i], so a rune boundary of a is one of b
	}
	start := i
	for k := 0; k < 20 && start > 0; k++ {
		_, w := utf8.DecodeLastRuneInString(a[:start])
		start -= w
	}
	show := func(s string) string {
		q := string(canonjson.AppendString(nil, s[min(start, len(s)):]))
		if start > 0 {
			q = `"…` + q[1:]
		}
		return textscan.Escape(q, excerptRunes)
	}
	return show(a), show(b)
}

// memberLines is the text a member's unified diff is made of.
func memberLines(v *canonjson.Value) []string {
	switch {
	case v == nil:
		return nil
	case v.Kind == canonjson.String:
		return segments(v.Text)
	default:
		return strings.Split(string(canonjson.Indent(v)), "\n")
	}
}

// segments splits text into lines, lines into sentences, and sentences longer than
// segmentRunes at a space near that length: a change then touches only its own piece.
func segments(text string) []string {
	var out []string
	for _, line := range strings.Split(text, "\n") {
		if line == "" {
			out = append(out, "")
			continue
		}
		for line != "" {
			piece := line[:sentenceEnd(line)]
			if utf8.RuneCountInString(piece) > segmentRunes {
				piece = line[:wordCut(line, segmentRunes)]
			}
			out = append(out, piece)
			line = line[len(piece):]
		}
	}
	return out
}

// sentenceEnd returns the byte index just after the first '.', '!' or '?' that is
// followed by a space (the space starts the next piece, so a sentence appended at the
// end leaves the last one unchanged), or len(s).
func sentenceEnd(s string) int {
	for i := 0; i+1 < len(s); i++ {
		if (s[i] == '.' || s[i] == '!' || s[i] == '?') && s[i+1] == ' ' {
			return i + 1
		}
	}
	return len(s)
}

// wordCut returns a byte index at most n runes into s, after the last space there if
// there is one in its second half.
func wordCut(s string, n int) int {
	end, count, lastSpace := 0, 0, -1
	for i, r := range s {
		if count == n {
			end = i
			break
		}
		if r == ' ' {
			lastSpace = i + 1
		}
		count++
		end = i + utf8.RuneLen(r)
	}
	if lastSpace > end/2 {
		return lastSpace
	}
	if end == 0 {
		_, w := utf8.DecodeRuneInString(s)
		return w
	}
	return end
}

// Summary is the diff in one line: which members changed.
func (d Diff) Summary() string {
	if len(d.Fields) == 0 {
		return "no difference"
	}
	var parts []string
	for _, f := range d.Fields {
		parts = append(parts, textscan.Escape(f.Field, 64)+" "+string(f.Change))
	}
	return strings.Join(parts, ", ")
}

// String renders the diff for a person: per member, the changed paths with old and new
// values, then the unified diff. At most MaxDiffBytes.
func (d Diff) String() string {
	var b strings.Builder
	for _, f := range d.Fields {
		fmt.Fprintf(&b, "%s %s\n", textscan.Escape(f.Field, 64), f.Change)
		for _, p := range f.Paths {
			old, nw := p.Old, p.New
			if old == "" {
				old = "(absent)"
			}
			if nw == "" {
				nw = "(absent)"
			}
			fmt.Fprintf(&b, "  %s: %s → %s\n", textscan.Escape(p.Pointer, 120), old, nw)
		}
		if f.MorePaths > 0 {
			fmt.Fprintf(&b, "  … and %d more changed values\n", f.MorePaths)
		}
		b.WriteString(f.Unified)
		if b.Len() > MaxDiffBytes {
			break
		}
	}
	s := b.String()
	if len(s) > MaxDiffBytes {
		cut := MaxDiffBytes
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "\n… (diff cut at " + fmt.Sprint(MaxDiffBytes) + " bytes)\n"
	}
	return s
}
