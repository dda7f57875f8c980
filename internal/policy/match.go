package policy

import (
	"errors"
	"fmt"
	"path"
	"sort"
	"strings"
)

// Request is one authorization question: may Principal perform Action on Resource
// through Tool? Resource must already be normalised (see NormalizeResource).
type Request struct {
	Principal string
	Tool      string
	Action    string
	Resource  string
	// Protected marks a resource that broad scopes do not cover (see Grant.Resource).
	Protected bool
	// ProtectedRoot is the protected path the resource lies in (for example
	// "path:.git/hooks"). Empty means the resource itself is the protected root.
	ProtectedRoot string
}

// Reason says why a Decision went the way it did.
type Reason string

const (
	ReasonAllowed   Reason = "allowed"
	ReasonNoGrant   Reason = "no_matching_grant"
	ReasonDenied    Reason = "explicit_deny"
	ReasonProtected Reason = "protected_path"
)

// Decision is the outcome of one Request. Grant is the grant that decided (the allow
// that allowed it or the deny that refused it); nil when nothing matched.
type Decision struct {
	Allowed bool
	Reason  Reason
	Grant   *Grant
}

// GrantID returns the deciding grant's id, or "".
func (d Decision) GrantID() string {
	if d.Grant == nil {
		return ""
	}
	return d.Grant.ID
}

// Set is a compiled, immutable set of grants. It is safe for concurrent use; a change
// to the grants means compiling a new Set, never editing one.
type Set struct {
	byPrincipal map[string][]*compiled
	anyone      []*compiled // grants whose principal is "*"
	size        int
}

type compiled struct {
	g        Grant
	toolKind int // toolAll, toolNamespace, toolExact
	toolArg  string
	scope    scope
}

const (
	toolAll = iota
	toolNamespace
	toolExact
)

type scopeKind int

const (
	scopeAny    scopeKind = iota // "" or "*"
	scopePrefix                  // ends in "/" or is a bare scheme "path:"
	scopeExact
)

type scope struct {
	kind  scopeKind
	value string
	// scheme is true for a bare scheme ("path:"), which never covers protected paths.
	scheme bool
}

// Compile validates and indexes grants. Order is deterministic: grants are consulted by
// ID, so the grant a decision records does not depend on storage order.
func Compile(grants []Grant) (*Set, error) {
	s := &Set{byPrincipal: map[string][]*compiled{}}
	sorted := append([]Grant(nil), grants...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].ID < sorted[j].ID })
	for i := range sorted {
		g := sorted[i]
		if err := Validate(g); err != nil {
			return nil, fmt.Errorf("compiling grant %q: %w", g.ID, err)
		}
		c := &compiled{g: g}
		c.toolKind, c.toolArg = compileToolPattern(g.Tool)
		c.scope = compileScope(g.Resource)
		if g.Principal == "*" {
			s.anyone = append(s.anyone, c)
		} else {
			s.byPrincipal[g.Principal] = append(s.byPrincipal[g.Principal], c)
		}
		s.size++
	}
	return s, nil
}

// Len is the number of grants in the set.
func (s *Set) Len() int { return s.size }

func compileScope(r string) scope {
	switch {
	case r == "" || r == "*":
		return scope{kind: scopeAny}
	case strings.HasSuffix(r, "/"):
		return scope{kind: scopePrefix, value: r}
	case strings.HasSuffix(r, ":") && !strings.Contains(strings.TrimSuffix(r, ":"), ":"):
		return scope{kind: scopePrefix, value: r, scheme: true}
	default:
		return scope{kind: scopeExact, value: r}
	}
}

// ErrInvalidGrant is wrapped by every Validate failure.
var ErrInvalidGrant = errors.New("invalid grant")

// Validate checks a grant's fields. The store calls it before saving and Compile calls it
// again, so a grant that cannot be matched the documented way is never half-applied.
func Validate(g Grant) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidGrant, fmt.Sprintf(format, args...))
	}
	if g.Principal == "" {
		return bad("principal is empty (use \"*\" for every principal)")
	}
	if len(g.Principal) > 256 || hasControl(g.Principal) {
		return bad("principal must be at most 256 printable characters")
	}
	if err := validToolPattern(g.Tool); err != nil {
		return bad("%v", err)
	}
	switch g.Action {
	case "read", "write", "execute", "*":
	default:
		return bad("action %q is not read, write, execute or *", g.Action)
	}
	switch g.Effect {
	case Allow, Deny:
	default:
		return bad("effect %q is not allow or deny", g.Effect)
	}
	if len(g.Resource) > 4096 || hasControl(g.Resource) {
		return bad("resource must be at most 4096 printable characters")
	}
	if g.Resource != "" && g.Resource != "*" {
		sc := compileScope(g.Resource)
		if !sc.scheme {
			n, err := NormalizeResource(strings.TrimSuffix(g.Resource, "/"))
			if err != nil {
				return bad("resource %q: %v", g.Resource, err)
			}
			if n == "path:." && sc.kind == scopePrefix {
				return bad("resource %q: write \"path:\" for the whole workspace", g.Resource)
			}
			if n != strings.TrimSuffix(g.Resource, "/") {
				return bad("resource %q is not normalised (write %q)", g.Resource, n+suffixOf(g.Resource))
			}
		}
	}
	return nil
}

func suffixOf(r string) string {
	if strings.HasSuffix(r, "/") {
		return "/"
	}
	return ""
}

func validToolPattern(p string) error {
	if p == "*" {
		return nil
	}
	if p == "" {
		return errors.New("tool pattern is empty (use \"*\", \"ns.*\" or \"ns.name\")")
	}
	if strings.HasSuffix(p, ".*") {
		if ValidNamespace(strings.TrimSuffix(p, ".*")) {
			return nil
		}
		return fmt.Errorf("tool pattern %q has an invalid namespace", p)
	}
	if strings.Contains(p, "*") {
		return fmt.Errorf("tool pattern %q: \"*\" is allowed only as \"*\" or \"ns.*\"", p)
	}
	if !ValidToolID(p) {
		return fmt.Errorf("tool pattern %q is not a canonical id namespace.name", p)
	}
	return nil
}

// ValidNamespace reports whether ns is a namespace: 1–64 of [a-z0-9_-], starting with a
// letter or digit.
func ValidNamespace(ns string) bool {
	if len(ns) == 0 || len(ns) > 64 {
		return false
	}
	for i := 0; i < len(ns); i++ {
		c := ns[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case (c == '_' || c == '-') && i > 0:
		default:
			return false
		}
	}
	return true
}

// ValidToolID reports whether id is a canonical "namespace.name": a valid namespace, a
// dot, and a name of 1–128 characters from [A-Za-z0-9_.-].
func ValidToolID(id string) bool {
	i := strings.IndexByte(id, '.')
	if i < 0 || !ValidNamespace(id[:i]) {
		return false
	}
	name := id[i+1:]
	if len(name) == 0 || len(name) > 128 {
		return false
	}
	for j := 0; j < len(name); j++ {
		c := name[j]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '-', c == '.':
		default:
			return false
		}
	}
	return true
}

func hasControl(s string) bool {
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return true
		}
	}
	return false
}

// ErrOutsideWorkspace is returned by NormalizeResource for a path that climbs above the
// workspace root or is absolute.
var ErrOutsideWorkspace = errors.New("path resolves outside the workspace")

// NormalizeResource returns the canonical form of a resource string so that matching is
// done on what the call touches, not on how it was spelled. For "path:" resources the
// path is cleaned ("docs/../src/x" becomes "src/x", the root is "."); an absolute path
// or one that climbs above the root fails with ErrOutsideWorkspace. Backslashes and NUL
// are refused: they spell different files on different systems. Other schemes are
// returned unchanged apart from refusing control characters.
func NormalizeResource(r string) (string, error) {
	if r == "" {
		return "", nil
	}
	if hasControl(r) {
		return "", errors.New("resource contains control characters")
	}
	scheme, rest, ok := strings.Cut(r, ":")
	if !ok || scheme == "" {
		return "", fmt.Errorf("resource %q has no scheme (want scheme:value)", r)
	}
	if scheme != "path" {
		return r, nil
	}
	if strings.ContainsRune(rest, '\\') {
		return "", fmt.Errorf("path resource %q contains a backslash", r)
	}
	if rest == "" {
		return "path:.", nil
	}
	if strings.HasPrefix(rest, "/") {
		return "", fmt.Errorf("%w: %q is absolute", ErrOutsideWorkspace, rest)
	}
	c := path.Clean(rest)
	if c == ".." || strings.HasPrefix(c, "../") {
		return "", fmt.Errorf("%w: %q", ErrOutsideWorkspace, rest)
	}
	return "path:" + c, nil
}

// compileToolPattern splits a validated tool pattern into its kind and the argument
// matchTool compares against ("ns." for a namespace wildcard). Grants and capabilities
// share it, so a pattern means the same thing in both.
func compileToolPattern(p string) (kind int, arg string) {
	switch {
	case p == "*":
		return toolAll, ""
	case strings.HasSuffix(p, ".*"):
		return toolNamespace, strings.TrimSuffix(p, "*")
	default:
		return toolExact, p
	}
}

func matchTool(kind int, arg, tool string) bool {
	switch kind {
	case toolAll:
		return true
	case toolNamespace:
		return strings.HasPrefix(tool, arg)
	default:
		return tool == arg
	}
}

func (c *compiled) matchesTool(tool string) bool { return matchTool(c.toolKind, c.toolArg, tool) }

func (c *compiled) matchesAction(a string) bool { return c.g.Action == "*" || c.g.Action == a }

// matchesResource reports whether the scope covers the resource, ignoring protection.
func (sc scope) covers(res string) bool {
	switch sc.kind {
	case scopeAny:
		return true
	case scopePrefix:
		if strings.HasPrefix(res, sc.value) {
			return true
		}
		// "path:docs/" also covers the directory "path:docs" itself.
		return !sc.scheme && res == strings.TrimSuffix(sc.value, "/")
	default:
		return res == sc.value
	}
}

// coversProtected reports whether the scope names the protected root or a path inside
// it. "", "*", a bare scheme and any prefix above the root never do.
func (sc scope) coversProtected(res, root string) bool {
	if root == "" {
		root = res
	}
	switch sc.kind {
	case scopeExact:
		return res == sc.value
	case scopePrefix:
		if sc.scheme {
			return false
		}
		dir := strings.TrimSuffix(sc.value, "/")
		return sc.covers(res) && (dir == root || strings.HasPrefix(dir, root+"/"))
	default:
		return false
	}
}

func (s *Set) candidates(principal string, yield func(*compiled) bool) {
	for _, c := range s.byPrincipal[principal] {
		if !yield(c) {
			return
		}
	}
	for _, c := range s.anyone {
		if !yield(c) {
			return
		}
	}
}

// Decide answers one request. Default deny; a matching deny grant wins over any allow
// (a deny's scope covers protected resources too: refusing is always safe).
func (s *Set) Decide(r Request) Decision {
	var allow *compiled
	protectedMiss := false
	var deny *compiled
	s.candidates(r.Principal, func(c *compiled) bool {
		if !c.matchesTool(r.Tool) || !c.matchesAction(r.Action) || !c.scope.covers(r.Resource) {
			return true
		}
		if c.g.Effect == Deny {
			deny = c
			return false
		}
		if allow != nil {
			return true
		}
		if r.Protected && !c.scope.coversProtected(r.Resource, r.ProtectedRoot) {
			protectedMiss = true
			return true
		}
		allow = c
		return true
	})
	switch {
	case deny != nil:
		g := deny.g
		return Decision{Reason: ReasonDenied, Grant: &g}
	case allow != nil:
		g := allow.g
		return Decision{Allowed: true, Reason: ReasonAllowed, Grant: &g}
	case protectedMiss:
		return Decision{Reason: ReasonProtected}
	default:
		return Decision{Reason: ReasonNoGrant}
	}
}

// MayUse reports whether some call of tool could be allowed for principal: an allow
// grant matches it and no deny grant refuses every action and resource that allow
// covers. This is the catalogue's third gate, so a tool the principal can never use is
// not published.
func (s *Set) MayUse(principal, tool string) bool {
	var allows, denies []*compiled
	s.candidates(principal, func(c *compiled) bool {
		if c.matchesTool(tool) {
			if c.g.Effect == Deny {
				denies = append(denies, c)
			} else {
				allows = append(allows, c)
			}
		}
		return true
	})
	for _, a := range allows {
		shadowed := false
		for _, d := range denies {
			if d.scope.kind == scopeAny && (d.g.Action == "*" || d.g.Action == a.g.Action) {
				shadowed = true
				break
			}
		}
		if !shadowed {
			return true
		}
	}
	return false
}
