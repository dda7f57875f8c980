package localtools

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"path"
	"strconv"
	"strings"
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
	// maxVisited bounds the directory entries walked (matching or not), so a glob that
	// matches nothing in a huge tree still answers quickly.
	maxVisited = 200000
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
	var entries []string
	patSegs := strings.Split(pattern, "/")
	globBudget := int64(maxGlobCost)
	globSpent := false
	visited := 0
	var truncated, deeper, tooMany bool
	fsys := ws.Root().FS()
	err = fs.WalkDir(fsys, rel, func(name string, d fs.DirEntry, err error) error {
		if cerr := ctx.Err(); cerr != nil {
			return cerr
		}
		if name == rel {
			if err != nil {
				return err
			}
			return nil
		}
		visited++
		if visited > maxVisited {
			tooMany = true
			return fs.SkipAll
		}
		sub := strings.TrimPrefix(name, rel+"/")
		if rel == "." {
			sub = name
		}
		level := strings.Count(sub, "/") + 1
		if err != nil {
			// An unreadable directory is listed, with its error, and not descended.
			entries = append(entries, sub+"/ [unreadable: "+stripRoot(err).Error()+"]")
			return fs.SkipDir
		}
		isDir := d.IsDir()
		if hasPattern && globBudget < 0 {
			globSpent = true
			return fs.SkipAll
		}
		if !hasPattern || matchSegs(patSegs, strings.Split(sub, "/"), &globBudget) {
			if int64(len(entries)) >= maxEntries {
				truncated = true
				return fs.SkipAll
			}
			entries = append(entries, describe(ws, name, sub, d))
		}
		if isDir && int64(level) >= depth {
			deeper = true
			return fs.SkipDir
		}
		return nil
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil, kernel.Failed(kernel.CodeTimeout, "listing %s was cancelled", rel)
		}
		return nil, kernel.Failed(kernel.CodeToolFailed, "listing %s: %v", rel, stripRoot(err))
	}
	var b strings.Builder
	for _, e := range entries {
		b.WriteString(e)
		b.WriteByte('\n')
	}
	if len(entries) == 0 {
		b.WriteString("[no entries]\n")
	}
	if hasPattern && globBudget < 0 {
		globSpent = true
	}
	switch {
	case globSpent:
		fmt.Fprintf(&b, "[truncated: matching the pattern became too costly (long literal runs between ** segments against long names) and the listing stopped; narrow path or simplify the pattern]\n")
	case truncated:
		fmt.Fprintf(&b, "[truncated: stopped at %d entries (max_entries); narrow path or pattern, or raise max_entries up to %d]\n", maxEntries, MaxListEntries)
	case tooMany:
		fmt.Fprintf(&b, "[truncated: stopped after walking %d entries; narrow path or pattern]\n", maxVisited)
	case deeper:
		fmt.Fprintf(&b, "[depth limit: directories deeper than %d levels were not listed; raise max_depth to see more]\n", depth)
	}
	return &kernel.Output{Text: b.String()}, nil
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
