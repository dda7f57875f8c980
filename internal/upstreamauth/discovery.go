package upstreamauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"github.com/toolgate/toolgate/internal/netguard"
)

// maxMetadataBytes bounds a metadata document.
const maxMetadataBytes = 1 << 20

// challengeInfo is what a WWW-Authenticate challenge told.
type challengeInfo struct {
	resourceMetadata string
	scopes           []string
	errorCode        string
}

func parseChallenge(values []string) challengeInfo {
	var ci challengeInfo
	cs, err := oauthex.ParseWWWAuthenticate(values)
	if err != nil {
		return ci
	}
	for _, c := range cs {
		if c.Scheme != "bearer" {
			continue
		}
		if ci.resourceMetadata == "" {
			ci.resourceMetadata = c.Params["resource_metadata"]
		}
		if ci.scopes == nil && c.Params["scope"] != "" {
			ci.scopes = strings.Fields(c.Params["scope"])
		}
		if ci.errorCode == "" {
			ci.errorCode = c.Params["error"]
		}
	}
	return ci
}

// discovery is what the server and its authorization server publish.
type discovery struct {
	// resource is the resource indicator: the protected resource metadata's
	// resource (checked to be this server).
	resource string
	prm      *oauthex.ProtectedResourceMetadata
	asm      *oauthex.AuthServerMeta
	// fallback: the 2025-03-26 defaults were used (no metadata published).
	fallback bool
}

// DiscoveryError reports metadata that cannot be used: discovery is not
// retried until something changes.
type DiscoveryError struct {
	Step string // "protected resource metadata" or "authorization server metadata"
	URL  string
	Err  error
}

func (e *DiscoveryError) Error() string {
	if e.URL == "" {
		return fmt.Sprintf("upstreamauth: %s: %v", e.Step, e.Err)
	}
	return fmt.Sprintf("upstreamauth: %s at %s: %v", e.Step, e.URL, e.Err)
}

func (e *DiscoveryError) Unwrap() error { return e.Err }

// discover finds the protected resource metadata (RFC 9728: the challenge's
// resource_metadata, then the path-based and the root well-known URLs, as the
// MCP specification orders them) and the authorization server's metadata
// (RFC 8414 and OpenID Connect forms, issuer checked). preferIssuer, when the
// metadata names it among several, is kept (the grant's own).
func (s *Server) discover(ctx context.Context, ci challengeInfo, preferIssuer string) (*discovery, error) {
	d := &discovery{}
	prm, err := s.protectedResource(ctx, ci)
	if err != nil {
		return nil, err
	}
	if prm == nil {
		// No metadata anywhere: the 2025-03-26 rule, the server's origin is
		// its authorization server.
		u, _ := url.Parse(s.resource)
		prm = &oauthex.ProtectedResourceMetadata{Resource: s.resource, AuthorizationServers: []string{u.Scheme + "://" + u.Host}}
		d.fallback = true
	}
	d.prm, d.resource = prm, prm.Resource
	issuer := prm.AuthorizationServers[0]
	for _, as := range prm.AuthorizationServers {
		if preferIssuer != "" && issuersEqual(as, preferIssuer) {
			issuer = as
		}
	}
	c, err := s.httpClient(issuer, netguard.RedirectSameOrigin)
	if err != nil {
		return nil, &DiscoveryError{Step: "authorization server", URL: issuer, Err: err}
	}
	asm, err := auth.GetAuthServerMetadata(ctx, issuer, c)
	if err != nil {
		return nil, &DiscoveryError{Step: "authorization server metadata", URL: issuer, Err: err}
	}
	if asm == nil {
		// The 2025-03-26 fallback endpoints.
		base := strings.TrimSuffix(issuer, "/")
		asm = &oauthex.AuthServerMeta{
			Issuer:                        issuer,
			AuthorizationEndpoint:         base + "/authorize",
			TokenEndpoint:                 base + "/token",
			RegistrationEndpoint:          base + "/register",
			CodeChallengeMethodsSupported: []string{"S256"},
		}
		d.fallback = true
	}
	if !slices.Contains(asm.CodeChallengeMethodsSupported, "S256") {
		return nil, &DiscoveryError{Step: "authorization server metadata", URL: issuer, Err: errors.New("PKCE S256 is not among code_challenge_methods_supported: toolgate does not sign in without it")}
	}
	for name, u := range map[string]string{"token_endpoint": asm.TokenEndpoint, "registration_endpoint": asm.RegistrationEndpoint, "revocation_endpoint": asm.RevocationEndpoint} {
		if u == "" {
			continue
		}
		if _, err := netguard.ValidateURL(u, s.cfg.Guard.Policy()); err != nil {
			return nil, &DiscoveryError{Step: "authorization server metadata", URL: issuer, Err: fmt.Errorf("%s: %w", name, err)}
		}
	}
	if asm.TokenEndpoint == "" {
		return nil, &DiscoveryError{Step: "authorization server metadata", URL: issuer, Err: errors.New("no token_endpoint")}
	}
	d.asm = asm
	return d, nil
}

// prmCandidate is a place protected resource metadata may be, and the
// resource it must then name.
type prmCandidate struct {
	url      string
	resource []string
}

func (s *Server) prmCandidates(ci challengeInfo) []prmCandidate {
	u, _ := url.Parse(s.resource)
	origin := u.Scheme + "://" + u.Host
	var out []prmCandidate
	if ci.resourceMetadata != "" {
		out = append(out, prmCandidate{ci.resourceMetadata, []string{s.resource}})
	}
	if p := strings.Trim(u.Path, "/"); p != "" {
		out = append(out, prmCandidate{origin + "/.well-known/oauth-protected-resource/" + p, []string{s.resource}})
	}
	// At the root the resource is the origin (or the server itself).
	return append(out, prmCandidate{origin + "/.well-known/oauth-protected-resource", []string{origin, s.resource}})
}

// protectedResource returns the first protected resource metadata found, or
// nil when there is none. Metadata naming another resource is refused
// outright: it is not this server's, and nothing it says may be followed.
func (s *Server) protectedResource(ctx context.Context, ci challengeInfo) (*oauthex.ProtectedResourceMetadata, error) {
	for _, cand := range s.prmCandidates(ci) {
		var prm oauthex.ProtectedResourceMetadata
		found, err := s.getJSON(ctx, cand.url, &prm)
		if err != nil {
			s.log.Debug("oauth: protected resource metadata not usable", "url", cand.url, "error", err)
			continue
		}
		if !found {
			continue
		}
		if !slices.Contains(cand.resource, prm.Resource) {
			return nil, &DiscoveryError{Step: "protected resource metadata", URL: cand.url,
				Err: fmt.Errorf("it is for resource %q, not this server (%s): refused", prm.Resource, s.resource)}
		}
		if len(prm.AuthorizationServers) == 0 {
			return nil, &DiscoveryError{Step: "protected resource metadata", URL: cand.url, Err: errors.New("it names no authorization server")}
		}
		for _, as := range prm.AuthorizationServers {
			if err := checkIssuerURL(as, s.cfg.Guard.Policy()); err != nil {
				return nil, &DiscoveryError{Step: "protected resource metadata", URL: cand.url, Err: err}
			}
		}
		return &prm, nil
	}
	return nil, nil
}

// checkIssuerURL refuses an authorization server URL that is not https (or
// http to loopback) or that the policy refuses.
func checkIssuerURL(raw string, p netguard.Policy) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("authorization server %q is not an https URL without query or fragment", raw)
	}
	_, err = netguard.ValidateURL(raw, p)
	return err
}

// getJSON fetches a metadata document. found is false for a 4xx (nothing
// there); any other failure is an error. Nothing of the body reaches an
// error.
func (s *Server) getJSON(ctx context.Context, rawURL string, v any) (found bool, err error) {
	c, err := s.httpClient(rawURL, netguard.RedirectSameOrigin)
	if err != nil {
		return false, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return false, err
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", userAgent())
	resp, err := c.Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	defer io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode >= 400 && resp.StatusCode < 500 {
		return false, nil
	}
	if resp.StatusCode != http.StatusOK {
		return false, fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "application/json" {
		return false, fmt.Errorf("content type %q is not application/json", resp.Header.Get("Content-Type"))
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxMetadataBytes+1))
	if err != nil {
		return false, err
	}
	if len(data) > maxMetadataBytes {
		return false, fmt.Errorf("larger than %d bytes", maxMetadataBytes)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return false, errors.New("not a JSON metadata document")
	}
	return true, nil
}

// issuersEqual compares issuer identifiers the way RFC 8414 metadata is
// matched: exactly, but for one trailing slash.
func issuersEqual(a, b string) bool {
	return strings.TrimSuffix(a, "/") == strings.TrimSuffix(b, "/")
}
