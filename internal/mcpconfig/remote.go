package mcpconfig

import (
	"cmp"
	"encoding/base64"
	"fmt"
	"net/http"
	"slices"
	"strings"
)

// managedHeaders are set by the HTTP transport itself; a configured value would break
// the protocol or smuggle a second meaning past it.
var managedHeaders = map[string]bool{
	"Host": true, "Content-Length": true, "Content-Type": true, "Transfer-Encoding": true, "Connection": true,
	"Keep-Alive": true, "Upgrade": true, "Te": true, "Trailer": true, "Proxy-Connection": true, "Accept": true,
	"Accept-Encoding": true, "Mcp-Session-Id": true, "Mcp-Protocol-Version": true, "Last-Event-Id": true,
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
