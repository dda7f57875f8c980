package upstream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// HTTPKind selects the HTTP transport.
type HTTPKind int

const (
	// HTTPAuto is Streamable HTTP, falling back to the legacy HTTP+SSE
	// transport when the server answers the initialize POST with 400, 404 or
	// 405, as the specification's backward-compatibility section says.
	HTTPAuto HTTPKind = iota
	// HTTPStreamable is Streamable HTTP only.
	HTTPStreamable
	// HTTPSSE is the legacy HTTP+SSE transport (2024-11-05) only.
	HTTPSSE
)

// HTTPSpec describes a remote server.
type HTTPSpec struct {
	// URL is the MCP endpoint (for HTTPSSE, the SSE endpoint). Userinfo and
	// query values are treated as secrets: errors show the URL redacted.
	URL  string
	Kind HTTPKind
	// Headers supplies the configured headers, added to requests to the URL's
	// origin only. Nil means none.
	Headers HeaderSource
	// Transport is the base RoundTripper (default: a private clone of
	// http.DefaultTransport, closed with the connection).
	Transport http.RoundTripper
	// CheckRedirect decides each redirect (http.Client.CheckRedirect); nil follows
	// up to 10 anywhere, with the configured headers and credentials only on the
	// URL's origin. The dialer of installed servers passes netguard's (docs/trust.md,
	// "Headers and redirects"): within the origin only.
	CheckRedirect func(req *http.Request, via []*http.Request) error
	// NoStandaloneStream leaves out the GET stream through which a stateful
	// server sends notifications (list_changed) outside any request.
	NoStandaloneStream bool
	// Auth, when set, owns the Authorization header of every request to the
	// URL's origin and answers the server's 401 and 403 challenges (OAuth:
	// internal/upstreamauth). A request it answers with new credentials is
	// sent again, a few times at most; one it does not is refused with the
	// server's *AuthRequiredError, as without it.
	Auth Authorizer
}

// DialHTTP connects to a remote server and runs the handshake. It never
// retries a 401 by itself (an HTTPSpec.Auth may answer it): an
// *AuthRequiredError means new credentials are needed.
//
// opts.Era chooses the handshake. EraStateless speaks 2026-07-28 only (not
// over HTTPSSE); EraProbe asks server/discover and, when the answer is not a
// 2026-07-28 one, dials a new connection that runs initialize, so one
// connection never carries both eras.
//
// Over Streamable HTTP the go-sdk's transport keeps Mcp-Session-Id and ends
// the session with DELETE on Close; this package adds Mcp-Protocol-Version
// after initialize and, when the server gave a session, opens the standalone
// GET stream itself (the go-sdk opens it only for its typed client). A 404 on
// that stream, or on any request of the session, ends the connection
// (mcp.ErrSessionMissing): the caller dials again.
func DialHTTP(ctx context.Context, spec HTTPSpec, opts Options) (*Conn, error) {
	u, err := url.Parse(spec.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errors.New("upstream: the server URL must be an absolute http or https URL")
	}
	opts = opts.withDefaults()
	base, owned := spec.Transport, false
	if base == nil {
		base, owned = http.DefaultTransport.(*http.Transport).Clone(), true
	}
	headers := spec.Headers
	if headers == nil {
		headers = StaticHeaders(nil)
	}
	if spec.Kind == HTTPSSE && opts.Era == EraStateless {
		return nil, errors.New("upstream: the stateless revision (2026-07-28) has no HTTP+SSE transport")
	}
	d := &httpDialer{
		spec:   spec,
		opts:   opts,
		safe:   RedactURL(u),
		redact: redactor(spec.URL, u),
		ht: &headerTransport{
			base:    base,
			origin:  originOf(u),
			headers: headers,
			auth:    spec.Auth,
			maxBody: opts.MaxMessageBytes,
			safeURL: RedactURL(u),
		},
	}
	d.client = &http.Client{Transport: d.ht, CheckRedirect: spec.CheckRedirect}
	if owned {
		d.release = base.(*http.Transport).CloseIdleConnections
	}
	if spec.Kind == HTTPSSE {
		d.opts.Era = EraLegacy
		return d.sse(ctx)
	}
	c, status, err := d.streamable(ctx)
	if err != nil && opts.Era == EraProbe && errors.Is(err, errNotStateless) {
		// Not a 2026-07-28 server: a new connection for initialize.
		d.opts.Era = EraLegacy
		d.ht.stateless.Store(false)
		d.ht.version.Store(nil)
		c, status, err = d.streamable(ctx)
	}
	if err == nil || spec.Kind != HTTPAuto || d.opts.Era != EraLegacy {
		return c, err
	}
	var auth *AuthRequiredError
	if errors.As(err, &auth) || (status != http.StatusBadRequest && status != http.StatusNotFound && status != http.StatusMethodNotAllowed) {
		return nil, err
	}
	c, sseErr := d.sse(ctx)
	if sseErr != nil {
		return nil, fmt.Errorf("upstream: %s answered initialize with HTTP %d, and the legacy SSE transport failed too: %w", d.safe, status, sseErr)
	}
	return c, nil
}

type httpDialer struct {
	spec    HTTPSpec
	opts    Options
	safe    string
	redact  func(error) error
	ht      *headerTransport
	client  *http.Client
	release func()
}

func (d *httpDialer) streamable(ctx context.Context) (*Conn, int, error) {
	c := newConn(d.opts)
	st := &mcp.StreamableClientTransport{
		Endpoint:             d.spec.URL,
		HTTPClient:           d.client,
		DisableStandaloneSSE: true, // opened here instead: see DialHTTP
		MaxEventSize:         d.opts.MaxMessageBytes,
	}
	mconn, err := st.Connect(c.life)
	if err != nil {
		return nil, 0, fmt.Errorf("upstream: %s: %w", d.safe, d.redact(err))
	}
	var status atomic.Int32
	err = c.start(context.WithValue(ctx, statusKey{}, &status), transport{
		conn:       mconn,
		kind:       "streamable-http",
		terminal:   func(error) bool { return true }, // the go-sdk's read errors are sticky
		redact:     d.redact,
		negotiated: func(v string) { d.ht.version.Store(&v) },
		stateless: func() {
			v := StatelessProtocolVersion
			d.ht.version.Store(&v)
			d.ht.stateless.Store(true)
		},
		ready: func(ctx context.Context, c *Conn) {
			if sid := mconn.SessionID(); sid != "" && !d.spec.NoStandaloneStream {
				// The dial returns once the stream is open (or refused), so a
				// request the server sends right after the handshake — an
				// elicitation for the first call — has somewhere to go.
				opened := make(chan struct{})
				go c.listen(d.client, d.spec.URL, sid, opened)
				t := time.NewTimer(listenOpenWait)
				defer t.Stop()
				select {
				case <-opened:
				case <-t.C:
				case <-ctx.Done():
				}
			}
		},
		closed: d.release,
	})
	if err != nil {
		return nil, int(status.Load()), d.dialError(err)
	}
	return c, 0, nil
}

func (d *httpDialer) sse(ctx context.Context) (*Conn, error) {
	c := newConn(d.opts)
	st := &mcp.SSEClientTransport{
		Endpoint:     d.spec.URL,
		HTTPClient:   d.client,
		MaxEventSize: d.opts.MaxMessageBytes,
	}
	// The hanging GET lives as long as the context Connect is given, so it gets
	// the connection's; ctx bounds only the wait for the endpoint event.
	stop := context.AfterFunc(ctx, c.cancel)
	mconn, err := st.Connect(c.life)
	if !stop() {
		if mconn != nil {
			mconn.Close()
		}
		return nil, ctx.Err()
	}
	if err != nil {
		return nil, d.dialError(err)
	}
	err = c.start(ctx, transport{
		conn:     mconn,
		kind:     "sse",
		terminal: func(err error) bool { return errors.Is(err, io.EOF) },
		redact:   d.redact,
		closed:   d.release,
	})
	if err != nil {
		return nil, d.dialError(err)
	}
	return c, nil
}

// dialError keeps the typed errors callers branch on at the top and removes
// secrets from the rest.
func (d *httpDialer) dialError(err error) error {
	var auth *AuthRequiredError
	if errors.As(err, &auth) {
		return auth
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return fmt.Errorf("upstream: %s: %w", d.safe, d.redact(err))
}
