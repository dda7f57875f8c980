package localtools

import (
	"fmt"
	"strconv"
	"strings"
)

// filePatch is one file's part of a unified diff.
type filePatch struct {
	oldName, newName string // as written, prefixes stripped; "" for /dev/null
	hunks            []hunk
}

func (fp *filePatch) target() string {
	if fp.newName != "" {
		return fp.newName
	}
	return fp.oldName
}

type hunk struct {
	oldStart, oldCount int
	newStart, newCount int
	lines              []hunkLine
	oldNoNL, newNoNL   bool // "\ No newline at end of file" on that side
}

type hunkLine struct {
	op   byte // ' ', '-', '+'
	text string
}

// Limits on what a patch may contain, so a hostile patch costs bounded work.
const (
	maxPatchBytes = 4 << 20
	maxPatchFiles = 256
)

// parsePatch reads a unified diff (plain `diff -u` or `git diff` output). Git extended
// headers that only describe modes and indexes are skipped; renames, copies and binary
// patches are refused, since applying them only partly would be worse than refusing.
func parsePatch(text string) ([]*filePatch, error) {
	if len(text) > maxPatchBytes {
		return nil, fmt.Errorf("the patch is %d bytes; at most %d", len(text), maxPatchBytes)
	}
	if strings.IndexByte(text, 0) >= 0 {
		return nil, fmt.Errorf("the patch contains a NUL byte")
	}
	lines := strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n")
	if n := len(lines); n > 0 && lines[n-1] == "" {
		lines = lines[:n-1]
	}
	var files []*filePatch
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		switch {
		case strings.HasPrefix(l, "rename from ") || strings.HasPrefix(l, "copy from ") ||
			strings.HasPrefix(l, "rename to ") || strings.HasPrefix(l, "copy to "):
			return nil, fmt.Errorf("line %d: renames and copies are not supported; patch the new file and delete the old one instead", i+1)
		case strings.HasPrefix(l, "GIT binary patch") || strings.HasPrefix(l, "Binary files "):
			return nil, fmt.Errorf("line %d: binary patches are not supported", i+1)
		case strings.HasPrefix(l, "--- ") && i+1 < len(lines) && strings.HasPrefix(lines[i+1], "+++ "):
			if len(files) == maxPatchFiles {
				return nil, fmt.Errorf("the patch touches more than %d files", maxPatchFiles)
			}
			fp := &filePatch{oldName: headerName(l[4:]), newName: headerName(lines[i+1][4:])}
			stripGitPrefixes(fp)
			if fp.oldName == "" && fp.newName == "" {
				return nil, fmt.Errorf("line %d: both sides are /dev/null", i+1)
			}
			i += 2
			for i < len(lines) && strings.HasPrefix(lines[i], "@@") {
				h, next, err := parseHunk(lines, i)
				if err != nil {
					return nil, err
				}
				fp.hunks = append(fp.hunks, h)
				i = next
			}
			if len(fp.hunks) == 0 && !(fp.oldName == "" || fp.newName == "") {
				return nil, fmt.Errorf("no hunks for %s", fp.target())
			}
			files = append(files, fp)
			i-- // the loop's i++ lands on the line after the last hunk
		case strings.HasPrefix(l, "@@"):
			return nil, fmt.Errorf("line %d: hunk without a ---/+++ file header", i+1)
		}
		// Anything else (diff --git, index, mode lines, commentary) is skipped.
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no file headers (---/+++ lines) found: give a unified diff")
	}
	return files, nil
}

// headerName takes the name from a ---/+++ line: up to a tab (a timestamp follows);
// "/dev/null" means the file does not exist on that side. Git quotes unusual names;
// those are unquoted.
func headerName(s string) string {
	if i := strings.IndexByte(s, '\t'); i >= 0 {
		s = s[:i]
	}
	s = strings.TrimRight(s, " ")
	if strings.HasPrefix(s, `"`) {
		if u, err := strconv.Unquote(s); err == nil {
			s = u
		}
	}
	if s == "/dev/null" {
		return ""
	}
	return s
}

// stripGitPrefixes removes git's a/ and b/ prefixes when the header uses them.
func stripGitPrefixes(fp *filePatch) {
	oldOK := fp.oldName == "" || strings.HasPrefix(fp.oldName, "a/")
	newOK := fp.newName == "" || strings.HasPrefix(fp.newName, "b/")
	if oldOK && newOK {
		fp.oldName = strings.TrimPrefix(fp.oldName, "a/")
		fp.newName = strings.TrimPrefix(fp.newName, "b/")
	}
}

func parseHunk(lines []string, i int) (hunk, int, error) {
	var h hunk
	hdr := lines[i]
	var err error
	h.oldStart, h.oldCount, h.newStart, h.newCount, err = parseHunkHeader(hdr)
	if err != nil {
		return h, 0, fmt.Errorf("line %d: %v", i+1, err)
	}
	i++
	oldSeen, newSeen := 0, 0
	var last byte
	for i < len(lines) && (oldSeen < h.oldCount || newSeen < h.newCount || strings.HasPrefix(lines[i], `\`)) {
		l := lines[i]
		if strings.HasPrefix(l, `\`) {
			switch last {
			case '-':
				h.oldNoNL = true
			case '+':
				h.newNoNL = true
			case ' ':
				h.oldNoNL, h.newNoNL = true, true
			default:
				return h, 0, fmt.Errorf("line %d: misplaced %q", i+1, l)
			}
			i++
			continue
		}
		op := byte(' ')
		text := ""
		if l != "" { // an empty line is a context line whose space was stripped
			op, text = l[0], l[1:]
		}
		switch op {
		case ' ':
			oldSeen++
			newSeen++
		case '-':
			oldSeen++
		case '+':
			newSeen++
		default:
			return h, 0, fmt.Errorf("line %d: unexpected %q inside a hunk (the hunk header promised more lines)", i+1, l)
		}
		if oldSeen > h.oldCount || newSeen > h.newCount {
			return h, 0, fmt.Errorf("line %d: the hunk has more lines than its header @@ -%d,%d +%d,%d @@ says",
				i+1, h.oldStart, h.oldCount, h.newStart, h.newCount)
		}
		h.lines = append(h.lines, hunkLine{op, text})
		last = op
		i++
	}
	if oldSeen != h.oldCount || newSeen != h.newCount {
		return h, 0, fmt.Errorf("the hunk %q ends early: the patch is cut short", hdr)
	}
	return h, i, nil
}

func parseHunkHeader(s string) (oldStart, oldCount, newStart, newCount int, err error) {
	rest, ok := strings.CutPrefix(s, "@@ -")
	if !ok {
		return 0, 0, 0, 0, fmt.Errorf("bad hunk header %q", s)
	}
	end := strings.Index(rest, " @@")
	if end < 0 {
		return 0, 0, 0, 0, fmt.Errorf("bad hunk header %q", s)
	}
	oldPart, newPart, ok := strings.Cut(rest[:end], " +")
	if !ok {
		return 0, 0, 0, 0, fmt.Errorf("bad hunk header %q", s)
	}
	parse := func(p string) (int, int, error) {
		a, b, has := strings.Cut(p, ",")
		start, err := strconv.Atoi(a)
		if err != nil || start < 0 || start > 1<<30 {
			return 0, 0, fmt.Errorf("bad hunk header %q", s)
		}
		count := 1
		if has {
			count, err = strconv.Atoi(b)
			if err != nil || count < 0 || count > 1<<30 {
				return 0, 0, fmt.Errorf("bad hunk header %q", s)
			}
		}
		return start, count, nil
	}
	if oldStart, oldCount, err = parse(oldPart); err != nil {
		return
	}
	newStart, newCount, err = parse(newPart)
	return
}

// text is a file as lines plus whether it ends with a newline.
type text struct {
	lines []string
	nl    bool
}

func splitText(s string) text {
	if s == "" {
		return text{nl: true}
	}
	nl := strings.HasSuffix(s, "\n")
	s = strings.TrimSuffix(s, "\n")
	return text{lines: strings.Split(s, "\n"), nl: nl}
}

func (t text) String() string {
	if len(t.lines) == 0 {
		return ""
	}
	s := strings.Join(t.lines, "\n")
	if t.nl {
		s += "\n"
	}
	return s
}

// apply applies every hunk to t or fails without changing anything. Context must match
// exactly; a hunk may sit at a different line than its header says (the file moved),
// and the nearest exact match is used.
//
// Placing a hunk away from its stated line is a search, and a hostile patch (a long
// context ending in a line found nowhere, against a long file of identical lines) can
// make that search cost lines × context comparisons: hours for inputs within the size
// limits. The search therefore has a budget of maxPatchCompares line comparisons for
// the whole patch; past it the patch is refused and nothing changes.
func apply(name string, t text, hunks []hunk) (text, error) {
	budget := maxPatchCompares
	return applyBudget(name, t, hunks, &budget)
}

// maxPatchCompares bounds the line comparisons one patch may spend placing its hunks
// (well under a second); a patch whose headers give the real line numbers needs about
// one comparison per context line.
const maxPatchCompares = 1 << 25

// applyBudget is apply drawing on a budget shared by every file of one patch.
func applyBudget(name string, t text, hunks []hunk, budget *int) (text, error) {
	out := text{nl: t.nl}
	cursor := 0 // next unconsumed line of t
	delta := 0
	for n, h := range hunks {
		var old, neu []string
		for _, l := range h.lines {
			if l.op != '+' {
				old = append(old, l.text)
			}
			if l.op != '-' {
				neu = append(neu, l.text)
			}
		}
		want := h.oldStart - 1 + delta
		if h.oldCount == 0 {
			want = h.oldStart + delta // "@@ -5,0" inserts after line 5
		}
		pos := findBlock(t.lines, old, want, cursor, budget)
		if pos == errBudget {
			return text{}, fmt.Errorf("hunk %d of %s could not be placed: searching for its context took more than %d line comparisons; give the hunk's real line numbers", n+1, name, maxPatchCompares)
		}
		if pos < 0 {
			return text{}, fmt.Errorf("hunk %d of %s does not apply: %s", n+1, name, mismatch(t.lines, old, want))
		}
		out.lines = append(out.lines, t.lines[cursor:pos]...)
		out.lines = append(out.lines, neu...)
		cursor = pos + len(old)
		delta += len(neu) - len(old)
		if cursor == len(t.lines) {
			if h.oldNoNL && t.nl && len(old) > 0 {
				return text{}, fmt.Errorf("hunk %d of %s does not apply: it expects no newline at the end of the file, but there is one", n+1, name)
			}
			out.nl = !h.newNoNL
		}
	}
	out.lines = append(out.lines, t.lines[cursor:]...)
	return out, nil
}

// errBudget is findBlock's answer when the comparison budget ran out.
const errBudget = -2

// findBlock returns where old occurs in lines at or after min, nearest to want, or -1;
// errBudget when *budget line comparisons were not enough to decide.
func findBlock(lines, old []string, want, min int, budget *int) int {
	// Clamp, so a header claiming line 10^9 of a ten-line file costs ten probes, not 10^9.
	if want > len(lines) {
		want = len(lines)
	}
	if want < min {
		want = min
	}
	match := func(p int) bool {
		if p < min || p+len(old) > len(lines) {
			return false
		}
		for i, s := range old {
			*budget--
			if lines[p+i] != s {
				return false
			}
		}
		return true
	}
	for d := 0; want-d >= min || want+d <= len(lines); d++ {
		if *budget <= 0 {
			return errBudget
		}
		if match(want + d) {
			return want + d
		}
		if d > 0 && match(want-d) {
			return want - d
		}
	}
	return -1
}

func mismatch(lines, old []string, want int) string {
	if len(old) == 0 {
		return fmt.Sprintf("line %d is past the end of the file (%d lines)", want, len(lines))
	}
	for i, s := range old {
		p := want + i
		if p < 0 || p >= len(lines) {
			return fmt.Sprintf("expected %q at line %d, but the file has only %d lines", s, p+1, len(lines))
		}
		if lines[p] != s {
			return fmt.Sprintf("expected %q at line %d, found %q (and no exact match elsewhere)", s, p+1, lines[p])
		}
	}
	return "its context was not found"
}
