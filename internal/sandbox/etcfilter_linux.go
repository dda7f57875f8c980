//go:build linux

package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Bounds on the walk of a filtered root: deeper or further entries are left out
// (unreadable), never granted.
const (
	maxFilterDepth   = 12
	maxFilterEntries = 50000
)

// readPlan is what the Landlock domain grants for reading: read rules (read, execute,
// list beneath) and list-only directories.
type readPlan struct {
	read, listOnly []string
	entries        int
}

// planCacheTTL is how long a computed plan is reused. Walking /etc costs a few
// milliseconds (about 1,200 entries, 5 ms on the development machine), more than the
// rest of a call's setup; a second's reuse costs nothing in safety, since a directory
// granted whole is granted for the whole call anyway (a secret created in it during
// the call is readable), and a rule for a file holds its inode, so a file replaced by
// rename is not covered by the old rule.
const planCacheTTL = time.Second

type planKey struct{ roots, filtered string }

type cachedPlan struct {
	read, listOnly []string
	at             time.Time
}

var (
	planMu    sync.Mutex
	planCache = map[planKey]cachedPlan{}
)

// planReadsCached is planReads, reusing a result younger than planCacheTTL.
func planReadsCached(roots, filtered []string) (read, listOnly []string, err error) {
	key := planKey{strings.Join(roots, "\x00"), strings.Join(filtered, "\x00")}
	now := time.Now()
	planMu.Lock()
	c, ok := planCache[key]
	planMu.Unlock()
	if ok && now.Sub(c.at) < planCacheTTL && now.Sub(c.at) >= 0 {
		return c.read, c.listOnly, nil
	}
	read, listOnly, err = planReads(roots, filtered)
	if err != nil {
		return nil, nil, err
	}
	planMu.Lock()
	for k, v := range planCache {
		if now.Sub(v.at) >= planCacheTTL {
			delete(planCache, k)
		}
	}
	planCache[key] = cachedPlan{read: read, listOnly: listOnly, at: now}
	planMu.Unlock()
	return read, listOnly, nil
}

// planReads expands the read-only roots into Landlock rules. Roots and filtered roots
// are compared after resolving symbolic links (rules hold inodes, not names). A root
// equal to or under a filtered root is walked (see FilteredRoots); a root that contains
// a filtered root is refused, since granting it would grant the filtered root whole.
// Missing roots are skipped.
func planReads(roots, filtered []string) (read, listOnly []string, err error) {
	var realFiltered []string
	for _, f := range filtered {
		if rf, err := filepath.EvalSymlinks(filepath.Clean(f)); err == nil {
			realFiltered = append(realFiltered, rf)
		}
	}
	p := &readPlan{}
	for _, r := range roots {
		if !filepath.IsAbs(r) {
			return nil, nil, fmt.Errorf("sandbox: read-only root %q is not absolute", r)
		}
		r, err := filepath.EvalSymlinks(filepath.Clean(r))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, nil, fmt.Errorf("sandbox: resolving read-only root %s: %w", r, err)
		}
		under, rel := "", ""
		for _, f := range realFiltered {
			if r == f || strings.HasPrefix(r, f+"/") {
				under = f
				rel, _ = filepath.Rel(f, r)
				break
			}
			if r == "/" || strings.HasPrefix(f, r+"/") {
				return nil, nil, fmt.Errorf("sandbox: read-only root %s would expose the filtered root %s whole", r, f)
			}
		}
		if under == "" {
			p.read = append(p.read, r)
			continue
		}
		if rel == "." {
			rel = ""
		}
		fi, err := os.Lstat(r)
		if err != nil {
			return nil, nil, fmt.Errorf("sandbox: checking read-only root %s: %w", r, err)
		}
		if (rel != "" || !fi.IsDir()) && !p.allowed(fi, rel) {
			continue
		}
		if !fi.IsDir() {
			p.read = append(p.read, r)
			continue
		}
		rules, lists, clean := p.walk(r, rel, 0)
		if clean && rel != "" {
			p.read = append(p.read, r)
			continue
		}
		// The filtered root itself is always split: its listing is granted, its entries
		// one by one.
		p.listOnly = append(p.listOnly, r)
		p.listOnly = append(p.listOnly, lists...)
		p.read = append(p.read, rules...)
	}
	return p.read, p.listOnly, nil
}

// allowed reports whether one entry (not following links) may be read: not a secret
// name, not a link, and readable by any user.
func (p *readPlan) allowed(fi fs.FileInfo, rel string) bool {
	if isSecretName(rel) || fi.Mode()&fs.ModeSymlink != 0 {
		return false
	}
	perm := fi.Mode().Perm()
	if fi.IsDir() {
		return perm&0o005 == 0o005
	}
	return perm&0o004 != 0
}

// walk returns the rules for dir's entries. clean means every entry beneath is allowed,
// so the caller may grant dir with one rule instead.
func (p *readPlan) walk(dir, rel string, depth int) (rules, lists []string, clean bool) {
	entries, err := os.ReadDir(dir)
	if err != nil || depth >= maxFilterDepth {
		return nil, nil, false
	}
	clean = true
	for _, e := range entries {
		p.entries++
		if p.entries > maxFilterEntries {
			return rules, lists, false
		}
		childRel := e.Name()
		if rel != "" {
			childRel = rel + "/" + e.Name()
		}
		child := filepath.Join(dir, e.Name())
		fi, err := os.Lstat(child)
		if err != nil || !p.allowed(fi, childRel) {
			clean = false
			continue
		}
		if !fi.IsDir() {
			rules = append(rules, child)
			continue
		}
		sub, subLists, subClean := p.walk(child, childRel, depth+1)
		if subClean {
			rules = append(rules, child)
			continue
		}
		clean = false
		lists = append(lists, child)
		lists = append(lists, subLists...)
		rules = append(rules, sub...)
	}
	return rules, lists, clean
}

// isSecretName reports whether rel (slash-separated, relative to a filtered root) or
// one of its ancestors matches SecretNames element by element.
func isSecretName(rel string) bool {
	parts := strings.Split(rel, "/")
	for _, pat := range SecretNames {
		pp := strings.Split(pat, "/")
		if len(pp) > len(parts) {
			continue
		}
		match := true
		for i := range pp {
			if ok, _ := path.Match(pp[i], parts[i]); !ok {
				match = false
				break
			}
		}
		if match {
			return true
		}
	}
	return false
}
