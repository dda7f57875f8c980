// Package names keeps one tool from taking a name that resolves to another: the
// shadowing check for upstream servers' tools (docs/trust.md, "No shadowing").
//
// A tool is published under several names: its canonical id (`github.create_issue`,
// what toolgate serve and bridges publish), the `toolgate mcp` prefixed form
// (`toolgate_github_create_issue`, like `toolgate_local_read_file`), the form of
// `--tool-prefix none` (`read_file` for local tools), and, per harness, the
// stable short form toolgate publishes when a harness would reject a name and the
// display name the harness shows its model (`mcp__toolgate__github_create_issue`; the
// rules are internal/harness's). A model reads any of them; a newcomer whose name, in any
// form, reads the same as a name another tool already has could take that tool's
// place. So every form of every registered tool is compared, across surfaces, after
// normalisation (Key): case-insensitively, with characters a harness rewrites mapped
// the way it rewrites them ('.' and other characters outside [A-Za-z0-9_-] to '_'),
// and with hidden characters dropped and lookalike letters folded (textscan.Skeleton),
// so `Read_File`, `read.file` and `reаd_file` (Cyrillic а) all meet `read_file`.
//
// The tool already registered keeps its name; the newcomer is refused with a Collision
// naming both. Within one batch (a server's whole catalogue) the order is the byte
// order of the canonical ids, so the outcome never depends on the order a server lists
// its tools in.
package names

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/toolgate/toolgate/internal/harness"
	"github.com/toolgate/toolgate/internal/textscan"
)

// Surface is one way toolgate publishes tool names.
type Surface struct {
	// Name says where the name is published ("toolgate mcp").
	Name string
	// Publish maps a canonical id ("ns.name") to the name published there.
	Publish func(id string) string
}

// The surfaces of DefaultSurfaces.
const (
	SurfaceCanonical  = "canonical id"
	SurfacePrefixed   = "toolgate mcp"
	SurfaceUnprefixed = "toolgate mcp --tool-prefix none"
)

// BareSurface is the --tool-prefix none surface for a `toolgate mcp` that publishes
// upstream tools by their bare names too (Options.BareUpstream): then two servers'
// tools of one name collide there, and the first registered keeps it.
func BareSurface() Surface {
	return Surface{SurfaceUnprefixed, func(id string) string {
		if ns, _ := split(id); ns == "server" || ns == "toolgate" {
			return prefixed(id)
		}
		_, name := split(id)
		return name
	}}
}

// DefaultSurfaces are the published forms of docs/toolgate-mcp.md and docs/harnesses.md:
//   - the canonical id (toolgate serve, bridges);
//   - `toolgate mcp`'s prefixed form toolgate_<ns>_<name> (toolgate.<n> is
//     toolgate_<n>): what localtools.Namer gives local.* and server.* tools with the
//     default prefix, and the form upstream tools take in that style;
//   - the --tool-prefix none form: the bare name of a local tool; the control plane
//     keeps its prefix; an upstream tool keeps its canonical id. (Publishing upstream
//     tools bare would make any two servers with a "search" tool collide, and
//     localtools.Namer publishes them canonically today.)
//
// TestDefaultSurfacesMatchLocaltools keeps the built-in namespaces equal to
// localtools.Namer.
func DefaultSurfaces() []Surface {
	return []Surface{
		{SurfaceCanonical, func(id string) string { return id }},
		{SurfacePrefixed, prefixed},
		{SurfaceUnprefixed, func(id string) string {
			switch ns, name := split(id); ns {
			case "local":
				return name
			case "server", "toolgate":
				return prefixed(id)
			}
			return id
		}},
	}
}

func prefixed(id string) string {
	ns, name := split(id)
	if ns == "toolgate" {
		return "toolgate_" + name
	}
	return "toolgate_" + ns + "_" + name
}

func split(id string) (ns, name string) {
	ns, name, _ = strings.Cut(id, ".")
	return ns, name
}

// Key is the normalised form names are compared in: hidden characters dropped,
// lookalikes folded to ASCII and everything lower-cased (textscan.Skeleton), then every
// character outside [a-z0-9_-] mapped to '_', as Claude Code, Codex and opencode map
// them.
func Key(name string) string {
	s := textscan.Skeleton(name)
	keep := func(c rune) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-' }
	if !strings.ContainsFunc(s, func(r rune) bool { return r >= utf8.RuneSelf }) {
		b := []byte(s)
		for i, c := range b {
			if !keep(rune(c)) {
				b[i] = '_'
			}
		}
		return string(b)
	}
	var out strings.Builder
	for _, c := range s { // one '_' per character, not per byte
		if keep(c) {
			out.WriteRune(c)
		} else {
			out.WriteByte('_')
		}
	}
	return out.String()
}

// Form is one published name of a tool.
type Form struct {
	// Surface says where it is published ("toolgate mcp", "claude-code short form",
	// "claude-code display name", …).
	Surface string
	Name    string
}

func (f Form) String() string { return fmt.Sprintf("%q (%s)", textscan.Escape(f.Name, 128), f.Surface) }

// Collision is a newcomer refused because one of its names reads as another tool's.
type Collision struct {
	// Newcomer is the refused tool's canonical id; NewcomerForm the name that collides.
	Newcomer     string
	NewcomerForm Form
	// Holder is the tool that keeps the name; HolderForm its name that was matched.
	Holder     string
	HolderForm Form
}

func (c Collision) String() string {
	return fmt.Sprintf("%s would be published as %s, which reads as %s of %s (%s): %s keeps the name and %s is refused",
		textscan.Escape(c.Newcomer, 200), c.NewcomerForm, c.HolderForm, textscan.Escape(c.Holder, 200), owner(c.Holder),
		textscan.Escape(c.Holder, 200), textscan.Escape(c.Newcomer, 200))
}

// owner describes who a canonical id belongs to.
func owner(id string) string {
	switch ns, _ := split(id); ns {
	case "local":
		return "a local tool"
	case "server", "toolgate":
		return "a built-in tool"
	default:
		return "a tool of server " + textscan.Escape(ns, 64)
	}
}

// RefusedError is the error Add returns for a refused newcomer.
type RefusedError struct {
	Collisions []Collision
}

func (e *RefusedError) Error() string {
	if len(e.Collisions) == 1 {
		return "names: " + e.Collisions[0].String()
	}
	parts := make([]string, len(e.Collisions))
	for i, c := range e.Collisions {
		parts[i] = c.String()
	}
	return fmt.Sprintf("names: %d collisions: %s", len(parts), strings.Join(parts, "; "))
}

// ErrInvalidID: an id without a namespace ("ns.name").
var ErrInvalidID = errors.New("names: a canonical id is namespace.name")

// maxCollisions bounds the collisions reported for one newcomer (one per holder).
const maxCollisions = 8

// Options configure a Registry.
type Options struct {
	// Surfaces are the published forms; nil means DefaultSurfaces(), with BareSurface
	// in place of its unprefixed surface when BareUpstream is set.
	Surfaces []Surface
	// BareUpstream: `toolgate mcp --tool-prefix none` publishes upstream tools by their
	// bare names (see BareSurface).
	BareUpstream bool
	// Harnesses whose short forms and display names count; nil means harness.All().
	Harnesses []*harness.Harness
	// HarnessServer is the name toolgate has in the harnesses' files (their display
	// names are namespaced under it); "" means harness.DefaultServerName.
	HarnessServer string
}

// Registry holds the names every published tool has taken. It is safe for concurrent
// use.
type Registry struct {
	surfaces []Surface
	rules    []*harness.Harness
	server   string

	mu     sync.Mutex
	byKey  map[string]holder
	keysOf map[string][]string
}

type holder struct {
	id   string
	form Form
}

// New returns an empty Registry.
func New(o Options) *Registry {
	r := &Registry{surfaces: o.Surfaces, rules: o.Harnesses, server: o.HarnessServer,
		byKey: map[string]holder{}, keysOf: map[string][]string{}}
	if r.surfaces == nil {
		r.surfaces = DefaultSurfaces()
		if o.BareUpstream {
			r.surfaces[2] = BareSurface()
		}
	}
	if r.rules == nil {
		r.rules = harness.All()
	}
	if r.server == "" {
		r.server = harness.DefaultServerName
	}
	return r
}

// Forms lists every published name of id, one per normalised key: first the
// surfaces' names, then each harness's short forms and display names of them (the
// first form to produce a key names it).
func (r *Registry) Forms(id string) []Form {
	forms, _ := r.forms(id)
	return forms
}

// forms is Forms with each form's key.
func (r *Registry) forms(id string) ([]Form, []string) {
	var out []Form
	var keys []string
	seen := map[string]bool{}
	add := func(surface, name string) {
		if k := Key(name); !seen[k] {
			seen[k] = true
			out = append(out, Form{Surface: surface, Name: name})
			keys = append(keys, k)
		}
	}
	pubs := make([]string, len(r.surfaces))
	for i, s := range r.surfaces {
		pubs[i] = s.Publish(id)
		add(s.Name, pubs[i])
	}
	for _, pub := range pubs {
		for _, h := range r.rules {
			short := h.Names.Published(r.server, pub)
			if short != pub {
				add(h.ID+" short form", short)
			}
			add(h.ID+" display name", h.Names.Display(r.server, short))
		}
	}
	return out, keys
}

// Check reports the collisions id would have, without registering it. A tool never
// collides with itself.
func (r *Registry) Check(id string) ([]Collision, error) {
	if ns, name := split(id); ns == "" || name == "" {
		return nil, fmt.Errorf("%w: %q", ErrInvalidID, textscan.Escape(id, 200))
	}
	forms, keys := r.forms(id)
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.collisions(id, forms, keys), nil
}

func (r *Registry) collisions(id string, forms []Form, keys []string) []Collision {
	var out []Collision
	var holders []string
	for i, f := range forms {
		h, ok := r.byKey[keys[i]]
		if !ok || h.id == id || slices.Contains(holders, h.id) {
			continue
		}
		holders = append(holders, h.id)
		out = append(out, Collision{Newcomer: id, NewcomerForm: f, Holder: h.id, HolderForm: h.form})
		if len(out) == maxCollisions {
			break
		}
	}
	return out
}

// Add registers id under every one of its forms, or, when any form collides with a
// registered tool's, registers nothing and returns a *RefusedError. Adding an id
// already registered is a no-op.
func (r *Registry) Add(id string) error {
	if ns, name := split(id); ns == "" || name == "" {
		return fmt.Errorf("%w: %q", ErrInvalidID, textscan.Escape(id, 200))
	}
	forms, keys := r.forms(id)
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.keysOf[id]; ok {
		return nil
	}
	if cs := r.collisions(id, forms, keys); len(cs) > 0 {
		return &RefusedError{Collisions: cs}
	}
	for i, f := range forms {
		r.byKey[keys[i]] = holder{id: id, form: f}
	}
	r.keysOf[id] = keys
	return nil
}

// AddAll adds ids in byte order and returns the refusals by id (nil when every id was
// added). An id that is not namespace.name is refused with ErrInvalidID.
func (r *Registry) AddAll(ids []string) map[string]error {
	sorted := slices.Clone(ids)
	slices.Sort(sorted)
	var refused map[string]error
	for _, id := range slices.Compact(sorted) {
		if err := r.Add(id); err != nil {
			if refused == nil {
				refused = map[string]error{}
			}
			refused[id] = err
		}
	}
	return refused
}

// Remove frees every name of id; it reports whether id was registered.
func (r *Registry) Remove(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	keys, ok := r.keysOf[id]
	for _, k := range keys {
		delete(r.byKey, k)
	}
	delete(r.keysOf, id)
	return ok
}

// RemoveNamespace frees the names of every tool of namespace ns (a server was
// uninstalled or its catalogue is being replaced) and returns their ids, sorted.
func (r *Registry) RemoveNamespace(ns string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ids []string
	for id, keys := range r.keysOf {
		if n, _ := split(id); n == ns {
			ids = append(ids, id)
			for _, k := range keys {
				delete(r.byKey, k)
			}
			delete(r.keysOf, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// Others returns what a scan of namespace ns's texts should treat as someone else's
// (textscan.Options): every published name of every tool outside ns, mapped to its
// canonical id, and the other namespaces.
func (r *Registry) Others(ns string) (tools map[string]string, namespaces []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	tools = map[string]string{}
	seen := map[string]bool{}
	for _, h := range r.byKey {
		n, _ := split(h.id)
		if n == ns {
			continue
		}
		tools[h.form.Name] = h.id
		if !seen[n] {
			seen[n] = true
			namespaces = append(namespaces, n)
		}
	}
	slices.Sort(namespaces)
	return tools, namespaces
}

// Resolve returns the registered tool a name reads as, in any form.
func (r *Registry) Resolve(name string) (id string, form Form, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	h, ok := r.byKey[Key(name)]
	return h.id, h.form, ok
}

// IDs lists the registered ids, sorted.
func (r *Registry) IDs() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	ids := make([]string, 0, len(r.keysOf))
	for id := range r.keysOf {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}
