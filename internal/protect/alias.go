package protect

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// Change is a protected path a confined command created or replaced (Snapshot.Changes).
type Change struct {
	// Path is relative to the workspace when inside it, else absolute.
	Path string
	// Created is true when nothing was there before the call; else it was replaced.
	Created bool
	// Removed says whether toolgate removed it; Err says why not.
	Removed bool
	Err     error
}

// maxPointerBytes bounds a .git file or commondir file read for its pointer.
const maxPointerBytes = 4096

// maxLinkHops bounds symbolic links followed while resolving an alias.
const maxLinkHops = 40

// isGit reports whether abs names a .git (in any spelling that folds to it).
func isGit(abs string) bool { return elemMatch(".git", Fold(filepath.Base(abs))) }

// restAfter returns, for a link at rel standing for the first elements of
// multi-element entries, the rest of each entry ("tools" for ".agents").
func restAfter(rel string) []string {
	elems := strings.Split(rel, "/")
	f := Fold(elems[len(elems)-1])
	var out []string
	for i := range compiledEntries {
		c := &compiledEntries[i]
		if len(c.elems) > 1 && (len(elems) == 1 || !c.RootOnly) && elemMatch(c.elems[0], f) {
			out = append(out, filepath.Join(c.elems[1:]...))
		}
	}
	return out
}

func join(dir, p string) string {
	if filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	return filepath.Join(dir, p)
}

// pointer reads a small pointer file (a .git file, commondir) and returns its value:
// the text after prefix on its first line. Only a regular file is read, opened without
// blocking (a FIFO planted as commondir must not hang the caller) or following a link.
func pointer(p, prefix string) string {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return ""
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return ""
	}
	b := make([]byte, maxPointerBytes)
	n, _ := f.Read(b)
	line, _, _ := strings.Cut(string(b[:n]), "\n")
	v, ok := strings.CutPrefix(strings.TrimSpace(line), prefix)
	if !ok {
		return ""
	}
	return strings.TrimSpace(v)
}

// resolveLoose resolves every link in the absolute path p, also when p (or its end)
// does not exist: the missing rest is kept as it is.
func resolveLoose(p string, hops int) string {
	if hops > maxLinkHops {
		return p
	}
	fi, err := os.Lstat(p)
	switch {
	case err == nil && fi.Mode()&os.ModeSymlink != 0:
		t, err := os.Readlink(p)
		if err != nil {
			return p
		}
		return resolveLoose(join(filepath.Dir(p), t), hops+1)
	case err == nil:
		if real, err := filepath.EvalSymlinks(p); err == nil {
			return real
		}
		return p
	}
	parent := filepath.Dir(p)
	if parent == p {
		return p
	}
	return filepath.Join(resolveLoose(parent, hops+1), filepath.Base(p))
}

// RootAliases returns, relative to the workspace dir (absolute, links resolved), the
// places inside it that protected names at its root stand for: the target of a
// protected link (".vscode -> shared/vscode"; for a link standing for the first element
// of a longer entry, the target joined with the rest), the repository a ".git" file
// points at ("gitdir: repo.git") and the common directory a repository's commondir
// names. A program reads them under the protected name, so writing them is as good as
// writing it. Missing targets are included (they would be created).
func RootAliases(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	add := func(abs string) {
		rel, err := filepath.Rel(dir, abs)
		if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, "../") || filepath.IsAbs(rel) {
			return
		}
		out = append(out, filepath.ToSlash(rel))
	}
	for _, e := range ents {
		name := e.Name()
		abs := filepath.Join(dir, name)
		switch {
		case e.Type()&os.ModeSymlink != 0:
			_, whole := Match(name)
			rests := restAfter(name)
			if !whole && len(rests) == 0 {
				continue
			}
			target := resolveLoose(abs, 0)
			if whole {
				add(target)
			}
			for _, r := range rests {
				add(filepath.Join(target, r))
			}
		case isGit(abs) && e.Type().IsRegular():
			if p := pointer(abs, "gitdir:"); p != "" {
				gd := resolveLoose(join(dir, p), 0)
				add(gd)
				if c := pointer(filepath.Join(gd, "commondir"), ""); c != "" {
					add(resolveLoose(join(gd, c), 0))
				}
			}
		case isGit(abs) && e.IsDir():
			if c := pointer(filepath.Join(abs, "commondir"), ""); c != "" {
				add(resolveLoose(join(abs, c), 0))
			}
		}
	}
	return out, nil
}

// Under reports whether the slash path rel is root or lies beneath it, comparing
// folded elements.
func Under(rel, root string) bool {
	r, a := strings.Split(rel, "/"), strings.Split(root, "/")
	if len(r) < len(a) {
		return false
	}
	for i := range a {
		if Fold(r[i]) != Fold(a[i]) {
			return false
		}
	}
	return true
}
