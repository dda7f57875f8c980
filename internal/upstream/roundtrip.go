package upstream

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/textproto"
	"net/url"
	"strings"
	"sync/atomic"

	"github.com/toolgate/toolgate/internal/telemetry"
)

// HeaderSource supplies an HTTP upstream's configured headers (API keys,
// Authorization). It is asked on every request to the configured origin, so a
// keystore can decrypt at use and a rotated secret applies at once. Its values
// are secrets: they appear in no log or error.
type HeaderSource interface {
	Header(ctx context.Context) (http.Header, error)
}

// StaticHeaders is a HeaderSource of fixed values.
type StaticHeaders map[string]string

// Header implements HeaderSource.
func (h StaticHeaders) Header(context.Context) (http.Header, error) {
	hdr := make(http.Header, len(h))
	for k, v := range h {
		hdr.Set(k, v)
	}
	return hdr, nil
}

// passHeaders are the only request headers that reach an upstream besides the
// configured ones: what the go-sdk's transports set. Anything else a request
// carries (nothing today) is removed, so no header of toolgate's own callers
// can ever be forwarded.
var passHeaders = map[string]bool{
	"Accept":               true,
	"Content-Type":         true,
	"Content-Length":       true,
	"Mcp-Session-Id":       true,
	"Mcp-Protocol-Version": true,
	"Mcp-Method":           true,
	"Mcp-Name":             true,
	"Last-Event-Id":        true,
	"Authorization":        true, // only from the URL's userinfo, added by http.Client
}

// protocolHeader reports whether a configured header would override what the
// transport itself must set; such configured headers are ignored.
func protocolHeader(name string) bool {
	switch name {
	case "Accept", "Content-Type", "Content-Length", "Mcp-Session-Id", "Mcp-Protocol-Version",
		"Mcp-Method", "Mcp-Name", "Last-Event-Id", "Host", "Transfer-Encoding", "Connection",
		"Traceparent", "Tracestate":
		return true
	}
	return strings.HasPrefix(name, "Mcp-Param-")
}

// headerTransport is the RoundTripper under every HTTP upstream connection. It
// works per hop (http.Client calls it again for each redirect), which is what
// makes the origin check sound: http.Client copies the first request's headers
// to the next hop, but the configured headers are never on that first request,
// they are added here, and only when this hop's origin is the configured one.
type headerTransport struct {
	base    http.RoundTripper
	origin  string
	headers HeaderSource
	auth    Authorizer
	maxBody int
	safeURL string
	// version is Mcp-Protocol-Version once initialize negotiated it: the
	// go-sdk's raw connection never learns it (dependencies.md §1.3).
	version atomic.Pointer[string]
	// stateless is set for a 2026-07-28 connection: no session id is sent or
	// taken from an answer, so the go-sdk transport never adopts one (and
	// never opens a GET stream or sends DELETE for it).
	stateless atomic.Bool
}

// statusKey carries a *atomic.Int32 in a request's context that receives the
// HTTP status of the response (used to decide the fallback to legacy SSE).
type statusKey struct{}

// requestHeadersKey carries, in a request's context, the 2026-07-28 headers
// a Conn computed for one message (Mcp-Method, Mcp-Name, Mcp-Param-*). They
// replace whatever the go-sdk set (it sends Mcp-Name unencoded).
type requestHeadersKey struct{}

func (t *headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	sameOrigin := originOf(req.URL) == t.origin
	replayable := req.Body == nil || req.Body == http.NoBody || req.GetBody != nil
	for round := 1; ; round++ {
		r := req.Clone(ctx)
		if round > 1 {
			body, err := req.GetBody()
			if err != nil {
				return nil, err
			}
			r.Body = body
		}
		cred, err := t.prepare(ctx, r, sameOrigin)
		if err != nil {
			if r.Body != nil {
				r.Body.Close()
			}
			return nil, err
		}
		resp, err := t.base.RoundTrip(r)
		if err != nil {
			return nil, err
		}
		if rec, ok := ctx.Value(statusKey{}).(*atomic.Int32); ok {
			rec.Store(int32(resp.StatusCode))
		}
		challenge := resp.Header.Values("WWW-Authenticate")
		if resp.StatusCode == http.StatusUnauthorized || (resp.StatusCode == http.StatusForbidden && len(challenge) > 0) {
			io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
			resp.Body.Close()
			refused := newAuthRequired(resp.StatusCode, challenge, RedactURL(r.URL))
			if t.auth == nil || !sameOrigin || !replayable || round >= maxAuthRounds {
				return nil, refused
			}
			retry, err := t.auth.Challenged(ctx, refused, cred)
			switch {
			case err != nil:
				return nil, err
			case !retry:
				return nil, refused
			}
			continue
		}
		if t.auth != nil && sameOrigin {
			t.auth.Accepted(cred)
		}
		if t.stateless.Load() {
			resp.Header.Del("Mcp-Session-Id")
		}
		return t.capJSON(resp)
	}
}

// prepare sets one hop's headers: only those the go-sdk's transports set, the
// configured ones and the Authorizer's credential for the configured origin,
// the connection's protocol headers.
func (t *headerTransport) prepare(ctx context.Context, r *http.Request, sameOrigin bool) (Credential, error) {
	for name := range r.Header {
		if !passHeaders[name] && !strings.HasPrefix(name, "Mcp-Param-") {
			delete(r.Header, name)
		}
	}
	var cred Credential
	if sameOrigin {
		hdr, err := t.headers.Header(ctx)
		if err != nil {
			return cred, fmt.Errorf("upstream: headers for %s: %w", t.safeURL, err)
		}
		for name, values := range hdr {
			name = textproto.CanonicalMIMEHeaderKey(name)
			if protocolHeader(name) {
				continue
			}
			r.Header[name] = append([]string(nil), values...)
		}
		if t.auth != nil {
			// The Authorizer owns Authorization: a configured one is not mixed in.
			r.Header.Del("Authorization")
			if cred, err = t.auth.Authorization(ctx); err != nil {
				return cred, err
			}
			if cred.Header.Len() > 0 {
				r.Header.Set("Authorization", cred.Header.RevealString())
			}
		}
		if hdr, ok := ctx.Value(requestHeadersKey{}).(http.Header); ok {
			for name := range r.Header {
				if name == "Mcp-Method" || name == "Mcp-Name" || strings.HasPrefix(name, "Mcp-Param-") {
					delete(r.Header, name)
				}
			}
			for name, values := range hdr {
				r.Header[name] = values
			}
		}
		// The call's trace context, from the propagator (a request without one,
		// such as a ping, sends none): docs/deployment.md, "Traces".
		telemetry.Inject(ctx, r.Header)
	} else {
		// Another origin (a redirect, or a legacy SSE endpoint pointing away):
		// nothing of ours goes there, tool arguments mirrored into headers
		// included.
		r.Header.Del("Mcp-Session-Id")
		r.Header.Del("Authorization")
		for name := range r.Header {
			if strings.HasPrefix(name, "Mcp-Param-") {
				delete(r.Header, name)
			}
		}
	}
	if t.stateless.Load() {
		r.Header.Del("Mcp-Session-Id")
	}
	if v := t.version.Load(); v != nil && r.Header.Get("Mcp-Protocol-Version") == "" {
		r.Header.Set("Mcp-Protocol-Version", *v)
	}
	return cred, nil
}

// capJSON reads a JSON answer whole, under the cap. The go-sdk reads it in a
// goroutine with the call's context and treats any read error as the end of
// the connection: a caller cancelling at the wrong moment, or one oversized
// answer, would end it for every caller. Here either fails only this request.
func (t *headerTransport) capJSON(resp *http.Response) (*http.Response, error) {
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "application/json" {
		return resp, nil
	}
	if resp.ContentLength > int64(t.maxBody) {
		resp.Body.Close()
		return nil, &MessageTooLargeError{Limit: t.maxBody}
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, int64(t.maxBody)+1))
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	if len(data) > t.maxBody {
		return nil, &MessageTooLargeError{Limit: t.maxBody}
	}
	resp.Body = io.NopCloser(bytes.NewReader(data))
	resp.ContentLength = int64(len(data))
	return resp, nil
}

// originOf is scheme://host:port with the default port made explicit.
func originOf(u *url.URL) string {
	scheme := strings.ToLower(u.Scheme)
	host := strings.ToLower(u.Hostname())
	port := u.Port()
	if port == "" {
		switch scheme {
		case "http":
			port = "80"
		case "https":
			port = "443"
		}
	}
	return scheme + "://" + host + ":" + port
}

// RedactURL is u without userinfo and with every query value replaced, for
// messages: endpoints carry tokens in both places.
func RedactURL(u *url.URL) string {
	c := *u
	c.User = nil
	if c.RawQuery != "" {
		q := c.Query()
		for k := range q {
			q[k] = []string{"REDACTED"}
		}
		c.RawQuery = q.Encode()
	}
	c.Fragment, c.RawFragment = "", ""
	return c.String()
}

// redactor replaces every spelling of the endpoint URL in an error's text with
// its redacted form (net/http's *url.Error quotes the request URL, query and
// all). The wrapped error stays reachable for errors.Is and errors.As.
func redactor(raw string, u *url.URL) func(error) error {
	safe := RedactURL(u)
	forms := []string{raw, u.String(), u.Redacted()}
	return func(err error) error {
		if err == nil {
			return nil
		}
		msg := err.Error()
		changed := msg
		for _, f := range forms {
			if f != "" && f != safe {
				changed = strings.ReplaceAll(changed, f, safe)
			}
		}
		if changed == msg {
			return err
		}
		return &redactedError{msg: changed, err: err}
	}
}

type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }
