package gittool

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/toolgate/toolgate/internal/kernel"
)

// maxRepoEntries bounds how many entries of the repository directory the link check
// walks, so a hostile .git cannot make every call arbitrarily slow.
const maxRepoEntries = 200000

// checkRepoDir refuses a repository whose files live, wholly or partly, outside the
// workspace. The work tree being the workspace is not enough: a ".git" file
// ("gitdir: /elsewhere"), a commondir file, a symbolic link inside .git (objects,
// refs, HEAD…) or an objects/info/alternates list can each make git read another
// repository's history and, for add, commit and checkout, write into it. git runs
// outside the sandbox, so the repository directory must be data the workspace owns.
func (r *runner) checkRepoDir(ctx context.Context) error {
	res, err := r.run(ctx, true, "", nil, "rev-parse", "--absolute-git-dir", "--git-common-dir")
	if err != nil {
		return err
	}
	if res.exitCode != 0 {
		return r.failure("rev-parse", res)
	}
	lines := strings.Split(strings.TrimRight(string(res.stdout), "\n"), "\n")
	if len(lines) != 2 {
		return kernel.Failed(kernel.CodeToolFailed, "git rev-parse printed %q; expected the git directory and the common directory", res.stdout)
	}
	seen := map[string]bool{}
	for _, d := range lines {
		if !filepath.IsAbs(d) {
			d = filepath.Join(r.ws.Dir(), d)
		}
		rel, err := r.inside(d)
		if err != nil {
			return err
		}
		if seen[rel] {
			continue
		}
		seen[rel] = true
		if err := r.checkRepoTree(ctx, rel); err != nil {
			return err
		}
	}
	return nil
}

// inside resolves dir's links and returns it relative to the workspace, or refuses.
func (r *runner) inside(dir string) (string, error) {
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return "", kernel.Failed(kernel.CodeToolFailed, "resolving the repository directory: %v", stripPath(err))
	}
	rel, err := filepath.Rel(r.ws.Dir(), real)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") || filepath.IsAbs(rel) {
		return "", kernel.Denied(kernel.CodePathOutsideWorkspace,
			"the repository's git directory (%s) is outside the workspace (a .git file or commondir points elsewhere); the git tools refuse to use it", real)
	}
	return filepath.ToSlash(rel), nil
}

// checkRepoTree walks the repository directory rel (workspace-relative) without
// following links and refuses any symbolic link in it (hooks/ aside: hooks never run),
// and any alternates file that names object directories.
func (r *runner) checkRepoTree(ctx context.Context, rel string) error {
	n := 0
	fsys := r.ws.Root().FS()
	err := fs.WalkDir(fsys, rel, func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			if name == rel {
				return err
			}
			return nil // unreadable parts are git's problem, not an escape
		}
		if n++; n > maxRepoEntries {
			return fmt.Errorf("the repository directory has more than %d entries", maxRepoEntries)
		}
		if n%4096 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		if name == rel+"/hooks" {
			return fs.SkipDir // never run: every call passes core.hooksPath=/dev/null
		}
		if d.Type()&fs.ModeSymlink != 0 {
			return kernel.Denied(kernel.CodePathOutsideWorkspace,
				"%s is a symbolic link inside the repository directory; git could follow it out of the workspace, so the git tools refuse to run", name)
		}
		return nil
	})
	if err != nil {
		var ke *kernel.Error
		if errors.As(err, &ke) {
			return err
		}
		return kernel.Failed(kernel.CodeToolFailed, "checking the repository directory: %v", stripPath(err))
	}
	for _, alt := range []string{"objects/info/alternates", "objects/info/http-alternates"} {
		f, err := r.ws.Root().Open(rel + "/" + alt)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		nonEmpty := false
		for sc.Scan() {
			if l := strings.TrimSpace(sc.Text()); l != "" && !strings.HasPrefix(l, "#") {
				nonEmpty = true
				break
			}
		}
		f.Close()
		if nonEmpty {
			return kernel.Denied(kernel.CodePathOutsideWorkspace,
				"%s/%s lists other object directories; git would read objects from outside the workspace, so the git tools refuse to run", rel, alt)
		}
	}
	return nil
}

// stripPath drops the absolute path an os error carries.
func stripPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// refuseProtectedChanges refuses a switch to commit id that would change a protected
// path (internal/protect's list: .gitattributes, .gitmodules, harness and editor
// configuration, toolgate's .agents/tools, …, and what protected links at the root
// point at). git writes the work tree outside the sandbox, so without this a
// commit built with git plumbing inside bash (where .git/objects and refs are
// writable) could land files that neither the file tools nor bash may write, such as a
// declarative tool definition the next session would publish.
func (r *runner) refuseProtectedChanges(ctx context.Context, id string) error {
	res, err := r.run(ctx, true, "", nil, "rev-parse", "--verify", "--quiet", "HEAD^{commit}")
	if err != nil {
		return err
	}
	var argv []string
	if res.exitCode == 0 {
		argv = []string{"diff", "--no-ext-diff", "--no-textconv", "--no-renames", "--name-only", "-z", "--end-of-options", "HEAD", id, "--"}
	} else {
		// An unborn branch: everything in the commit is new.
		argv = []string{"ls-tree", "-r", "--name-only", "-z", "--end-of-options", id}
	}
	res, err = r.run(ctx, true, "", nil, argv...)
	if err != nil {
		return err
	}
	if res.truncated {
		return kernel.Failed(kernel.CodeToolFailed, "the switch changes too many paths to check them for protected files; a person must do it")
	}
	if res.exitCode != 0 {
		return r.failure(argv[0], res)
	}
	prot, err := r.ws.Protection()
	if err != nil {
		return kernel.Failed(kernel.CodeToolFailed, "%v", err)
	}
	var hit []string
	for _, p := range strings.Split(string(res.stdout), "\x00") {
		if _, protected := prot.Root(p); p != "" && protected {
			hit = append(hit, p)
		}
	}
	if len(hit) > 0 {
		if len(hit) > 10 {
			hit = append(hit[:10], "…")
		}
		return kernel.Denied(kernel.CodeProtectedPath,
			"switching to %s would change protected files (%s); git_checkout never writes those, a person must do this switch", id, strings.Join(hit, ", "))
	}
	return nil
}

// refuseHardLinked refuses when a work-tree file git would read for this call has more
// than one hard link: git_add would copy its content into the repository (where
// git_show and git_diff then show it) and git_diff would print it, and another name of
// its inode may be a file outside the workspace that someone else linked in, which
// read_file refuses for the same reason. listArgs is the git command that lists the
// files (NUL-separated, workspace-relative).
func (r *runner) refuseHardLinked(ctx context.Context, listArgs ...string) error {
	res, err := r.run(ctx, true, "", nil, listArgs...)
	if err != nil {
		return err
	}
	if res.exitCode != 0 {
		return r.failure(listArgs[0], res)
	}
	if res.truncated {
		return kernel.Failed(kernel.CodeToolFailed, "too many files to check for hard links; name fewer paths")
	}
	for _, p := range strings.Split(string(res.stdout), "\x00") {
		if p == "" {
			continue
		}
		fi, err := r.ws.Root().Lstat(p)
		if err != nil || !fi.Mode().IsRegular() {
			continue // deleted, or not a file git reads as content
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Nlink > 1 {
			return kernel.Denied(kernel.CodePathOutsideWorkspace,
				"%s has %d hard links; another name may be a file outside the workspace, so git does not read it", p, st.Nlink)
		}
	}
	return nil
}
