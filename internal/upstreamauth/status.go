package upstreamauth

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/toolgate/toolgate/internal/netguard"
	"github.com/toolgate/toolgate/internal/upstream"
)

// The states Status reports.
const (
	// StateSignedIn: a usable access token (or one that will be refreshed).
	StateSignedIn = "signed_in"
	// StateSignedOut: no credentials; the server has not asked for any yet
	// (a 401 would park it, unless the Server signs in by itself).
	StateSignedOut = "signed_out"
	// StateExpired: the access token lapsed and cannot be refreshed.
	StateExpired = "expired"
	// StateSignInRequired: parked; Reason and Detail say why.
	StateSignInRequired = "sign_in_required"
)

// Status is what an operator sees of a server's sign-in: never a secret.
type Status struct {
	Server string `json:"server"`
	State  string `json:"state"`
	// Reason and Detail explain StateSignInRequired (an upstream.AuthReason).
	Reason string `json:"reason,omitempty"`
	Detail string `json:"detail,omitempty"`
	// Grant is authorization_code or client_credentials.
	Grant      string    `json:"grant,omitempty"`
	Issuer     string    `json:"issuer,omitempty"`
	Resource   string    `json:"resource,omitempty"`
	ClientID   string    `json:"client_id,omitempty"`
	Scopes     []string  `json:"scopes,omitempty"`
	ExpiresAt  time.Time `json:"expires_at,omitzero"`
	ObtainedAt time.Time `json:"obtained_at,omitzero"`
	// Refreshable: a refresh token is held (or the grant is client
	// credentials, renewed without one).
	Refreshable bool `json:"refreshable"`
	// WantScopes are scopes the server asked for (insufficient_scope) that a
	// new login will ask for.
	WantScopes []string `json:"want_scopes,omitempty"`
	// LoginPending: a login is waiting for its callback.
	LoginPending bool `json:"login_pending"`
}

// Status reports the server's sign-in.
func (s *Server) Status(ctx context.Context) (Status, error) {
	if err := s.ensureLoaded(ctx); err != nil {
		return Status{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st := Status{Server: s.cfg.Server, State: StateSignedOut, WantScopes: s.want, LoginPending: s.login != nil}
	if g := s.grant; g != nil {
		st.Grant, st.Issuer, st.Resource, st.ClientID = g.Kind, g.Issuer, g.Resource, g.ClientID
		st.Scopes, st.ExpiresAt, st.ObtainedAt, st.Refreshable = g.Scopes, g.Expiry, g.ObtainedAt, renewable(g)
		st.State = StateSignedIn
		if !g.Expiry.IsZero() && !time.Now().Before(g.Expiry) && !st.Refreshable {
			st.State = StateExpired
		}
	}
	if p := s.parked; p != nil {
		st.State, st.Reason, st.Detail = StateSignInRequired, p.Reason, p.Detail
	}
	return st, nil
}

// LogoutOptions shape Logout.
type LogoutOptions struct {
	// Revoke asks the authorization server to revoke the tokens too (RFC
	// 7009), when it publishes a revocation endpoint; failing to is not an
	// error.
	Revoke bool
	// ForgetClient deletes the dynamic registration as well, so the next
	// login registers anew.
	ForgetClient bool
}

// Logout forgets the server's tokens: requests then fail at once as
// login_required until a person signs in again.
func (s *Server) Logout(ctx context.Context, opts LogoutOptions) error {
	if err := s.ensureLoaded(ctx); err != nil {
		return err
	}
	s.mu.Lock()
	g := s.grant
	s.setGrantLocked(nil, viaNone)
	s.stepUps, s.want = 0, nil
	s.mu.Unlock()
	if opts.Revoke && g != nil {
		s.revoke(ctx, g)
	}
	if err := s.cfg.Store.DeleteGrant(ctx, s.cfg.Server); err != nil {
		return err
	}
	if opts.ForgetClient {
		if err := s.cfg.Store.DeleteClient(ctx, s.cfg.Server); err != nil {
			return err
		}
	}
	s.park(nil, upstream.AuthReasonLoginRequired, "signed out: toolgate auth login "+s.cfg.Server, nil)
	return nil
}

// ensureLoaded loads the stored grant if it was not yet (Logout and Status
// work on what is stored), as the one flight, like Authorization does.
func (s *Server) ensureLoaded(ctx context.Context) error {
	for {
		s.mu.Lock()
		if s.loaded {
			s.mu.Unlock()
			return nil
		}
		f, mine := s.beginLocked()
		s.mu.Unlock()
		if !mine {
			if err := wait(ctx, f); err != nil {
				return err
			}
			continue
		}
		err := s.load(ctx)
		s.end(f)
		return err
	}
}

// revoke is RFC 7009, best effort: the refresh token (which revokes the
// access token with it at most servers), then the access token.
func (s *Server) revoke(ctx context.Context, g *Grant) {
	if g.RevocationEndpoint == "" || g.Kind == GrantClientCredentials {
		return
	}
	c, err := s.clientFor(ctx, g)
	if err != nil {
		return
	}
	for _, t := range []struct {
		v    string
		hint string
	}{{g.RefreshToken.RevealString(), "refresh_token"}, {g.AccessToken.RevealString(), "access_token"}} {
		if t.v == "" {
			continue
		}
		err := s.revokeOne(ctx, g.RevocationEndpoint, g.Issuer, c, t.v, t.hint)
		s.record(EventRevocation, g.RevocationEndpoint, g.Issuer, err)
		if err != nil {
			s.log.Info("oauth: revocation failed", "error", err)
		}
	}
}

func (s *Server) revokeOne(ctx context.Context, endpoint, issuer string, c *Client, token, hint string) error {
	form := url.Values{"token": {token}, "token_type_hint": {hint}}
	header := http.Header{}
	if _, err := clientAuth(c, issuer, form, header); err != nil {
		return err
	}
	hc, err := s.httpClient(endpoint, netguard.RedirectNone)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return err
	}
	req.Header = header
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("User-Agent", userAgent())
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != http.StatusOK {
		return errors.New("the revocation endpoint answered HTTP " + resp.Status)
	}
	return nil
}
