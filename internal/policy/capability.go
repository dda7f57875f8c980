package policy

import (
	"errors"
	"fmt"
	"sort"
	"strings"
)

// ErrInvalidCapability is wrapped by every ParseCapability and CompileCapabilities
// failure.
var ErrInvalidCapability = errors.New("invalid capability")

// MaxCapabilities bounds how many capabilities one turn may carry; a turn narrowed by
// more is refused rather than silently cut.
const MaxCapabilities = 256

// maxCapabilityLen is far above the longest valid capability (a 64-byte namespace, a
// dot, a 128-byte name and ":execute").
const maxCapabilityLen = 512

// Capability narrows one turn. It is a tool pattern exactly as grants write them ("*",
// "ns.*" or a canonical id) and, optionally, one action. A capability only ever takes
// away: what a turn may see and do is what the grants allow AND what some capability
// covers, so a capability naming a tool the grants refuse changes nothing.
type Capability struct {
	// Tool is "*", "ns.*" or "ns.name".
	Tool string
	// Action is "read", "write" or "execute"; "" covers every action.
	Action string
}

// String is the capability's written form, PATTERN or PATTERN:ACTION.
func (c Capability) String() string {
	if c.Action == "" {
		return c.Tool
	}
	return c.Tool + ":" + c.Action
}

// ParseCapability parses PATTERN or PATTERN:ACTION. A tool pattern never contains ':',
// so the suffix is unambiguous.
func ParseCapability(s string) (Capability, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w %s: %s", ErrInvalidCapability, quoteClipped(s), fmt.Sprintf(format, args...))
	}
	if s == "" {
		return Capability{}, fmt.Errorf("%w: empty (use \"*\", \"ns.*\" or \"ns.name\", optionally with :read, :write or :execute)", ErrInvalidCapability)
	}
	if len(s) > maxCapabilityLen {
		return Capability{}, fmt.Errorf("%w: %d bytes, at most %d", ErrInvalidCapability, len(s), maxCapabilityLen)
	}
	pattern, action, hasAction := strings.Cut(s, ":")
	// The pattern first: "path:docs/" is a resource written by mistake, and saying its
	// pattern is not a tool id explains that better than complaining about "docs/".
	if err := validToolPattern(pattern); err != nil {
		return Capability{}, bad("%v", err)
	}
	if hasAction {
		switch action {
		case "read", "write", "execute":
		case "", "*":
			return Capability{}, bad("the action suffix must be read, write or execute (leave it out to cover every action)")
		default:
			return Capability{}, bad("action %s is not read, write or execute", quoteClipped(action))
		}
	}
	return Capability{Tool: pattern, Action: action}, nil
}

// Capabilities is a compiled, immutable set of capabilities. A nil *Capabilities
// narrows nothing: it covers every tool and allows every action, leaving the grants
// alone to decide.
type Capabilities struct {
	list []compiledCapability
	key  string
}

type compiledCapability struct {
	kind   int
	arg    string
	action string
}

// CompileCapabilities parses and indexes specs. No specs gives nil (no narrowing); any
// invalid spec fails the whole set, so a typo never quietly widens or empties a turn.
func CompileCapabilities(specs []string) (*Capabilities, error) {
	if len(specs) == 0 {
		return nil, nil
	}
	if len(specs) > MaxCapabilities {
		return nil, fmt.Errorf("%w: %d given, at most %d", ErrInvalidCapability, len(specs), MaxCapabilities)
	}
	seen := make(map[string]bool, len(specs))
	c := &Capabilities{}
	keys := make([]string, 0, len(specs))
	for _, s := range specs {
		cp, err := ParseCapability(s)
		if err != nil {
			return nil, err
		}
		w := cp.String()
		if seen[w] {
			continue
		}
		seen[w] = true
		keys = append(keys, w)
		kind, arg := compileToolPattern(cp.Tool)
		c.list = append(c.list, compiledCapability{kind: kind, arg: arg, action: cp.Action})
	}
	sort.Strings(keys)
	c.key = strings.Join(keys, "\n")
	return c, nil
}

// Covers reports whether some capability's pattern matches tool, whatever its action:
// the tool may appear in the turn's catalogue (if the grants allow it too).
func (c *Capabilities) Covers(tool string) bool {
	if c == nil {
		return true
	}
	for _, cp := range c.list {
		if matchTool(cp.kind, cp.arg, tool) {
			return true
		}
	}
	return false
}

// Allows reports whether some capability matches tool and action: the call may go on to
// be decided by the grants.
func (c *Capabilities) Allows(tool, action string) bool {
	if c == nil {
		return true
	}
	for _, cp := range c.list {
		if matchTool(cp.kind, cp.arg, tool) && (cp.action == "" || cp.action == action) {
			return true
		}
	}
	return false
}

// Key is the set's canonical form (sorted, deduplicated, one per line; "" for nil): two
// sets with the same key narrow exactly alike.
func (c *Capabilities) Key() string {
	if c == nil {
		return ""
	}
	return c.key
}

// String lists the capabilities, comma-separated, in canonical order.
func (c *Capabilities) String() string {
	return strings.ReplaceAll(c.Key(), "\n", ",")
}

// quoteClipped quotes a caller-supplied value for an error message, at most 128 bytes
// of it, so a hostile flag cannot flood a log or terminal.
func quoteClipped(s string) string {
	if len(s) > 128 {
		return fmt.Sprintf("%q…", s[:128])
	}
	return fmt.Sprintf("%q", s)
}
