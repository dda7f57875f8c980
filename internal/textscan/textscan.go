// Package textscan looks for what hides instructions from a person reading a tool's
// text: invisible and bidirectional Unicode, tag characters and variation-selector
// runs (decoded, so the finding shows what they spell), lookalike letters of other
// scripts, instruction-like phrases aimed at the model, mentions of other servers'
// tools, very long texts and encoded blobs.
//
// An upstream MCP server's tool descriptions and schemas go into the model's context
// verbatim while the harness usually shows the user only a name; that gap is where tool
// poisoning lives (docs/trust.md, "Suspicious text"). The scanner cannot prove a text
// honest. It flags, with a severity, where the text is (a JSON Pointer) and a safe
// excerpt, and the server's policy decides whether a flag holds the tool back.
//
// A Scanner is immutable and safe for concurrent use. Scanning is linear in the text
// and allocates only for what it reports (and for the normalised copy of text that
// needs one).
package textscan

import (
	"encoding"
	"fmt"
	"slices"
	"strings"

	"github.com/toolgate/toolgate/internal/canonjson"
)

// Severity orders findings. The zero value is "no finding".
type Severity uint8

// The severities. High is what no honest tool text contains (bidi overrides, tag
// characters, "ignore previous instructions"); Medium is unusual and worth a look
// (invisible characters, a credential file's name, a mention of another server's
// tool); Low is worth knowing (a very long text, a private-use character); Info is
// recorded for completeness.
const (
	Info Severity = iota + 1
	Low
	Medium
	High
)

var severityNames = [...]string{"", "info", "low", "medium", "high"}

func (s Severity) String() string {
	if int(s) < len(severityNames) && s != 0 {
		return severityNames[s]
	}
	return fmt.Sprintf("Severity(%d)", s)
}

// MarshalText writes the severity's name.
func (s Severity) MarshalText() ([]byte, error) {
	if s == 0 || int(s) >= len(severityNames) {
		return nil, fmt.Errorf("textscan: no severity %d", s)
	}
	return []byte(severityNames[s]), nil
}

// UnmarshalText reads a severity's name.
func (s *Severity) UnmarshalText(b []byte) error {
	v, err := ParseSeverity(string(b))
	if err == nil {
		*s = v
	}
	return err
}

var (
	_ encoding.TextMarshaler   = Severity(0)
	_ encoding.TextUnmarshaler = (*Severity)(nil)
)

// ParseSeverity reads "info", "low", "medium" or "high" (any case).
func ParseSeverity(s string) (Severity, error) {
	for i, n := range severityNames {
		if i > 0 && strings.EqualFold(s, n) {
			return Severity(i), nil
		}
	}
	return 0, fmt.Errorf("unknown severity %q (want info, low, medium or high)", s)
}

// Kind is what a finding found.
type Kind string

// The kinds of findings.
const (
	KindControl     Kind = "control"     // C0/C1 control characters (ESC can rewrite a terminal)
	KindBidi        Kind = "bidi"        // bidirectional embeddings, overrides, isolates, marks
	KindInvisible   Kind = "invisible"   // zero-width, soft hyphen, word joiner, BOM, fillers, other format characters
	KindTag         Kind = "tag"         // Unicode tag characters; Decoded holds what they spell
	KindVariation   Kind = "variation"   // a run of variation selectors; Decoded holds the bytes they encode
	KindPrivateUse  Kind = "private_use" // private-use characters
	KindHomoglyph   Kind = "homoglyph"   // letters of another script that pass for Latin, or a non-ASCII tool name
	KindInstruction Kind = "instruction" // a phrase aimed at the model; Detail names the rule
	KindReference   Kind = "reference"   // mentions another server's tool or namespace
	KindLong        Kind = "long"        // a very long text
	KindBlob        Kind = "blob"        // a base64 or hex blob; Decoded holds readable content
)

// Finding is one thing the scanner flagged.
type Finding struct {
	Kind     Kind     `json:"kind"`
	Severity Severity `json:"severity"`
	// Pointer is where the text is: a JSON Pointer into the tool object ("/description",
	// "/inputSchema/properties/path/description").
	Pointer string `json:"pointer"`
	// Key: the text is the member name at Pointer, not its value.
	Key bool `json:"key,omitempty"`
	// Rule names the phrase rule (KindInstruction) or the referenced tool (KindReference).
	Rule string `json:"rule,omitempty"`
	// Detail says what was found, in words.
	Detail string `json:"detail"`
	// Count is how many times it occurs in this text (characters, for character kinds).
	Count int `json:"count,omitempty"`
	// Excerpt is the text around the first occurrence, escaped by Escape and bounded.
	Excerpt string `json:"excerpt"`
	// Decoded is what hidden characters or a blob spell, escaped and bounded.
	Decoded string `json:"decoded,omitempty"`
}

func (f Finding) String() string {
	where := f.Pointer
	if where == "" {
		where = "/"
	}
	if f.Key {
		where += " (member name)"
	}
	s := fmt.Sprintf("%s %s at %s: %s", f.Severity, f.Kind, where, f.Detail)
	if f.Decoded != "" {
		s += fmt.Sprintf(" (spells %q)", f.Decoded)
	}
	if f.Excerpt != "" {
		s += fmt.Sprintf(": %q", f.Excerpt)
	}
	return s
}

// Max returns the highest severity among fs (0 when fs is empty).
func Max(fs []Finding) Severity {
	var m Severity
	for _, f := range fs {
		m = max(m, f.Severity)
	}
	return m
}

// Bounds of what the scanner reports.
const (
	// MaxFindings bounds the findings of one Tool call; the highest severities are kept.
	MaxFindings = 64
	// ExcerptRunes bounds an excerpt's escaped length.
	ExcerptRunes = 120
	// DefaultLongText is the length in characters over which a text is "long" (Low);
	// at four times it, Medium. The longest description among the real servers in
	// testdata/catalogues is under 3000 characters.
	DefaultLongText = 4096
)

// Options configure a Scanner.
type Options struct {
	// OtherTools are names of tools that belong to someone else — built-ins, local
	// tools, other servers' tools — in any published form, each mapped to what the
	// finding should call it (usually its canonical id). A text that mentions one is
	// flagged Medium. Names made of one plain word ("search", "read") are left out: an
	// ordinary sentence would match them. A name is kept when it has 4 or more
	// characters and contains '_', '-', '.', a digit, or a capital after its first
	// letter.
	OtherTools map[string]string
	// OtherNamespaces are namespaces of others (other servers' names, "local",
	// "toolgate"). A token that starts with one followed by '.', '_' or '__'
	// ("slack_post", "github.create_issue") is flagged Low.
	OtherNamespaces []string
	// LongText overrides DefaultLongText.
	LongText int
}

// Scanner scans tool text. Build one per catalogue context with New.
type Scanner struct {
	tools      map[string]string // lower-cased name → label
	namespaces map[string]bool
	longText   int
}

// New returns a Scanner for o.
func New(o Options) *Scanner {
	s := &Scanner{tools: map[string]string{}, namespaces: map[string]bool{}, longText: o.LongText}
	if s.longText <= 0 {
		s.longText = DefaultLongText
	}
	for name, label := range o.OtherTools {
		if distinctive(name) {
			s.tools[strings.ToLower(name)] = label
		}
	}
	for _, ns := range o.OtherNamespaces {
		if ns != "" {
			s.namespaces[strings.ToLower(ns)] = true
		}
	}
	return s
}

// distinctive reports whether a tool name is unlike an ordinary word (see
// Options.OtherTools).
func distinctive(name string) bool {
	if len(name) < 4 {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c == '_' || c == '-' || c == '.' || c >= '0' && c <= '9' || i > 0 && c >= 'A' && c <= 'Z' {
			return true
		}
	}
	return false
}

// place is where a text sits in a tool, which decides which checks apply and how hard.
type place uint8

const (
	inText        place = iota // any other string or member name
	inDescription              // the tool's description
	inName                     // the tool's own name
)

// Text scans one string found at pointer (key: it is a member name). Tool calls it for
// every string of a definition; it is exported for texts that are not tools (a
// server's instructions, a prompt's description).
func (s *Scanner) Text(pointer string, key bool, text string) []Finding {
	var out []Finding
	s.scan(&out, func() string { return pointer }, key, text, inText)
	return out
}

// Name scans a tool's own name: hidden characters in it are always High, and any
// character of another script is flagged (MCP tool names are meant to be ASCII
// [A-Za-z0-9_.-]).
func (s *Scanner) Name(name string) []Finding {
	var out []Finding
	s.scan(&out, func() string { return "/name" }, false, name, inName)
	return out
}

// Tool scans every string of a tool definition (a JSON object): its name, title and
// description, every member name and string anywhere in its schemas, annotations and
// other members. Findings are sorted by severity (highest first), then pointer;
// at most MaxFindings are returned.
func (s *Scanner) Tool(v *canonjson.Value) []Finding {
	var out []Finding
	canonjson.Walk(v, func(path canonjson.Path, key bool, text string) {
		where := inText
		if len(path) == 1 && !key {
			switch path[0] {
			case "name":
				where = inName
			case "description":
				where = inDescription
			}
		}
		s.scan(&out, path.String, key, text, where)
	})
	slices.SortStableFunc(out, func(a, b Finding) int {
		if a.Severity != b.Severity {
			return int(b.Severity) - int(a.Severity)
		}
		return strings.Compare(a.Pointer, b.Pointer)
	})
	if len(out) > MaxFindings {
		out = out[:MaxFindings]
	}
	return out
}
