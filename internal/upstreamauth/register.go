package upstreamauth

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"time"

	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"github.com/toolgate/toolgate/internal/keystore"
	"github.com/toolgate/toolgate/internal/netguard"
	"github.com/toolgate/toolgate/internal/version"
)

// RegistrationError reports that no client could be had from the
// authorization server.
type RegistrationError struct {
	Issuer string
	// Code and Description are the authorization server's RFC 7591 error,
	// when it sent one.
	Code, Description string
	Err               error
}

func (e *RegistrationError) Error() string {
	s := "upstreamauth: client registration with " + e.Issuer
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

func (e *RegistrationError) Unwrap() error { return e.Err }

// personClient returns the client a person signs in with at d's authorization
// server, for the loopback redirectURI: a client ID metadata document when the
// server supports them and one is configured, else the pre-registered client,
// else a dynamic registration (reused while it is for this issuer and
// redirect URI; made anew otherwise, so a server that moves to another
// authorization server never gets the old one's client).
func (s *Server) personClient(ctx context.Context, d *discovery, redirectURI string) (*Client, error) {
	asm, cc := d.asm, s.cfg.Client
	if cc.MetadataURL != "" && asm.ClientIDMetadataDocumentSupported {
		return &Client{Kind: ClientMetadataDocument, Issuer: asm.Issuer, ID: cc.MetadataURL, AuthMethod: "none"}, nil
	}
	if cc.ID != "" {
		if cc.Issuer != "" && !issuersEqual(cc.Issuer, asm.Issuer) {
			return nil, &RegistrationError{Issuer: asm.Issuer, Err: fmt.Errorf("the pre-registered client %q belongs to %s", cc.ID, cc.Issuer)}
		}
		return &Client{Kind: ClientPreregistered, Issuer: asm.Issuer, ID: cc.ID, Secret: cc.Secret,
			AuthMethod: secretAuthMethod(cc.Secret.Len() > 0, asm.TokenEndpointAuthMethodsSupported)}, nil
	}
	stored, err := s.cfg.Store.LoadClient(ctx, s.cfg.Server)
	if err != nil {
		return nil, err
	}
	if stored != nil && stored.Kind == ClientDynamic && issuersEqual(stored.Issuer, asm.Issuer) &&
		slices.Contains(stored.RedirectURIs, redirectURI) &&
		(stored.SecretExpiresAt.IsZero() || time.Now().Before(stored.SecretExpiresAt)) {
		return stored, nil
	}
	if cc.NoDynamicRegistration || asm.RegistrationEndpoint == "" {
		return nil, &RegistrationError{Issuer: asm.Issuer, Err: errors.New("it supports neither client ID metadata documents (with one configured) nor dynamic registration, and no client is configured for it")}
	}
	c, err := s.register(ctx, asm, redirectURI)
	if err != nil {
		return nil, err
	}
	if err := s.cfg.Store.SaveClient(ctx, s.cfg.Server, c); err != nil {
		return nil, err
	}
	s.log.Info("oauth: registered a client", "issuer", asm.Issuer, "client_id", c.ID, "auth_method", c.AuthMethod)
	return c, nil
}

// secretAuthMethod picks how a client with (or without) a secret
// authenticates at the token endpoint: client_secret_basic unless the server
// lists only client_secret_post (RFC 8414's default is basic), none without a
// secret.
func secretAuthMethod(hasSecret bool, supported []string) string {
	switch {
	case !hasSecret:
		return "none"
	case len(supported) == 0 || slices.Contains(supported, "client_secret_basic"):
		return "client_secret_basic"
	case slices.Contains(supported, "client_secret_post"):
		return "client_secret_post"
	}
	return "client_secret_basic"
}

// register is RFC 7591 dynamic client registration for a native client with
// a loopback redirect (application_type native, as the 2026-07-28 revision
// requires; refresh_token among grant_types, so a refresh token may be had).
func (s *Server) register(ctx context.Context, asm *oauthex.AuthServerMeta, redirectURI string) (*Client, error) {
	c, err := s.postRegistration(ctx, asm, redirectURI)
	s.record(EventRegistration, asm.RegistrationEndpoint, asm.Issuer, err)
	return c, err
}

func (s *Server) postRegistration(ctx context.Context, asm *oauthex.AuthServerMeta, redirectURI string) (*Client, error) {
	method := "none"
	if sup := asm.TokenEndpointAuthMethodsSupported; len(sup) > 0 && !slices.Contains(sup, "none") {
		method = secretAuthMethod(true, sup)
	}
	meta := oauthex.ClientRegistrationMetadata{
		RedirectURIs:            []string{redirectURI},
		TokenEndpointAuthMethod: method,
		GrantTypes:              []string{"authorization_code", "refresh_token"},
		ResponseTypes:           []string{"code"},
		ClientName:              s.cfg.Client.Name,
		SoftwareID:              "toolgate",
		SoftwareVersion:         version.String(),
		ApplicationType:         "native",
	}
	body, err := json.Marshal(meta)
	if err != nil {
		return nil, err
	}
	hc, err := s.httpClient(asm.RegistrationEndpoint, netguard.RedirectNone)
	if err != nil {
		return nil, &RegistrationError{Issuer: asm.Issuer, Err: err}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, asm.RegistrationEndpoint, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", userAgent())
	resp, err := hc.Do(req)
	if err != nil {
		return nil, &RegistrationError{Issuer: asm.Issuer, Err: err}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxMetadataBytes))
	if err != nil {
		return nil, &RegistrationError{Issuer: asm.Issuer, Err: err}
	}
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK {
		var e oauthex.ClientRegistrationError
		if json.Unmarshal(data, &e) == nil && e.ErrorCode != "" {
			return nil, &RegistrationError{Issuer: asm.Issuer, Code: clip(e.ErrorCode), Description: clip(e.ErrorDescription)}
		}
		// The body is not shown: an answer that is not an RFC 7591 error may
		// hold anything.
		return nil, &RegistrationError{Issuer: asm.Issuer, Err: fmt.Errorf("HTTP %d", resp.StatusCode)}
	}
	defer clear(data)
	var r oauthex.ClientRegistrationResponse
	if err := json.Unmarshal(data, &r); err != nil || r.ClientID == "" {
		return nil, &RegistrationError{Issuer: asm.Issuer, Err: errors.New("the answer is not a registration (no client_id)")}
	}
	c := &Client{
		Kind: ClientDynamic, Issuer: asm.Issuer, ID: r.ClientID, Secret: keystore.NewSecretString(r.ClientSecret),
		AuthMethod: r.TokenEndpointAuthMethod, RedirectURIs: r.RedirectURIs, SecretExpiresAt: r.ClientSecretExpiresAt,
		RegisteredAt: time.Now(),
	}
	r.ClientSecret = ""
	if len(c.RedirectURIs) == 0 {
		c.RedirectURIs = []string{redirectURI}
	}
	if c.AuthMethod == "" {
		// RFC 7591's default; a client without a secret has nothing to send.
		c.AuthMethod = secretAuthMethod(c.Secret.Len() > 0, nil)
	}
	if !slices.Contains(c.RedirectURIs, redirectURI) {
		return nil, &RegistrationError{Issuer: asm.Issuer, Err: errors.New("the registration does not hold toolgate's redirect URI")}
	}
	return c, nil
}

// machineClient is the configured client credentials client, checked
// against d's authorization server.
func (s *Server) machineClient(d *discovery) (*Client, error) {
	cc := s.cfg.ClientCredentials
	if cc.Issuer != "" && !issuersEqual(cc.Issuer, d.asm.Issuer) {
		return nil, &RegistrationError{Issuer: d.asm.Issuer, Err: fmt.Errorf("the client %q belongs to %s", cc.ID, cc.Issuer)}
	}
	c := &Client{Kind: ClientClientCredentials, Issuer: d.asm.Issuer, ID: cc.ID, Secret: cc.Secret}
	if cc.PrivateKey.Len() > 0 {
		_, alg, err := signerOf(cc.PrivateKey, cc.SigningAlg)
		if err != nil {
			return nil, err
		}
		if sup := d.asm.TokenEndpointAuthSigningAlgValuesSupported; len(sup) > 0 && !slices.Contains(sup, alg) {
			return nil, &RegistrationError{Issuer: d.asm.Issuer, Err: fmt.Errorf("it accepts private_key_jwt signed with %v, not %s", sup, alg)}
		}
		c.AuthMethod, c.privateKey, c.signingAlg = "private_key_jwt", cc.PrivateKey, alg
		return c, nil
	}
	c.AuthMethod = secretAuthMethod(true, d.asm.TokenEndpointAuthMethodsSupported)
	return c, nil
}

// clip bounds a text an authorization server wrote before it goes into an
// error, and keeps control characters (a terminal's escape sequences) out.
func clip(s string) string {
	const max = 200
	out := make([]rune, 0, min(len(s), max))
	for _, r := range s {
		if len(out) == max {
			out = append(out, '…')
			break
		}
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			r = '?'
		}
		out = append(out, r)
	}
	return string(out)
}
