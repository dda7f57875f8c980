package localtools

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strings"

	"github.com/toolgate/toolgate/internal/kernel"
	"github.com/toolgate/toolgate/internal/workspace"
)

var patchFileSchema = mustJSON(map[string]any{
	"$schema":              "https://json-schema.org/draft/2020-12/schema",
	"type":                 "object",
	"additionalProperties": false,
	"required":             []string{"patch"},
	"properties": map[string]any{
		"patch": map[string]any{"type": "string", "minLength": 1, "maxLength": maxPatchBytes,
			"description": "A unified diff (diff -u or git diff format). Paths in the ---/+++ headers are " +
				"relative to the workspace root (git's a/ and b/ prefixes are accepted). /dev/null creates or deletes a file."},
	},
})

func patchFileTool(ws *workspace.Workspace) *kernel.Tool {
	return &kernel.Tool{
		ID:    "local.patch_file",
		Title: "Apply a unified diff",
		Description: "Apply a unified diff to one or more files in the workspace, all or nothing: if " +
			"any hunk does not match exactly, no file is changed and the answer says which hunk and line " +
			"failed. Creates and deletes files via /dev/null headers; renames and binary patches are refused.",
		InputSchema: patchFileSchema,
		Annotations: kernel.Annotations{Destructive: true, OpenWorld: boolp(false)},
		Source:      "toolgate",
		Access: func(args map[string]any) (kernel.Access, error) {
			a, _, err := patchAccess(ws, args)
			return a, err
		},
		Run: func(ctx context.Context, call *kernel.Call) (*kernel.Output, error) {
			return patchFile(ws, call.Args)
		},
	}
}

// maxPatchLines bounds the lines of a file patch_file will load (a 64 MiB file of
// empty lines took 2.3 GB and 10 s before this cap).
const maxPatchLines = 4 << 20

type patchTarget struct {
	fp  *filePatch
	rel string
}

// patchAccess parses the patch and names what it writes: the one file it touches, or,
// for several, their deepest common directory. A patch that touches a protected path
// must touch only files inside that one protected path, and is then marked with it: a
// grant must name the protected path (or lie inside it), so a broad grant, or one on a
// directory holding a protected file among others ("path:src/" for src/.gitattributes
// and src/a.go), never lets a patch slip a protected file in.
func patchAccess(ws *workspace.Workspace, args map[string]any) (kernel.Access, []patchTarget, error) {
	p, err := requireString(args, "patch")
	if err != nil {
		return kernel.Access{}, nil, err
	}
	fps, err := parsePatch(p)
	if err != nil {
		return kernel.Access{}, nil, kernel.Failed(kernel.CodeInvalidArguments, "patch: %v", err)
	}
	var targets []patchTarget
	var protectedRoot, unprotected string
	seen := map[string]bool{}
	for _, fp := range fps {
		if fp.oldName != "" && fp.newName != "" && fp.oldName != fp.newName {
			return kernel.Access{}, nil, kernel.Failed(kernel.CodeInvalidArguments,
				"patch: %s is renamed to %s; renames are not supported", fp.oldName, fp.newName)
		}
		a, rel, err := writeAccess(ws, fp.target())
		if err != nil {
			return kernel.Access{}, nil, err
		}
		if seen[rel] {
			return kernel.Access{}, nil, kernel.Failed(kernel.CodeInvalidArguments, "patch: %s appears twice; merge its hunks", rel)
		}
		seen[rel] = true
		switch {
		case !a.Protected:
			unprotected = rel
		case protectedRoot == "":
			protectedRoot = a.ProtectedRoot
		case protectedRoot != a.ProtectedRoot:
			return kernel.Access{}, nil, kernel.Denied(kernel.CodeProtectedPath,
				"the patch changes files in two protected paths (%s and %s); patch each protected path on its own",
				strings.TrimPrefix(protectedRoot, "path:"), strings.TrimPrefix(a.ProtectedRoot, "path:"))
		}
		targets = append(targets, patchTarget{fp, rel})
	}
	if protectedRoot != "" && unprotected != "" {
		return kernel.Access{}, nil, kernel.Denied(kernel.CodeProtectedPath,
			"the patch changes the protected path %s and also %s; patch the protected path on its own",
			strings.TrimPrefix(protectedRoot, "path:"), unprotected)
	}
	res := targets[0].rel
	if len(targets) > 1 {
		res = path.Dir(res)
		for _, t := range targets[1:] {
			res = commonDir(res, path.Dir(t.rel))
		}
	}
	acc := kernel.Access{Action: kernel.ActionWrite, Resource: "path:" + res}
	if protectedRoot != "" {
		acc.Protected, acc.ProtectedRoot = true, protectedRoot
	}
	return acc, targets, nil
}

// commonDir is the deepest directory containing both slash directory paths ("." for
// the workspace).
func commonDir(a, b string) string {
	if a == "." || b == "." {
		return "."
	}
	pa, pb := strings.Split(a, "/"), strings.Split(b, "/")
	n := 0
	for n < len(pa) && n < len(pb) && pa[n] == pb[n] {
		n++
	}
	if n == 0 {
		return "."
	}
	return strings.Join(pa[:n], "/")
}

func patchFile(ws *workspace.Workspace, args map[string]any) (*kernel.Output, error) {
	_, targets, err := patchAccess(ws, args)
	if err != nil {
		return nil, err
	}
	type change struct {
		rel     string
		remove  bool
		data    []byte
		mode    fs.FileMode
		created bool
		old     []byte
		existed bool
	}
	var changes []change
	budget := maxPatchCompares // shared by every file, so 256 files cannot multiply it
	// Phase 1: read and patch everything in memory; any failure changes nothing.
	for _, t := range targets {
		mode, exists, err := checkWritable(ws, t.rel)
		if err != nil {
			return nil, err
		}
		var cur []byte
		if exists {
			f, _, err := openRegular(ws, t.rel)
			if err != nil {
				return nil, err
			}
			cur, err = io.ReadAll(io.LimitReader(f, 64<<20+1))
			f.Close()
			if err != nil {
				return nil, kernel.Failed(kernel.CodeToolFailed, "reading %s: %v", t.rel, stripRoot(err))
			}
			if len(cur) > 64<<20 {
				return nil, kernel.Failed(kernel.CodeToolFailed, "%s is larger than 64 MiB; not patched", t.rel)
			}
			// Each line costs a string header twice over (the file and the result), so a
			// 64 MiB file of newlines would cost gigabytes; count before splitting.
			if n := bytes.Count(cur, []byte{'\n'}); n > maxPatchLines {
				return nil, kernel.Failed(kernel.CodeToolFailed, "%s has %d lines; files of more than %d lines are not patched", t.rel, n, maxPatchLines)
			}
		}
		switch {
		case t.fp.oldName == "" && exists:
			return nil, kernel.Failed(kernel.CodeToolFailed, "the patch creates %s, but it already exists; nothing was changed", t.rel)
		case t.fp.oldName != "" && !exists:
			return nil, kernel.Failed(kernel.CodeToolFailed, "the patch changes %s, but it does not exist; nothing was changed", t.rel)
		}
		res, err := applyBudget(t.rel, splitText(string(cur)), t.fp.hunks, &budget)
		if err != nil {
			return nil, kernel.Failed(kernel.CodeToolFailed, "%v; nothing was changed", err)
		}
		c := change{rel: t.rel, mode: mode, created: !exists, old: cur, existed: exists}
		if t.fp.newName == "" {
			if len(res.lines) != 0 {
				return nil, kernel.Failed(kernel.CodeToolFailed, "the patch deletes %s but does not remove all of its lines; nothing was changed", t.rel)
			}
			c.remove = true
		} else {
			c.data = []byte(res.String())
		}
		changes = append(changes, c)
	}
	// Phase 2: stage every new file (written and synced under temporary names).
	staged := make([]*pending, len(changes))
	abortAll := func() {
		for _, p := range staged {
			if p != nil {
				p.abort(ws)
			}
		}
	}
	for i, c := range changes {
		if c.remove {
			continue
		}
		p, err := stage(ws, c.rel, c.data, c.mode)
		if err != nil {
			abortAll()
			return nil, err
		}
		staged[i] = p
	}
	// Phase 3: rename into place; on a failure, put back what was already replaced.
	var done []int
	rollback := func() {
		for _, j := range done {
			c := changes[j]
			if c.existed {
				if p, err := stage(ws, c.rel, c.old, c.mode); err == nil {
					if p.commit(ws) != nil {
						p.abort(ws)
					}
				}
			} else {
				ws.Root().Remove(c.rel)
			}
		}
	}
	var summary []string
	for i, c := range changes {
		var err error
		if c.remove {
			err = ws.Root().Remove(c.rel)
			if err != nil && !errors.Is(err, fs.ErrNotExist) {
				err = kernel.Failed(kernel.CodeToolFailed, "deleting %s: %v", c.rel, stripRoot(err))
			} else {
				err = nil
			}
			summary = append(summary, "deleted "+c.rel)
		} else {
			err = staged[i].commit(ws)
			staged[i] = nil
			verb := "patched "
			if c.created {
				verb = "created "
			}
			summary = append(summary, verb+c.rel)
		}
		if err != nil {
			abortAll()
			rollback()
			return nil, err
		}
		done = append(done, i)
	}
	return &kernel.Output{Text: fmt.Sprintf("applied the patch to %s: %s", plural(len(changes), "file", "files"), strings.Join(summary, ", "))}, nil
}
