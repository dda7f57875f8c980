package harness

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
	"sync"
)

// NameRule is how one harness turns an MCP server name and a published tool name into
// the name its model sees, and what that name must satisfy. The rules and their sources
// are listed in docs/harnesses.md.
type NameRule struct {
	// Display reproduces the harness's own name for a tool.
	Display func(server, tool string) string
	// MaxLen bounds the counted length (0: no bound).
	MaxLen int
	// Length counts a name against MaxLen; nil counts len(Display(server, tool)).
	Length func(server, tool string) int
	// Chars reports whether the harness can pass a character of a published tool name
	// on to the model provider. nil means every character is fine because the harness
	// rewrites names itself (such as '.' to '_') and maps calls back.
	Chars func(rune) bool
	// Summary states the rule in one line.
	Summary string
}

// Alias returns the display name of a published tool name under server.
func (r NameRule) Alias(server, tool string) string { return r.Display(server, tool) }

// Problem explains why tool breaks the harness's rules under server, or "".
func (r NameRule) Problem(server, tool string) string {
	if tool == "" {
		return "empty name"
	}
	if r.Chars != nil {
		if bad := firstInvalid(tool, r.Chars); bad != "" {
			return fmt.Sprintf("contains %s, which this harness passes to the model provider unchanged and the provider rejects", bad)
		}
	}
	if r.MaxLen > 0 {
		n := len(r.Display(server, tool))
		if r.Length != nil {
			n = r.Length(server, tool)
		}
		if n > r.MaxLen {
			return fmt.Sprintf("is %d characters as the harness counts it (%s), over its limit of %d", n, r.Display(server, tool), r.MaxLen)
		}
	}
	return ""
}

// firstInvalid names the first character outside [A-Za-z0-9_-], or "".
func firstInvalid(s string, ok func(rune) bool) string {
	for _, c := range s {
		if !ok(c) {
			return fmt.Sprintf("%q", c)
		}
	}
	return ""
}

func isSafe(c rune) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

// sanitize maps every character outside [A-Za-z0-9_-] to '_', the way Claude Code,
// Codex and opencode treat names.
func sanitize(s string) string {
	var b strings.Builder
	for _, c := range s {
		if isSafe(c) {
			b.WriteRune(c)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

// shortHashLen is how many hex digits of SHA-256(canonical id) a short form carries:
// 32 bits, so two ids in one catalogue collide with negligible probability, and Check
// reports it if they ever do.
const shortHashLen = 8

// ShortForm is the stable name published for canonical under server when the canonical
// id breaks the rule: the id with unsafe characters mapped to '_', cut to fit, plus '_'
// and 8 hex digits of SHA-256(canonical). It depends only on the harness, the server
// name and the id, so it is the same on every run.
func (r NameRule) ShortForm(server, canonical string) string {
	sum := sha256.Sum256([]byte(canonical))
	suffix := "_" + hex.EncodeToString(sum[:])[:shortHashLen]
	base := sanitize(canonical)
	for n := len(base); n >= 1; n-- {
		cand := strings.TrimRight(base[:n], "_-") + suffix
		if strings.TrimRight(base[:n], "_-") == "" {
			cand = base[:1] + suffix
		}
		if r.Problem(server, cand) == "" {
			return cand
		}
	}
	return "t" + suffix
}

// Published returns the name to publish for canonical: the id itself when the harness
// accepts it, else its ShortForm.
func (r NameRule) Published(server, canonical string) string {
	if r.Problem(server, canonical) == "" {
		return canonical
	}
	return r.ShortForm(server, canonical)
}

// Rename is one canonical id published under a short form, and why.
type Rename struct {
	Canonical string
	Published string
	Alias     string
	Reason    string
}

// Namer publishes names for one harness and server name. Its Name method is the
// app.TurnRequest Namer; it remembers every rename it made so `toolgate config` and
// `toolgate run` can report them.
type Namer struct {
	rule   NameRule
	server string

	mu      sync.Mutex
	renames map[string]Rename
}

// Namer returns a Namer for this harness's rule under server name.
func (h *Harness) Namer(server string) *Namer {
	if server == "" {
		server = DefaultServerName
	}
	return &Namer{rule: h.Names, server: server, renames: map[string]Rename{}}
}

// Name maps a canonical id to its published name.
func (n *Namer) Name(canonical string) string {
	pub := n.rule.Published(n.server, canonical)
	if pub != canonical {
		n.mu.Lock()
		n.renames[canonical] = Rename{
			Canonical: canonical,
			Published: pub,
			Alias:     n.rule.Display(n.server, pub),
			Reason:    n.rule.Problem(n.server, canonical),
		}
		n.mu.Unlock()
	}
	return pub
}

// Alias reproduces the harness display name of a published name.
func (n *Namer) Alias(published string) string { return n.rule.Display(n.server, published) }

// Renames lists every rename Name made so far, sorted by canonical id.
func (n *Namer) Renames() []Rename {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make([]Rename, 0, len(n.renames))
	for _, r := range n.renames {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Canonical < out[j].Canonical })
	return out
}

// Finding is one catalogue problem for a harness.
type Finding struct {
	Canonical string
	Published string
	Alias     string
	// Renamed: the id is published under a short form (Reason says why).
	// Otherwise the finding is an error the short form could not solve.
	Renamed bool
	Reason  string
}

func (f Finding) String() string {
	if f.Renamed {
		return fmt.Sprintf("%s is published as %s (shown as %s): the canonical id %s", f.Canonical, f.Published, f.Alias, f.Reason)
	}
	return fmt.Sprintf("%s: %s", f.Canonical, f.Reason)
}

// Check reports, for every canonical id of a catalogue, the ids that are renamed for
// this harness and every remaining problem: a short form that still breaks the rule
// (a server name too long to leave room), or two ids that end up with one published
// name or one display name (the harness could not tell them apart).
func (h *Harness) Check(server string, ids []string) []Finding {
	if server == "" {
		server = DefaultServerName
	}
	r := h.Names
	var out []Finding
	byPub := map[string]string{}
	byAlias := map[string]string{}
	sorted := append([]string(nil), ids...)
	sort.Strings(sorted)
	for _, id := range sorted {
		pub := r.Published(server, id)
		alias := r.Display(server, pub)
		if pub != id {
			out = append(out, Finding{Canonical: id, Published: pub, Alias: alias, Renamed: true, Reason: r.Problem(server, id)})
		}
		if p := r.Problem(server, pub); p != "" {
			out = append(out, Finding{Canonical: id, Published: pub, Alias: alias, Reason: "no short form fits: " + p + " (choose a shorter --name)"})
		}
		if other, dup := byPub[pub]; dup {
			out = append(out, Finding{Canonical: id, Published: pub, Alias: alias, Reason: fmt.Sprintf("published name %s is also the name of %s", pub, other)})
		}
		if other, dup := byAlias[alias]; dup && byPub[pub] == "" {
			out = append(out, Finding{Canonical: id, Published: pub, Alias: alias, Reason: fmt.Sprintf("%s shows it as %s, the same name it shows for %s", h.Title, alias, other)})
		}
		byPub[pub] = id
		byAlias[alias] = id
	}
	return out
}
