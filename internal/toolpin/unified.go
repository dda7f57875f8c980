package toolpin

import (
	"fmt"
	"strings"

	"github.com/toolgate/toolgate/internal/textscan"
)

// op is one line of an edit script.
type op struct {
	kind byte // ' ' kept, '-' removed, '+' added
	line string
}

// unified renders the line diff of a and b with two lines of context, every line
// escaped and cut to diffLineRunes, at most MaxDiffLines lines. truncated reports a
// cut, or an edit too large to diff line by line.
func unified(a, b []string) (string, bool) {
	ops, truncated := lineDiff(a, b)
	const context = 2
	keep := make([]bool, len(ops))
	for i, o := range ops {
		if o.kind != ' ' {
			for j := max(0, i-context); j <= min(len(ops)-1, i+context); j++ {
				keep[j] = true
			}
		}
	}
	var out strings.Builder
	lines := 0
	ai, bi := 0, 0 // line numbers (0-based) in a and b at ops[i]
	advance := func(o op) {
		if o.kind != '+' {
			ai++
		}
		if o.kind != '-' {
			bi++
		}
	}
hunks:
	for i := 0; i < len(ops); {
		if !keep[i] {
			advance(ops[i])
			i++
			continue
		}
		j := i
		na, nb := 0, 0
		for ; j < len(ops) && keep[j]; j++ {
			if ops[j].kind != '+' {
				na++
			}
			if ops[j].kind != '-' {
				nb++
			}
		}
		hunk := []string{fmt.Sprintf("@@ -%d,%d +%d,%d @@", ai+1, na, bi+1, nb)}
		for _, o := range ops[i:j] {
			hunk = append(hunk, string(o.kind)+textscan.Escape(o.line, diffLineRunes))
			advance(o)
		}
		for _, l := range hunk {
			if lines >= MaxDiffLines {
				truncated = true
				break hunks
			}
			out.WriteString(l)
			out.WriteByte('\n')
			lines++
		}
		i = j
	}
	if truncated {
		out.WriteString("… (diff cut)\n")
	}
	return out.String(), truncated
}

// lineDiff is a shortest edit script from a to b (Myers' algorithm after trimming the
// common prefix and suffix). When more than maxEdits edits would be needed it gives
// up and returns all of a removed and all of b added, with whole true.
func lineDiff(a, b []string) (ops []op, whole bool) {
	pre := 0
	for pre < len(a) && pre < len(b) && a[pre] == b[pre] {
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	for _, l := range a[:pre] {
		ops = append(ops, op{' ', l})
	}
	mid, whole := myers(a[pre:len(a)-suf], b[pre:len(b)-suf])
	ops = append(ops, mid...)
	for _, l := range a[len(a)-suf:] {
		ops = append(ops, op{' ', l})
	}
	return ops, whole
}

func myers(a, b []string) ([]op, bool) {
	n, m := len(a), len(b)
	replaceAll := func() []op {
		out := make([]op, 0, n+m)
		for _, l := range a {
			out = append(out, op{'-', l})
		}
		for _, l := range b {
			out = append(out, op{'+', l})
		}
		return out
	}
	if n == 0 || m == 0 {
		return replaceAll(), false
	}
	limit := min(n+m, maxEdits)
	off := limit + 1
	v := make([]int, 2*limit+3)
	// trace[d] holds v[k] for k in [-(d-1), d-1] as it was before step d.
	var trace [][]int
	for d := 0; d <= limit; d++ {
		if d == 0 {
			trace = append(trace, nil)
		} else {
			trace = append(trace, append([]int(nil), v[off-d+1:off+d]...))
		}
		for k := -d; k <= d; k += 2 {
			var x int
			if k == -d || k != d && v[off+k-1] < v[off+k+1] {
				x = v[off+k+1]
			} else {
				x = v[off+k-1] + 1
			}
			y := x - k
			for x < n && y < m && a[x] == b[y] {
				x, y = x+1, y+1
			}
			v[off+k] = x
			if x >= n && y >= m {
				return backtrack(a, b, trace), false
			}
		}
	}
	return replaceAll(), true
}

func backtrack(a, b []string, trace [][]int) []op {
	x, y := len(a), len(b)
	var rev []op
	for d := len(trace) - 1; d > 0; d-- {
		snap := trace[d]
		at := func(k int) int { return snap[k+d-1] }
		k := x - y
		prevK := k - 1
		if k == -d || k != d && at(k-1) < at(k+1) {
			prevK = k + 1
		}
		prevX := at(prevK)
		prevY := prevX - prevK
		for x > prevX && y > prevY {
			rev = append(rev, op{' ', a[x-1]})
			x, y = x-1, y-1
		}
		if x == prevX {
			rev = append(rev, op{'+', b[y-1]})
		} else {
			rev = append(rev, op{'-', a[x-1]})
		}
		x, y = prevX, prevY
	}
	for x > 0 && y > 0 {
		rev = append(rev, op{' ', a[x-1]})
		x, y = x-1, y-1
	}
	for i, j := 0, len(rev)-1; i < j; i, j = i+1, j-1 {
		rev[i], rev[j] = rev[j], rev[i]
	}
	return rev
}
