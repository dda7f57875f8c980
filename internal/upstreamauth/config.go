package upstreamauth

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/toolgate/toolgate/internal/keystore"
	"github.com/toolgate/toolgate/internal/netguard"
	"github.com/toolgate/toolgate/internal/upstream"
	"github.com/toolgate/toolgate/internal/version"
)

// Defaults of Config.
const (
	// DefaultRefreshAhead is how long before its expiry an access token is
	// refreshed: a request never leaves with a token about to lapse in flight.
	DefaultRefreshAhead = 60 * time.Second
	// DefaultMaxStepUps bounds the new authorizations one grant may go through
	// for insufficient_scope before the server is told no: a server that asks
	// for scopes it never accepts cannot loop the person or the flow.
	DefaultMaxStepUps = 2
	// DefaultLoginTimeout is how long a login waits for its callback.
	DefaultLoginTimeout = 10 * time.Minute
	// DefaultCallbackAddr is where the loopback redirect listener binds.
	DefaultCallbackAddr = "127.0.0.1:0"
	// DefaultRequestTimeout bounds one metadata, registration or token request.
	DefaultRequestTimeout = 30 * time.Second
)

// Config is how toolgate signs in to one remote server.
type Config struct {
	// Server names the server: the key of its records in the Store, and a
	// label in logs.
	Server string
	// URL is the server's MCP endpoint, as installed.
	URL string
	// Store keeps the server's tokens and dynamic registration.
	Store Store
	// Guard dials every metadata, registration and token request (the
	// server's netguard policy). Required.
	Guard *netguard.Guard
	// Transport is the base of those requests (default
	// netguard.NewTransport(Guard)). It must dial through Guard.
	Transport http.RoundTripper

	// Client says how toolgate identifies itself when a person signs in.
	Client ClientConfig
	// ClientCredentials, when set, makes this a machine-to-machine server:
	// tokens come from the client credentials grant, with no person and no
	// browser.
	ClientCredentials *ClientCredentials

	// Scopes, when set, are asked for instead of the scopes the server's
	// challenge or metadata names.
	Scopes []string
	// NoOfflineAccess leaves out offline_access (which asks for a refresh
	// token) even when the authorization server supports it.
	NoOfflineAccess bool
	// RefreshAhead is how long before expiry a token is refreshed (default
	// DefaultRefreshAhead).
	RefreshAhead time.Duration
	// MaxStepUps bounds the step-ups for insufficient_scope (default
	// DefaultMaxStepUps).
	MaxStepUps int

	// Headless signs in without a person when the server asks for it: the
	// authorization URL is fetched and the authorization server's immediate
	// redirect followed to the loopback listener. For tests and the
	// conformance suite, whose authorization servers redirect at once.
	Headless bool
	// OpenBrowser, when set, signs in automatically too: it must show the
	// authorization URL to a person (a desktop session); the flow then waits
	// for the callback. It must not run a shell with the URL.
	OpenBrowser func(ctx context.Context, authorizationURL string) error

	// CallbackAddr is where the loopback listener binds (default
	// DefaultCallbackAddr). It must be a loopback address.
	CallbackAddr string
	// LoginTimeout bounds a login's wait for its callback (default
	// DefaultLoginTimeout).
	LoginTimeout time.Duration
	// RequestTimeout bounds one metadata, registration or token request
	// (default DefaultRequestTimeout).
	RequestTimeout time.Duration
	// OnChange is told when the credentials change (a login completed, a
	// logout, a refused refresh), so the host can lift or set auth_required.
	// It runs on its own goroutine.
	OnChange func()
	// OnRequest, when set, is told of every token-related request (the
	// authorization response, code exchange, refresh, client credentials,
	// registration, revocation) once it ended, on the goroutine that made it
	// and with no lock of the Server held: the host audits them. It never
	// gets a token or a secret (RequestEvent).
	OnRequest func(RequestEvent)
	// Logger receives the flow's events, never a secret. Nil discards.
	Logger *slog.Logger
}

// ClientConfig is how toolgate identifies itself to the authorization server
// for a person's sign-in. It is tried in this order: a client ID metadata
// document (when the server supports them), a pre-registered client, dynamic
// registration.
type ClientConfig struct {
	// MetadataURL is an https URL with a path where toolgate's client ID
	// metadata document is published; it is the client_id for authorization
	// servers that advertise client_id_metadata_document_supported.
	MetadataURL string
	// ID is a pre-registered client's id.
	ID string
	// Secret is a pre-registered client's secret (empty: a public client).
	Secret keystore.Secret
	// Issuer, when set, is the authorization server the pre-registered client
	// belongs to; another one is refused.
	Issuer string
	// NoDynamicRegistration refuses to register a client dynamically.
	NoDynamicRegistration bool
	// Name is client_name in a dynamic registration (default "toolgate").
	Name string
}

// ClientCredentials is a machine-to-machine client (the OAuth client
// credentials grant, the MCP client-credentials extension).
type ClientCredentials struct {
	// ID is the client's id.
	ID string
	// Secret authenticates with client_secret_basic (or client_secret_post
	// when the authorization server supports only that).
	Secret keystore.Secret
	// PrivateKey, a PEM PKCS#8 (or SEC 1, PKCS#1) EC or RSA private key,
	// authenticates with private_key_jwt instead.
	PrivateKey keystore.Secret
	// SigningAlg is the JWS algorithm of private_key_jwt (default ES256 for
	// a P-256 key, ES384 for P-384, RS256 for RSA).
	SigningAlg string
	// Issuer, when set, is the authorization server the client belongs to;
	// another one is refused.
	Issuer string
}

// Server is one upstream server's authorization: the upstream.Authorizer of
// its HTTP dial, and its logins. It is safe for concurrent use.
type Server struct {
	cfg      Config
	log      *slog.Logger
	base     http.RoundTripper
	safeURL  string
	resource string // the canonical server URI (no userinfo, query or fragment)
	clientMu sync.Mutex
	clients  map[string]*http.Client // origin + redirect policy; at most maxClients

	accepted atomic.Uint64 // the newest credential generation the server took

	mu        sync.Mutex
	loaded    bool
	grant     *Grant
	header    keystore.Secret // "Bearer " + the grant's access token
	gen       uint64
	via       string // how the current grant was obtained: stored, refresh, login, client_credentials
	parked    *upstream.AuthRequiredError
	stepUps   int
	want      []string // scopes a step-up asked for, for the next login
	challenge []string // the last challenge, for the next login's discovery
	flight    *flight
	login     *Login
	renewErr  error     // the last renewal's failure that may pass
	retryAt   time.Time // no renewal before this, after such a failure
}

// New returns the authorization of one server.
func New(cfg Config) (*Server, error) {
	if cfg.Server == "" {
		return nil, errors.New("upstreamauth: Config.Server is empty")
	}
	if cfg.Store == nil {
		return nil, errors.New("upstreamauth: Config.Store is nil")
	}
	if cfg.Guard == nil {
		return nil, errors.New("upstreamauth: Config.Guard is nil")
	}
	t, err := netguard.ValidateURL(cfg.URL, cfg.Guard.Policy())
	if err != nil {
		return nil, fmt.Errorf("upstreamauth: server %s: %w", cfg.Server, err)
	}
	if cc := cfg.ClientCredentials; cc != nil {
		if cc.ID == "" {
			return nil, fmt.Errorf("upstreamauth: server %s: client credentials without a client id", cfg.Server)
		}
		if cc.Secret.Len() == 0 && cc.PrivateKey.Len() == 0 {
			return nil, fmt.Errorf("upstreamauth: server %s: client credentials need a secret or a private key", cfg.Server)
		}
		if cc.PrivateKey.Len() > 0 {
			if _, _, err := signerOf(cc.PrivateKey, cc.SigningAlg); err != nil {
				return nil, fmt.Errorf("upstreamauth: server %s: %w", cfg.Server, err)
			}
		}
	}
	if u := cfg.Client.MetadataURL; u != "" {
		p, err := url.Parse(u)
		if err != nil || p.Scheme != "https" || p.Host == "" || strings.Trim(p.Path, "/") == "" {
			return nil, fmt.Errorf("upstreamauth: server %s: a client ID metadata document URL must be https with a path", cfg.Server)
		}
	}
	if cfg.CallbackAddr == "" {
		cfg.CallbackAddr = DefaultCallbackAddr
	}
	if err := checkLoopbackAddr(cfg.CallbackAddr); err != nil {
		return nil, fmt.Errorf("upstreamauth: server %s: %w", cfg.Server, err)
	}
	if cfg.RefreshAhead <= 0 {
		cfg.RefreshAhead = DefaultRefreshAhead
	}
	if cfg.MaxStepUps <= 0 {
		cfg.MaxStepUps = DefaultMaxStepUps
	}
	if cfg.LoginTimeout <= 0 {
		cfg.LoginTimeout = DefaultLoginTimeout
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = DefaultRequestTimeout
	}
	if cfg.Client.Name == "" {
		cfg.Client.Name = "toolgate"
	}
	s := &Server{cfg: cfg, safeURL: upstream.RedactURL(t.URL), resource: canonicalResource(t.URL)}
	s.log = cfg.Logger
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.log = s.log.With("server", cfg.Server)
	s.base = cfg.Transport
	if s.base == nil {
		s.base = netguard.NewTransport(cfg.Guard)
	}
	return s, nil
}

// Close releases the idle connections of the Server's requests and ends a
// login under way.
func (s *Server) Close() {
	s.mu.Lock()
	l := s.login
	s.mu.Unlock()
	if l != nil {
		l.Cancel()
	}
	if t, ok := s.base.(interface{ CloseIdleConnections() }); ok {
		t.CloseIdleConnections()
	}
}

// httpClient returns the client for requests to rawURL's origin under the
// server's policy: the URL (and every hop) validated and dialled through the
// guard, with the given redirect policy.
func (s *Server) httpClient(rawURL string, redirects netguard.Redirects) (*http.Client, error) {
	t, err := netguard.ValidateURL(rawURL, s.cfg.Guard.Policy())
	if err != nil {
		return nil, err
	}
	key := fmt.Sprintf("%s|%d", t.Origin, redirects)
	s.clientMu.Lock()
	defer s.clientMu.Unlock()
	if c, ok := s.clients[key]; ok {
		return c, nil
	}
	c, err := netguard.NewClient(s.cfg.Guard, netguard.ClientOptions{URL: rawURL, Redirects: redirects, Transport: s.base})
	if err != nil {
		return nil, err
	}
	c.Timeout = s.cfg.RequestTimeout
	if s.clients == nil {
		s.clients = map[string]*http.Client{}
	}
	// A server naming new origins on every challenge cannot grow this
	// without bound: past maxClients, clients are made per request (they
	// share the transport, so nothing else is lost).
	if len(s.clients) < maxClients {
		s.clients[key] = c
	}
	return c, nil
}

// maxClients bounds the clients kept per Server (a few origins are normal:
// the server, its authorization server, a metadata host).
const maxClients = 16

// userAgent names toolgate on the requests it makes itself.
func userAgent() string { return "toolgate/" + version.String() }

// canonicalResource is the server's URI as a resource indicator: scheme and
// host in lower case, the port when it is not the scheme's default, the path;
// no userinfo, query or fragment (they may hold secrets, and RFC 8707 keeps
// fragments out).
func canonicalResource(u *url.URL) string {
	c := url.URL{Scheme: strings.ToLower(u.Scheme), Host: strings.ToLower(u.Host), Path: u.Path, RawPath: u.RawPath}
	if port := c.Port(); (c.Scheme == "https" && port == "443") || (c.Scheme == "http" && port == "80") {
		c.Host = c.Hostname()
		if strings.Contains(c.Host, ":") {
			c.Host = "[" + c.Host + "]"
		}
	}
	if c.Path == "/" {
		c.Path, c.RawPath = "", ""
	}
	return c.String()
}
