package mcpserver

import (
	"context"
	"maps"
	"mime"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/toolgate/toolgate/internal/listenaddr"
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
//     "simple" text/plain POST never runs; so is a POST with more than one
//     Content-Type or with a Content-Encoding other than identity (the body is
//     never decompressed, so a gzip body would be misread).
//
// It also gives every request body DefaultBodyTimeout to arrive (see
// withBodyDeadline) and every write of a response DefaultWriteTimeout (see
// deadlineWriter), on every route behind it.
//
// allowedHosts entries are host names, optionally with a port ("gw.internal",
// "10.0.0.5:7077"); a deliberate non-loopback bind lists its names here.
func Guard(next http.Handler, allowedHosts []string) http.Handler {
	return guardWith(next, allowedHosts, DefaultBodyTimeout)
}

func guardWith(next http.Handler, allowedHosts []string, bodyTimeout time.Duration) http.Handler {
	g := newGuard(allowedHosts)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		withBodyDeadline(w, r, bodyTimeout)
		w = withWriteDeadline(w, DefaultWriteTimeout)
		if ref := g.check(r); ref != refuseNone {
			writeRefusal(w, ref)
			return
		}
		// Say so, for a Handler behind this guard: it does not check again.
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), guardedKey{}, g.key)))
	})
}

// guardedKey marks a request that passed a Guard; its value is that guard's key.
type guardedKey struct{}

type guard struct {
	allowed map[string]bool // lower-cased hosts, with and without ports
	// key names what the guard accepts (its allowed hosts, sorted): a Handler whose
	// own guard has the same key skips the check of a request a Guard passed.
	key string
}

func newGuard(allowedHosts []string) *guard {
	g := &guard{allowed: map[string]bool{}}
	for _, h := range allowedHosts {
		h = strings.ToLower(strings.TrimSpace(h))
		if h != "" {
			g.allowed[h] = true
		}
	}
	hosts := slices.Sorted(maps.Keys(g.allowed))
	g.key = "guard:" + strings.Join(hosts, ",")
	return g
}

// passed reports whether r already passed a Guard accepting exactly what g accepts,
// so that a request through toolgate serve's Guard and its /mcp Handler is checked
// once. A request that passed a Guard with other hosts, or none, is checked.
func (g *guard) passed(r *http.Request) bool {
	key, ok := r.Context().Value(guardedKey{}).(string)
	return ok && key == g.key
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
	if listenaddr.IsLoopback(host) {
		return true
	}
	return g.allowed[hostport] || g.allowed[host]
}

func (g *guard) check(r *http.Request) refusal {
	if !g.hostAllowed(r.Host) {
		return refuseForbiddenHost
	}
	// The Origin half is not http.CrossOriginProtection, which was tried against the
	// golden files: it compares an Origin with the request's own Host (or an exact
	// trusted origin), so it refuses a loopback page on another port (Origin
	// http://localhost:3000 on 127.0.0.1:7077, the MCP Inspector's case, served in
	// testdata/wire/foreign_origin_403.txtar), and it lets every GET, HEAD and OPTIONS
	// through whatever its Origin, where the contract refuses a foreign or "null"
	// Origin on every method (TestGuardMiddleware: GET /v1/tools from evil.com is 403).
	// Its Sec-Fetch-Site check would also refuse same-site loopback pages the contract
	// accepts.
	if origins, ok := r.Header["Origin"]; ok {
		for _, o := range origins {
			u, err := url.Parse(o)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || !g.hostAllowed(u.Host) {
				return refuseForbiddenOrigin
			}
		}
	}
	if r.Method == http.MethodPost {
		// Exactly one Content-Type: with two, a filter in front and this server
		// could each read a different one.
		cts := r.Header.Values("Content-Type")
		if len(cts) != 1 {
			return refuseUnsupportedMediaType
		}
		mt, _, err := mime.ParseMediaType(cts[0])
		if err != nil || mt != "application/json" {
			return refuseUnsupportedMediaType
		}
		// The body is read as sent: a coded body (gzip, …) would be read as
		// something it is not, so it is refused rather than misread.
		for _, ce := range r.Header.Values("Content-Encoding") {
			if !strings.EqualFold(strings.TrimSpace(ce), "identity") {
				return refuseUnsupportedMediaType
			}
		}
	}
	return refuseNone
}

// DefaultBodyTimeout bounds how long a client may take to send a request body once
// its headers are in. Without it a slow body (or a chunked one that never ends)
// holds a connection and its goroutine forever — even for a client that is
// refused 401, because the server drains what is left of a body before it
// answers. A 4 MiB body on loopback takes milliseconds.
const DefaultBodyTimeout = 30 * time.Second

// withBodyDeadline gives a request with a body until d to send all of it, by
// setting the connection's read deadline. net/http clears that deadline itself
// when the body has been read to its end (it starts its background read then),
// so a long call that follows is never cut off. A body the handler does not read
// (a refusal) keeps the deadline, which bounds the server's own drain of it; a
// body that does not arrive in time fails to read and its connection is closed.
func withBodyDeadline(w http.ResponseWriter, r *http.Request, d time.Duration) {
	if d <= 0 || r.ContentLength == 0 || r.Body == nil || r.Body == http.NoBody {
		return
	}
	// An in-memory recorder has no connection; there is nothing to bound.
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(d))
}
