package gittool_test

import (
	"math/rand/v2"
	"os/exec"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/gittool"
	"github.com/toolgate/toolgate/internal/kernel"
)

// hostileRefNames are branch names that probe every rule of git-check-ref-format(1),
// and its neighbours.
var hostileRefNames = []string{
	// ordinary
	"main", "feature/x", "a/b/c", "v1.0", "héllo", "日本", "a@b", "@a", "a@", "a/@/b", "a{b", "a}b", "a-b", "a_b", "x.y.z",
	"a+b", "a=b", "a,b", "a;b", "a!b", "a#b", "a$b", "a%b", "a&b", "a'b", `a"b`, "a(b)", "a<b>", "a|b", "a`b",
	// the single '@' and HEAD
	"@", "HEAD", "head", "HEAD/x", "x/HEAD", "@@", "@/x", "x/@",
	// @{ and the @{-N} shorthand
	"@{-1}", "@{-2}", "@{0}", "a@{b", "a@{", "@{", "{@", "a@{u}", "@{upstream}",
	// option-like
	"-", "-x", "--force", "--orphan=x", "-b",
	// dots
	".", "..", "...", ".a", "a.", "a..b", "a/.b", "a/b.", "a/./b", "a/../b", "a.b.", "..a", "a..",
	// .lock
	"foo.lock", "a/foo.lock", "foo.lock/x", "foo.locks", ".lock", "lock", "a.lock.b",
	// slashes
	"/x", "x/", "a//b", "//", "/", "a/b/", "/a/b",
	// forbidden bytes
	"a b", "a\tb", "a\nb", "a\x00b", "a\x01b", "a\x7fb", "a~b", "a^b", "a:b", "a?b", "a*b", "a[b", "a]b", `a\b`,
	"~", "^", ":", "?", "*", "[", `\`, "a*", "*a", "a/*",
	// full ref spellings
	"refs/heads/x", "refs/tags/v1", "refs", "refs/", "refsx",
	// Unicode that does not show as itself
	"a\u202eb", "a\u200bb", "a\u0085b", "a\ufeffb",
	// long
	strings.Repeat("a", 256), strings.Repeat("a", 257), strings.Repeat("a/", 100) + "a",
}

// stricterThanGit are the names git check-ref-format --branch accepts and toolgate
// refuses on purpose (docs/confinement.md).
func stricterThanGit(name string) bool {
	return name == "@" || strings.HasPrefix(name, "refs/") || len(name) > 256 ||
		strings.ContainsAny(name, "\u202e\u200b\u0085\ufeff")
}

// TestCheckBranchNameMatchesGit compares gittool.CheckBranchName with the real `git
// check-ref-format --branch` on every hostile name above and on random names built from
// the bytes the rules are about. The repository has a previous branch, so git expands
// @{-1} to it: a name is accepted by git only when it is printed back unchanged.
func TestCheckBranchNameMatchesGit(t *testing.T) {
	dir := newRepo(t)
	rawGit(t, dir, "checkout", "-q", "-b", "other")
	rawGit(t, dir, "checkout", "-q", "main")
	gitAccepts := func(name string) bool {
		if strings.ContainsRune(name, 0) {
			return false // an argv string cannot hold NUL; git never sees such a name
		}
		cmd := exec.Command("git", "check-ref-format", "--branch", name)
		cmd.Dir = dir
		out, err := cmd.Output()
		return err == nil && strings.TrimSuffix(string(out), "\n") == name
	}
	names := append([]string(nil), hostileRefNames...)
	rng := rand.New(rand.NewPCG(8, 2))
	alphabet := []string{"a", "b", ".", "/", "@", "{", "}", "-", "lock", "~", "^", ":", "*", " ", "\\", "?", "[", "\x7f", "é"}
	n := 400
	if testing.Short() {
		n = 50
	}
	for range n {
		var b strings.Builder
		for range 1 + rng.IntN(7) {
			b.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		names = append(names, b.String())
	}
	var accepted, refused int
	for _, name := range names {
		ours := gittool.CheckBranchName(name) == nil
		git := gitAccepts(name)
		if ours {
			accepted++
		} else {
			refused++
		}
		switch {
		case ours && !git:
			t.Errorf("CheckBranchName(%q) accepts what git refuses", name)
		case !ours && git && !stricterThanGit(name):
			t.Errorf("CheckBranchName(%q) = %v, but git accepts it and it is not one of the documented stricter rules", name, gittool.CheckBranchName(name))
		}
	}
	t.Logf("%d names: %d accepted, %d refused", len(names), accepted, refused)
}

// TestCheckRevision covers the revision forms the git tools accept and the ones they
// refuse before git runs.
func TestCheckRevision(t *testing.T) {
	for _, ok := range []string{
		"HEAD", "@", "main", "feature/x", "origin/main", "refs/heads/main", "refs/tags/v1.0", "v1.0",
		"0123abcd", "0123456789abcdef0123456789abcdef01234567", "HEAD~", "HEAD~3", "HEAD^", "HEAD^2", "main^2~3^",
		"HEAD@{1}", "main@{0}", "main@{u}", "main@{upstream}", "main@{push}", "@{u}", "@{1}", "@{-1}", "@{-2}~1", "a@b", "héllo",
	} {
		if err := gittool.CheckRevision(ok); err != nil {
			t.Errorf("CheckRevision(%q) = %v, want accepted", ok, err)
		}
	}
	for _, bad := range []string{
		"", "-", "--output=x", "-p", "HEAD --output=x", "a..b", "a...b", "^a", "main^{tree}", "main^{/fix}", ":/fix",
		"HEAD:README.md", "main@{yesterday}", "main@{1.day.ago}", "main@{", "@{}", "@{-}", "@{-x}", "a@{b}", "~1", "^",
		"a b", "a\tb", "a\nb", "a\x00b", "a\x7fb", "a\u202eb", "a*", "a?", "a[b", `a\b`, "a//b", "/a", "a/", ".a", "a/.b",
		"a.lock", "a.", "a~b", "HEAD~x", "HEAD^^{}", strings.Repeat("a", 257),
	} {
		if err := gittool.CheckRevision(bad); err == nil {
			t.Errorf("CheckRevision(%q) accepted", bad)
		}
	}
}

// TestHostileBranchNamesRefused: git_checkout create_branch with every name git or the
// stricter rules refuse creates nothing, answers invalid_ref, and leaves the branches
// as they were; "@" in particular (which git 2.39 would create).
func TestHostileBranchNamesRefused(t *testing.T) {
	dir := newRepo(t)
	k := newKit(t, dir, gittool.Options{})
	for _, name := range hostileRefNames {
		if gittool.CheckBranchName(name) == nil {
			continue
		}
		_, err := k.call(t, "git_checkout", map[string]any{"ref": "HEAD", "create_branch": name})
		if codeOf(err) != kernel.CodeInvalidRef {
			t.Errorf("create_branch %q: err = %v, want invalid_ref", name, err)
		}
	}
	for _, rev := range []string{"a..b", ":/initial", "HEAD:README.md", "main@{yesterday}", "HEAD^{tree}"} {
		for _, c := range []struct{ tool, arg string }{{"git_log", "revision"}, {"git_show", "revision"}, {"git_diff", "target"}, {"git_checkout", "ref"}} {
			if _, err := k.call(t, c.tool, map[string]any{c.arg: rev}); codeOf(err) != kernel.CodeInvalidRef {
				t.Errorf("%s %s=%q: err = %v, want invalid_ref", c.tool, c.arg, rev, err)
			}
		}
	}
	if br := rawGit(t, dir, "branch", "--list"); strings.TrimSpace(br) != "* main" {
		t.Errorf("branches changed: %q", br)
	}
	// A valid name still works, and "@" still names HEAD as a revision.
	k.mustCall(t, "git_checkout", map[string]any{"ref": "@", "create_branch": "feature/ok"})
	if br := rawGit(t, dir, "branch", "--show-current"); strings.TrimSpace(br) != "feature/ok" {
		t.Errorf("current branch %q, want feature/ok", br)
	}
}
