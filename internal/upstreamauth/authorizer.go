package upstreamauth

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/toolgate/toolgate/internal/keystore"
	"github.com/toolgate/toolgate/internal/upstream"
)

var _ upstream.Authorizer = (*Server)(nil)

// How the current credentials were obtained.
const (
	viaNone    = ""
	viaStored  = "stored"
	viaRefresh = "refresh"
	viaLogin   = "login"
)

// renewBackoff is how long renewals rest after one failed in a way that may
// pass (the network, a 5xx): requests in between use the token while it is
// valid, and fail at once when it is not, instead of each asking again.
const renewBackoff = 10 * time.Second

// flight is the one refresh, sign-in or load under way: requests that meet
// an expiry or a challenge at the same time wait for it instead of each
// asking the authorization server.
type flight struct{ done chan struct{} }

// begin makes the caller the flight (true), or returns the flight under way
// to wait for. s.mu must be held.
func (s *Server) beginLocked() (*flight, bool) {
	if s.flight != nil {
		return s.flight, false
	}
	s.flight = &flight{done: make(chan struct{})}
	return s.flight, true
}

func (s *Server) end(f *flight) {
	s.mu.Lock()
	s.flight = nil
	s.mu.Unlock()
	close(f.done)
}

func wait(ctx context.Context, f *flight) error {
	select {
	case <-f.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Authorization implements upstream.Authorizer: the Bearer token for the next
// request, refreshed first when it lapses within RefreshAhead (or half its
// lifetime, for short-lived tokens). A parked Server fails at once.
func (s *Server) Authorization(ctx context.Context) (upstream.Credential, error) {
	for {
		s.mu.Lock()
		if s.parked != nil {
			p := s.parked
			s.mu.Unlock()
			return upstream.Credential{}, p
		}
		if f := s.flight; f != nil {
			s.mu.Unlock()
			if err := wait(ctx, f); err != nil {
				return upstream.Credential{}, err
			}
			continue
		}
		g := s.grant
		switch {
		case !s.loaded:
			f, _ := s.beginLocked()
			s.mu.Unlock()
			err := s.load(ctx)
			s.end(f)
			if err != nil {
				return upstream.Credential{}, err
			}
			continue
		case g != nil && s.due(g) && renewable(g) && !time.Now().Before(s.retryAt):
			f, _ := s.beginLocked()
			s.mu.Unlock()
			err := s.renewAhead(ctx, g)
			s.end(f)
			if err != nil {
				return upstream.Credential{}, err
			}
			continue
		}
		cred := upstream.Credential{Header: s.header, Generation: s.gen}
		lastErr := s.renewErr
		s.mu.Unlock()
		if lastErr != nil && g != nil && !g.Expiry.IsZero() && !time.Now().Before(g.Expiry) {
			// The token has lapsed and renewing it just failed: fail now rather
			// than send it (the failure may pass; nothing is parked).
			return upstream.Credential{}, lastErr
		}
		return cred, nil
	}
}

// due reports whether g's access token should be renewed before use.
func (s *Server) due(g *Grant) bool {
	if g.Expiry.IsZero() {
		return false
	}
	ahead := s.cfg.RefreshAhead
	if life := g.Expiry.Sub(g.ObtainedAt); life > 0 && ahead > life/2 {
		ahead = life / 2
	}
	return !time.Now().Before(g.Expiry.Add(-ahead))
}

func renewable(g *Grant) bool {
	return g.RefreshToken.Len() > 0 || g.Kind == GrantClientCredentials
}

// load reads the stored grant, once. A grant for another resource (the
// server's URL changed) is not this server's and is dropped.
func (s *Server) load(ctx context.Context) error {
	g, err := s.cfg.Store.LoadGrant(ctx, s.cfg.Server)
	if err != nil {
		return fmt.Errorf("upstreamauth: reading the credentials of %s: %w", s.cfg.Server, err)
	}
	if g != nil && !s.ownResource(g.Resource) {
		s.log.Info("oauth: stored credentials are for another URL; dropped", "resource", g.Resource)
		if err := s.cfg.Store.DeleteGrant(ctx, s.cfg.Server); err != nil {
			return err
		}
		g = nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.loaded = true
	if g != nil && g.AccessToken.Len() > 0 {
		s.setGrantLocked(g, viaStored)
	}
	return nil
}

// ownResource: the server itself or (root metadata) its origin.
func (s *Server) ownResource(r string) bool {
	if r == s.resource {
		return true
	}
	u, err := url.Parse(s.resource)
	return err == nil && r == u.Scheme+"://"+u.Host
}

func (s *Server) setGrantLocked(g *Grant, via string) {
	s.grant, s.via = g, via
	s.gen++
	s.header = keystore.Secret{}
	if g != nil {
		s.header = keystore.NewSecretString("Bearer " + g.AccessToken.RevealString())
	}
	s.renewErr, s.retryAt = nil, time.Time{}
}

// renewAhead refreshes a token before it lapses. A refused refresh drops the
// grant: automatic modes sign in anew at the server's next 401, others park.
func (s *Server) renewAhead(ctx context.Context, g *Grant) error {
	ng, err := s.renew(ctx, g, nil)
	if err == nil {
		return s.install(ctx, ng, viaRefresh)
	}
	if reason, refused := refusal(err); refused {
		s.dropGrant(ctx, g)
		if s.automatic() {
			return nil
		}
		return s.park(nil, reason, "the authorization server refused to renew the sign-in: sign in again (toolgate auth login "+s.cfg.Server+")", err)
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	s.log.Warn("oauth: renewing the access token failed; will try again", "error", err)
	s.mu.Lock()
	s.renewErr, s.retryAt = err, time.Now().Add(renewBackoff)
	s.mu.Unlock()
	return nil
}

// refusal says whether err is the authorization server refusing (not a
// failure that may pass), and the reason to park with.
func refusal(err error) (string, bool) {
	var te *TokenError
	if errors.As(err, &te) {
		switch te.Code {
		case "invalid_client", "unauthorized_client", "unsupported_grant_type":
			return upstream.AuthReasonClientRejected, true
		case "invalid_scope", "invalid_target":
			return upstream.AuthReasonAuthorizationFailed, true
		}
		return upstream.AuthReasonGrantRevoked, true
	}
	var re *RegistrationError
	if errors.As(err, &re) {
		return upstream.AuthReasonClientRejected, true
	}
	var de *DiscoveryError
	if errors.As(err, &de) {
		return upstream.AuthReasonAuthorizationFailed, true
	}
	return "", false
}

// renew gets a new access token for g: the refresh token, or a new client
// credentials grant (at the authorization server d found, discovered here
// when d is nil).
func (s *Server) renew(ctx context.Context, g *Grant, d *discovery) (*Grant, error) {
	if g.Kind == GrantClientCredentials {
		if d == nil {
			var err error
			if d, err = s.discover(ctx, challengeInfo{}, g.Issuer); err != nil {
				return nil, err
			}
		}
		return s.clientCredentialsGrant(ctx, d, g.Requested)
	}
	c, err := s.clientFor(ctx, g)
	if err != nil {
		return nil, err
	}
	return s.refreshGrant(ctx, g, c)
}

// clientFor is the client that obtained g (a refresh authenticates as it).
func (s *Server) clientFor(ctx context.Context, g *Grant) (*Client, error) {
	cc := s.cfg.Client
	switch {
	case cc.MetadataURL != "" && g.ClientID == cc.MetadataURL:
		return &Client{Kind: ClientMetadataDocument, Issuer: g.Issuer, ID: g.ClientID, AuthMethod: "none"}, nil
	case cc.ID != "" && g.ClientID == cc.ID:
		return &Client{Kind: ClientPreregistered, Issuer: g.Issuer, ID: g.ClientID, Secret: cc.Secret, AuthMethod: g.ClientAuthMethod}, nil
	}
	c, err := s.cfg.Store.LoadClient(ctx, s.cfg.Server)
	if err != nil {
		return nil, err
	}
	if c == nil || c.ID != g.ClientID || !issuersEqual(c.Issuer, g.Issuer) {
		return nil, &RegistrationError{Issuer: g.Issuer, Err: errors.New("the client that signed in is no longer registered")}
	}
	return c, nil
}

// install makes g the credentials, stores it, and lifts a park.
func (s *Server) install(ctx context.Context, g *Grant, via string) error {
	s.mu.Lock()
	s.setGrantLocked(g, via)
	wasParked := s.parked != nil
	s.parked = nil
	s.loaded = true
	s.mu.Unlock()
	s.log.Info("oauth: credentials obtained", "via", via, "issuer", g.Issuer, "scopes", strings.Join(g.Scopes, " "), "expires", g.Expiry)
	if err := s.cfg.Store.SaveGrant(ctx, s.cfg.Server, g); err != nil {
		// In use for this process; a restart signs in again.
		s.log.Warn("oauth: storing the credentials failed", "error", err)
	}
	if via == viaLogin || wasParked {
		s.changed()
	}
	return nil
}

// dropGrant forgets g (when it is still the current grant) here and in the
// store.
func (s *Server) dropGrant(ctx context.Context, g *Grant) {
	s.mu.Lock()
	if s.grant == g {
		s.setGrantLocked(nil, viaNone)
	}
	s.mu.Unlock()
	if err := s.cfg.Store.DeleteGrant(ctx, s.cfg.Server); err != nil {
		s.log.Warn("oauth: deleting refused credentials failed", "error", err)
	}
}

// park stops the Server trying: every request fails with the returned error
// until new credentials arrive (a login).
func (s *Server) park(ch *upstream.AuthRequiredError, reason, detail string, cause error) *upstream.AuthRequiredError {
	e := &upstream.AuthRequiredError{URL: s.safeURL, Reason: reason, Detail: detail, Err: cause}
	if ch != nil {
		e.StatusCode, e.Challenge = ch.StatusCode, ch.Challenge
	}
	s.mu.Lock()
	s.parked = e
	s.mu.Unlock()
	s.log.Warn("oauth: sign-in required", "reason", reason, "detail", detail, "cause", cause)
	s.changed()
	return e
}

func (s *Server) changed() {
	if s.cfg.OnChange != nil {
		go s.cfg.OnChange()
	}
}

// automatic reports whether the Server may sign in by itself.
func (s *Server) automatic() bool {
	return s.cfg.ClientCredentials != nil || s.cfg.Headless || s.cfg.OpenBrowser != nil
}

// Accepted implements upstream.Authorizer.
func (s *Server) Accepted(used upstream.Credential) {
	for {
		cur := s.accepted.Load()
		if used.Generation <= cur || s.accepted.CompareAndSwap(cur, used.Generation) {
			return
		}
	}
}

// Challenged implements upstream.Authorizer. A 401 for credentials that
// worked is an expiry or a revocation: refresh (after checking the server
// still names the same authorization server), or sign in anew when the
// Server may, or park. A 401 for credentials just obtained is not retried in
// a loop: a refreshed token refused leads to one new sign-in at most, a new
// sign-in's token refused parks. A 403 insufficient_scope steps up, within
// MaxStepUps and only while the server asks for scopes not yet granted.
func (s *Server) Challenged(ctx context.Context, ch *upstream.AuthRequiredError, used upstream.Credential) (bool, error) {
	ci := parseChallenge(ch.Challenge)
	if ch.StatusCode == 403 && ci.errorCode != "insufficient_scope" {
		return false, nil // a refusal that more scopes would not change
	}
	for {
		s.mu.Lock()
		s.challenge = boundChallenge(ch.Challenge)
		if s.parked != nil {
			p := s.parked
			s.mu.Unlock()
			return false, p
		}
		if s.gen != used.Generation {
			s.mu.Unlock()
			return true, nil // another request already replaced them
		}
		f, mine := s.beginLocked()
		if !mine {
			s.mu.Unlock()
			if err := wait(ctx, f); err != nil {
				return false, err
			}
			continue
		}
		g, via := s.grant, s.via
		s.mu.Unlock()
		retry, err := s.answer(ctx, ch, ci, used, g, via)
		s.end(f)
		return retry, err
	}
}

func (s *Server) answer(ctx context.Context, ch *upstream.AuthRequiredError, ci challengeInfo, used upstream.Credential, g *Grant, via string) (bool, error) {
	if ch.StatusCode == 403 {
		return s.stepUp(ctx, ch, ci, g)
	}
	if g == nil {
		return s.signIn(ctx, ch, ci, nil, nil, upstream.AuthReasonLoginRequired,
			"the server requires a sign-in: toolgate auth login "+s.cfg.Server, nil)
	}
	worked := used.Generation != 0 && s.accepted.Load() >= used.Generation
	if !worked && via != viaStored {
		if via == viaRefresh {
			s.dropGrant(ctx, g)
			return s.signIn(ctx, ch, ci, nil, nil, upstream.AuthReasonTokenRejected,
				"the server refuses the token just renewed for it: sign in again (toolgate auth login "+s.cfg.Server+")", nil)
		}
		return false, s.park(ch, upstream.AuthReasonTokenRejected,
			"the server refuses the token its authorization server just issued for it", nil)
	}
	// The credentials lapsed or were revoked. The server may also have moved
	// to another authorization server: then nothing of the old one is used.
	d, err := s.discover(ctx, ci, g.Issuer)
	if err != nil {
		return s.failed(ch, err)
	}
	if !issuersEqual(d.asm.Issuer, g.Issuer) {
		s.log.Info("oauth: the server names another authorization server", "was", g.Issuer, "now", d.asm.Issuer)
		s.dropGrant(ctx, g)
		return s.signIn(ctx, ch, ci, nil, d, upstream.AuthReasonLoginRequired,
			"the server now uses the authorization server "+d.asm.Issuer+": sign in there (toolgate auth login "+s.cfg.Server+")", nil)
	}
	if renewable(g) {
		ng, err := s.renew(ctx, g, d)
		if err == nil {
			return true, s.install(ctx, ng, viaRefresh)
		}
		reason, refused := refusal(err)
		if !refused {
			return false, err
		}
		s.dropGrant(ctx, g)
		return s.signIn(ctx, ch, ci, nil, d, reason,
			"the authorization server refused to renew the sign-in: sign in again (toolgate auth login "+s.cfg.Server+")", err)
	}
	s.dropGrant(ctx, g)
	return s.signIn(ctx, ch, ci, nil, d, upstream.AuthReasonLoginRequired,
		"the sign-in lapsed and there is no refresh token: sign in again (toolgate auth login "+s.cfg.Server+")", nil)
}

// stepUp answers a 403 insufficient_scope.
func (s *Server) stepUp(ctx context.Context, ch *upstream.AuthRequiredError, ci challengeInfo, g *Grant) (bool, error) {
	var have []string
	if g != nil {
		have = unionScopes(g.Scopes, g.Requested)
	}
	want := unionScopes(have, ci.scopes)
	scopeErr := func(detail string) error {
		return &upstream.AuthRequiredError{StatusCode: ch.StatusCode, Challenge: ch.Challenge, URL: s.safeURL,
			Reason: upstream.AuthReasonInsufficientScope, Scopes: want, Detail: detail}
	}
	if g != nil && hasScopes(g.Scopes, ci.scopes) {
		return false, scopeErr("the server asks for scopes already granted (" + strings.Join(ci.scopes, " ") + "): not asking again")
	}
	s.mu.Lock()
	if s.stepUps >= s.cfg.MaxStepUps {
		s.mu.Unlock()
		return false, scopeErr(fmt.Sprintf("%d step-ups already: not asking again until a person signs in", s.cfg.MaxStepUps))
	}
	s.stepUps++
	s.want = want
	s.mu.Unlock()
	follow := g != nil && g.Headless
	if !s.automatic() && !follow {
		return false, scopeErr("the server needs more scopes (" + strings.Join(want, " ") + "): sign in again to grant them (toolgate auth login " + s.cfg.Server + ")")
	}
	s.log.Info("oauth: stepping up", "scopes", strings.Join(want, " "))
	if err := s.obtain(ctx, ci, want, nil, follow); err != nil {
		if _, refused := refusal(err); refused || isLoginError(err) {
			return false, scopeErr("the step-up failed: " + err.Error())
		}
		return false, err
	}
	return true, nil
}

// signIn obtains credentials without a person when the Server may, or parks
// with reason and detail.
func (s *Server) signIn(ctx context.Context, ch *upstream.AuthRequiredError, ci challengeInfo, scopes []string, d *discovery, reason, detail string, cause error) (bool, error) {
	if !s.automatic() {
		return false, s.park(ch, reason, detail, cause)
	}
	if err := s.obtain(ctx, ci, scopes, d, false); err != nil {
		return s.failed(ch, err)
	}
	return true, nil
}

// failed turns an error of discovery or of a sign-in into the request's
// error: refusals and failed logins park; what may pass does not.
func (s *Server) failed(ch *upstream.AuthRequiredError, err error) (bool, error) {
	if reason, refused := refusal(err); refused {
		return false, s.park(ch, reason, err.Error(), err)
	}
	if isLoginError(err) {
		return false, s.park(ch, upstream.AuthReasonAuthorizationFailed, err.Error(), err)
	}
	return false, err
}

// obtain runs a sign-in without a person: the client credentials grant, or a
// login whose authorization URL is followed headlessly (Config.Headless, or
// follow: a step-up of a grant obtained headlessly) or shown by OpenBrowser.
func (s *Server) obtain(ctx context.Context, ci challengeInfo, scopes []string, d *discovery, follow bool) error {
	if s.cfg.ClientCredentials != nil {
		if d == nil {
			var err error
			if d, err = s.discover(ctx, ci, ""); err != nil {
				return err
			}
		}
		g, err := s.clientCredentialsGrant(ctx, d, s.selectScopes(ci, d, scopes, false))
		if err != nil {
			return err
		}
		return s.install(ctx, g, GrantClientCredentials)
	}
	l, err := s.startLogin(ctx, ci, scopes, false)
	if err != nil {
		return err
	}
	defer l.Cancel()
	if s.cfg.Headless || follow || s.cfg.OpenBrowser == nil {
		err = s.follow(ctx, l)
	} else {
		err = s.cfg.OpenBrowser(ctx, l.URL)
	}
	if err != nil {
		return &LoginError{Step: "authorization request", Err: err}
	}
	return l.Wait(ctx)
}

// selectScopes is the scope of a new authorization: the configured scopes,
// else the challenge's, else the protected resource metadata's; with extra
// (a step-up's), what the current grant holds (so a step-up keeps it), and
// offline_access when the authorization server supports it and a refresh
// token is wanted.
func (s *Server) selectScopes(ci challengeInfo, d *discovery, extra []string, person bool) []string {
	base := s.cfg.Scopes
	if len(base) == 0 {
		base = ci.scopes
	}
	if len(base) == 0 && d.prm != nil {
		base = d.prm.ScopesSupported
	}
	out := unionScopes(base, extra)
	s.mu.Lock()
	if g := s.grant; g != nil && issuersEqual(g.Issuer, d.asm.Issuer) {
		out = unionScopes(g.Scopes, out)
	}
	s.mu.Unlock()
	if person && !s.cfg.NoOfflineAccess && containsString(d.asm.ScopesSupported, "offline_access") {
		out = unionScopes(out, []string{"offline_access"})
	}
	return out
}

func containsString(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// boundChallenge keeps a challenge for the next login, bounded.
func boundChallenge(values []string) []string {
	out := make([]string, 0, min(len(values), 4))
	for _, v := range values {
		if len(out) == 4 {
			break
		}
		if len(v) > 2048 {
			v = v[:2048]
		}
		out = append(out, v)
	}
	return out
}
