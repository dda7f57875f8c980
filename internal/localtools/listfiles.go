package localtools

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"unicode"
	"unicode/utf8"

	"github.com/toolgate/toolgate/internal/kernel"
	"github.com/toolgate/toolgate/internal/workspace"
)

// list_files caps.
const (
	DefaultListDepth   = 3
	MaxListDepth       = 32
	DefaultListEntries = 1000
	MaxListEntries     = 10000
	// maxVisited bounds the directory entries read (matching or not), so a walk of a
	// huge tree, or a glob that matches nothing in one, still ends: reading through
	// os.Root costs an lstat per entry, about 2.4 µs on tmpfs. Reading costs no memory
	// beyond the caps (lister), so the bound is set where a directory of a million
	// entries is still listed whole, in order.
	maxVisited = 1 << 20
)

var listFilesSchema = mustJSON(map[string]any{
	"$schema":              "https://json-schema.org/draft/2020-12/schema",
	"type":                 "object",
	"additionalProperties": false,
	"properties": map[string]any{
		"path": map[string]any{"type": "string", "minLength": 1, "maxLength": 4096,
			"description": "Directory to list, relative to the workspace root. Default \".\"."},
		"pattern": map[string]any{"type": "string", "minLength": 1, "maxLength": 1024,
			"description": "Glob over paths relative to `path`: * and ? within a name, [abc] classes, ** for any number of directories (e.g. \"**/*.go\")."},
		"max_depth": map[string]any{"type": "integer", "minimum": 1, "maximum": MaxListDepth,
			"description": fmt.Sprintf("How many directory levels below `path` to descend. Default %d.", DefaultListDepth)},
		"max_entries": map[string]any{"type": "integer", "minimum": 1, "maximum": MaxListEntries,
			"description": fmt.Sprintf("Most entries to return. Default %d.", DefaultListEntries)},
	},
})

func listFilesTool(ws *workspace.Workspace) *kernel.Tool {
	return &kernel.Tool{
		ID:    "local.list_files",
		Title: "List files",
		Description: "List files and directories in the workspace (directories end with /, symbolic " +
			"links show their target and are never followed). Optional glob pattern; depth and entry " +
			"caps; the answer says when it was truncated.",
		InputSchema: listFilesSchema,
		Annotations: kernel.Annotations{ReadOnly: true, Idempotent: true, OpenWorld: boolp(false)},
		Source:      "toolgate",
		Access: func(args map[string]any) (kernel.Access, error) {
			p, _, err := argString(args, "path")
			if err != nil {
				return kernel.Access{}, err
			}
			if p == "" {
				p = "."
			}
			return readAccess(ws, p)
		},
		Run: func(ctx context.Context, call *kernel.Call) (*kernel.Output, error) {
			return listFiles(ctx, ws, call.Args)
		},
	}
}

func listFiles(ctx context.Context, ws *workspace.Workspace, args map[string]any) (*kernel.Output, error) {
	p, _, err := argString(args, "path")
	if err != nil {
		return nil, err
	}
	if p == "" {
		p = "."
	}
	pattern, hasPattern, err := argString(args, "pattern")
	if err != nil {
		return nil, err
	}
	if hasPattern {
		if err := checkGlob(pattern); err != nil {
			return nil, kernel.Failed(kernel.CodeInvalidArguments, "pattern %q: %v", pattern, err)
		}
	}
	depth, ok, err := argInt(args, "max_depth")
	if err != nil {
		return nil, err
	}
	if !ok {
		depth = DefaultListDepth
	}
	maxEntries, ok, err := argInt(args, "max_entries")
	if err != nil {
		return nil, err
	}
	if !ok {
		maxEntries = DefaultListEntries
	}
	if depth < 1 || depth > MaxListDepth || maxEntries < 1 || maxEntries > MaxListEntries {
		return nil, kernel.Failed(kernel.CodeInvalidArguments, "max_depth must be 1…%d and max_entries 1…%d", MaxListDepth, MaxListEntries)
	}
	rel, err := ws.Rel(p)
	if err != nil {
		return nil, err
	}
	fi, err := ws.Root().Stat(rel)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, kernel.Failed(kernel.CodeToolFailed, "%s does not exist", rel)
		}
		return nil, kernel.Failed(kernel.CodeToolFailed, "listing %s: %v", rel, stripRoot(err))
	}
	if !fi.IsDir() {
		return nil, kernel.Failed(kernel.CodeToolFailed, "%s is not a directory", rel)
	}
	w := &lister{ctx: ctx, ws: ws, rel: rel, depth: int(depth), maxEntries: int(maxEntries),
		hasPattern: hasPattern, patSegs: strings.Split(pattern, "/"), globBudget: maxGlobCost}
	if err := w.walk(rel, "", 1); err != nil && !errors.Is(err, errStopListing) {
		if ctx.Err() != nil {
			return nil, kernel.Failed(kernel.CodeTimeout, "listing %s was cancelled", rel)
		}
		return nil, kernel.Failed(kernel.CodeToolFailed, "listing %s: %v", rel, stripRoot(err))
	}
	entries, globSpent, truncated, tooMany, deeper, crowded := w.entries, w.globSpent, w.truncated, w.tooMany, w.deeper, w.crowded
	var b strings.Builder
	for _, e := range entries {
		b.WriteString(e)
		b.WriteByte('\n')
	}
	if len(entries) == 0 {
		b.WriteString("[no entries]\n")
	}
	switch {
	case globSpent:
		fmt.Fprintf(&b, "[truncated: matching the pattern became too costly (long literal runs between ** segments against long names) and the listing stopped; narrow path or simplify the pattern]\n")
	case truncated:
		fmt.Fprintf(&b, "[truncated: stopped at %d entries (max_entries); narrow path or pattern, or raise max_entries up to %d]\n", maxEntries, MaxListEntries)
	case tooMany:
		fmt.Fprintf(&b, "[truncated: stopped after reading %d directory entries; narrow path or pattern]\n", maxVisited)
	case crowded:
		fmt.Fprintf(&b, "[truncated: a directory held more non-matching subdirectories than one listing keeps in order; narrow path or pattern]\n")
	case deeper:
		fmt.Fprintf(&b, "[depth limit: directories deeper than %d levels were not listed; raise max_depth to see more]\n", depth)
	}
	return &kernel.Output{Text: b.String()}, nil
}

// errStopListing ends the walk once a cap is reached; what was listed is kept.
var errStopListing = errors.New("listing stopped")

// readDirChunk is how many entries one ReadDir call returns. A directory is read in
// chunks of this many rather than whole, so a directory of a million entries costs
// no more memory than the listing can show.
const readDirChunk = 1024

// lister walks one list_files call depth first, in byte order of names within each
// directory (what fs.WalkDir would produce), with memory bounded by the caps rather
// than by directory sizes: of each directory it keeps only the candidates (matching
// entries, and subdirectories it will descend into) that could still be listed — the
// smallest names, at most as many as there are free output slots (plus readDirChunk
// with a pattern), in a max-heap — and drops the rest as it reads. Whatever it lists
// is therefore exactly a prefix of the whole-directory walk. Without a pattern every
// candidate takes a slot, so a drop only ever coincides with the entry cap; with one,
// a directory crowded with non-matching subdirectories ends the listing with a note
// saying so.
type lister struct {
	ctx               context.Context
	ws                *workspace.Workspace
	rel               string
	depth, maxEntries int
	hasPattern        bool
	patSegs           []string
	globBudget        int64

	visited int
	entries []string
	// Why the listing ended early, if it did.
	globSpent, truncated, tooMany, deeper, crowded bool
}

// candidate is one entry of a directory kept for listing or descending.
type candidate struct {
	d     fs.DirEntry
	match bool
}

// candidates is a max-heap by name: the root is the largest name kept, the first to
// give way to a smaller one.
type candidates []candidate

func (h candidates) Len() int           { return len(h) }
func (h candidates) Less(i, j int) bool { return h[i].d.Name() > h[j].d.Name() }
func (h candidates) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *candidates) Push(x any)        { *h = append(*h, x.(candidate)) }
func (h *candidates) Pop() any {
	old := *h
	c := old[len(old)-1]
	*h = old[:len(old)-1]
	return c
}

// walk lists the directory dir (a path under the root; sub is the same relative to
// the listed directory, "" for the listed directory itself) at depth level.
func (w *lister) walk(dir, sub string, level int) error {
	var f *os.File
	var err error
	if sub == "" {
		f, err = w.ws.Root().Open(dir) // the listed directory may be reached through a link inside
	} else {
		// Never follow a link: an entry that was a directory when its parent was read
		// and is a link now is reported unreadable.
		f, err = w.ws.Root().OpenFile(dir, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW, 0)
	}
	if err != nil {
		return w.unreadable(sub, err)
	}
	kept, dropped, stop, err := w.read(f, sub, level)
	f.Close()
	if err != nil {
		if errors.Is(err, errStopListing) || w.ctx.Err() != nil {
			return err
		}
		if rerr := w.unreadable(sub, err); rerr != nil {
			return rerr
		}
	}
	sort.Slice(kept, func(i, j int) bool { return kept[i].d.Name() < kept[j].d.Name() })
	for _, c := range kept {
		childSub := c.d.Name()
		if sub != "" {
			childSub = sub + "/" + childSub
		}
		childDir := path.Join(dir, c.d.Name())
		if c.match {
			if len(w.entries) >= w.maxEntries {
				w.truncated = true
				return errStopListing
			}
			w.entries = append(w.entries, describe(w.ws, childDir, childSub, c.d))
		}
		if !stop && c.d.IsDir() && level < w.depth {
			if err := w.walk(childDir, childSub, level+1); err != nil {
				return err
			}
		}
	}
	if stop {
		return errStopListing
	}
	if dropped {
		// Everything dropped sorts after everything kept, so the listing so far is
		// exactly what a whole-directory walk would have produced; it cannot go on
		// without the dropped entries.
		if len(w.entries) >= w.maxEntries {
			w.truncated = true
		} else {
			w.crowded = true
		}
		return errStopListing
	}
	return nil
}

// read reads the open directory f in chunks and returns the candidates worth
// keeping (see lister), whether any candidate was dropped for want of room, and
// whether the walk must stop after these (the entry budget ran out).
func (w *lister) read(f *os.File, sub string, level int) (kept candidates, dropped, stop bool, err error) {
	// Without a pattern every candidate takes an output slot, so the free slots are
	// exactly the room needed. With one, subdirectories that do not match take none;
	// a chunk's worth of extra room keeps them from crowding out matches in all but
	// directories with thousands of such subdirectories.
	room := w.maxEntries - len(w.entries)
	if w.hasPattern {
		room += readDirChunk
	}
	for {
		if err := w.ctx.Err(); err != nil {
			return nil, false, false, err
		}
		ds, rerr := f.ReadDir(readDirChunk)
		for _, d := range ds {
			w.visited++
			if w.visited > maxVisited {
				w.tooMany = true
				return kept, dropped, true, nil
			}
			isDir := d.IsDir()
			descend := isDir && level < w.depth
			if isDir && !descend {
				w.deeper = true
			}
			match := true
			if w.hasPattern {
				childSub := d.Name()
				if sub != "" {
					childSub = sub + "/" + childSub
				}
				match = matchSegs(w.patSegs, strings.Split(childSub, "/"), &w.globBudget)
				if w.globBudget < 0 {
					w.globSpent = true
					return nil, false, false, errStopListing
				}
			}
			if !match && !descend {
				continue
			}
			c := candidate{d: d, match: match}
			switch {
			case len(kept) < room:
				heap.Push(&kept, c)
			case room > 0 && d.Name() < kept[0].d.Name():
				kept[0] = c
				heap.Fix(&kept, 0)
				dropped = true
			default:
				dropped = true
			}
		}
		if errors.Is(rerr, io.EOF) || (rerr == nil && len(ds) == 0) {
			return kept, dropped, false, nil
		}
		if rerr != nil {
			return kept, dropped, false, rerr
		}
	}
}

// unreadable records a directory below the listed one that could not be read (it
// is listed with its error and not descended); for the listed directory itself the
// error is the call's.
func (w *lister) unreadable(sub string, err error) error {
	if sub == "" {
		return err
	}
	w.entries = append(w.entries, safeName(sub)+"/ [unreadable: "+stripRoot(err).Error()+"]")
	return nil
}

// describe renders one entry on one line. Names with control characters (a newline
// could forge a "[truncated…]" line) or invalid UTF-8 are shown Go-quoted.
func describe(ws *workspace.Workspace, name, sub string, d fs.DirEntry) string {
	sub = safeName(sub)
	switch {
	case d.IsDir():
		return sub + "/"
	case d.Type()&fs.ModeSymlink != 0:
		t, err := ws.Root().Readlink(name)
		if err != nil {
			return sub + " -> ?"
		}
		return sub + " -> " + safeName(t)
	case d.Type().IsRegular():
		return sub
	}
	return sub + " [" + fileKind(d.Type()) + "]"
}

func safeName(s string) string {
	if !utf8.ValidString(s) || strings.ContainsFunc(s, unicode.IsControl) {
		return strconv.Quote(s)
	}
	return s
}

// checkGlob validates every segment once, so a bad pattern is an argument error instead
// of a silent empty answer.
func checkGlob(pattern string) error {
	if strings.HasPrefix(pattern, "/") {
		return errors.New("patterns are relative to path; remove the leading /")
	}
	for _, seg := range strings.Split(pattern, "/") {
		if seg == "**" {
			continue
		}
		if _, err := path.Match(seg, ""); err != nil {
			return err
		}
	}
	return nil
}

// globMatch matches a slash path against a pattern whose "**" segments match any
// number (including zero) of path segments; other segments use path.Match.
func globMatch(pattern, name string) bool {
	budget := int64(math.MaxInt64)
	return matchSegs(strings.Split(pattern, "/"), strings.Split(name, "/"), &budget)
}

// maxGlobCost bounds the matching work of one list_files call, in units of
// pattern-segment bytes × name-segment bytes (path.Match's worst case per segment
// pair). A pattern of long literal runs between ** segments, matched against deep
// paths of long names, cost 4.6 ms per entry; over the 200000 entries a walk may visit
// that was a quarter of an hour. This is about two seconds of matching at most, and
// several times what "**/*_test.go" costs over 200000 entries of an ordinary tree.
const maxGlobCost = 1 << 30

// matchSegs reports whether the segments match, charging every path.Match to budget;
// once the budget is spent it answers false without matching.
func matchSegs(ps, ns []string, budget *int64) bool {
	// Iterative with one backtrack point per "**" run, so hostile patterns
	// ("**/**/**/…") cost O(len(ps)·len(ns)) at worst.
	pi, ni := 0, 0
	starP, starN := -1, -1
	for ni < len(ns) {
		if pi < len(ps) && ps[pi] == "**" {
			starP, starN = pi, ni
			pi++
			continue
		}
		if pi < len(ps) {
			*budget -= int64(len(ps[pi])+1) * int64(len(ns[ni])+1)
			if *budget < 0 {
				return false
			}
			if ok, _ := path.Match(ps[pi], ns[ni]); ok {
				pi++
				ni++
				continue
			}
		}
		if starP >= 0 {
			starN++
			pi, ni = starP+1, starN
			continue
		}
		return false
	}
	for pi < len(ps) && ps[pi] == "**" {
		pi++
	}
	return pi == len(ps)
}
