package mcpconfig

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/toolgate/toolgate/internal/keystore"
	"github.com/toolgate/toolgate/internal/rpcwire"
)

// How an entry member is treated. Every member is one of these: nothing is dropped
// without a word.
type memberKind int

const (
	memberRead    memberKind = iota // understood and used
	memberIgnored                   // a harness's own setting: a warning says why it has no effect
	memberRefused                   // would change what the server does or may do, and is not supported: an error
)

type memberRule struct {
	kind memberKind
	why  string
}

const (
	whyApproval = "a harness's approval setting; toolgate's grants decide which calls run (toolgate grant add), so it has no effect"
	whyTimeout  = "toolgate applies its own start-up timeout and its own call timeout (set it with callTimeout, a duration such as \"90s\"), so it has no effect"
	whyWatch    = "toolgate does not restart a server when files change (use toolgate restart), so it has no effect"
	whyMetadata = "catalogue metadata of the editor that wrote the file, so it has no effect"
	whyOAuth    = "is not supported: toolgate signs in to a remote server with OAuth by itself (configure it with oauth: docs/mcp-config.md)"
	whyFilter   = "is not supported: toolgate publishes the tools that grants allow, so grant only the tools you want rather than rely on a filter that would be ignored"
)

// entryMembers is every member an entry may have (docs/mcp-config.md lists the same
// table; a test keeps them equal).
var entryMembers = map[string]memberRule{
	"type":          {kind: memberRead},
	"transportType": {kind: memberRead},
	"command":       {kind: memberRead},
	"args":          {kind: memberRead},
	"env":           {kind: memberRead},
	"cwd":           {kind: memberRead},
	"url":           {kind: memberRead},
	"serverUrl":     {kind: memberRead},
	"httpUrl":       {kind: memberRead},
	"headers":       {kind: memberRead},
	"isolation":     {kind: memberRead},
	"required":      {kind: memberRead},
	"callTimeout":   {kind: memberRead},
	"disabled":      {kind: memberRead},
	"description":   {kind: memberRead},

	"autoApprove": {memberIgnored, whyApproval},
	"alwaysAllow": {memberIgnored, whyApproval},
	"trust":       {memberIgnored, whyApproval},
	"timeout":     {memberIgnored, whyTimeout},
	"watchPaths":  {memberIgnored, whyWatch},
	"dev":         {memberIgnored, whyWatch},
	"gallery":     {memberIgnored, whyMetadata},
	"version":     {memberIgnored, whyMetadata},

	"envFile":          {memberRefused, "is not supported: put the variables in env (their values are kept in the keystore, not in a file toolgate would read at every start)"},
	"includeTools":     {memberRefused, whyFilter},
	"excludeTools":     {memberRefused, whyFilter},
	"oauth":            {kind: memberRead},
	"network":          {kind: memberRead},
	"authProviderType": {memberRefused, whyOAuth},
	"pin":              {memberRefused, "is reserved for catalogue pinning, which this version does not support"},
}

// entryParser gathers one entry's diagnostics and secrets.
type entryParser struct {
	path    string
	opts    *Options
	h       Hasher
	diags   []Diagnostic
	dropped int
	failed  bool
	secrets []keystore.Named
}

func (p *entryParser) add(path string, sev Severity, format string, args ...any) {
	if sev == Error {
		p.failed = true
	}
	if len(p.diags) >= MaxDiagnostics {
		p.dropped++
		return
	}
	p.diags = append(p.diags, Diagnostic{Path: path, Severity: sev, Message: fmt.Sprintf(format, args...)})
}

func (p *entryParser) errorf(path, format string, args ...any) { p.add(path, Error, format, args...) }
func (p *entryParser) warnf(path, format string, args ...any)  { p.add(path, Warning, format, args...) }

// secret records a secret value under name and returns its digest.
func (p *entryParser) secret(name, value string) string {
	s := keystore.NewSecretString(value)
	p.secrets = append(p.secrets, keystore.Named{Name: name, Value: s})
	return p.h.Digest(s)
}

// field reads a member, treating JSON null as absent.
func field(obj map[string]any, name string) (any, bool) {
	v, ok := obj[name]
	if !ok || v == nil {
		return nil, false
	}
	return v, true
}

// str reads a string member; a present non-string is an error.
func (p *entryParser) str(obj map[string]any, name string) (string, bool) {
	v, ok := field(obj, name)
	if !ok {
		return "", false
	}
	s, isStr := v.(string)
	if !isStr {
		p.errorf(pathMember(p.path, name), "must be a string%s", quoteHint(v))
		return "", false
	}
	return s, true
}

// boolean reads a true/false member.
func (p *entryParser) boolean(obj map[string]any, name string) bool {
	v, ok := field(obj, name)
	if !ok {
		return false
	}
	b, isBool := v.(bool)
	if !isBool {
		p.errorf(pathMember(p.path, name), "must be true or false")
	}
	return b
}

// quoteHint suggests quoting a number or boolean where a string belongs (a common slip
// in env: {"PORT": 3000}).
func quoteHint(v any) string {
	switch v.(type) {
	case json.Number, bool:
		return " (write it in quotes)"
	}
	return ""
}

// parseEntry reads one server entry.
func parseEntry(container, key string, raw json.RawMessage, h Hasher, opts *Options) Entry {
	p := &entryParser{path: pathMember(container, key), opts: opts, h: h}
	e := Entry{Key: key}
	if srv := p.entry(key, raw); !p.failed {
		slices.SortFunc(p.secrets, func(a, b keystore.Named) int { return cmp.Compare(a.Name, b.Name) })
		e.Server, e.Secrets = srv, p.secrets
	}
	if p.dropped > 0 {
		sev := Warning
		if p.failed {
			sev = Error
		}
		p.diags = append(p.diags, Diagnostic{Path: p.path, Severity: sev, Message: fmt.Sprintf("%d more problems not shown", p.dropped)})
	}
	e.Diagnostics = p.diags
	return e
}

// entry reads the entry's members into a Server; p.failed says whether it is valid.
func (p *entryParser) entry(key string, raw json.RawMessage) *Server {
	srv := &Server{DisplayName: key, Isolation: Shared}
	switch {
	case strings.TrimSpace(key) == "":
		p.errorf(p.path, "a server needs a name: the key is empty")
	case len(key) > MaxKeyBytes:
		p.errorf(p.path, "the server's name is %d bytes, at most %d", len(key), MaxKeyBytes)
	case textProblem(key, false) != "":
		p.errorf(p.path, "the server's name %s", textProblem(key, false))
	default:
		name, err := NormalizeName(key)
		if err != nil {
			p.errorf(p.path, "the server's name %s", err)
		} else if name != key {
			p.warnf(p.path, "is installed as the server name %q: server names are the namespace of their tools' ids (lower-case letters, digits, '_' and '-')", name)
		}
		srv.Name = name
	}
	v, err := rpcwire.DecodeValue(raw)
	if err != nil {
		p.errorf(p.path, "%s", strings.TrimPrefix(err.Error(), "decoding JSON: "))
		return nil
	}
	obj, ok := v.(map[string]any)
	if !ok {
		p.errorf(p.path, "must be an object (with command for a stdio server, or url for an HTTP one)")
		return nil
	}
	names := make([]string, 0, len(obj))
	for n := range obj {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		rule, known := entryMembers[n]
		switch {
		case !known:
			hint := ""
			for k := range entryMembers {
				if strings.EqualFold(k, n) {
					hint = fmt.Sprintf(" (member names are case-sensitive: did you mean %q?)", k)
				}
			}
			p.errorf(pathMember(p.path, n), "is not a member toolgate knows%s: remove it (docs/mcp-config.md lists what is read)", hint)
		case rule.kind == memberIgnored:
			p.warnf(pathMember(p.path, n), "ignored: %s", rule.why)
		case rule.kind == memberRefused:
			p.errorf(pathMember(p.path, n), "%s", rule.why)
		}
	}
	p.transport(obj, &srv.Transport)
	if iso, ok := p.str(obj, "isolation"); ok {
		switch Isolation(iso) {
		case Shared, Session:
			srv.Isolation = Isolation(iso)
		default:
			p.errorf(pathMember(p.path, "isolation"), `must be "shared" (one process for every caller, the default) or "session" (one per caller session)`)
		}
	}
	srv.Required = p.boolean(obj, "required")
	if v, ok := p.str(obj, "callTimeout"); ok {
		if ct, err := parseCallTimeout(v); err != nil {
			p.errorf(pathMember(p.path, "callTimeout"), "%v", err)
		} else {
			srv.CallTimeout = ct
		}
	}
	srv.Disabled = p.boolean(obj, "disabled")
	if d, ok := p.str(obj, "description"); ok {
		switch {
		case len(d) > MaxDescriptionBytes:
			p.errorf(pathMember(p.path, "description"), "is %d bytes, at most %d", len(d), MaxDescriptionBytes)
		case textProblem(d, false) != "":
			p.errorf(pathMember(p.path, "description"), "%s", textProblem(d, false))
		}
		srv.Description = d
	}
	return srv
}

// transport decides the kind and reads the members of that kind.
func (p *entryParser) transport(obj map[string]any, t *Transport) {
	typeKey := "type"
	typ, hasType := p.str(obj, "type")
	if tt, ok := p.str(obj, "transportType"); ok {
		if hasType {
			p.errorf(pathMember(p.path, "transportType"), "gives the transport a second time (type gives it too): keep one")
		}
		typ, hasType, typeKey = tt, true, "transportType"
	}
	var urlKeys []string
	for _, k := range []string{"url", "serverUrl", "httpUrl"} {
		if _, ok := field(obj, k); ok {
			urlKeys = append(urlKeys, k)
		}
	}
	if len(urlKeys) > 1 {
		p.errorf(pathMember(p.path, urlKeys[1]), "gives the URL a second time (%s gives it too): keep one", urlKeys[0])
		return
	}
	_, hasCommand := field(obj, "command")
	if hasCommand && len(urlKeys) == 1 {
		p.errorf(p.path, "has both command (a stdio server) and %s (an HTTP server): keep one", urlKeys[0])
		return
	}
	switch {
	case !hasType:
	case typ == "stdio":
		t.Kind = Stdio
	case typ == "http" || typ == "streamable-http" || typ == "streamableHttp":
		t.Kind = HTTP
	case typ == "sse":
		t.Kind = SSE
	default:
		p.errorf(pathMember(p.path, typeKey), `must be "stdio", "http" (or "streamable-http") or "sse"`)
		return
	}
	if t.Kind == "" {
		switch {
		case hasCommand:
			t.Kind = Stdio
		case len(urlKeys) == 1:
			t.Kind = HTTP
		default:
			p.errorf(p.path, "needs command (to run a stdio server) or url (to reach an HTTP server)")
			return
		}
	}
	if t.Kind == SSE && len(urlKeys) == 1 && urlKeys[0] == "httpUrl" {
		p.errorf(pathMember(p.path, "httpUrl"), `is Gemini CLI's Streamable HTTP URL, but the type is "sse": use url`)
	}
	if t.Kind == Stdio {
		for _, k := range append(urlKeys, "headers", "oauth", "network") {
			if _, ok := field(obj, k); ok {
				p.errorf(pathMember(p.path, k), "is only for HTTP servers, and this one is a stdio server")
			}
		}
		p.stdio(obj, t)
		return
	}
	for _, k := range []string{"command", "args", "env", "cwd"} {
		if _, ok := field(obj, k); ok {
			p.errorf(pathMember(p.path, k), "is only for stdio servers, and this one is an HTTP server")
		}
	}
	if len(urlKeys) == 0 {
		p.errorf(pathMember(p.path, "url"), "required for an HTTP server")
		return
	}
	p.remote(obj, urlKeys[0], t)
	p.oauth(obj, t)
	p.network(obj, t)
}

// value checks one string that may hold references and resolves them. It reports
// errors itself (failed is true then).
func (p *entryParser) value(path, s string, max int) (value, shown string, hadRef, failed bool) {
	if len(s) > max {
		p.errorf(path, "is %d bytes, at most %d", len(s), max)
		return "", "", false, true
	}
	value, shown, hadRef, err := expand(s, p.opts.LookupEnv)
	if err != nil {
		p.errorf(path, "%s", err)
		return "", "", hadRef, true
	}
	if len(value) > max {
		p.errorf(path, "is %d bytes once its references are resolved, at most %d", len(value), max)
		return "", "", hadRef, true
	}
	return value, shown, hadRef, false
}

// secretMap reads an object of strings whose every value is a secret (env, headers):
// at most max members, each name checked by nameProblem, each value resolved and
// bounded by valueMax, then handed to add in name order.
func (p *entryParser) secretMap(obj map[string]any, member, what string, max, valueMax int, nameProblem func(string) string, add func(path, name, value string)) {
	v, ok := field(obj, member)
	if !ok {
		return
	}
	path := pathMember(p.path, member)
	m, isObj := v.(map[string]any)
	if !isObj {
		p.errorf(path, "must be an object of %s by name", what)
		return
	}
	if len(m) > max {
		p.errorf(path, "holds %d %s, at most %d", len(m), what, max)
		return
	}
	for _, name := range sortedKeys(m) {
		np := pathMember(path, name)
		if problem := nameProblem(name); problem != "" {
			p.errorf(np, "%s", problem)
			continue
		}
		s, isStr := m[name].(string)
		if !isStr {
			p.errorf(np, "must be a string%s", quoteHint(m[name]))
			continue
		}
		if value, _, _, failed := p.value(np, s, valueMax); !failed {
			add(np, name, value)
		}
	}
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
