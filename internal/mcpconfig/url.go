package mcpconfig

import (
	"fmt"
	"net/netip"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/toolgate/toolgate/internal/keystore"
)

// serverURL is a server URL split into what may be stored and shown, and its secrets.
type serverURL struct {
	public string        // scheme://host/path?non-credential-query, no userinfo, no fragment
	query  [][2]string   // credential query parameters (name, value), decoded, in order
	user   *url.Userinfo // userinfo, to become an Authorization header
	parsed *url.URL      // the public URL, parsed
	secure bool          // https, or http to a loopback host
}

// parseServerURL checks a server URL and splits out its secrets. Problems never quote
// any part of the URL: any part of it can be a credential (even what parses as its
// scheme, when a token was pasted where the URL belongs).
func parseServerURL(s string) (serverURL, string) {
	var out serverURL
	if len(s) > MaxURLBytes {
		return out, fmt.Sprintf("is %d bytes, at most %d", len(s), MaxURLBytes)
	}
	if s == "" {
		return out, "is empty"
	}
	for _, r := range s {
		if r == ' ' || controlRune(r) || invisibleRune(r) {
			return out, "holds a space or a control character: percent-encode it"
		}
	}
	u, err := url.Parse(s)
	if err != nil {
		return out, "is not a valid URL"
	}
	scheme := strings.ToLower(u.Scheme)
	if scheme != "http" && scheme != "https" {
		return out, "must be an http:// or https:// URL"
	}
	if u.Opaque != "" || u.Host == "" || u.Hostname() == "" {
		return out, "must be an absolute http:// or https:// URL with a host"
	}
	if u.Fragment != "" || strings.Contains(s, "#") {
		return out, "must not have a #fragment (it is never sent to the server): remove it"
	}
	var kept []string
	seen := map[string]bool{}
	if u.RawQuery != "" {
		for part := range strings.SplitSeq(u.RawQuery, "&") {
			rawName, rawValue, _ := strings.Cut(part, "=")
			name, err := url.QueryUnescape(rawName)
			if err != nil {
				return out, "has a query parameter name that is not valid percent-encoding"
			}
			value, err := url.QueryUnescape(rawValue)
			if err != nil {
				return out, "has a query parameter value that is not valid percent-encoding"
			}
			if rawValue == "" && looksLikeToken(name) {
				return out, "has a credential as a query parameter with no name: write it as name=value"
			}
			if !credentialName(name) && !looksLikeToken(value) {
				kept = append(kept, part)
				continue
			}
			switch {
			case name == "":
				return out, "has a credential in a query parameter with no name"
			case len(name) > MaxHeaderNameBytes:
				return out, fmt.Sprintf("has a credential query parameter name of %d bytes, at most %d", len(name), MaxHeaderNameBytes)
			case textProblem(name, false) != "" || strings.TrimSpace(name) != name:
				return out, "has a credential query parameter whose name holds a space or a control character"
			case seen[name]:
				return out, fmt.Sprintf("gives the credential query parameter %q twice", name)
			}
			seen[name] = true
			out.query = append(out.query, [2]string{name, value})
		}
	}
	pub := &url.URL{Scheme: scheme, Host: u.Host, Path: u.Path, RawPath: u.RawPath, RawQuery: strings.Join(kept, "&")}
	out.public = pub.String()
	out.parsed = pub
	out.user = u.User
	out.secure = scheme == "https" || loopbackHost(u.Hostname())
	return out, ""
}

// loopbackHost reports localhost names and loopback addresses.
func loopbackHost(h string) bool {
	h = strings.ToLower(strings.TrimSuffix(h, "."))
	if h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return true
	}
	a, err := netip.ParseAddr(h)
	return err == nil && a.Unmap().IsLoopback()
}

// publicURLProblem checks a stored (public) URL: what parseServerURL produces and
// nothing else. Used by Server.Validate.
func publicURLProblem(s string) string {
	p, problem := parseServerURL(s)
	switch {
	case problem != "":
		return problem
	case p.user != nil:
		return "holds userinfo"
	case len(p.query) > 0:
		return "holds a credential query parameter"
	case p.public != s:
		return "is not in normal form"
	}
	return ""
}

// redactURLText renders u with userinfo and credential query values hidden, for an
// argument that is a URL, and reports whether anything was hidden.
func redactURLText(u *url.URL) (string, bool) {
	hidden := false
	var b strings.Builder
	b.WriteString(u.Scheme)
	b.WriteString("://")
	if u.User != nil {
		b.WriteString(keystore.Redacted + "@")
		hidden = true
	}
	b.WriteString(strings.TrimPrefix((&url.URL{Host: u.Host}).String(), "//")) // the host as the URL escapes it
	b.WriteString(u.EscapedPath())
	if u.RawQuery != "" {
		b.WriteByte('?')
		for i, part := range strings.Split(u.RawQuery, "&") {
			if i > 0 {
				b.WriteByte('&')
			}
			rawName, rawValue, has := strings.Cut(part, "=")
			name, _ := url.QueryUnescape(rawName)
			value, _ := url.QueryUnescape(rawValue)
			if !has && looksLikeToken(name) {
				b.WriteString(keystore.Redacted)
				hidden = true
				continue
			}
			if has && (credentialName(name) || looksLikeToken(value)) {
				b.WriteString(rawName + "=" + keystore.Redacted)
				hidden = true
				continue
			}
			b.WriteString(part)
		}
	}
	if u.Fragment != "" {
		b.WriteString("#" + keystore.Redacted)
		hidden = true
	}
	if shown := b.String(); utf8.ValidString(shown) && textProblem(shown, false) == "" {
		return shown, hidden
	}
	return keystore.Redacted, hidden
}
