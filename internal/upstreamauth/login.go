package upstreamauth

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/toolgate/toolgate/internal/netguard"
	"golang.org/x/oauth2"
)

// callbackPath is the loopback redirect URI's path.
const callbackPath = "/callback"

// ErrLoginCancelled is what a login's Wait returns after Cancel (or a newer
// login replaced it).
var ErrLoginCancelled = errors.New("upstreamauth: the login was cancelled")

// ErrLoginExpired is what a login's Wait returns when no callback came in
// time.
var ErrLoginExpired = errors.New("upstreamauth: the login expired before the authorization server redirected back")

// LoginError reports a login that failed: the authorization server refused
// (Code, RFC 6749 §4.1.2.1), the response failed a check (iss, state), or
// the code exchange failed.
type LoginError struct {
	Step              string
	Code, Description string
	Err               error
}

func (e *LoginError) Error() string {
	s := "upstreamauth: sign-in failed at the " + e.Step
	if e.Code != "" {
		s += ": " + e.Code
		if e.Description != "" {
			s += " (" + e.Description + ")"
		}
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

func (e *LoginError) Unwrap() error { return e.Err }

func isLoginError(err error) bool {
	var le *LoginError
	return errors.As(err, &le) || errors.Is(err, ErrLoginExpired)
}

// LoginOptions shape a person's login.
type LoginOptions struct {
	// Scopes are asked for besides those the server named.
	Scopes []string
	// Challenge is the server's WWW-Authenticate from when it refused (an
	// *upstream.AuthRequiredError's Challenge): where its metadata is and
	// which scopes it wants. Without one the Server uses the last it saw, or
	// asks the server for one.
	Challenge []string
}

// Login is one sign-in under way: open URL in a browser; the authorization
// server redirects to RedirectURI, a listener on 127.0.0.1 that takes exactly
// one callback with this login's state; Wait then exchanges the code.
type Login struct {
	// URL is the authorization request to open in a browser.
	URL string
	// RedirectURI is where the authorization server sends the browser back.
	RedirectURI string
	// Expires is when the login gives up waiting.
	Expires time.Time

	s        *Server
	d        *discovery
	client   *Client
	scopes   []string
	verifier string
	state    string
	person   bool
	// followed is set once the authorization URL was followed headlessly to
	// the callback (Follow): the grant it obtains is a headless one.
	followed atomic.Bool

	srv     *http.Server
	results chan callback // one: the first callback with the right state
	stop    chan struct{} // closed by Cancel
	stopped sync.Once
	timer   *time.Timer

	finish sync.Once
	done   chan struct{}
	err    error
}

// callback is what the authorization server's redirect carried.
type callback struct {
	code, iss, errCode, errDesc string
	hasIss                      bool
}

// StartLogin begins a person's sign-in: discovery, a client (client ID
// metadata document, pre-registered or dynamically registered), PKCE S256, a
// state, and the loopback listener. Show Login.URL to the person and call
// Wait (or Complete with the URL the browser was sent back to). A newer login
// cancels an older one. Servers configured with client credentials have no
// person's login.
func (s *Server) StartLogin(ctx context.Context, opts LoginOptions) (*Login, error) {
	if s.cfg.ClientCredentials != nil {
		return nil, errors.New("upstreamauth: " + s.cfg.Server + " signs in with client credentials: no person logs in")
	}
	s.mu.Lock()
	challenge := opts.Challenge
	if len(challenge) == 0 {
		challenge = s.challenge
	}
	want := s.want
	s.mu.Unlock()
	if len(challenge) == 0 {
		challenge = s.probe(ctx)
	}
	return s.startLogin(ctx, parseChallenge(challenge), unionScopes(want, opts.Scopes), true)
}

// probe asks the server for its challenge with an unauthenticated request.
func (s *Server) probe(ctx context.Context) []string {
	c, err := s.httpClient(s.cfg.URL, netguard.RedirectSameOrigin)
	if err != nil {
		return nil
	}
	body := `{"jsonrpc":"2.0","id":0,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.cfg.URL, strings.NewReader(body))
	if err != nil {
		return nil
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "server/discover")
	resp, err := c.Do(req)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != http.StatusUnauthorized && resp.StatusCode != http.StatusForbidden {
		return nil
	}
	return boundChallenge(resp.Header.Values("WWW-Authenticate"))
}

func (s *Server) startLogin(ctx context.Context, ci challengeInfo, extra []string, person bool) (*Login, error) {
	ln, err := s.listen(ctx)
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*Login, error) {
		ln.Close()
		return nil, err
	}
	redirect := "http://" + ln.Addr().String() + callbackPath
	var preferIssuer string
	s.mu.Lock()
	if s.grant != nil {
		preferIssuer = s.grant.Issuer
	}
	s.mu.Unlock()
	d, err := s.discover(ctx, ci, preferIssuer)
	if err != nil {
		return fail(err)
	}
	client, err := s.personClient(ctx, d, redirect)
	if err != nil {
		return fail(err)
	}
	l := &Login{
		RedirectURI: redirect,
		Expires:     time.Now().Add(s.cfg.LoginTimeout),
		s:           s, d: d, client: client, person: person,
		scopes:   s.selectScopes(ci, d, extra, true),
		verifier: oauth2.GenerateVerifier(),
		state:    rand.Text(),
		results:  make(chan callback, 1),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
	}
	if l.URL, err = l.authorizationURL(); err != nil {
		return fail(err)
	}
	l.srv = &http.Server{
		Handler:           http.HandlerFunc(l.serveCallback),
		ReadHeaderTimeout: 10 * time.Second,
		MaxHeaderBytes:    16 << 10,
		ErrorLog:          log.New(io.Discard, "", 0),
	}
	go l.srv.Serve(ln)
	l.timer = time.AfterFunc(s.cfg.LoginTimeout, l.expire)
	s.mu.Lock()
	prev := s.login
	s.login = l
	s.mu.Unlock()
	if prev != nil {
		prev.Cancel()
	}
	s.log.Info("oauth: login started", "issuer", d.asm.Issuer, "client_kind", client.Kind, "scopes", strings.Join(l.scopes, " "), "redirect_uri", redirect)
	return l, nil
}

// listen opens the loopback listener: on the port of the redirect URI a
// dynamic registration holds when it is free (so the registration is
// reused), else where CallbackAddr says.
func (s *Server) listen(ctx context.Context) (net.Listener, error) {
	var lc net.ListenConfig
	if c, err := s.cfg.Store.LoadClient(ctx, s.cfg.Server); err == nil && c != nil && c.Kind == ClientDynamic {
		host, _, _ := net.SplitHostPort(s.cfg.CallbackAddr)
		for _, r := range c.RedirectURIs {
			u, err := url.Parse(r)
			if err != nil || u.Hostname() != host || u.Path != callbackPath || u.Port() == "" {
				continue
			}
			if ln, err := lc.Listen(ctx, "tcp", u.Host); err == nil {
				return ln, nil
			}
		}
	}
	ln, err := lc.Listen(ctx, "tcp", s.cfg.CallbackAddr)
	if err != nil {
		return nil, fmt.Errorf("upstreamauth: opening the loopback redirect listener: %w", err)
	}
	return ln, nil
}

// checkLoopbackAddr accepts only a loopback IP literal and a port.
func checkLoopbackAddr(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("the callback address %q is not host:port", addr)
	}
	a, err := netip.ParseAddr(host)
	if err != nil || !a.IsLoopback() {
		return fmt.Errorf("the callback address %q is not a loopback address", addr)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("the callback address %q has no valid port", addr)
	}
	return nil
}

// authorizationURL is the authorization request (RFC 6749 §4.1.1 with PKCE
// S256, RFC 7636, and the resource indicator, RFC 8707). The endpoint must be
// https, or http to loopback, and pass the server's policy: a person's
// browser is about to open it, so javascript:, file:, a metadata address or
// a shell's metacharacters never reach it.
func (l *Login) authorizationURL() (string, error) {
	ep := l.d.asm.AuthorizationEndpoint
	u, err := url.Parse(ep)
	if err != nil || ep == "" {
		return "", &LoginError{Step: "authorization request", Err: fmt.Errorf("refused authorization URL %q", clip(ep))}
	}
	if u.User != nil || u.Fragment != "" || (u.Scheme != "https" && u.Scheme != "http") {
		return "", &LoginError{Step: "authorization request", Err: fmt.Errorf("refused authorization URL %q: it must be https (or http to loopback) with no userinfo or fragment", clip(ep))}
	}
	if _, err := netguard.ValidateURL(ep, l.s.cfg.Guard.Policy()); err != nil {
		return "", &LoginError{Step: "authorization request", Err: fmt.Errorf("refused authorization URL: %w", err)}
	}
	q := u.Query()
	q.Set("response_type", "code")
	q.Set("client_id", l.client.ID)
	q.Set("redirect_uri", l.RedirectURI)
	q.Set("state", l.state)
	q.Set("code_challenge", oauth2.S256ChallengeFromVerifier(l.verifier))
	q.Set("code_challenge_method", "S256")
	q.Set("resource", l.d.resource)
	if len(l.scopes) > 0 {
		q.Set("scope", strings.Join(l.scopes, " "))
	} else {
		q.Del("scope")
	}
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// serveCallback is the loopback listener: exactly one GET to callbackPath
// carrying this login's state is taken; anything else is refused and does not
// end the login.
func (l *Login) serveCallback(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Frame-Options", "DENY")
	w.Header().Set("Referrer-Policy", "no-referrer")
	w.Header().Set("Content-Security-Policy", "default-src 'none'")
	switch {
	case r.URL.Path != callbackPath:
		http.Error(w, "not found", http.StatusNotFound)
		return
	case r.Method != http.MethodGet:
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	q := r.URL.Query()
	if subtle.ConstantTimeCompare([]byte(q.Get("state")), []byte(l.state)) != 1 {
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, page("This is not the sign-in toolgate is waiting for.", "Start again with toolgate auth login."))
		return
	}
	cb := callback{code: q.Get("code"), iss: q.Get("iss"), hasIss: q.Has("iss"), errCode: q.Get("error"), errDesc: q.Get("error_description")}
	select {
	case l.results <- cb:
	default:
		w.WriteHeader(http.StatusConflict)
		io.WriteString(w, page("This sign-in is already complete.", "You can close this window."))
		return
	}
	if cb.errCode != "" {
		io.WriteString(w, page("The sign-in was not completed.", "toolgate reports what the authorization server said. You can close this window."))
		return
	}
	io.WriteString(w, page("Signed in.", "toolgate has what it needs. You can close this window."))
}

func page(title, text string) string {
	return "<!doctype html><meta charset=utf-8><title>toolgate</title><h1>" + title + "</h1><p>" + text + "</p>\n"
}

// Wait waits for the callback (or ctx, Cancel, or expiry), checks it and
// exchanges the code for tokens, which it stores. It returns the same result
// to every caller.
func (l *Login) Wait(ctx context.Context) error {
	select {
	case cb := <-l.results:
		l.finish.Do(func() {
			l.err = l.complete(ctx, cb)
			l.close()
			close(l.done)
		})
	case <-l.done:
	case <-l.stop:
		l.finish.Do(func() {
			l.err = ErrLoginCancelled
			close(l.done)
		})
	case <-ctx.Done():
		return ctx.Err()
	}
	<-l.done
	return l.err
}

// Complete finishes the login with the URL the browser was sent back to
// (for a person whose browser cannot reach the loopback listener: they paste
// it). It must be the redirect URI with this login's state.
func (l *Login) Complete(ctx context.Context, callbackURL string) error {
	u, err := url.Parse(callbackURL)
	if err != nil {
		return &LoginError{Step: "authorization response", Err: errors.New("the callback URL does not parse")}
	}
	want, _ := url.Parse(l.RedirectURI)
	q := u.Query()
	if u.Scheme != want.Scheme || u.Host != want.Host || u.Path != want.Path ||
		subtle.ConstantTimeCompare([]byte(q.Get("state")), []byte(l.state)) != 1 {
		return &LoginError{Step: "authorization response", Err: errors.New("the callback URL is not this login's redirect (redirect URI and state)")}
	}
	select {
	case l.results <- callback{code: q.Get("code"), iss: q.Get("iss"), hasIss: q.Has("iss"), errCode: q.Get("error"), errDesc: q.Get("error_description")}:
	default:
	}
	return l.Wait(ctx)
}

// Cancel ends the login: its listener closes and Wait returns
// ErrLoginCancelled (unless it already finished).
func (l *Login) Cancel() {
	l.stopped.Do(func() { close(l.stop) })
	l.close()
}

func (l *Login) expire() {
	l.finish.Do(func() {
		l.err = ErrLoginExpired
		close(l.done)
	})
	l.close()
}

func (l *Login) close() {
	l.timer.Stop()
	l.srv.Close()
	l.s.mu.Lock()
	if l.s.login == l {
		l.s.login = nil
	}
	l.s.mu.Unlock()
}

// complete checks the authorization response and exchanges the code.
func (l *Login) complete(ctx context.Context, cb callback) error {
	err := l.checkResponse(cb)
	l.s.record(EventAuthorize, l.d.asm.AuthorizationEndpoint, l.d.asm.Issuer, err)
	if err != nil {
		return err
	}
	return l.exchange(ctx, cb)
}

// checkResponse checks the authorization response: no error, the issuer
// (RFC 9207), a code.
func (l *Login) checkResponse(cb callback) error {
	asm := l.d.asm
	if cb.errCode != "" {
		return &LoginError{Step: "authorization server", Code: clip(cb.errCode), Description: clip(cb.errDesc)}
	}
	// RFC 9207: a server that promises iss must send it, and any iss sent must
	// be exactly the issuer the metadata names; otherwise the response may
	// come from another authorization server (a mix-up attack).
	if asm.AuthorizationResponseIssParameterSupported && !cb.hasIss {
		return &LoginError{Step: "authorization response", Err: errors.New("the authorization server promises an iss parameter (RFC 9207) and the response has none: refused")}
	}
	if cb.hasIss && cb.iss != asm.Issuer {
		return &LoginError{Step: "authorization response", Err: fmt.Errorf("the response names the issuer %q, not %q: refused", clip(cb.iss), asm.Issuer)}
	}
	if cb.code == "" {
		return &LoginError{Step: "authorization response", Err: errors.New("the response has no code")}
	}
	return nil
}

// exchange trades the authorization response's code for tokens.
func (l *Login) exchange(ctx context.Context, cb callback) error {
	asm := l.d.asm
	form := url.Values{
		"grant_type":    {"authorization_code"},
		"code":          {cb.code},
		"redirect_uri":  {l.RedirectURI},
		"code_verifier": {l.verifier},
		"resource":      {l.d.resource},
	}
	g, err := l.s.tokenRequest(ctx, asm.TokenEndpoint, asm.Issuer, l.client, form, l.scopes)
	if err != nil {
		var te *TokenError
		if errors.As(err, &te) && te.Code == "invalid_client" && l.client.Kind == ClientDynamic {
			// The registration is gone at the authorization server: the next
			// login registers anew.
			_ = l.s.cfg.Store.DeleteClient(ctx, l.s.cfg.Server)
		}
		return &LoginError{Step: "token exchange", Err: err}
	}
	g.Kind, g.Resource, g.RevocationEndpoint = GrantAuthorizationCode, l.d.resource, asm.RevocationEndpoint
	g.Headless = l.followed.Load()
	if l.person {
		l.s.mu.Lock()
		l.s.stepUps, l.s.want = 0, nil
		l.s.mu.Unlock()
	}
	return l.s.install(ctx, g, viaLogin)
}

// Follow plays the browser for an authorization server that redirects at once
// (tests, automation, the conformance suite): the headless sign-in of
// Config.Headless, for a login a person started. It returns once the callback
// was delivered; Wait then finishes the login. A server that shows a page
// instead ends it with an error (a person must sign in).
func (l *Login) Follow(ctx context.Context) error { return l.s.follow(ctx, l) }

// follow is the headless browser: it fetches the authorization URL and
// follows the authorization server's redirects (each hop under the server's
// policy, carrying nothing of toolgate's) until one reaches the loopback
// redirect URI, which it then requests, delivering the callback.
func (s *Server) follow(ctx context.Context, l *Login) error {
	next := l.URL
	want, _ := url.Parse(l.RedirectURI)
	// The URLs carry the code once the redirect is under way: errors name
	// them without their query.
	scrubbed := func(err error) error {
		u, perr := url.Parse(next)
		if perr != nil {
			return errors.New("following the authorization server's redirect failed")
		}
		safe := *u
		safe.RawQuery, safe.Fragment = "", ""
		return errors.New(strings.ReplaceAll(strings.ReplaceAll(err.Error(), next, safe.String()), u.String(), safe.String()))
	}
	for hop := 0; hop < netguard.DefaultMaxRedirects; hop++ {
		c, err := s.httpClient(next, netguard.RedirectNone)
		if err != nil {
			return scrubbed(err)
		}
		nc := *c
		nc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, next, nil)
		if err != nil {
			return err
		}
		req.Header.Set("User-Agent", userAgent())
		resp, err := nc.Do(req)
		if err != nil {
			return scrubbed(err)
		}
		io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		at, _ := url.Parse(next)
		if at.Scheme == want.Scheme && at.Host == want.Host && at.Path == want.Path {
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("the loopback listener answered HTTP %d", resp.StatusCode)
			}
			return nil
		}
		if loc, err := resp.Location(); err == nil && resp.StatusCode/100 == 3 &&
			loc.Scheme == want.Scheme && loc.Host == want.Host && loc.Path == want.Path {
			// The next hop delivers the callback: mark the login headless
			// before it can complete.
			l.followed.Store(true)
		}
		loc, err := resp.Location()
		if err != nil || resp.StatusCode/100 != 3 {
			return fmt.Errorf("the authorization server answered HTTP %d without redirecting: a person must sign in (toolgate auth login %s)", resp.StatusCode, s.cfg.Server)
		}
		next = loc.String()
	}
	return errors.New("too many redirects")
}
