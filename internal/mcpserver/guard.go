package mcpserver

import (
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// Guard refuses requests a browser could forge against a loopback server, before
// next sees them:
//
//   - a Host header that is not a loopback name (localhost, 127.0.0.1, [::1], any
//     port) or one of allowedHosts → 403 {"error":"forbidden_host"} (DNS
//     rebinding: after a rebind the browser sends the attacker's host name);
//   - an Origin header whose host is not allowed the same way (including "null")
//     → 403 {"error":"forbidden_origin"};
//   - a POST whose Content-Type is not application/json → 415, so a cross-site
//     "simple" text/plain POST never runs.
//
// allowedHosts entries are host names, optionally with a port ("gw.internal",
// "10.0.0.5:7077"); a deliberate non-loopback bind lists its names here.
func Guard(next http.Handler, allowedHosts []string) http.Handler {
	g := newGuard(allowedHosts)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if ref := g.check(r); ref != refuseNone {
			writeRefusal(w, ref)
			return
		}
		next.ServeHTTP(w, r)
	})
}

type guard struct {
	allowed map[string]bool // lower-cased hosts, with and without ports
}

func newGuard(allowedHosts []string) *guard {
	g := &guard{allowed: map[string]bool{}}
	for _, h := range allowedHosts {
		h = strings.ToLower(strings.TrimSpace(h))
		if h != "" {
			g.allowed[h] = true
		}
	}
	return g
}

func isLoopbackName(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// hostAllowed decides a Host header value or an Origin's host[:port].
func (g *guard) hostAllowed(hostport string) bool {
	hostport = strings.ToLower(hostport)
	if hostport == "" {
		return false
	}
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	} else if strings.HasPrefix(hostport, "[") && strings.HasSuffix(hostport, "]") {
		host = hostport[1 : len(hostport)-1]
	}
	if isLoopbackName(host) {
		return true
	}
	return g.allowed[hostport] || g.allowed[host]
}

func (g *guard) check(r *http.Request) refusal {
	if !g.hostAllowed(r.Host) {
		return refuseForbiddenHost
	}
	if origins, ok := r.Header["Origin"]; ok {
		for _, o := range origins {
			u, err := url.Parse(o)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || !g.hostAllowed(u.Host) {
				return refuseForbiddenOrigin
			}
		}
	}
	if r.Method == http.MethodPost {
		mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
		if err != nil || mt != "application/json" {
			return refuseUnsupportedMediaType
		}
	}
	return refuseNone
}
