// Package upstreamauthtest is a local OAuth world for tests: an authorization
// server (RFC 8414 metadata, an authorization endpoint that redirects at once,
// a token endpoint, dynamic registration, revocation) and a protected MCP
// server (RFC 9728 metadata, bearer tokens checked for audience, expiry and
// scopes, the go-sdk's own stateless MCP server behind it), each on its own
// loopback origin as in real deployments. It is strict where a client can go
// wrong — PKCE S256 is verified, the resource indicator is required on every
// token request and must name the server, redirect URIs are matched exactly,
// client authentication is checked — and it records every request, so a test
// can count token requests (no retry storm) and see what was sent.
package upstreamauthtest

import (
	"context"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Options shape a Fixture.
type Options struct {
	// Scopes are the server's scopes_supported (offline_access is added to
	// the authorization server's); default "read".
	Scopes []string
	// Require maps an MCP method to the scopes its requests need (a 403
	// insufficient_scope names them). The scopes of the 401 challenge are
	// Scopes.
	Require map[string][]string
	// NeverGrant are scopes the authorization server never puts in a token,
	// whatever is asked (a server whose step-up cannot succeed).
	NeverGrant []string
	// Iss is what the authorization response's iss is: "" (the issuer),
	// "wrong", "omit"; IssUnadvertised leaves
	// authorization_response_iss_parameter_supported out of the metadata.
	Iss             string
	IssUnadvertised bool
	// AccessTTL is expires_in (default one hour).
	AccessTTL time.Duration
	// NoRefreshToken issues no refresh tokens.
	NoRefreshToken bool
	// AuthMethods is token_endpoint_auth_methods_supported (default none,
	// client_secret_basic, client_secret_post, private_key_jwt).
	AuthMethods []string
	// NoDCR publishes no registration endpoint.
	NoDCR bool
	// CIMD advertises client ID metadata documents: any https client_id URL
	// is accepted with a loopback redirect URI.
	CIMD bool
	// Clients are pre-registered clients: id -> secret ("" for a public one)
	// with any loopback redirect URI.
	Clients map[string]string
	// MachineClients are client credentials clients: id -> secret.
	MachineClients map[string]string
	// MachineKeys are private_key_jwt clients: id -> public key (ES256).
	MachineKeys map[string]*ecdsa.PublicKey
	// Canary is put in every token, code and client secret issued, so a test can
	// look for it where it must not be.
	Canary string
	// EchoSecrets makes error descriptions quote the secret that was refused
	// (a careless authorization server), to check a client does not repeat
	// them.
	EchoSecrets bool
	// Metadata replaces members of the authorization server's metadata
	// (hostile endpoints).
	Metadata map[string]any
	// TokenRedirect makes the token endpoint answer 307 to this URL.
	TokenRedirect string
}

// TokenRequest is one request the token endpoint received.
type TokenRequest struct {
	GrantType  string
	Resource   []string
	Scope      string
	ClientID   string
	AuthMethod string
	Status     int
}

// AuthorizationRequest is one request the authorization endpoint received.
type AuthorizationRequest struct {
	Query url.Values
}

// Fixture is the authorization server and the protected MCP server.
type Fixture struct {
	// URL is the MCP endpoint; Issuer the authorization server.
	URL    string
	Issuer string
	// AS and MCP are the two servers.
	AS, MCP *httptest.Server

	opts Options

	mu          sync.Mutex
	clients     map[string]*client
	codes       map[string]*code
	access      map[string]*token
	refresh     map[string]*token
	seq         int
	tokenReqs   []TokenRequest
	authReqs    []AuthorizationRequest
	regs        int
	asReqs      int
	revoked     int
	mcpStatus   map[int]int
	issuerOf    func() string // which issuer the resource metadata names (migration)
	resourceFor string        // the resource the metadata names (mismatch tests)
	trusted     []*Fixture    // other authorization servers whose tokens the MCP server takes
}

type client struct {
	secret    string
	redirects []string
	method    string
	loopback  bool // any loopback redirect URI
	machine   bool
	key       *ecdsa.PublicKey
}

type code struct {
	client, redirect, challenge, resource string
	scopes                                []string
	used                                  bool
}

type token struct {
	client, resource string
	scopes           []string
	expires          time.Time
	revoked          bool
	refreshable      bool
}

// New starts a Fixture, closed when the test ends.
func New(t testing.TB, opts Options) *Fixture {
	t.Helper()
	if len(opts.Scopes) == 0 {
		opts.Scopes = []string{"read"}
	}
	if opts.AccessTTL == 0 {
		opts.AccessTTL = time.Hour
	}
	if opts.AuthMethods == nil {
		opts.AuthMethods = []string{"none", "client_secret_basic", "client_secret_post", "private_key_jwt"}
	}
	f := &Fixture{opts: opts, clients: map[string]*client{}, codes: map[string]*code{}, access: map[string]*token{},
		refresh: map[string]*token{}, mcpStatus: map[int]int{}}
	for id, secret := range opts.Clients {
		method := "client_secret_basic"
		if secret == "" {
			method = "none"
		}
		f.clients[id] = &client{secret: secret, method: method, loopback: true}
	}
	for id, secret := range opts.MachineClients {
		f.clients[id] = &client{secret: secret, method: "client_secret_basic", machine: true}
	}
	for id, key := range opts.MachineKeys {
		f.clients[id] = &client{key: key, method: "private_key_jwt", machine: true}
	}
	f.AS = httptest.NewServer(http.HandlerFunc(f.serveAS))
	t.Cleanup(f.AS.Close)
	f.Issuer = f.AS.URL
	f.issuerOf = func() string { return f.Issuer }
	server := mcp.NewServer(&mcp.Implementation{Name: "protected", Version: "1.0.0"}, nil)
	server.AddTool(&mcp.Tool{Name: "echo", Description: "echoes its arguments", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "echo " + string(req.Params.Arguments)}}}, nil
		})
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, &mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true})
	f.MCP = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { f.serveMCP(w, r, handler) }))
	t.Cleanup(f.MCP.Close)
	f.URL = f.MCP.URL + "/mcp"
	return f
}

// ResourceMetadataURL is where the server's RFC 9728 metadata is.
func (f *Fixture) ResourceMetadataURL() string {
	return f.MCP.URL + "/.well-known/oauth-protected-resource/mcp"
}

// TokenRequests returns the token endpoint's requests so far.
func (f *Fixture) TokenRequests() []TokenRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.tokenReqs)
}

// AuthorizationRequests returns the authorization endpoint's requests so far.
func (f *Fixture) AuthorizationRequests() []AuthorizationRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.authReqs)
}

// Registrations is how many dynamic registrations there were.
func (f *Fixture) Registrations() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.regs
}

// Revocations is how many tokens the revocation endpoint revoked.
func (f *Fixture) Revocations() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.revoked
}

// ASRequests is how many requests the authorization server received.
func (f *Fixture) ASRequests() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.asReqs
}

// MCPRequests returns how many requests the MCP server answered with status.
func (f *Fixture) MCPRequests(status int) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.mcpStatus[status]
}

// MCPTotal is how many requests the MCP server received.
func (f *Fixture) MCPTotal() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.mcpStatus {
		n += c
	}
	return n
}

// ExpireAccessTokens makes every access token issued so far refused (as
// when it lapsed, or was revoked, at the server).
func (f *Fixture) ExpireAccessTokens() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, t := range f.access {
		t.revoked = true
	}
}

// RevokeRefreshTokens makes every refresh token issued so far refused
// (invalid_grant): the grant was revoked.
func (f *Fixture) RevokeRefreshTokens() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, t := range f.refresh {
		t.revoked = true
	}
}

// MoveTo makes the resource metadata name another authorization server
// (and every token issued so far refused): the server migrated.
func (f *Fixture) MoveTo(issuer string) {
	f.mu.Lock()
	f.issuerOf = func() string { return issuer }
	f.mu.Unlock()
	f.ExpireAccessTokens()
}

// ServeResource makes f's authorization server issue tokens for of's MCP
// server, and of's MCP server take them (a second authorization server for
// one resource, for migration tests).
func (f *Fixture) ServeResource(of *Fixture) {
	f.mu.Lock()
	f.URL = of.URL
	f.mu.Unlock()
	of.mu.Lock()
	of.trusted = append(of.trusted, f)
	of.mu.Unlock()
}

// lookup finds an access token issued here or by a trusted authorization
// server. f.mu is held.
func (f *Fixture) lookup(tok string) *token {
	if t := f.access[tok]; t != nil {
		return t
	}
	for _, o := range f.trusted {
		o.mu.Lock()
		t := o.access[tok]
		o.mu.Unlock()
		if t != nil {
			return t
		}
	}
	return nil
}

// ClaimResource makes the resource metadata name resource instead of the
// server (a metadata document that is not this server's).
func (f *Fixture) ClaimResource(resource string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.resourceFor = resource
}

// Verify checks a PKCE verifier against a challenge the way the token
// endpoint does (S256), for tests of the fixture itself.
func Verify(verifier, challenge string) bool {
	sum := sha256.Sum256([]byte(verifier))
	return subtle.ConstantTimeCompare([]byte(base64.RawURLEncoding.EncodeToString(sum[:])), []byte(challenge)) == 1
}

func (f *Fixture) secret(kind string) string {
	b := make([]byte, 12)
	rand.Read(b)
	f.seq++
	return fmt.Sprintf("%s-%s%d-%x", kind, f.opts.Canary, f.seq, b)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func oauthError(w http.ResponseWriter, status int, code, desc string) {
	writeJSON(w, status, map[string]string{"error": code, "error_description": desc})
}

func (f *Fixture) serveAS(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.asReqs++
	f.mu.Unlock()
	if r.URL.Path == "/token" && f.opts.TokenRedirect != "" {
		http.Redirect(w, r, f.opts.TokenRedirect, http.StatusTemporaryRedirect)
		return
	}
	switch r.URL.Path {
	case "/.well-known/oauth-authorization-server":
		f.metadata(w)
	case "/authorize":
		f.authorize(w, r)
	case "/token":
		f.tokenEndpoint(w, r)
	case "/register":
		if f.opts.NoDCR {
			http.NotFound(w, r)
			return
		}
		f.register(w, r)
	case "/revoke":
		r.ParseForm()
		f.mu.Lock()
		defer f.mu.Unlock()
		if _, _, ok := f.authenticate(r); !ok {
			oauthError(w, http.StatusUnauthorized, "invalid_client", "client authentication failed")
			return
		}
		for _, m := range []map[string]*token{f.refresh, f.access} {
			if t := m[r.PostForm.Get("token")]; t != nil {
				t.revoked = true
				f.revoked++
			}
		}
		w.WriteHeader(http.StatusOK)
	default:
		http.NotFound(w, r)
	}
}

func (f *Fixture) metadata(w http.ResponseWriter) {
	m := map[string]any{
		"issuer":                                           f.Issuer,
		"authorization_endpoint":                           f.Issuer + "/authorize",
		"token_endpoint":                                   f.Issuer + "/token",
		"revocation_endpoint":                              f.Issuer + "/revoke",
		"response_types_supported":                         []string{"code"},
		"grant_types_supported":                            []string{"authorization_code", "refresh_token", "client_credentials"},
		"code_challenge_methods_supported":                 []string{"S256"},
		"scopes_supported":                                 append(slices.Clone(f.opts.Scopes), "offline_access"),
		"token_endpoint_auth_methods_supported":            f.opts.AuthMethods,
		"token_endpoint_auth_signing_alg_values_supported": []string{"ES256"},
	}
	if !f.opts.NoDCR {
		m["registration_endpoint"] = f.Issuer + "/register"
	}
	if !f.opts.IssUnadvertised {
		m["authorization_response_iss_parameter_supported"] = true
	}
	if f.opts.CIMD {
		m["client_id_metadata_document_supported"] = true
	}
	for k, v := range f.opts.Metadata {
		m[k] = v
	}
	writeJSON(w, http.StatusOK, m)
}

func isLoopbackRedirect(raw string) bool {
	u, err := url.Parse(raw)
	return err == nil && u.Scheme == "http" && (u.Hostname() == "127.0.0.1" || u.Hostname() == "::1") && u.Path == "/callback"
}

func (f *Fixture) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.authReqs = append(f.authReqs, AuthorizationRequest{Query: q})
	id, redirect := q.Get("client_id"), q.Get("redirect_uri")
	c := f.clients[id]
	switch {
	case c == nil && f.opts.CIMD && strings.HasPrefix(id, "https://") && isLoopbackRedirect(redirect):
		c = &client{method: "none", loopback: true}
		f.clients[id] = c
	case c == nil || c.machine:
		http.Error(w, "unknown client", http.StatusBadRequest)
		return
	}
	if !slices.Contains(c.redirects, redirect) && !(c.loopback && isLoopbackRedirect(redirect)) {
		http.Error(w, "redirect_uri not registered", http.StatusBadRequest)
		return
	}
	back, _ := url.Parse(redirect)
	bq := back.Query()
	bq.Set("state", q.Get("state"))
	fail := func(code string) {
		bq.Set("error", code)
		back.RawQuery = bq.Encode()
		http.Redirect(w, r, back.String(), http.StatusFound)
	}
	switch {
	case q.Get("response_type") != "code":
		fail("unsupported_response_type")
		return
	case q.Get("code_challenge") == "" || q.Get("code_challenge_method") != "S256":
		fail("invalid_request")
		return
	case q.Get("resource") != f.URL:
		fail("invalid_target")
		return
	}
	k := f.secret("code")
	f.codes[k] = &code{client: id, redirect: redirect, challenge: q.Get("code_challenge"), resource: q.Get("resource"), scopes: strings.Fields(q.Get("scope"))}
	bq.Set("code", k)
	switch f.opts.Iss {
	case "":
		bq.Set("iss", f.Issuer)
	case "wrong":
		bq.Set("iss", "https://evil.example")
	}
	back.RawQuery = bq.Encode()
	http.Redirect(w, r, back.String(), http.StatusFound)
}

func (f *Fixture) register(w http.ResponseWriter, r *http.Request) {
	var m struct {
		RedirectURIs []string `json:"redirect_uris"`
		Method       string   `json:"token_endpoint_auth_method"`
		AppType      string   `json:"application_type"`
	}
	if json.NewDecoder(io.LimitReader(r.Body, 64<<10)).Decode(&m) != nil || len(m.RedirectURIs) == 0 || m.AppType != "native" {
		oauthError(w, http.StatusBadRequest, "invalid_client_metadata", "redirect_uris and application_type native are required")
		return
	}
	for _, u := range m.RedirectURIs {
		if !isLoopbackRedirect(u) {
			oauthError(w, http.StatusBadRequest, "invalid_redirect_uri", "only loopback redirect URIs")
			return
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.regs++
	f.seq++
	id := fmt.Sprintf("client-%d-%s", f.seq, rand.Text()[:8]) // an id is not a secret: no canary
	c := &client{redirects: m.RedirectURIs, method: m.Method}
	if c.method == "" {
		c.method = "client_secret_basic"
	}
	resp := map[string]any{"client_id": id, "redirect_uris": m.RedirectURIs, "token_endpoint_auth_method": c.method}
	if c.method != "none" {
		c.secret = f.secret("secret")
		resp["client_secret"] = c.secret
	}
	f.clients[id] = c
	writeJSON(w, http.StatusCreated, resp)
}

// authenticate checks the client's authentication at the token endpoint
// and returns the client id and how it authenticated.
func (f *Fixture) authenticate(r *http.Request) (string, string, bool) {
	form := r.PostForm
	if id, secret, ok := r.BasicAuth(); ok {
		id, _ = url.QueryUnescape(id)
		secret, _ = url.QueryUnescape(secret)
		c := f.clients[id]
		return id, "client_secret_basic", c != nil && c.secret != "" && subtle.ConstantTimeCompare([]byte(c.secret), []byte(secret)) == 1
	}
	id := form.Get("client_id")
	c := f.clients[id]
	switch {
	case form.Get("client_assertion") != "":
		if c == nil || c.key == nil || form.Get("client_assertion_type") != "urn:ietf:params:oauth:client-assertion-type:jwt-bearer" {
			return id, "private_key_jwt", false
		}
		return id, "private_key_jwt", verifyAssertion(form.Get("client_assertion"), c.key, id, f.Issuer)
	case form.Get("client_secret") != "":
		return id, "client_secret_post", c != nil && c.secret != "" && subtle.ConstantTimeCompare([]byte(c.secret), []byte(form.Get("client_secret"))) == 1
	}
	return id, "none", c != nil && c.secret == "" && !c.machine
}

func (f *Fixture) tokenEndpoint(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.ParseForm() != nil {
		oauthError(w, http.StatusBadRequest, "invalid_request", "POST a form")
		return
	}
	form := r.PostForm
	f.mu.Lock()
	defer f.mu.Unlock()
	id, method, ok := f.authenticate(r)
	rec := TokenRequest{GrantType: form.Get("grant_type"), Resource: form["resource"], Scope: form.Get("scope"), ClientID: id, AuthMethod: method}
	status := http.StatusOK
	defer func() {
		rec.Status = status
		f.tokenReqs = append(f.tokenReqs, rec)
	}()
	refuse := func(st int, code, desc string) {
		status = st
		oauthError(w, st, code, desc)
	}
	c := f.clients[id]
	if !ok {
		refuse(http.StatusUnauthorized, "invalid_client", "client authentication failed")
		return
	}
	if method != c.method && !(c.method == "client_secret_basic" && method == "client_secret_post") {
		refuse(http.StatusUnauthorized, "invalid_client", "the client registered "+c.method+", not "+method)
		return
	}
	if len(form["resource"]) != 1 || form.Get("resource") != f.URL {
		refuse(http.StatusBadRequest, "invalid_target", "the resource indicator must name "+f.URL)
		return
	}
	var scopes []string
	refreshable := false
	switch form.Get("grant_type") {
	case "authorization_code":
		k := f.codes[form.Get("code")]
		switch {
		case k == nil || k.used || k.client != id:
			refuse(http.StatusBadRequest, "invalid_grant", "unknown or used code")
			return
		case form.Get("redirect_uri") != k.redirect:
			refuse(http.StatusBadRequest, "invalid_grant", "redirect_uri differs from the authorization request's")
			return
		case !Verify(form.Get("code_verifier"), k.challenge):
			refuse(http.StatusBadRequest, "invalid_grant", "PKCE verification failed")
			return
		}
		k.used = true
		scopes, refreshable = k.scopes, !f.opts.NoRefreshToken
	case "refresh_token":
		presented := form.Get("refresh_token")
		t := f.refresh[presented]
		if t == nil || t.revoked || t.client != id {
			desc := "the refresh token is revoked"
			if f.opts.EchoSecrets {
				desc = "the refresh token " + presented + " is revoked"
			}
			refuse(http.StatusBadRequest, "invalid_grant", desc)
			return
		}
		t.revoked = true // rotated
		scopes, refreshable = t.scopes, true
	case "client_credentials":
		if !c.machine {
			refuse(http.StatusBadRequest, "unauthorized_client", "not a machine client")
			return
		}
		scopes = strings.Fields(form.Get("scope"))
	default:
		refuse(http.StatusBadRequest, "unsupported_grant_type", "no")
		return
	}
	scopes = slices.DeleteFunc(slices.Clone(scopes), func(s string) bool { return slices.Contains(f.opts.NeverGrant, s) })
	at := f.secret("access")
	f.access[at] = &token{client: id, resource: f.URL, scopes: scopes, expires: time.Now().Add(f.opts.AccessTTL)}
	resp := map[string]any{"access_token": at, "token_type": "Bearer", "expires_in": int(f.opts.AccessTTL / time.Second), "scope": strings.Join(scopes, " ")}
	if refreshable {
		rt := f.secret("refresh")
		f.refresh[rt] = &token{client: id, resource: f.URL, scopes: scopes}
		resp["refresh_token"] = rt
	}
	writeJSON(w, http.StatusOK, resp)
}

// verifyAssertion checks an ES256 private_key_jwt assertion: signature, iss
// and sub the client, aud the issuer, not expired.
func verifyAssertion(jwt string, key *ecdsa.PublicKey, clientID, issuer string) bool {
	parts := strings.Split(jwt, ".")
	if len(parts) != 3 {
		return false
	}
	var header struct {
		Alg string `json:"alg"`
	}
	hb, err1 := base64.RawURLEncoding.DecodeString(parts[0])
	cb, err2 := base64.RawURLEncoding.DecodeString(parts[1])
	sig, err3 := base64.RawURLEncoding.DecodeString(parts[2])
	if err1 != nil || err2 != nil || err3 != nil || json.Unmarshal(hb, &header) != nil || header.Alg != "ES256" || len(sig) != 64 {
		return false
	}
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if !ecdsa.Verify(key, sum[:], new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:])) {
		return false
	}
	var claims struct {
		Iss, Sub, Aud, Jti string
		Exp                int64
	}
	if json.Unmarshal(cb, &claims) != nil {
		return false
	}
	return claims.Iss == clientID && claims.Sub == clientID && strings.TrimSuffix(claims.Aud, "/") == issuer &&
		claims.Jti != "" && time.Now().Unix() < claims.Exp
}

// serveMCP is the protected resource: metadata, then bearer tokens checked
// before the MCP server sees anything.
func (f *Fixture) serveMCP(w http.ResponseWriter, r *http.Request, next http.Handler) {
	status := f.gate(w, r)
	if status == 0 {
		return // metadata, or not the MCP endpoint
	}
	f.mu.Lock()
	f.mcpStatus[status]++
	f.mu.Unlock()
	if status == http.StatusOK {
		next.ServeHTTP(w, r)
	}
}

// gate answers metadata requests and refused MCP requests itself; it
// returns 0 for the former and the status of the latter (200: let through).
func (f *Fixture) gate(w http.ResponseWriter, r *http.Request) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r.URL.Path == "/.well-known/oauth-protected-resource/mcp" {
		res := f.URL
		if f.resourceFor != "" {
			res = f.resourceFor
		}
		writeJSON(w, http.StatusOK, map[string]any{"resource": res, "authorization_servers": []string{f.issuerOf()}, "scopes_supported": f.opts.Scopes})
		return 0
	}
	if r.URL.Path != "/mcp" {
		http.NotFound(w, r)
		return 0
	}
	challenge := fmt.Sprintf(`Bearer resource_metadata=%q, scope=%q`, f.ResourceMetadataURL(), strings.Join(f.opts.Scopes, " "))
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	t := f.lookup(tok)
	if !ok || t == nil || t.revoked || t.resource != f.URL || !time.Now().Before(t.expires) {
		w.Header().Set("WWW-Authenticate", challenge)
		writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "invalid_token"})
		return http.StatusUnauthorized
	}
	method := r.Header.Get("Mcp-Method")
	if need := f.opts.Require[method]; !hasAll(t.scopes, need) {
		w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer error="insufficient_scope", scope=%q, resource_metadata=%q`, strings.Join(need, " "), f.ResourceMetadataURL()))
		writeJSON(w, http.StatusForbidden, map[string]string{"error": "insufficient_scope"})
		return http.StatusForbidden
	}
	return http.StatusOK
}

func hasAll(have, need []string) bool {
	for _, n := range need {
		if !slices.Contains(have, n) {
			return false
		}
	}
	return true
}
