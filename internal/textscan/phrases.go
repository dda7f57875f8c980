package textscan

import (
	"regexp"
	"slices"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
)

// rule is one instruction-like phrase. The list is conservative on purpose: each rule
// names something no honest tool description says to a model (hide things from the
// user, drop earlier instructions, read a credential file first, wear a chat
// template's markup). Every rule has a test that it fires and the suite checks it stays
// silent on the descriptions of real servers (testdata/catalogues).
type rule struct {
	id       string
	severity Severity
	// anchors: the rule's regexp runs only if the normalised text contains one of
	// these (a cheap filter; the regexp decides).
	anchors []string
	// also: and, when set, one of these too (every alternative of the regexp needs one).
	also []string
	re   *regexp.Regexp
	// detail is what a finding says the phrase does.
	detail string
}

// The rules match the normalised text (see normalise): lower-case, hidden characters
// dropped, lookalikes folded, runs of spaces and tabs as one space, line breaks kept.
// They are compiled on first use, not at program start: compiling them takes about
// 20 ms, which every toolgate command would otherwise pay, scanning or not.
var rules = sync.OnceValue(func() []rule {
	return []rule{
		{
			id: "ignore-instructions", severity: High, anchors: []string{"ignore", "disregard", "forget"},
			also:   []string{"instruction", "prompt", "direction", "rule", "guideline", "message", "context", "command", "guidance", "constraint", "everything", "all "},
			detail: "tells the model to drop its earlier instructions",
			re: words(`\b(?:ignore|disregard|forget)\b(?: (?:all|any|the|your|of|every|these|those|my|previous|prior|above|earlier|preceding|former|original|initial|system|developer))* ` +
				`(?:previous|prior|above|earlier|preceding|former|original|initial|system|developer|all|any|your)\b(?: [a-z]+)? ` +
				`(?:instructions?|prompts?|directions?|rules|guidelines|messages|context|commands|guidance|constraints)\b` +
				`|\bforget (?:everything|all) (?:you|that|above|before)\b`),
		},
		{
			id: "override-instructions", severity: High, anchors: []string{"override", "overrule", "supersede", "bypass", "instructions", "precedence", "priority"},
			detail: "claims to replace or outrank the model's instructions",
			re: words(`\b(?:override|overrule|supersede|bypass)s? (?:all |any |the |your |of )*(?:previous |prior |system |original |safety |security |existing )?(?:instructions|prompts?|guidelines|guardrails)\b` +
				`|\bnew (?:system )?instructions ?:` +
				`|\b(?:these|this|the following|my) instructions? (?:take|takes|have|has) (?:priority|precedence)\b` +
				`|\b(?:takes?|has|have) (?:priority|precedence) over (?:all |any |the |your )*(?:other |previous |system )?(?:instructions|prompts?|rules)\b`),
		},
		{
			id: "conceal-from-user", severity: High, anchors: []string{"user", "human"},
			also:   []string{"tell", "inform", "notif", "alert", "mention", "reveal", "disclos", "hide", "conceal", "keep", " not "},
			detail: "asks the model to keep something from the user",
			re: words(`\b(?:do not|don't|dont|never|must not|should not|shouldn't|mustn't|avoid|without) (?:ever )?(?:tell|telling|inform|informing|notify|notifying|alert|alerting|mention|mentioning|reveal|revealing|disclose|disclosing) (?:this |it |that |anything |any of this )?(?:to )?(?:the |your )?(?:user|human)\b` +
				`|\b(?:hide|conceal|keep) (?:this|it|that|these)(?: [a-z]+){0,3} (?:secret |hidden )?from (?:the |your )?(?:user|human)\b` +
				`|\b(?:the |your )?(?:user|human) (?:must|should|needs? to|may) not (?:know|see|notice|find out|be told|be informed)\b`),
		},
		{
			id: "conceal", severity: Medium, anchors: []string{"mention", "reveal", "disclose"},
			detail: "asks the model not to mention what it is doing",
			re:     words(`\b(?:do not|don't|never|must not|should not) (?:mention|reveal|disclose) (?:that|this|it|anything about)\b`),
		},
		{
			id: "credential-file", severity: Medium,
			anchors: []string{"ssh", "id_", "authorized_keys", ".aws", ".netrc", ".npmrc", ".pypirc", ".pgpass", "credentials", ".kube", ".docker", "/etc/", "mcp.json", ".cursor", "claude_desktop", "gcloud", ".env"},
			detail:  "names a credential or configuration file",
			re: words(`(?:~|\$home|%userprofile%)?/?\.ssh\b|\bid_(?:rsa|dsa|ecdsa|ed25519)\b|\bauthorized_keys\b|\.aws/(?:credentials|config)\b|~/\.aws\b` +
				`|\.netrc\b|\.npmrc\b|\.pypirc\b|\.pgpass\b|\.git-credentials\b|\.kube/config\b|\.docker/config\.json\b|/etc/(?:passwd|shadow|sudoers)\b` +
				`|\bmcp\.json\b|\.cursor/|claude_desktop_config\.json|\.config/gcloud\b|(?:^|[\s'"\x60(/~])\.env\b`),
		},
		{
			id: "before-using", severity: Medium, anchors: []string{"before"},
			also:   []string{" tool", " function"},
			detail: "tells the model to do something else before using the tool",
			re: words(`\bbefore (?:using|calling|invoking|running|executing|you use|you call|you run) (?:this|the|any) (?:tool|function)s?\b,? (?:you )?(?:must |should |need to |always |first |have to |please )*` +
				`(?:read|open|send|include|fetch|pass|provide|upload|attach|copy|cat)\b`),
		},
		{
			id: "markup", severity: High, anchors: []string{"<", "[inst", "[/inst"},
			detail: "carries prompt or chat-template markup aimed at the model",
			re: words(`</?\s*(?:important|system|system[-_ ]?prompt|systemprompt|instructions?|secret|hidden|admin|critical|override|sys)\s*>` +
				`|<\|(?:im_start|im_end|system|user|assistant|endoftext|eot_id|start_header_id|end_header_id|begin_of_text)\|>` +
				`|\[/?inst\]|<</?sys>>`),
		},
		{
			id: "role-marker", severity: Medium, anchors: []string{"system", "assistant", "developer", "you are now", "from now on"},
			also:   []string{":", "you are now", "from now on"},
			detail: "speaks as a system or assistant message",
			re: words(`(?m)^ ?(?:#+ ?)?(?:system|assistant|developer) ?(?:prompt ?)?:` +
				`|\byou are now\b|\bfrom now on,? (?:you|always|never|ignore)\b`),
		},
		{
			id: "sidenote", severity: Medium, anchors: []string{"side"},
			detail: "asks for content to be passed in a side channel",
			re:     words(`\bside ?note\b|\bside[- ]channel\b`),
		},
		{
			id: "directs-other-tool", severity: Medium, anchors: []string{" tool "},
			also:   []string{"must", "shall", "has to", "needs to", "should always", "should never"},
			detail: "dictates how another named tool must behave",
			re:     words(`\b(?:the|any|every) [a-z0-9]+[_.-][a-z0-9_.-]+ tool (?:must|shall|has to|needs to|should always|should never)\b`),
		},
	}
})

// words compiles a rule's pattern with each space standing for one space or one line
// break, as normalise leaves them: a phrase split over lines still matches.
func words(pattern string) *regexp.Regexp {
	return regexp.MustCompile(strings.ReplaceAll(pattern, " ", "[ \n]"))
}

// exfilVerb: a credential-file mention within exfilWindow bytes after one of these
// reads as an order to fetch or send it, and is raised to High.
var exfilVerb = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`\b(?:read|cat|open|include|send|pass|upload|attach|copy|forward|provide|paste|access|load|extract|collect|post|exfiltrate|submit|fetch|grab|retrieve|contents? of)\b`)
})

const exfilWindow = 120

// normalised is a text as the rules see it, with a map back to the original.
type normalised struct {
	text string
	// at[i] is the byte offset in the original of text[i]; len(at) == len(text)+1.
	at []int
}

// normalise lower-cases s, drops hidden characters, folds lookalikes, turns runs of
// spaces and tabs into one space and runs containing a line break into one "\n".
func normalise(s string) normalised {
	var b strings.Builder
	b.Grow(len(s))
	at := make([]int, 0, len(s)+1)
	space := false // a run of whitespace is pending
	newline := false
	spaceAt := 0
	emit := func(r rune, off int) {
		if space {
			if newline {
				b.WriteByte('\n')
			} else {
				b.WriteByte(' ')
			}
			at = append(at, spaceAt)
			space, newline = false, false
		}
		n := b.Len()
		b.WriteRune(r)
		for range b.Len() - n {
			at = append(at, off)
		}
	}
	for i, r := range s {
		switch {
		case r == '\n' || r == '\r' || r == 0x2028 || r == 0x2029:
			if !space {
				spaceAt = i
			}
			space, newline = true, true
			continue
		case r == ' ' || r == '\t' || unicode.IsSpace(r):
			if !space {
				spaceAt = i
			}
			space = true
			continue
		case r < utf8.RuneSelf:
			if r >= 'A' && r <= 'Z' {
				r += 'a' - 'A'
			}
			emit(r, i)
			continue
		case hidden(r):
			continue
		}
		if a, ok := Fold(r); ok {
			r = a
		}
		emit(unicode.ToLower(r), i)
	}
	if space {
		b.WriteByte(' ')
		at = append(at, spaceAt)
	}
	at = append(at, len(s))
	return normalised{text: b.String(), at: at}
}

// phraseHit is one rule that matched, with the original byte range.
type phraseHit struct {
	rule       *rule
	severity   Severity
	start, end int
}

// phrases runs every rule over s and returns the first hit of each.
func phrases(s string) []phraseHit {
	if !maybePhrase(s) {
		return nil
	}
	n := normalise(s)
	var out []phraseHit
	rs := rules()
	for i := range rs {
		r := &rs[i]
		if !containsAny(n.text, r.anchors) || r.also != nil && !containsAny(n.text, r.also) {
			continue
		}
		loc := r.re.FindStringIndex(n.text)
		if loc == nil {
			continue
		}
		h := phraseHit{rule: r, severity: r.severity, start: n.at[loc[0]], end: n.at[loc[1]]}
		if r.id == "credential-file" {
			from := max(0, loc[0]-exfilWindow)
			if exfilVerb().MatchString(n.text[from:loc[0]]) || strings.Contains(n.text[from:loc[0]], "before using this tool") {
				h.severity = High
			}
		}
		out = append(out, h)
	}
	return out
}

// anchorsByByte indexes every rule's anchors (the first word of a multi-word one) by
// their first byte: a pure-ASCII text containing none of them, in any case, is skipped
// without normalising it. Text with other characters is always normalised; it may hide
// an anchor behind lookalikes or invisible characters.
var anchorsByByte = sync.OnceValue(func() *[256][]string {
	t := new([256][]string)
	for _, r := range rules() {
		for _, a := range r.anchors {
			if k := strings.IndexByte(a[1:], ' '); k >= 0 {
				a = a[:k+1]
			}
			if !slices.Contains(t[a[0]], a) {
				t[a[0]] = append(t[a[0]], a)
			}
		}
	}
	return t
})

func maybePhrase(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= utf8.RuneSelf {
			return true
		}
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		for _, a := range anchorsByByte()[c] {
			if hasPrefixFold(s[i:], a) {
				return true
			}
		}
	}
	return false
}

// hasPrefixFold reports whether s starts with the lower-case ASCII prefix, ignoring
// ASCII case and reading tab, CR and LF as a space.
func hasPrefixFold(s, prefix string) bool {
	if len(s) < len(prefix) {
		return false
	}
	for i := 0; i < len(prefix); i++ {
		c := s[i]
		switch {
		case c >= 'A' && c <= 'Z':
			c += 'a' - 'A'
		case c == '\t' || c == '\n' || c == '\r':
			c = ' '
		}
		if c != prefix[i] {
			return false
		}
	}
	return true
}

func containsAny(s string, subs []string) bool {
	for _, a := range subs {
		if strings.Contains(s, a) {
			return true
		}
	}
	return false
}
