package toolpin

import (
	"fmt"
	"strings"

	"github.com/toolgate/toolgate/internal/canonjson"
	"github.com/toolgate/toolgate/internal/textscan"
)

// Kind is what a pin pins: a tool, or one of the other items an upstream server lists
// and toolgate relays (resources, resource templates, prompts; docs/trust.md,
// "Resources and prompts"). Every kind's pins live in the same store, keyed by server
// and a pin name: a tool's is its raw name, any other item's is its kind's Prefix and
// its key (the resource's uri, the template's uriTemplate, the prompt's name). No tool
// can take such a name: a tool whose name starts with any Prefix is refused (Parse), so
// a tool's pin can never be met by a resource listing, nor the other way round.
type Kind struct {
	// Name names the kind in reasons ("tool", "prompt").
	Name string
	// Prefix starts the pin name of every item of the kind ("" for tools).
	Prefix string
	// Key is the member whose string is the item's identity.
	Key string
	// strings are the members that must be strings when present.
	strings []string
	// members are the members a lookalike member name is refused for.
	members []string
}

// The kinds.
var (
	KindTool     = Kind{Name: "tool", Key: "name"}
	KindResource = Kind{Name: "resource", Prefix: "resource:", Key: "uri",
		strings: []string{"uri", "name", "title", "description", "mimeType"},
		members: []string{"uri", "name", "title", "description", "mimeType", "annotations", "size", "icons", "_meta"}}
	KindTemplate = Kind{Name: "resource template", Prefix: "template:", Key: "uriTemplate",
		strings: []string{"uriTemplate", "name", "title", "description", "mimeType"},
		members: []string{"uriTemplate", "name", "title", "description", "mimeType", "annotations", "icons", "_meta"}}
	KindPrompt = Kind{Name: "prompt", Prefix: "prompt:", Key: "name",
		strings: []string{"name", "title", "description"},
		members: []string{"name", "title", "description", "arguments", "icons", "_meta"}}
)

// itemKinds are the kinds whose pin names carry a prefix.
var itemKinds = []Kind{KindResource, KindTemplate, KindPrompt}

// PinName is the pin name of an item of kind k whose key is key.
func (k Kind) PinName(key string) string { return k.Prefix + key }

// Owns reports whether the pin name belongs to kind k.
func (k Kind) Owns(pinName string) bool {
	if k.Prefix != "" {
		return strings.HasPrefix(pinName, k.Prefix)
	}
	return reservedPrefix(pinName) == ""
}

// KindOf is the kind a pin name belongs to.
func KindOf(pinName string) Kind {
	for _, k := range itemKinds {
		if k.Owns(pinName) {
			return k
		}
	}
	return KindTool
}

// reservedPrefix is the item kind prefix name starts with, or "".
func reservedPrefix(name string) string {
	for _, k := range itemKinds {
		if strings.HasPrefix(name, k.Prefix) {
			return k.Prefix
		}
	}
	return ""
}

// ParseItem reads one item of kind k (an element of resources/list's "resources",
// resources/templates/list's "resourceTemplates" or prompts/list's "prompts") of
// server, as Parse reads a tool: strictly, canonicalised and digested, the whole object
// pinned. The Definition's Name is the item's pin name (k.PinName of its key).
func ParseItem(server string, k Kind, raw []byte) (Definition, error) {
	if k.Prefix == "" {
		return Parse(server, raw)
	}
	v, err := canonjson.Parse(raw, canonjson.Limits{MaxBytes: MaxDefinitionBytes, MaxDepth: MaxDepth})
	if err != nil {
		return Definition{}, &Error{Server: server, Err: fmt.Errorf("%s definition: %w", k.Name, err)}
	}
	if v.Kind != canonjson.Object {
		return Definition{}, &Error{Server: server, Err: fmt.Errorf("%s definition is a JSON %s, not an object", k.Name, v.Kind)}
	}
	n := v.Get(k.Key)
	if n == nil || n.Kind != canonjson.String || n.Text == "" {
		return Definition{}, &Error{Server: server, Err: fmt.Errorf("%s definition has no %q string", k.Name, k.Key)}
	}
	name := k.PinName(n.Text)
	fail := func(format string, args ...any) (Definition, error) {
		return Definition{}, &Error{Server: server, Tool: textscan.Escape(name, 200), Err: fmt.Errorf(format, args...)}
	}
	if len(name) > MaxNameBytes {
		return fail("the %s is %d bytes, over the limit of %d", k.Key, len(n.Text), MaxNameBytes)
	}
	for _, m := range k.strings {
		if f := v.Get(m); f != nil && f.Kind != canonjson.String {
			return fail("%q is a JSON %s, not a string", m, f.Kind)
		}
	}
	for _, m := range v.Members {
		if km := lookalikeOf(m.Key, k.members); km != "" {
			return fail("member %q reads as %q but is not it: refused, since a client could take either for %s",
				textscan.Escape(m.Key, 80), km, km)
		}
	}
	c := canonjson.Canonical(&v)
	return Definition{Server: server, Name: name, Value: v, Canonical: c, Digest: Digest(c)}, nil
}
