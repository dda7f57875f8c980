package gittool

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Ref names and revisions are checked here, in Go, before git sees them: the rules
// are those of git's check_refname_format (refs.c, documented in
// git-check-ref-format(1)), applied without starting a process per call, plus a few
// stricter ones listed in docs/confinement.md ("Revisions and branch names") where
// git accepts a name that reads as something else (a branch called "@" is HEAD in
// every revision git is later given).

// refnameError says why a ref name is refused; the callers wrap it in invalid_ref.
type refnameError string

func (e refnameError) Error() string { return string(e) }

// refnameByte classifies one byte of a ref name as git's refname_disposition table
// does: 0 ordinary, 1 component end ('/'), 2 '.', 3 '{', 4 never allowed, 5 '*'.
func refnameByte(c byte) int {
	switch {
	case c < 0x20 || c == 0x7f:
		return 4
	case c == '/':
		return 1
	case c == '.':
		return 2
	case c == '{':
		return 3
	case c == '*':
		return 5
	case c == ' ', c == ':', c == '?', c == '[', c == '\\', c == '^', c == '~':
		return 4
	}
	return 0
}

// checkRefComponent checks one '/'-separated component of a full ref name: no "..",
// no "@{", none of the forbidden bytes or '*', not empty, not starting with '.', not
// ending with ".lock".
func checkRefComponent(c string) error {
	if c == "" {
		return refnameError("it has an empty component (a leading, trailing or doubled '/')")
	}
	var last byte
	for i := 0; i < len(c); i++ {
		ch := c[i]
		switch refnameByte(ch) {
		case 2:
			if last == '.' {
				return refnameError(`it contains ".."`)
			}
		case 3:
			if last == '@' {
				return refnameError(`it contains "@{"`)
			}
		case 4:
			return refnameError(fmt.Sprintf("it contains %q, which git does not allow in a ref name", ch))
		case 5:
			return refnameError(`it contains "*"`)
		}
		last = ch
	}
	if c[0] == '.' {
		return refnameError("a component starts with '.'")
	}
	if strings.HasSuffix(c, ".lock") {
		return refnameError(`a component ends with ".lock"`)
	}
	return nil
}

// checkRefname is git's check_refname_format(name, flags) without the refspec-pattern
// and sanitising modes; oneLevel is REFNAME_ALLOW_ONELEVEL (a name such as "main"
// rather than "refs/heads/main").
func checkRefname(name string, oneLevel bool) error {
	if name == "@" {
		return refnameError(`it is "@", which git reads as HEAD`)
	}
	parts := strings.Split(name, "/")
	for _, p := range parts {
		if err := checkRefComponent(p); err != nil {
			return err
		}
	}
	if strings.HasSuffix(name, ".") {
		return refnameError("it ends with '.'")
	}
	if !oneLevel && len(parts) < 2 {
		return refnameError("it has only one component")
	}
	return nil
}

// CheckBranchName reports whether name may be created as a local branch. It accepts
// what `git check-ref-format --branch NAME` accepts outside the @{-N} shorthand, and
// refuses in addition: "@" (HEAD in every revision), a name starting with "refs/"
// (refs/heads/refs/… would shadow the full ref it spells), and names holding Unicode
// format or C1 control characters (bidi overrides that make a listing lie). Exported
// for the cross-check against the real git in the tests.
func CheckBranchName(name string) error {
	switch {
	case name == "":
		return refnameError("it is empty")
	case len(name) > maxRevBytes:
		return refnameError(fmt.Sprintf("it is longer than %d bytes", maxRevBytes))
	case name[0] == '-':
		return refnameError("it starts with '-' and could be read as an option")
	case name == "HEAD":
		return refnameError(`"HEAD" is not a branch`)
	case name == "@":
		return refnameError(`it is "@", which git reads as HEAD`)
	case strings.HasPrefix(name, "refs/"):
		return refnameError(`it starts with "refs/"; give the short name (main, not refs/heads/main)`)
	}
	if err := checkInvisible(name); err != nil {
		return err
	}
	return checkRefname("refs/heads/"+name, false)
}

// checkInvisible refuses invalid UTF-8 and characters that do not show as themselves
// (Unicode format characters such as bidi overrides, C1 controls).
func checkInvisible(s string) error {
	if !utf8.ValidString(s) {
		return refnameError("it is not valid UTF-8")
	}
	for _, r := range s {
		if unicode.Is(unicode.Cf, r) || (r >= 0x80 && r < 0xa0) {
			return refnameError(fmt.Sprintf("it contains the invisible character %U", r))
		}
	}
	return nil
}

// CheckRevision reports whether rev is a revision the git tools accept:
//
//	rev    = base [ "@{" reflog "}" ] { "^" [digits] | "~" [digits] }
//	base   = "HEAD" | "@" | a ref name (git's rules, one level allowed) | "@{-" N "}"
//	reflog = N | "u" | "upstream" | "push"
//
// A commit id is a ref name as far as these rules go. Everything else git's revision
// syntax has is refused: ranges (a..b, ^a), searches (:/text, ^{/text}), paths
// (rev:path), dates (@{yesterday}), peeling (^{tree}). The git tools only ever need
// a commit; rev-parse then resolves what passed. Exported for the tests.
func CheckRevision(rev string) error {
	switch {
	case rev == "":
		return refnameError("it is empty")
	case len(rev) > maxRevBytes:
		return refnameError(fmt.Sprintf("it is longer than %d bytes", maxRevBytes))
	case rev[0] == '-':
		return refnameError("it starts with '-' and could be read as an option")
	}
	if err := checkInvisible(rev); err != nil {
		return err
	}
	// Strip the ancestry suffixes from the end: ^, ^N, ~, ~N.
	base := rev
	for {
		i := strings.LastIndexAny(base, "^~")
		if i < 0 || !allDigits(base[i+1:]) {
			break
		}
		base = base[:i]
	}
	if base == "" {
		return refnameError("it has no ref or commit before ^ or ~")
	}
	if strings.HasPrefix(base, "@{-") && strings.HasSuffix(base, "}") && len(base) > 4 && allDigits(base[3:len(base)-1]) {
		return nil // @{-N}: the N-th branch checked out before this one
	}
	if i := strings.Index(base, "@{"); i >= 0 {
		sel := base[i:]
		if !strings.HasSuffix(sel, "}") {
			return refnameError(`"@{" is not closed by "}"`)
		}
		switch inner := sel[2 : len(sel)-1]; {
		case inner == "u", inner == "upstream", inner == "push":
		case inner != "" && allDigits(inner):
		default:
			return refnameError(fmt.Sprintf("@{%s} is not a reflog position (N), @{u}, @{upstream} or @{push}", inner))
		}
		base = base[:i]
		if base == "" {
			return nil // @{N}, @{u}: of the current branch
		}
	}
	if base == "HEAD" || base == "@" {
		return nil
	}
	return checkRefname(base, true)
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
