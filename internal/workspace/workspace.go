// Package workspace confines toolgate's file tools to one directory. It holds the
// directory as an *os.Root (so every open walks component by component with
// O_NOFOLLOW and never leaves the root, closing the check-then-use race of "realpath,
// then open") and closes the gaps os.Root leaves: it refuses absolute paths, ".." and NUL
// bytes before touching the disk, refuses symbolic links that point out of the workspace
// (absolute or relative) even where os.Root would silently refuse later with a less
// useful error, and says which paths are protected (internal/protect: .git, harness and
// editor configuration, toolgate's own files) so that a broad grant does not cover them.
//
// What os.Root cannot see and callers must still check: hard links (a file inside may
// share its inode with a file outside; refuse reads and writes when Nlink > 1), FIFOs and devices
// (open with O_NONBLOCK and fstat the opened file), and links that other programs (bash,
// git) would follow after a tool created them (the file tools never create links).
package workspace

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/toolgate/toolgate/internal/protect"
)

// maxLinks bounds how many symbolic links one resolution follows, as Linux's
// MAXSYMLINKS does, so a link cycle is an error instead of a loop.
const maxLinks = 40

// maxPathBytes bounds the length of a user path; anything longer is refused before it
// reaches the file system.
const maxPathBytes = 4096

// Workspace is one confined directory. It is safe for concurrent use.
type Workspace struct {
	dir  string
	root *os.Root
}

// Open opens dir (which must exist and be a directory) as a workspace. dir is made
// absolute and its own symbolic links are resolved once here, so later confinement is
// relative to the real directory.
func Open(dir string) (*Workspace, error) {
	if dir == "" {
		return nil, errors.New("opening workspace: empty directory name")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("opening workspace %q: %w", dir, err)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, fmt.Errorf("opening workspace %q: %w", dir, err)
	}
	st, err := os.Stat(real)
	if err != nil {
		return nil, fmt.Errorf("opening workspace %q: %w", dir, err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("opening workspace %q: not a directory", dir)
	}
	root, err := os.OpenRoot(real)
	if err != nil {
		return nil, fmt.Errorf("opening workspace %q: %w", dir, err)
	}
	return &Workspace{dir: real, root: root}, nil
}

// Encloses reports whether the absolute path p, once its existing part's links are
// resolved, is the workspace directory or lies inside it. It is for directories the
// tools must never reach (toolgate's own data directory): p need not exist yet.
func (w *Workspace) Encloses(p string) (bool, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return false, fmt.Errorf("checking %q: %w", p, err)
	}
	// Resolve the longest existing ancestor; the missing rest cannot hold links.
	rest := ""
	cur := abs
	for {
		real, err := filepath.EvalSymlinks(cur)
		if err == nil {
			abs = filepath.Join(real, rest)
			break
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return false, fmt.Errorf("checking %q: %w", p, err)
		}
		parent := filepath.Dir(cur)
		if parent == cur {
			break
		}
		rest = filepath.Join(filepath.Base(cur), rest)
		cur = parent
	}
	rel, err := filepath.Rel(w.dir, abs)
	if err != nil {
		return false, nil
	}
	return rel == "." || (rel != ".." && !strings.HasPrefix(rel, "../")), nil
}

// Dir returns the workspace's absolute, symlink-free directory.
func (w *Workspace) Dir() string { return w.dir }

// Root returns the *os.Root every file operation must go through.
func (w *Workspace) Root() *os.Root { return w.root }

// Close releases the root.
func (w *Workspace) Close() error { return w.root.Close() }

// outside builds the refusal every confinement failure returns.
func outside(p, why string) error { return &OutsideError{Path: p, Reason: why} }

// Clean checks a user path lexically, without touching the disk, and returns it as a
// clean workspace-relative slash path ("." for the root). It refuses empty paths,
// absolute paths, NUL bytes, paths over 4096 bytes and any
// ".." component: a ".." is refused rather than folded away, because folding "a/../b"
// to "b" is wrong when "a" is a link, and the grant a call is checked against must name
// exactly what is touched.
func Clean(p string) (string, error) {
	if p == "" {
		return "", outside(p, "empty path")
	}
	if len(p) > maxPathBytes {
		return "", outside(p[:64]+"…", "path longer than 4096 bytes")
	}
	if strings.IndexByte(p, 0) >= 0 {
		return "", outside(p, "NUL byte in path")
	}
	if strings.HasPrefix(p, "/") || filepath.IsAbs(p) {
		return "", outside(p, "absolute paths are refused; give a path relative to the workspace")
	}
	for _, c := range strings.Split(p, "/") {
		if c == ".." {
			return "", outside(p, `".." is refused`)
		}
	}
	c := path.Clean(p)
	if c == ".." || strings.HasPrefix(c, "../") || strings.HasPrefix(c, "/") {
		return "", outside(p, "escapes the workspace")
	}
	return c, nil
}

// Rel normalises a user path to a clean workspace-relative slash path ("." for the root)
// with every symbolic link along it resolved, so the result names the file the call
// would really touch. It refuses what Clean refuses and any link whose target is absolute
// or leads out of the workspace, wherever it sits in the path. Components that do not
// exist yet are kept as given (a file about to be created).
func (w *Workspace) Rel(p string) (string, error) {
	c, err := Clean(p)
	if err != nil {
		return "", err
	}
	return w.resolve(p, c)
}

// HasLink reports whether any existing component of the clean relative path rel is a
// symbolic link. Write tools use it to refuse writing through links at all.
func (w *Workspace) HasLink(rel string) (bool, error) {
	if rel == "." {
		return false, nil
	}
	parts := strings.Split(rel, "/")
	for i := range parts {
		fi, err := w.root.Lstat(strings.Join(parts[:i+1], "/"))
		if errors.Is(err, fs.ErrNotExist) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("checking %q: %w", rel, err)
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return true, nil
		}
	}
	return false, nil
}

// resolve follows links component by component, lexically inside the workspace. orig is
// only used in error messages.
func (w *Workspace) resolve(orig, rel string) (string, error) {
	if rel == "." {
		return ".", nil
	}
	todo := strings.Split(rel, "/")
	var done []string // resolved, existing-or-not components so far
	links := 0
	for len(todo) > 0 {
		comp := todo[0]
		todo = todo[1:]
		switch comp {
		case "", ".":
			continue
		case "..":
			// Only reachable through a link target; lexically inside is required.
			if len(done) == 0 {
				return "", outside(orig, "a symbolic link leads out of the workspace")
			}
			done = done[:len(done)-1]
			continue
		}
		cur := strings.Join(append(done, comp), "/")
		fi, err := w.root.Lstat(cur)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscallENOTDIR) {
				// The rest does not exist: keep it verbatim.
				done = append(done, comp)
				done = append(done, todo...)
				return cleanJoin(done), nil
			}
			if isEscape(err) {
				return "", outside(orig, "a symbolic link leads out of the workspace")
			}
			return "", fmt.Errorf("resolving %q: %w", orig, err)
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			done = append(done, comp)
			continue
		}
		links++
		if links > maxLinks {
			return "", fmt.Errorf("resolving %q: %w", orig, ErrTooManyLinks)
		}
		target, err := w.root.Readlink(cur)
		if err != nil {
			return "", fmt.Errorf("resolving %q: %w", orig, err)
		}
		if target == "" || strings.IndexByte(target, 0) >= 0 {
			return "", outside(orig, "a symbolic link has an invalid target")
		}
		if strings.HasPrefix(target, "/") {
			return "", outside(orig, fmt.Sprintf("%q is a symbolic link to an absolute path", cur))
		}
		// Splice the target in place of the link, relative to the link's directory.
		// Check it lexically first, so a link to "../x" is refused even if it would
		// come back in later.
		base := strings.Join(done, "/")
		joined := path.Join(base, target)
		if base == "" {
			joined = path.Clean(target)
		}
		if joined == ".." || strings.HasPrefix(joined, "../") {
			return "", outside(orig, fmt.Sprintf("%q is a symbolic link that leads out of the workspace", cur))
		}
		next := strings.Split(joined, "/")
		if joined == "." {
			next = nil
		}
		todo = append(next, todo...)
		done = done[:0]
	}
	return cleanJoin(done), nil
}

func cleanJoin(parts []string) string {
	if len(parts) == 0 {
		return "."
	}
	return path.Clean(strings.Join(parts, "/"))
}

// isEscape recognises os.Root's own refusal ("path escapes from parent").
func isEscape(err error) bool {
	return err != nil && strings.Contains(err.Error(), "path escapes from parent")
}

// IsProtected reports whether the clean relative path rel is a protected path or lies
// in one (the list is internal/protect's, docs/toolgate-mcp.md#protected-paths: what
// makes git, a harness, an editor or a shell run code), by name alone, in any spelling a
// file system might fold to it. Such paths are covered only by a grant that names them.
func IsProtected(rel string) bool { return protect.IsProtected(rel) }

// ProtectedRoot reports whether writing rel would write a protected path, and which one
// (the path a grant must name or lie inside): by name (protect.Match), or because rel
// lies where a protected name at the workspace root points — the target of a protected
// symbolic link (".vscode -> shared/vscode"), the repository a ".git" file names, a
// repository's common directory — which a program reads under the protected name.
func (w *Workspace) ProtectedRoot(rel string) (root string, ok bool, err error) {
	p, err := w.Protection()
	if err != nil {
		return "", false, err
	}
	root, ok = p.Root(rel)
	return root, ok, nil
}

// Protection is the workspace's protected paths at one moment, for checking many paths.
type Protection struct {
	aliases []string
}

// Protection reads what the protected names at the workspace root point at.
func (w *Workspace) Protection() (*Protection, error) {
	aliases, err := protect.RootAliases(w.dir)
	if err != nil {
		return nil, fmt.Errorf("checking protected paths: %w", err)
	}
	return &Protection{aliases: aliases}, nil
}

// Root is ProtectedRoot for this moment's aliases.
func (p *Protection) Root(rel string) (string, bool) {
	if root, ok := protect.Match(rel); ok {
		return root, true
	}
	for _, a := range p.aliases {
		if protect.Under(rel, a) {
			// Spelt as in rel, which is what a grant is matched against.
			return strings.Join(strings.Split(rel, "/")[:strings.Count(a, "/")+1], "/"), true
		}
	}
	return "", false
}
