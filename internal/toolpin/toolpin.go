// Package toolpin pins the definitions of upstream MCP servers' tools, so that a tool
// approved today cannot quietly become another tool tomorrow (a "rug pull").
//
// Each tool definition a server lists is parsed strictly (internal/canonjson), reduced
// to one canonical form and digested. The first time a (server, tool name) is seen its
// definition is pinned — trusted on first use — or, when the server's policy says
// pin: "approve", held until a person approves it. From then on every listing is
// compared with the pin: the same digest is published; a different one is quarantined
// (hidden from every new catalogue, its calls refused), with a field-level diff for the
// person who decides, and the old pin stays until that person approves the change. A
// renamed tool is a new tool. The model is docs/trust.md.
//
// What is pinned is the whole tool object, every member: name, title, description,
// inputSchema, outputSchema, annotations, and also members this version does not know
// (icons, execution, _meta, whatever a later protocol revision adds). Anything a
// stranger sends may reach a harness or a model, or change how a client behaves
// (_meta.ui names the interface an MCP Apps host renders); a member left out of the pin
// is one a server could change without anyone noticing. So the integrator must publish
// only what was pinned: the definition, or a subset of it, never a member fetched after
// the decision.
//
// Numbers are compared by exact decimal value, so 1.50 and 1.5 are one definition: the
// same constraint to every schema validator and the same text to a model, and a server
// whose JSON library changes how it writes numbers should not raise a quarantine that
// teaches owners to approve without reading. No digit is ever lost (no float64).
//
// The package decides; it does not publish, authorise or persist. Store is the
// persistence it needs (the integrator implements it on internal/store; toolpintest has
// a fake and the behavioural suite every Store must pass).
package toolpin

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/toolgate/toolgate/internal/canonjson"
	"github.com/toolgate/toolgate/internal/textscan"
)

// Limits on one definition.
const (
	// MaxDefinitionBytes bounds a tool definition's JSON text.
	MaxDefinitionBytes = 1 << 20
	// MaxDepth bounds its nesting.
	MaxDepth = 128
	// MaxNameBytes bounds a tool's name. The MCP spec recommends 1–128 characters;
	// pinning records longer names (up to this bound) so the refusal to publish them is
	// made, and reported, where names are published.
	MaxNameBytes = 1024
)

// knownMembers are the tool members of the MCP revisions toolgate speaks. A member
// whose name reads as one of these but is not it ("Description", "ınputSchema",
// "description\u200b") is refused: a client that matches names case-insensitively or
// after normalising would read it as the real one, and the scanner and the person
// reading the diff would look at the other.
var knownMembers = []string{"name", "title", "description", "inputSchema", "outputSchema", "annotations", "icons", "execution", "_meta"}

// DigestPrefix starts every digest.
const DigestPrefix = "sha256:"

// Definition is one tool definition as a server listed it, parsed and canonicalised.
type Definition struct {
	// Server is the server's name (its namespace).
	Server string
	// Name is the tool's name exactly as the server sent it.
	Name string
	// Value is the parsed tool object.
	Value canonjson.Value
	// Canonical is Value's canonical JSON form, the bytes the digest covers.
	Canonical []byte
	// Digest is "sha256:" and the hex SHA-256 of Canonical.
	Digest string
}

// Error is why a definition could not be pinned. A definition that cannot be pinned is
// never published.
type Error struct {
	Server string
	// Tool is the tool's name when it could be read, else "".
	Tool string
	Err  error
}

func (e *Error) Error() string {
	if e.Tool != "" {
		return fmt.Sprintf("server %s, tool %q: %v", e.Server, e.Tool, e.Err)
	}
	return fmt.Sprintf("server %s: tool definition: %v", e.Server, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// Parse reads one tool definition (one element of a tools/list result's "tools") of
// server. It refuses what cannot be pinned unambiguously: JSON canonjson refuses
// (duplicate members, invalid UTF-8, …), a value that is not an object, a missing,
// empty, non-string or over-long name, a title or description that is not a string,
// schemas and annotations that are not objects, and members whose names read as a
// known member's (see knownMembers).
func Parse(server string, raw []byte) (Definition, error) {
	v, err := canonjson.Parse(raw, canonjson.Limits{MaxBytes: MaxDefinitionBytes, MaxDepth: MaxDepth})
	if err != nil {
		return Definition{}, &Error{Server: server, Err: err}
	}
	return FromValue(server, v)
}

// FromValue is Parse for a value already parsed by canonjson.
func FromValue(server string, v canonjson.Value) (Definition, error) {
	if v.Kind != canonjson.Object {
		return Definition{}, &Error{Server: server, Err: fmt.Errorf("is a JSON %s, not an object", v.Kind)}
	}
	n := v.Get("name")
	if n == nil || n.Kind != canonjson.String {
		return Definition{}, &Error{Server: server, Err: errors.New(`has no "name" string`)}
	}
	name := n.Text
	fail := func(format string, args ...any) (Definition, error) {
		return Definition{}, &Error{Server: server, Tool: textscan.Escape(name, 200), Err: fmt.Errorf(format, args...)}
	}
	if name == "" {
		return fail("the name is empty")
	}
	if len(name) > MaxNameBytes {
		return fail("the name is %d bytes, over the limit of %d", len(name), MaxNameBytes)
	}
	if p := reservedPrefix(name); p != "" {
		return fail("a tool name cannot start with %q: that prefix names the pins of other items (docs/trust.md)", p)
	}
	for _, m := range []struct {
		name string
		kind canonjson.Kind
	}{{"title", canonjson.String}, {"description", canonjson.String}, {"inputSchema", canonjson.Object},
		{"outputSchema", canonjson.Object}, {"annotations", canonjson.Object}, {"_meta", canonjson.Object}} {
		if f := v.Get(m.name); f != nil && f.Kind != m.kind {
			return fail("%q is a JSON %s, not a %s", m.name, f.Kind, m.kind)
		}
	}
	for _, m := range v.Members {
		if k := lookalikeMember(m.Key); k != "" {
			return fail("member %q reads as %q but is not it: refused, since a client could take either for %s",
				textscan.Escape(m.Key, 80), k, k)
		}
	}
	c := canonjson.Canonical(&v)
	return Definition{Server: server, Name: name, Value: v, Canonical: c, Digest: Digest(c)}, nil
}

// lookalikeMember returns the known member key impersonates, or "".
func lookalikeMember(key string) string { return lookalikeOf(key, knownMembers) }

// lookalikeOf returns the member of known that key impersonates, or "".
func lookalikeOf(key string, known []string) string {
	folded := strings.TrimSpace(textscan.Skeleton(key))
	for _, k := range known {
		if key == k {
			return ""
		}
		if strings.EqualFold(folded, k) {
			return k
		}
	}
	return ""
}

// Digest returns "sha256:<hex>" of canonical bytes.
func Digest(canonical []byte) string {
	sum := sha256.Sum256(canonical)
	return DigestPrefix + hex.EncodeToString(sum[:])
}
