package upstreamauth

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/toolgate/toolgate/internal/keystore"
	"github.com/toolgate/toolgate/internal/netguard"
)

// maxTokenResponseBytes bounds a token endpoint's answer.
const maxTokenResponseBytes = 64 << 10

// TokenError is a token endpoint's refusal (RFC 6749 §5.2). Code is the
// OAuth error ("invalid_grant", "invalid_client"…); Description is the
// server's text, bounded and with every secret the request carried removed.
type TokenError struct {
	Status      int
	Code        string
	Description string
}

func (e *TokenError) Error() string {
	s := fmt.Sprintf("upstreamauth: the token endpoint refused (HTTP %d)", e.Status)
	if e.Code != "" {
		s += ": " + e.Code
	}
	if e.Description != "" {
		s += ": " + e.Description
	}
	return s
}

// TransientError is a token or registration request that failed in a way
// that may pass (the network, a 5xx): the credentials are kept and nothing is
// parked.
type TransientError struct{ Err error }

func (e *TransientError) Error() string { return "upstreamauth: " + e.Err.Error() }
func (e *TransientError) Unwrap() error { return e.Err }

// tokenResponse is a token endpoint's successful answer (RFC 6749 §5.1).
type tokenResponse struct {
	AccessToken  string          `json:"access_token"`
	TokenType    string          `json:"token_type"`
	RefreshToken string          `json:"refresh_token"`
	ExpiresIn    json.RawMessage `json:"expires_in"`
	Scope        string          `json:"scope"`
}

// tokenRequest posts one grant to the token endpoint with the client's
// authentication and the resource indicator, and returns the new grant.
// Every secret of the request (code, refresh token, client secret, client
// assertion) is removed from whatever of the server's text reaches an error.
func (s *Server) tokenRequest(ctx context.Context, endpoint, issuer string, c *Client, form url.Values, requested []string) (*Grant, error) {
	kind := EventToken
	switch form.Get("grant_type") {
	case "refresh_token":
		kind = EventRefresh
	case "client_credentials":
		kind = EventClientCredentials
	}
	g, err := s.postToken(ctx, endpoint, issuer, c, form, requested)
	s.record(kind, endpoint, issuer, err)
	return g, err
}

// postToken is tokenRequest's request; it empties form.
func (s *Server) postToken(ctx context.Context, endpoint, issuer string, c *Client, form url.Values, requested []string) (*Grant, error) {
	sent := []keystore.Secret{keystore.NewSecretString(form.Get("code")), keystore.NewSecretString(form.Get("refresh_token"))}
	header := http.Header{}
	auth, err := clientAuth(c, issuer, form, header)
	if err != nil {
		return nil, err
	}
	sent = append(sent, auth...)
	body := form.Encode()
	for k := range form {
		form.Del(k)
	}
	hc, err := s.httpClient(endpoint, netguard.RedirectNone)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header = header
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", userAgent())
	resp, err := hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &TransientError{Err: fmt.Errorf("token request to %s: %w", endpoint, err)}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxTokenResponseBytes+1))
	defer clear(data)
	if err != nil {
		return nil, &TransientError{Err: fmt.Errorf("token request to %s: %w", endpoint, err)}
	}
	if resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests {
		return nil, &TransientError{Err: fmt.Errorf("token request to %s: HTTP %d", endpoint, resp.StatusCode)}
	}
	if resp.StatusCode != http.StatusOK {
		te := &TokenError{Status: resp.StatusCode}
		var e struct {
			Error       string `json:"error"`
			Description string `json:"error_description"`
		}
		if json.Unmarshal(data, &e) == nil {
			te.Code = clip(scrub(e.Error, sent))
			te.Description = clip(scrub(e.Description, sent))
		}
		return nil, te
	}
	if len(data) > maxTokenResponseBytes {
		return nil, errors.New("upstreamauth: the token endpoint's answer is too large")
	}
	var tr tokenResponse
	if err := json.Unmarshal(data, &tr); err != nil || tr.AccessToken == "" {
		// Not even the json error: it could quote the answer.
		return nil, errors.New("upstreamauth: the token endpoint's answer is not a token response")
	}
	if !strings.EqualFold(tr.TokenType, "bearer") {
		return nil, fmt.Errorf("upstreamauth: the token endpoint issued a %q token; toolgate sends only bearer tokens", clip(tr.TokenType))
	}
	now := time.Now()
	g := &Grant{
		AccessToken: keystore.NewSecretString(tr.AccessToken), RefreshToken: keystore.NewSecretString(tr.RefreshToken),
		Issuer: issuer, TokenEndpoint: endpoint, ClientID: c.ID, ClientAuthMethod: c.AuthMethod, Requested: requested, ObtainedAt: now,
	}
	if sec, ok := expiresIn(tr.ExpiresIn); ok {
		g.Expiry = now.Add(time.Duration(sec) * time.Second)
	}
	g.Scopes = requested
	if tr.Scope != "" {
		g.Scopes = strings.Fields(tr.Scope)
	}
	tr = tokenResponse{}
	return g, nil
}

// clientAuth adds the client's authentication to a request to the token or
// the revocation endpoint: none (client_id in the form), client_secret_basic,
// client_secret_post or private_key_jwt. It returns the secrets it put in the
// request, to be scrubbed from what the server answers.
func clientAuth(c *Client, issuer string, form url.Values, header http.Header) ([]keystore.Secret, error) {
	switch c.AuthMethod {
	case "client_secret_basic":
		header.Set("Authorization", "Basic "+basicAuth(c.ID, c.Secret.RevealString()))
		return []keystore.Secret{c.Secret}, nil
	case "client_secret_post":
		form.Set("client_id", c.ID)
		form.Set("client_secret", c.Secret.RevealString())
		return []keystore.Secret{c.Secret}, nil
	case "private_key_jwt":
		assertion, err := clientAssertion(c, issuer)
		if err != nil {
			return nil, err
		}
		form.Set("client_id", c.ID)
		form.Set("client_assertion_type", "urn:ietf:params:oauth:client-assertion-type:jwt-bearer")
		form.Set("client_assertion", assertion.RevealString())
		return []keystore.Secret{assertion}, nil
	}
	form.Set("client_id", c.ID) // none: a public client
	return nil, nil
}

// expiresIn reads expires_in, a number of seconds (some servers send it as a
// string).
func expiresIn(raw json.RawMessage) (int64, bool) {
	s := strings.Trim(string(raw), `"`)
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		f, ferr := strconv.ParseFloat(s, 64)
		if ferr != nil || f <= 0 || f > 1e9 {
			return 0, false
		}
		n = int64(f)
	}
	return min(n, 10*365*24*3600), true
}

// scrub removes every secret of sent from s.
func scrub(s string, sent []keystore.Secret) string {
	for _, sec := range sent {
		if v := sec.RevealString(); len(v) >= 4 {
			s = strings.ReplaceAll(s, v, keystore.Redacted)
		}
	}
	return s
}

// refreshGrant uses the refresh token, with the resource indicator and the
// grant's own client, at the grant's own token endpoint. A server that sends
// no new refresh token lets the old one go on (RFC 6749 §6).
func (s *Server) refreshGrant(ctx context.Context, g *Grant, c *Client) (*Grant, error) {
	form := url.Values{
		"grant_type":    {"refresh_token"},
		"refresh_token": {g.RefreshToken.RevealString()},
		"resource":      {g.Resource},
	}
	ng, err := s.tokenRequest(ctx, g.TokenEndpoint, g.Issuer, c, form, g.Requested)
	if err != nil {
		return nil, err
	}
	ng.Kind, ng.Resource, ng.RevocationEndpoint, ng.Headless = g.Kind, g.Resource, g.RevocationEndpoint, g.Headless
	if ng.RefreshToken.Len() == 0 {
		ng.RefreshToken = g.RefreshToken
	}
	if len(ng.Requested) == 0 {
		ng.Requested = g.Requested
	}
	return ng, nil
}

// clientCredentialsGrant asks for a token as the configured machine client.
func (s *Server) clientCredentialsGrant(ctx context.Context, d *discovery, scopes []string) (*Grant, error) {
	c, err := s.machineClient(d)
	if err != nil {
		return nil, err
	}
	form := url.Values{"grant_type": {"client_credentials"}, "resource": {d.resource}}
	if len(scopes) > 0 {
		form.Set("scope", strings.Join(scopes, " "))
	}
	g, err := s.tokenRequest(ctx, d.asm.TokenEndpoint, d.asm.Issuer, c, form, scopes)
	if err != nil {
		return nil, err
	}
	g.Kind, g.Resource, g.RevocationEndpoint = GrantClientCredentials, d.resource, d.asm.RevocationEndpoint
	return g, nil
}

// basicAuth is client_secret_basic's credential: id and secret each
// form-encoded, then joined and base64-encoded (RFC 6749 §2.3.1).
func basicAuth(id, secret string) string {
	return base64.StdEncoding.EncodeToString([]byte(url.QueryEscape(id) + ":" + url.QueryEscape(secret)))
}
