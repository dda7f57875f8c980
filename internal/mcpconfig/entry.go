package mcpconfig

import (
	"cmp"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
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
	whyTimeout  = "toolgate applies its own call and start-up timeouts, so it has no effect"
	whyWatch    = "toolgate does not restart a server when files change (use toolgate restart), so it has no effect"
	whyMetadata = "catalogue metadata of the editor that wrote the file, so it has no effect"
	whyOAuth    = "is not supported: toolgate does not sign in to upstream servers yet; put a token in headers"
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
	"oauth":            {memberRefused, whyOAuth},
	"authProviderType": {memberRefused, whyOAuth},
	"pin":              {memberRefused, "is reserved for catalogue pinning, which this version does not support"},
}

// managedHeaders are set by the HTTP transport itself; a configured value would break
// the protocol or smuggle a second meaning past it.
var managedHeaders = map[string]bool{
	"Host": true, "Content-Length": true, "Content-Type": true, "Transfer-Encoding": true, "Connection": true,
	"Keep-Alive": true, "Upgrade": true, "Te": true, "Trailer": true, "Proxy-Connection": true, "Accept": true,
	"Accept-Encoding": true, "Mcp-Session-Id": true, "Mcp-Protocol-Version": true, "Last-Event-Id": true,
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
		for _, k := range append(urlKeys, "headers") {
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
}

// stdio reads command, args, env and cwd.
func (p *entryParser) stdio(obj map[string]any, t *Transport) {
	if cwd, ok := p.str(obj, "cwd"); ok {
		if abs, ok := p.absPath(pathMember(p.path, "cwd"), cwd, p.opts.BaseDir, "the config file's directory"); ok {
			t.Cwd = abs
		}
	}
	cmdPath := pathMember(p.path, "command")
	if cmd, ok := p.str(obj, "command"); !ok {
		if _, present := field(obj, "command"); !present {
			p.errorf(cmdPath, "required for a stdio server")
		}
	} else if strings.ContainsAny(cmd, " \t") && !filepath.IsAbs(cmd) {
		p.errorf(cmdPath, "holds a space: toolgate runs the command without a shell, so put its arguments in args")
	} else if strings.ContainsRune(cmd, '/') {
		base, what := t.Cwd, "cwd"
		if base == "" {
			base, what = p.opts.BaseDir, "the config file's directory"
		}
		if abs, ok := p.absPath(cmdPath, cmd, base, what); ok {
			t.Command = abs
		}
	} else if problem := bareCommandProblem(cmd); problem != "" {
		p.errorf(cmdPath, "%s", problem)
	} else {
		t.Command = cmd
	}
	p.args(obj, t)
	p.env(obj, t)
}

// absPath checks a cwd or command path and makes it absolute against base (described
// as what in the error when missing).
func (p *entryParser) absPath(path, s, base, what string) (string, bool) {
	switch {
	case s == "":
		p.errorf(path, "must not be empty")
	case hasRef(s):
		p.errorf(path, "holds a ${…} reference; references are resolved only in args, env and headers: write the path")
	case len(s) > MaxPathBytes:
		p.errorf(path, "is %d bytes, at most %d", len(s), MaxPathBytes)
	case textProblem(s, false) != "":
		p.errorf(path, "%s", textProblem(s, false))
	case s == "~" || strings.HasPrefix(s, "~/"):
		p.errorf(path, "starts with ~, which is not expanded (no shell runs it): write the absolute path")
	case filepath.IsAbs(s):
		return filepath.Clean(s), true
	case base == "":
		p.errorf(path, "is a relative path: write an absolute one (a relative path is resolved against %s, which this install does not have)", what)
	case len(base)+1+len(s) > MaxPathBytes:
		p.errorf(path, "is over %d bytes once resolved against %s", MaxPathBytes, what)
	default:
		return filepath.Join(base, s), true
	}
	return "", false
}

// bareCommandProblem checks a command without a '/': a program name found in PATH.
func bareCommandProblem(cmd string) string {
	switch {
	case cmd == "":
		return "must not be empty"
	case hasRef(cmd):
		return "holds a ${…} reference; references are resolved only in args, env and headers: write the command"
	case len(cmd) > 255:
		return fmt.Sprintf("is %d bytes, longer than any program name", len(cmd))
	case textProblem(cmd, false) != "":
		return textProblem(cmd, false)
	case strings.ContainsAny(cmd, " \t"):
		return "holds a space: toolgate runs the command without a shell, so put its arguments in args"
	case cmd == "." || cmd == "..":
		return "is not a program name"
	case cmd == "~":
		return "starts with ~, which is not expanded (no shell runs it): write the absolute path"
	}
	return ""
}

// args reads the argument list; credential-looking arguments become secrets.
func (p *entryParser) args(obj map[string]any, t *Transport) {
	v, ok := field(obj, "args")
	if !ok {
		return
	}
	path := pathMember(p.path, "args")
	list, isList := v.([]any)
	if !isList {
		p.errorf(path, "must be an array of strings")
		return
	}
	if len(list) > MaxArgs {
		p.errorf(path, "holds %d arguments, at most %d", len(list), MaxArgs)
		return
	}
	prev := ""
	for i, item := range list {
		ip := pathIndex(path, i)
		s, isStr := item.(string)
		if !isStr {
			p.errorf(ip, "must be a string%s", quoteHint(item))
			continue
		}
		value, shown, hadRef, failed := p.value(ip, s, MaxArgBytes)
		if failed {
			prev = s
			continue
		}
		if problem := textProblem(value, true); problem != "" {
			p.errorf(ip, "%s", problem)
			prev = s
			continue
		}
		redacted, secret := argSecret(prev, shown)
		if !secret && hadRef {
			redacted, secret = shown, true
		}
		prev = s
		if !secret {
			t.Args = append(t.Args, Arg{Value: value})
			continue
		}
		name := argSecretPrefix + strconv.Itoa(i)
		t.Args = append(t.Args, Arg{Secret: name, Redacted: redacted, Digest: p.secret(name, value)})
		p.warnf(ip, "looks like a credential, so it is kept in the keystore; but every local user can read a process's arguments (/proc/PID/cmdline): pass it in env if the server can take it there")
	}
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

// env reads the environment; every value is a secret.
func (p *entryParser) env(obj map[string]any, t *Transport) {
	p.secretMap(obj, "env", "variables", MaxEnv, MaxEnvValueBytes, envNameProblem, func(path, name, value string) {
		if strings.IndexByte(value, 0) >= 0 {
			p.errorf(path, "holds a NUL byte, which an environment cannot carry")
			return
		}
		secret := envSecretPrefix + name
		t.Env = append(t.Env, Var{Name: name, Secret: secret, Digest: p.secret(secret, value)})
	})
}

// envNameProblem checks an environment variable's name.
func envNameProblem(name string) string {
	switch {
	case len(name) > MaxEnvNameBytes:
		return fmt.Sprintf("the name is %d bytes, at most %d", len(name), MaxEnvNameBytes)
	case !envNameRE.MatchString(name):
		return "is not a variable name: letters, digits and '_', not starting with a digit"
	}
	return ""
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

// remote reads the URL and headers of an HTTP or SSE server.
func (p *entryParser) remote(obj map[string]any, urlKey string, t *Transport) {
	up := pathMember(p.path, urlKey)
	raw, ok := p.str(obj, urlKey)
	if !ok {
		return
	}
	if hasRef(raw) {
		p.errorf(up, "holds a ${…} reference; references are resolved only in args, env and headers: put the credential in headers")
		return
	}
	u, problem := parseServerURL(raw)
	if problem != "" {
		p.errorf(up, "%s", problem)
		return
	}
	t.URL = u.public
	p.headers(obj, t)
	if u.user != nil {
		if slices.ContainsFunc(t.Headers, func(h Var) bool { return h.Name == "Authorization" }) {
			p.errorf(up, "has userinfo (user:password@), and headers has Authorization too: keep one")
			return
		}
		user := u.user.Username()
		pw, _ := u.user.Password()
		name := headerSecretPrefix + "Authorization"
		basic := "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pw))
		t.Headers = append(t.Headers, Var{Name: "Authorization", Secret: name, Digest: p.secret(name, basic)})
		slices.SortFunc(t.Headers, func(a, b Var) int { return cmp.Compare(a.Name, b.Name) })
	}
	for _, q := range u.query {
		name := querySecretPrefix + q[0]
		t.Query = append(t.Query, Var{Name: q[0], Secret: name, Digest: p.secret(name, q[1])})
	}
	if !u.secure {
		if len(t.Headers) > 0 || len(t.Query) > 0 {
			p.errorf(up, "is plain http:// to a host that is not loopback, so the server's credentials would cross the network in clear: use https://")
		} else {
			p.warnf(up, "is plain http:// to a host that is not loopback: everything sent to it crosses the network in clear")
		}
	}
}

// headers reads the header map; every value is a secret.
func (p *entryParser) headers(obj map[string]any, t *Transport) {
	p.secretMap(obj, "headers", "headers", MaxHeaders, MaxHeaderValueBytes, headerNameProblem, func(path, name, value string) {
		if strings.ContainsFunc(value, func(r rune) bool { return r != '\t' && (r < 0x20 || r == 0x7f) }) {
			p.errorf(path, "holds a line break or control character, which a header value cannot carry")
			return
		}
		canon := http.CanonicalHeaderKey(name)
		secret := headerSecretPrefix + canon
		t.Headers = append(t.Headers, Var{Name: canon, Secret: secret, Digest: p.secret(secret, value)})
	})
	slices.SortFunc(t.Headers, func(a, b Var) int { return cmp.Compare(a.Name, b.Name) })
}

// headerNameProblem checks a header name: an RFC 9110 token, not one the transport
// sets itself.
func headerNameProblem(name string) string {
	switch {
	case name == "":
		return "a header needs a name"
	case len(name) > MaxHeaderNameBytes:
		return fmt.Sprintf("the name is %d bytes, at most %d", len(name), MaxHeaderNameBytes)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return "is not a header name: letters, digits and !#$%&'*+-.^_`|~ only"
		}
	}
	if managedHeaders[http.CanonicalHeaderKey(name)] {
		return "is set by the HTTP transport itself and cannot be configured"
	}
	return ""
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
