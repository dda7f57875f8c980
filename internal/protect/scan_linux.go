//go:build linux

package protect

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// MaxBinds bounds the read-only paths one call mounts, so a hostile workspace makes a
// call fail instead of mounting without end.
const MaxBinds = 4096

// ident is what must stay the same for a protected path to count as untouched: the
// same inode (device, number, birth time where the file system keeps one) of the same
// type. Content is not compared: a protected path is bound read-only for the call, so a
// change of content can only come from outside the sandbox (a person's editor), which
// is not the command's doing.
type ident struct {
	dev, ino uint64
	typ      uint32
	btime    unix.StatxTimestamp
}

// Snapshot is the protected paths of a workspace at one moment, as a confined command's
// protection needs them: what to mount read-only, and what to compare after the call.
type Snapshot struct {
	dir   string
	extra []string
	roots map[string]ident // absolute path → identity, for every protected path found
	alias map[string]*ident
	binds []string
	err   error // an alias that cannot be protected
}

// Scan finds the protected paths of the workspace dir (absolute, links resolved) that
// bash must not change: every entry of the list where Match finds it (a symbolic link
// standing for the first elements of a multi-element entry counts as protected itself),
// except that inside node_modules only the InPackages entries (.git) count; the targets
// inside a writable root (dir or extra) of protected symbolic links, .git files
// (gitdir:) and commondir files; and the other names inside the workspace of protected
// files that have several hard links. ReadOnlyPaths says what to mount; Changes, after
// the call, what it left.
func Scan(dir string, extra []string) (*Snapshot, error) {
	s := &Snapshot{dir: filepath.Clean(dir), roots: map[string]ident{}, alias: map[string]*ident{}}
	for _, e := range extra {
		s.extra = append(s.extra, filepath.Clean(e))
	}
	links := map[[2]uint64]bool{}
	if err := s.walk(func(fd int, abs string, st *unix.Statx_t) {
		s.roots[abs] = identOf(st)
		s.noteLinks(fd, abs, st, links)
	}); err != nil {
		return nil, err
	}
	for abs := range s.roots {
		for _, a := range s.aliasesOf(abs) {
			if _, seen := s.alias[a]; !seen {
				s.alias[a] = lstatIdent(a)
			}
		}
	}
	if s.err != nil {
		return nil, s.err
	}
	if len(links) > 0 {
		if err := s.walkInodes(links); err != nil {
			return nil, err
		}
	}
	for abs, id := range s.roots {
		if id.typ != unix.S_IFLNK {
			s.binds = append(s.binds, abs)
		}
	}
	for a, id := range s.alias {
		if id != nil && id.typ != unix.S_IFLNK {
			s.binds = append(s.binds, a)
		}
	}
	sort.Strings(s.binds)
	s.binds = dedupeNested(s.binds)
	if len(s.binds) > MaxBinds {
		return nil, fmt.Errorf("the workspace has %d protected paths to keep read-only; at most %d are supported", len(s.binds), MaxBinds)
	}
	return s, nil
}

// ReadOnlyPaths are the existing protected paths to mount read-only for the call
// (absolute; none is a symbolic link; none lies inside another).
func (s *Snapshot) ReadOnlyPaths() []string { return append([]string(nil), s.binds...) }

// Changes scans the workspace again and returns every protected path that is there now
// but was not at Scan, or is another file than it was: what the call created or
// replaced. Alias targets are checked only for the links Scan saw (a link the call made
// is itself a change, and its target is not touched).
func (s *Snapshot) Changes() ([]Change, error) {
	var out []Change
	err := s.walk(func(_ int, abs string, st *unix.Statx_t) {
		before, ok := s.roots[abs]
		if now := identOf(st); !ok || before != now {
			out = append(out, Change{Path: s.rel(abs), Created: !ok})
		}
	})
	for a, before := range s.alias {
		if _, root := s.roots[a]; root {
			continue // a protected path itself, checked above
		}
		now := lstatIdent(a)
		if now != nil && (before == nil || *before != *now) {
			out = append(out, Change{Path: s.rel(a), Created: before == nil})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return slices.CompactFunc(out, func(a, b Change) bool { return a.Path == b.Path }), err
}

// Remove removes what changes name, each through directory descriptors opened without
// following links from the writable root it lies in, so a link swapped in meanwhile
// cannot redirect it. It records the outcome in each Change.
func (s *Snapshot) Remove(changes []Change) {
	for i := range changes {
		c := &changes[i]
		abs := c.Path
		if !filepath.IsAbs(abs) {
			abs = filepath.Join(s.dir, filepath.FromSlash(abs))
		}
		c.Err = s.removePath(abs)
		c.Removed = c.Err == nil
	}
}

// unremovedSuffix is appended to what could not be removed (a tree too deep, a
// directory someone else owns): under that name no program reads it as configuration.
const unremovedSuffix = ".toolgate-unremoved"

func (s *Snapshot) rel(abs string) string {
	if r, err := filepath.Rel(s.dir, abs); err == nil && r != ".." && !strings.HasPrefix(r, "../") {
		return filepath.ToSlash(r)
	}
	return abs
}

// partial is an entry whose first k elements matched the directories above.
type partial struct {
	c *compiled
	k int
}

// scope is what a directory's entries are matched against: partial matches continuing
// from above, and which entries may start there (all at the root; below it those not
// RootOnly, and inside node_modules only the InPackages ones).
type scope struct {
	parts []partial
	root  bool
	pkg   bool
}

// walk visits every protected path of the workspace (see Scan), calling found with
// the descriptor of its directory, its absolute path and its statx.
func (s *Snapshot) walk(found func(dirfd int, abs string, st *unix.Statx_t)) error {
	fd, err := unix.Open(s.dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("opening the workspace: %w", err)
	}
	defer unix.Close(fd)
	w := newWalker(s.dir, 64<<10)
	var starts []*compiled
	return w.dir(fd, s.dir, scope{root: true}, func(dirfd int, parent, name string, typ uint8, _ uint64, sc scope) (bool, scope) {
		f := Fold(name)
		var next []partial
		hit := false
		for _, p := range sc.parts {
			if !elemMatch(p.c.elems[p.k], f) {
				continue
			}
			if p.k == len(p.c.elems)-1 {
				hit = true
			} else {
				next = append(next, partial{p.c, p.k + 1})
			}
		}
		starts = entryIndex.starts(f, starts[:0])
		for _, c := range starts {
			if !sc.root && (c.RootOnly || (sc.pkg && !c.InPackages)) {
				continue
			}
			if len(c.elems) == 1 {
				hit = true
			} else {
				next = append(next, partial{c, 1})
			}
		}
		if hit || (typ == unix.DT_LNK && len(next) > 0) {
			// A protected path, or a link standing where one's parent should be (an
			// intermediate link of a multi-element entry counts as protected itself).
			var st unix.Statx_t
			if err := unix.Statx(dirfd, name, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_TYPE|unix.STATX_INO|unix.STATX_BTIME|unix.STATX_NLINK, &st); err == nil {
				found(dirfd, filepath.Join(parent, name), &st)
			}
			return false, scope{}
		}
		if typ != unix.DT_DIR {
			return false, scope{}
		}
		return true, scope{parts: next, pkg: sc.pkg || f == "node_modules"}
	})
}

// maxWalkPath bounds how far below its start a walk descends, in bytes of path: past
// PATH_MAX no program works with a path by name (getcwd, git's discovery and editors
// fail there), and the walk holds one descriptor per level.
const maxWalkPath = 4096

// dirWalker reads directories with getdents, which gives each entry's type and inode
// without a stat.
type dirWalker struct {
	buf   []byte
	limit int // longest absolute path descended into
}

func newWalker(start string, bufSize int) *dirWalker {
	return &dirWalker{buf: make([]byte, bufSize), limit: len(start) + maxWalkPath}
}

// visitFunc decides for one entry (name in the directory dirfd at parent) whether to
// descend (only directories are) and with which scope.
type visitFunc func(dirfd int, parent, name string, typ uint8, ino uint64, sc scope) (bool, scope)

// dir lists the directory fd (at abs) and visits its entries. Directories are opened
// relative to their parent with O_NOFOLLOW, so the walk never follows a link. An
// unreadable directory the walk owns is made readable for the moment of reading it; one
// owned by someone else is skipped (nothing confined could have written in it).
func (w *dirWalker) dir(fd int, abs string, sc scope, visit visitFunc) error {
	type sub struct {
		name string
		sc   scope
	}
	var subs []sub
	err := w.entries(fd, func(name string, typ uint8, ino uint64) {
		if typ == unix.DT_UNKNOWN {
			var st unix.Stat_t
			if unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
				return
			}
			typ = dtOf(st.Mode)
		}
		if descend, next := visit(fd, abs, name, typ, ino, sc); descend {
			subs = append(subs, sub{name, next})
		}
	})
	if err != nil {
		return fmt.Errorf("reading %s: %w", abs, err)
	}
	for _, d := range subs {
		if len(abs)+1+len(d.name) > w.limit {
			continue
		}
		cfd, restore, err := openDir(fd, d.name)
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
			continue // gone, or swapped for something else, since it was listed
		}
		if err != nil {
			if errors.Is(err, unix.EACCES) {
				continue
			}
			return fmt.Errorf("opening %s: %w", filepath.Join(abs, d.name), err)
		}
		err = w.dir(cfd, filepath.Join(abs, d.name), d.sc, visit)
		restore()
		unix.Close(cfd)
		if err != nil {
			return err
		}
	}
	return nil
}

// openDir opens the directory name under fd without following a link. One without
// read or search permission but owned by this process's user (a command may chmod 000
// a directory to hide what it made there) is given u+rwx for the moment of opening;
// restore puts its mode back, and must be called once the caller is done with it.
func openDir(fd int, name string) (dfd int, restore func(), err error) {
	const flags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
	nothing := func() {}
	dfd, err = unix.Openat(fd, name, flags, 0)
	if !errors.Is(err, unix.EACCES) {
		return dfd, nothing, err
	}
	var st unix.Stat_t
	if unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil || int(st.Uid) != os.Getuid() || st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return -1, nothing, err
	}
	mode := st.Mode & 0o7777
	if err := unix.Fchmodat(fd, name, mode|0o700, 0); err != nil {
		return -1, nothing, err
	}
	// Through the opened descriptor, so a rename meanwhile cannot aim the chmod elsewhere.
	dfd, err = unix.Openat(fd, name, flags, 0)
	if err != nil {
		_ = unix.Fchmodat(fd, name, mode, 0)
		return -1, nothing, err
	}
	return dfd, func() { _ = unix.Fchmod(dfd, mode) }, nil
}

// entries calls fn for every entry of the directory fd except "." and "..".
func (w *dirWalker) entries(fd int, fn func(name string, typ uint8, ino uint64)) error {
	for {
		n, err := unix.Getdents(fd, w.buf)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return err
		}
		if n <= 0 {
			return nil
		}
		b := w.buf[:n]
		// Names are copied out before fn runs: fn may recurse and reuse the buffer.
		type ent struct {
			name string
			typ  uint8
			ino  uint64
		}
		var batch []ent
		for len(b) > 0 {
			d := (*unix.Dirent)(unsafe.Pointer(&b[0]))
			if d.Reclen == 0 || int(d.Reclen) > len(b) {
				break
			}
			rec := b[:d.Reclen]
			b = b[d.Reclen:]
			name := rec[unsafe.Offsetof(d.Name):]
			if i := bytes.IndexByte(name, 0); i >= 0 {
				name = name[:i]
			}
			if string(name) == "." || string(name) == ".." {
				continue
			}
			batch = append(batch, ent{string(name), d.Type, d.Ino})
		}
		for _, e := range batch {
			fn(e.name, e.typ, e.ino)
		}
	}
}

func dtOf(mode uint32) uint8 {
	switch mode & unix.S_IFMT {
	case unix.S_IFDIR:
		return unix.DT_DIR
	case unix.S_IFLNK:
		return unix.DT_LNK
	case unix.S_IFREG:
		return unix.DT_REG
	case unix.S_IFIFO:
		return unix.DT_FIFO
	case unix.S_IFSOCK:
		return unix.DT_SOCK
	case unix.S_IFCHR:
		return unix.DT_CHR
	}
	return unix.DT_BLK
}

func identOf(st *unix.Statx_t) ident {
	id := ident{dev: unix.Mkdev(st.Dev_major, st.Dev_minor), ino: st.Ino, typ: uint32(st.Mode) & unix.S_IFMT}
	if st.Mask&unix.STATX_BTIME != 0 {
		id.btime = st.Btime
	}
	return id
}

// lstatIdent returns the identity of the absolute path p without following a final
// link, or nil when nothing is there.
func lstatIdent(p string) *ident {
	var st unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, p, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_TYPE|unix.STATX_INO|unix.STATX_BTIME, &st); err != nil {
		return nil
	}
	id := identOf(&st)
	return &id
}

// noteLinks records the inodes of protected regular files that have other names: the
// root itself when it is a file, and the files inside a protected directory (the object
// store of a repository aside: git writes an object once and never in place, and a
// local clone hard-links every object to another repository outside the workspace; any
// directory named objects is skipped, which also covers submodules and git-lfs).
func (s *Snapshot) noteLinks(dirfd int, abs string, st *unix.Statx_t, links map[[2]uint64]bool) {
	dev := unix.Mkdev(st.Dev_major, st.Dev_minor)
	switch uint32(st.Mode) & unix.S_IFMT {
	case unix.S_IFREG:
		if st.Nlink > 1 {
			links[[2]uint64{dev, st.Ino}] = true
		}
	case unix.S_IFDIR:
		fd, restore, err := openDir(dirfd, filepath.Base(abs))
		if err != nil {
			return
		}
		defer unix.Close(fd)
		defer restore()
		w := newWalker(s.dir, 16<<10)
		_ = w.dir(fd, abs, scope{}, func(pfd int, _, name string, typ uint8, _ uint64, _ scope) (bool, scope) {
			switch typ {
			case unix.DT_DIR:
				return name != "objects", scope{}
			case unix.DT_REG:
				var fst unix.Stat_t
				if unix.Fstatat(pfd, name, &fst, unix.AT_SYMLINK_NOFOLLOW) == nil && fst.Nlink > 1 {
					links[[2]uint64{uint64(fst.Dev), fst.Ino}] = true
				}
			}
			return false, scope{}
		})
	}
}

// walkInodes finds, outside the protected paths, the other names of the inodes in
// links, and adds them to the paths mounted read-only: a command writing such a name
// would change the protected file.
func (s *Snapshot) walkInodes(links map[[2]uint64]bool) error {
	inos := map[uint64]bool{}
	for k := range links {
		inos[k[1]] = true
	}
	fd, err := unix.Open(s.dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("opening the workspace: %w", err)
	}
	defer unix.Close(fd)
	w := newWalker(s.dir, 64<<10)
	return w.dir(fd, s.dir, scope{}, func(dirfd int, parent, name string, typ uint8, ino uint64, _ scope) (bool, scope) {
		if typ != unix.DT_DIR && !(typ == unix.DT_REG && inos[ino]) {
			return false, scope{}
		}
		abs := filepath.Join(parent, name)
		if _, protected := s.roots[abs]; protected {
			return false, scope{}
		}
		switch typ {
		case unix.DT_DIR:
			return true, scope{}
		case unix.DT_REG:
			if inos[ino] {
				var st unix.Stat_t
				if unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && links[[2]uint64{uint64(st.Dev), st.Ino}] {
					s.binds = append(s.binds, abs)
				}
			}
		}
		return false, scope{}
	})
}

// aliasesOf returns what the protected path abs makes a program read elsewhere, when
// that lies inside a writable root: the target of a link (with the rest of the entry
// when the link stands for a parent element), the repository a .git file points at, and
// the common directory a repository's commondir names.
func (s *Snapshot) aliasesOf(abs string) []string {
	var out []string
	rel := s.rel(abs)
	add := func(p string) {
		if p == "" {
			return
		}
		for _, r := range append([]string{s.dir}, s.extra...) {
			if p == r {
				s.err = fmt.Errorf("protected path %s points at %s, a whole writable root; it cannot be kept read-only", rel, p)
				return
			}
		}
		if !s.writable(p) {
			return // a confined command cannot write there
		}
		out = append(out, p)
	}
	id := s.roots[abs]
	switch id.typ {
	case unix.S_IFLNK:
		target := resolveLoose(abs, 0)
		rests := restAfter(rel)
		if len(rests) == 0 {
			add(target)
		}
		for _, r := range rests {
			add(filepath.Join(target, r))
		}
		return out
	case unix.S_IFREG:
		if isGit(abs) {
			if p := pointer(abs, "gitdir:"); p != "" {
				gd := resolveLoose(join(filepath.Dir(abs), p), 0)
				add(gd)
				if c := pointer(filepath.Join(gd, "commondir"), ""); c != "" {
					add(resolveLoose(join(gd, c), 0))
				}
			}
		}
	case unix.S_IFDIR:
		if isGit(abs) {
			if c := pointer(filepath.Join(abs, "commondir"), ""); c != "" {
				add(resolveLoose(join(abs, c), 0))
			}
		}
	}
	return out
}

// writable reports whether p is inside the workspace or an extra writable root.
func (s *Snapshot) writable(p string) bool {
	for _, r := range append([]string{s.dir}, s.extra...) {
		if p == r || strings.HasPrefix(p, r+string(filepath.Separator)) {
			return true
		}
	}
	return false
}

// dedupeNested drops paths inside another path of the sorted list (a bind of a
// directory already covers them).
func dedupeNested(sorted []string) []string {
	var out []string
	for _, p := range sorted {
		if n := len(out); n > 0 && (p == out[n-1] || strings.HasPrefix(p, out[n-1]+string(filepath.Separator))) {
			continue
		}
		out = append(out, p)
	}
	return out
}

// removePath removes abs (a file, a link, or a directory tree) through descriptors.
func (s *Snapshot) removePath(abs string) error {
	base := ""
	for _, r := range append([]string{s.dir}, s.extra...) {
		if strings.HasPrefix(abs, r+string(filepath.Separator)) {
			base = r
			break
		}
	}
	if base == "" {
		return fmt.Errorf("%s is not inside a writable root", abs)
	}
	rel, _ := filepath.Rel(base, abs)
	elems := strings.Split(rel, string(filepath.Separator))
	fd, err := unix.Open(base, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	// Modes are put back (through the descriptors) before those are closed.
	var fds []int
	defer func() {
		for _, f := range fds {
			unix.Close(f)
		}
	}()
	var restores []func()
	defer func() {
		for i := len(restores) - 1; i >= 0; i-- {
			restores[i]()
		}
	}()
	fds = append(fds, fd)
	for _, e := range elems[:len(elems)-1] {
		next, restore, err := openDir(fd, e)
		if err != nil {
			return fmt.Errorf("opening %s: %w", e, err)
		}
		fds, restores = append(fds, next), append(restores, restore)
		fd = next
	}
	name := elems[len(elems)-1]
	err = removeAt(fd, name, 0)
	if err == nil {
		return nil
	}
	// Out of the way at least, so that it no longer acts as configuration.
	aside := fmt.Sprintf("%s%s-%d", name, unremovedSuffix, os.Getpid())
	if rerr := unix.Renameat2(fd, name, fd, aside, unix.RENAME_NOREPLACE); rerr != nil {
		return fmt.Errorf("%v; renaming it aside failed too: %v", err, rerr)
	}
	return fmt.Errorf("%v; renamed to %s", err, aside)
}

// removeAt removes name under fd, recursing into directories without following links.
func removeAt(fd int, name string, depth int) error {
	err := unix.Unlinkat(fd, name, 0)
	if err == nil || errors.Is(err, unix.ENOENT) {
		return nil
	}
	if !errors.Is(err, unix.EISDIR) && !errors.Is(err, unix.EPERM) {
		return err
	}
	if depth > 4096 {
		return errors.New("directory tree too deep to remove")
	}
	cfd, _, err := openDir(fd, name) // removed below: no mode to put back
	if err != nil {
		return err
	}
	w := &dirWalker{buf: make([]byte, 16<<10)}
	var names []string
	err = w.entries(cfd, func(n string, _ uint8, _ uint64) { names = append(names, n) })
	for _, n := range names {
		if rerr := removeAt(cfd, n, depth+1); rerr != nil && err == nil {
			err = rerr
		}
	}
	unix.Close(cfd)
	if err != nil {
		return err
	}
	if err := unix.Unlinkat(fd, name, unix.AT_REMOVEDIR); err != nil && !errors.Is(err, unix.ENOENT) {
		return err
	}
	return nil
}
