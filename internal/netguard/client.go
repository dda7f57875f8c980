package netguard

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Target is a validated upstream URL.
type Target struct {
	URL  *url.URL
	Host Host
	// Port is the explicit port or the scheme's default.
	Port string
	// Origin is scheme://host:port, the unit redirects and headers are bound to.
	Origin string
}

// ErrBadURL is what every refusal of a URL wraps (with ErrBadHost or ErrDenied when
// the host is the reason).
var ErrBadURL = errors.New("netguard: URL refused")

type urlError struct {
	url string
	msg string
	err error
}

func (e *urlError) Error() string {
	if e.err != nil {
		return fmt.Sprintf("netguard: URL %s: %s: %v", escapeHost(e.url), e.msg, e.err)
	}
	return fmt.Sprintf("netguard: URL %s: %s", escapeHost(e.url), e.msg)
}

func (e *urlError) Unwrap() []error {
	if e.err != nil {
		return []error{ErrBadURL, e.err}
	}
	return []error{ErrBadURL}
}

// ValidateURL checks a remote upstream's URL under p before anything is dialled: an
// absolute http or https URL; its host spelled one way (ParseHost); a port in 1–65535;
// plain http only to a host that names loopback unless p.InsecureHTTP; an IP literal
// passing CheckAddr and a name passing CheckName. The names' addresses are checked when
// they are dialled (Guard), since only then is it known what they resolve to.
func ValidateURL(raw string, p Policy) (*Target, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, &urlError{url: raw, msg: "does not parse", err: err}
	}
	return validate(u, p)
}

func validate(u *url.URL, p Policy) (*Target, error) {
	raw := u.String()
	scheme := strings.ToLower(u.Scheme)
	if scheme != "http" && scheme != "https" {
		return nil, &urlError{url: raw, msg: fmt.Sprintf("scheme %q is not http or https", u.Scheme)}
	}
	if u.Opaque != "" || u.Host == "" {
		return nil, &urlError{url: raw, msg: "has no host (want scheme://host/…)"}
	}
	h, err := ParseHost(u.Hostname())
	if err != nil {
		return nil, &urlError{url: raw, msg: "bad host", err: err}
	}
	port := u.Port()
	if port == "" {
		if strings.HasSuffix(u.Host, ":") {
			return nil, &urlError{url: raw, msg: "has an empty port"}
		}
		port = map[string]string{"http": "80", "https": "443"}[scheme]
	} else if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return nil, &urlError{url: raw, msg: fmt.Sprintf("port %s is not 1-65535", port)}
	}
	if scheme == "http" && !p.InsecureHTTP && !h.namesLoopback() {
		return nil, &urlError{url: raw, msg: "plain http reaches only loopback (it would send the server's headers in the clear): use https, or set this server's policy to allow insecure http"}
	}
	if h.IsIP() {
		if err := p.CheckAddr(h.Addr, h); err != nil {
			return nil, &urlError{url: raw, msg: "refused", err: err}
		}
	} else if err := p.CheckName(h.Name); err != nil {
		return nil, &urlError{url: raw, msg: "refused", err: err}
	}
	return &Target{URL: u, Host: h, Port: port, Origin: originOf(scheme, h, port)}, nil
}

// NewTransport returns an http.Transport that dials only through g. It never uses a
// proxy: through a proxy the address connected to is the proxy's, and the
// destination could not be checked.
func NewTransport(g *Guard) *http.Transport {
	return &http.Transport{
		Proxy:                 nil,
		DialContext:           g.DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          100,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: 1 * time.Second,
	}
}

// Redirects is a server's redirect policy.
type Redirects uint8

// The redirect policies.
const (
	// RedirectSameOrigin follows redirects within the server's origin and refuses any
	// other (the default).
	RedirectSameOrigin Redirects = iota
	// RedirectCrossOrigin also follows redirects to other origins, without the
	// configured headers, Authorization, cookies or proxy credentials. (A 307/308
	// re-sends the request body there: allow it only for a server whose redirects are
	// trusted.)
	RedirectCrossOrigin
	// RedirectNone refuses every redirect.
	RedirectNone
)

// DefaultMaxRedirects bounds a chain of redirects.
const DefaultMaxRedirects = 10

// ClientOptions configure NewClient.
type ClientOptions struct {
	// URL is the server's configured URL: its origin is the one headers go to.
	URL string
	// Redirects is the redirect policy.
	Redirects Redirects
	// HeaderNames are the names of the server's configured headers; they are removed
	// from every request that leaves the origin.
	HeaderNames []string
	// Headers returns the configured headers when a request to the origin is sent (so
	// secrets are opened at use); nil sends none. A header it returns must be in
	// HeaderNames.
	Headers func(ctx context.Context) (http.Header, error)
	// MaxRedirects bounds a redirect chain; 0 means DefaultMaxRedirects.
	MaxRedirects int
	// Transport is the base round tripper; nil means NewTransport(g). Tests only: a
	// transport that does not dial through the guard defeats it.
	Transport http.RoundTripper
}

// RedirectError is a refused redirect.
type RedirectError struct {
	From, To string
	Reason   string
}

func (e *RedirectError) Error() string {
	return fmt.Sprintf("netguard: redirect from %s to %s refused: %s", escapeHost(e.From), escapeHost(e.To), e.Reason)
}

// alwaysStripped are removed from a request leaving the origin whatever is configured.
var alwaysStripped = []string{"Authorization", "Cookie", "Cookie2", "Proxy-Authorization"}

// NewClient returns an http.Client for one remote server: every request's URL is
// validated (ValidateURL) and dialled through g; configured headers are added only to
// requests for the configured origin; redirects follow o.Redirects. It has no overall
// timeout, because MCP streams (SSE) are long-lived: bound calls with contexts.
func NewClient(g *Guard, o ClientOptions) (*http.Client, error) {
	t, err := ValidateURL(o.URL, g.policy)
	if err != nil {
		return nil, err
	}
	base := o.Transport
	if base == nil {
		base = NewTransport(g)
	}
	names := make(map[string]bool, len(o.HeaderNames))
	for _, n := range o.HeaderNames {
		names[http.CanonicalHeaderKey(n)] = true
	}
	for _, n := range alwaysStripped {
		names[n] = true
	}
	max := o.MaxRedirects
	if max <= 0 {
		max = DefaultMaxRedirects
	}
	rt := &originTransport{base: base, policy: g.policy, origin: t.Origin, names: names, headers: o.Headers}
	return &http.Client{
		Transport: rt,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			from := via[len(via)-1].URL.String()
			if o.Redirects == RedirectNone {
				return &RedirectError{From: from, To: req.URL.String(), Reason: "this server's policy follows no redirects"}
			}
			if len(via) >= max {
				return &RedirectError{From: from, To: req.URL.String(), Reason: fmt.Sprintf("more than %d redirects", max)}
			}
			to, err := validate(req.URL, g.policy)
			if err != nil {
				return &RedirectError{From: from, To: req.URL.String(), Reason: err.Error()}
			}
			if to.Origin == t.Origin {
				return nil
			}
			if o.Redirects != RedirectCrossOrigin {
				return &RedirectError{From: from, To: req.URL.String(), Reason: "it leaves the server's origin " + t.Origin}
			}
			for n := range names {
				req.Header.Del(n)
			}
			return nil
		},
	}, nil
}

// originTransport binds the configured headers to the configured origin.
type originTransport struct {
	base    http.RoundTripper
	policy  Policy
	origin  string
	names   map[string]bool
	headers func(context.Context) (http.Header, error)
}

func (t *originTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	to, err := validate(req.URL, t.policy)
	if err != nil {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, err
	}
	out := req.Clone(req.Context())
	if to.Origin != t.origin {
		for n := range t.names {
			out.Header.Del(n)
		}
		return t.base.RoundTrip(out)
	}
	if t.headers != nil {
		h, err := t.headers(req.Context())
		if err != nil {
			if req.Body != nil {
				req.Body.Close()
			}
			return nil, fmt.Errorf("netguard: headers for %s: %w", t.origin, err)
		}
		for k, vs := range h {
			ck := http.CanonicalHeaderKey(k)
			if !t.names[ck] {
				if req.Body != nil {
					req.Body.Close()
				}
				return nil, fmt.Errorf("netguard: header %s is not one of the server's configured headers", escapeHost(k))
			}
			out.Header[ck] = append([]string(nil), vs...)
		}
	}
	return t.base.RoundTrip(out)
}

// originOf is scheme://host:port with the host as ParseHost normalised it, so that
// spellings of one origin compare equal ("HTTPS://Example.COM.:443").
func originOf(scheme string, h Host, port string) string {
	hostPart := h.String()
	if h.IsIP() && h.Addr.Is6() {
		hostPart = "[" + hostPart + "]"
	}
	return scheme + "://" + hostPart + ":" + port
}
