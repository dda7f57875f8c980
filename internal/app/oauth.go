package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/toolgate/toolgate/internal/host"
	"github.com/toolgate/toolgate/internal/keystore"
	"github.com/toolgate/toolgate/internal/mcpconfig"
	"github.com/toolgate/toolgate/internal/mgmt"
	"github.com/toolgate/toolgate/internal/netguard"
	"github.com/toolgate/toolgate/internal/store"
	"github.com/toolgate/toolgate/internal/upstreamauth"
)

// upstreamAuths holds the OAuth sign-in (upstreamauth.Server) of each installed HTTP
// server this process dials (docs/upstream-auth.md, "Wiring it into the host"). One
// Server per installed server and URL, shared by all its connections, so requests that
// meet an expiry together share one refresh; its tokens are in the keystore
// (upstreamauth.KeystoreStore), never in the definition.
type upstreamAuths struct {
	ks  *keystore.Keystore
	log *slog.Logger
	// changed is told, on its own goroutine, that a server's credentials changed and
	// it is signed in (a completed login): the host restarts it, lifting auth_required.
	changed func(server string)
	// audit records each token-related request of a sign-in (oauthaudit.go).
	audit func(upstreamauth.RequestEvent)

	mu      sync.Mutex
	servers map[string]*authEntry // by server name
	pending map[string]*AuthLogin // logins started by the management methods, by server name
}

type authEntry struct {
	key string // ksScope, URL: another installation or URL gets another Server
	s   *upstreamauth.Server
}

// authKey identifies the definition a Server was built for: another scope, URL or
// oauth setting (the fingerprint covers both) gets another Server.
func authKey(cfg dialConfig) string { return cfg.ksScope + "\x00" + cfg.server.Fingerprint() }

// oauthScope is the keystore scope of an installation's OAuth records (the
// KeystoreStore adds its own "oauth:" prefix).
func oauthStore(ks *keystore.Keystore, scope string) *upstreamauth.KeystoreStore {
	return upstreamauth.NewKeystoreStore(ks, scope)
}

// usesOAuth says whether a remote server's connection is authorized by upstreamauth:
// every HTTP or SSE server, except one whose definition carries its own Authorization
// header (a token the operator put in headers, or URL userinfo), which is sent as is,
// and one configured with "oauth": {"enabled": false}.
func usesOAuth(t *mcpconfig.Transport) bool {
	if t.Kind != mcpconfig.HTTP && t.Kind != mcpconfig.SSE || t.OAuth != nil && t.OAuth.Disabled {
		return false
	}
	return !slices.ContainsFunc(t.Headers, func(h mcpconfig.Var) bool { return h.Name == "Authorization" })
}

// get returns the Server for an installed server's dial. At a dial (reload), a
// Server that is parked (sign-in required) while the keystore holds a grant is
// replaced by a fresh one reading it: credentials another process obtained (toolgate
// auth login without a daemon) are used at the next start. A parked Server with no
// stored grant is kept: it refuses the dial at once, sending nothing, and keeps the
// reason it parked for. Only a dial reloads: status and logins use the Server that
// parked, which knows why and what the server's challenge was.
func (r *upstreamAuths) get(ctx context.Context, cfg dialConfig, reload bool) (*upstreamauth.Server, error) {
	key := authKey(cfg)
	name := cfg.server.Name
	r.mu.Lock()
	e := r.servers[name]
	r.mu.Unlock()
	if e != nil && e.key == key && (!reload || !r.stale(ctx, cfg, e.s)) {
		return e.s, nil
	}
	s, err := r.build(ctx, cfg)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	old := r.servers[name]
	if r.servers == nil {
		r.servers = map[string]*authEntry{}
	}
	if old != e && old != nil && old.key == key {
		// Another dial replaced it meanwhile: use that one.
		r.mu.Unlock()
		s.Close()
		return old.s, nil
	}
	r.servers[name] = &authEntry{key: key, s: s}
	r.mu.Unlock()
	if old != nil {
		old.s.Close()
	}
	return s, nil
}

// stale says whether a parked Server should give way to the keystore's grant.
func (r *upstreamAuths) stale(ctx context.Context, cfg dialConfig, s *upstreamauth.Server) bool {
	st, err := s.Status(ctx)
	if err != nil || st.State != upstreamauth.StateSignInRequired || st.LoginPending {
		return false
	}
	g, err := oauthStore(r.ks, cfg.ksScope).LoadGrant(ctx, cfg.server.Name)
	return err == nil && g != nil
}

// lookup returns the Server already built for name, if any.
func (r *upstreamAuths) lookup(name string) *upstreamauth.Server {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e := r.servers[name]; e != nil {
		return e.s
	}
	return nil
}

// build makes the Server of an installed server: its keystore records, the same
// netguard policy as its connection.
func (r *upstreamAuths) build(ctx context.Context, cfg dialConfig) (*upstreamauth.Server, error) {
	name := cfg.server.Name
	c := upstreamauth.Config{Server: name, URL: cfg.server.Transport.URL, Store: oauthStore(r.ks, cfg.ksScope),
		Guard: netguard.NewGuard(netguard.Policy{}, nil), Logger: r.log, OnRequest: r.audit}
	if err := configureOAuth(ctx, &c, cfg.server.Transport.OAuth, r.ks.Server(cfg.ksScope, name)); err != nil {
		return nil, fmt.Errorf("signing in to %q: %w", name, err)
	}
	// s is set before the Server is published (under r.mu), which is before any
	// OnChange can run.
	var s *upstreamauth.Server
	c.OnChange = func() { r.onChange(name, s) }
	s, err := upstreamauth.New(c)
	if err != nil {
		return nil, fmt.Errorf("signing in to %q: %w", name, err)
	}
	return s, nil
}

// onChange restarts a server whose credentials changed when it is now signed in (a
// login completed); a parking change needs nothing (the host parks on the refusal).
func (r *upstreamAuths) onChange(name string, s *upstreamauth.Server) {
	if r.changed == nil || r.lookup(name) != s {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if st, err := s.Status(ctx); err == nil && st.State == upstreamauth.StateSignedIn {
		r.changed(name)
	}
}

// forget drops a server's Server and its OAuth records (uninstall).
func (r *upstreamAuths) forget(ctx context.Context, scope, name string) error {
	r.mu.Lock()
	e := r.servers[name]
	delete(r.servers, name)
	r.mu.Unlock()
	if e != nil {
		e.s.Close()
	}
	return oauthStore(r.ks, scope).Forget(ctx, name)
}

// close ends every Server (logins under way, idle connections).
func (r *upstreamAuths) close() {
	r.mu.Lock()
	es := r.servers
	r.servers = nil
	r.mu.Unlock()
	for _, e := range es {
		e.s.Close()
	}
}

// credentialsChanged restarts a server parked in auth_required whose sign-in completed
// in this process, so it goes ready with the new credentials.
func (a *App) credentialsChanged(server string) {
	up := a.Upstreams()
	if up == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// Only a parked server: a refresh changes the credentials too, and the running
	// connection already uses the new token.
	if st, ok, err := up.Status(ctx, server); err != nil || !ok || st.State != host.StateAuthRequired {
		return
	}
	if err := up.Restart(ctx, server); err != nil {
		a.log.Warn("restarting a server after its sign-in", "server", server, "err", err)
	}
}

// AuthServer returns the OAuth sign-in of the installed remote server called name:
// the one this process's connections use when it hosts the server, else one over the
// same keystore records (what it obtains is used at the hosting process's next start
// of the server).
func (a *App) AuthServer(ctx context.Context, name string) (*upstreamauth.Server, error) {
	m, err := a.st.MCPServerByName(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("server %q: %w", name, err)
	}
	return a.authServerOf(ctx, &m)
}

func (a *App) authServerOf(ctx context.Context, m *store.MCPServer) (*upstreamauth.Server, error) {
	def, err := definition(m)
	if err != nil {
		return nil, err
	}
	cfg := def.Config.(dialConfig)
	if !usesOAuth(&cfg.server.Transport) {
		return nil, &mgmt.Error{Code: mgmt.CodeConflict, Field: "name", Message: fmt.Sprintf(
			"server %q does not sign in with OAuth: it is a stdio server, has its own Authorization header, or oauth.enabled is false", m.Name)}
	}
	return a.auths.get(ctx, cfg, false)
}

// AuthLogin is a person's sign-in to a remote server started by StartAuthLogin.
type AuthLogin struct {
	Server      string    `json:"server"`
	URL         string    `json:"url"`
	RedirectURI string    `json:"redirect_uri"`
	ExpiresAt   time.Time `json:"expires_at"`
	login       *upstreamauth.Login
	a           *App
}

// StartAuthLogin starts a person's sign-in to a remote server (discovery, a client,
// PKCE, the loopback listener) and returns the URL to open. Wait (or Complete with
// the URL the browser was sent back to) finishes it; the server is then restarted
// and goes ready.
func (a *App) StartAuthLogin(ctx context.Context, name string) (*AuthLogin, error) {
	m, err := a.st.MCPServerByName(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("server %q: %w", name, err)
	}
	return a.startAuthLogin(ctx, &m)
}

func (a *App) startAuthLogin(ctx context.Context, m *store.MCPServer) (*AuthLogin, error) {
	name := m.Name
	s, err := a.authServerOf(ctx, m)
	if err != nil {
		return nil, err
	}
	l, err := s.StartLogin(ctx, upstreamauth.LoginOptions{})
	if err != nil {
		return nil, fmt.Errorf("signing in to %q: %w", name, err)
	}
	al := &AuthLogin{Server: name, URL: l.URL, RedirectURI: l.RedirectURI, ExpiresAt: l.Expires, login: l, a: a}
	a.auths.mu.Lock()
	if a.auths.pending == nil {
		a.auths.pending = map[string]*AuthLogin{}
	}
	a.auths.pending[name] = al // a newer login cancels an older one (upstreamauth)
	a.auths.mu.Unlock()
	return al, nil
}

// Wait waits for the browser's callback and exchanges the code; the server is then
// restarted if it was parked.
func (l *AuthLogin) Wait(ctx context.Context) error { return l.finish(l.login.Wait(ctx)) }

// Complete finishes the login with the URL the browser was sent back to (a person
// whose browser could not reach the loopback listener pastes it).
func (l *AuthLogin) Complete(ctx context.Context, callbackURL string) error {
	return l.finish(l.login.Complete(ctx, callbackURL))
}

// finish forgets the login once it ended and, when it succeeded, restarts the parked
// server now rather than when OnChange runs, so a command that exits right after the
// login has restarted it.
func (l *AuthLogin) finish(err error) error {
	r := l.a.auths
	r.mu.Lock()
	if r.pending[l.Server] == l {
		delete(r.pending, l.Server)
	}
	r.mu.Unlock()
	if err != nil {
		return fmt.Errorf("signing in to %q: %w", l.Server, err)
	}
	l.a.credentialsChanged(l.Server)
	return nil
}

// Cancel ends the login.
func (l *AuthLogin) Cancel() { l.login.Cancel() }

// signsIn says whether the installed server m signs in with OAuth.
func signsIn(m *store.MCPServer) bool {
	def, err := definition(m)
	if err != nil {
		return false
	}
	cfg := def.Config.(dialConfig)
	return usesOAuth(&cfg.server.Transport)
}

// configureOAuth applies a definition's oauth member to c, opening its secrets from
// the keystore (they stay keystore.Secret values).
func configureOAuth(ctx context.Context, c *upstreamauth.Config, o *mcpconfig.OAuth, src mcpconfig.SecretSource) error {
	if o == nil {
		return nil
	}
	open := func(v mcpconfig.Var) (keystore.Secret, error) {
		if v.Secret == "" {
			return keystore.Secret{}, nil
		}
		s, err := src.Secret(ctx, v.Secret)
		if err != nil {
			return keystore.Secret{}, fmt.Errorf("opening oauth %s: %w", v.Name, err)
		}
		return s, nil
	}
	secret, err := open(o.ClientSecret)
	if err != nil {
		return err
	}
	key, err := open(o.PrivateKey)
	if err != nil {
		return err
	}
	c.Scopes = o.Scopes
	if o.Grant == mcpconfig.GrantClientCredentials {
		c.ClientCredentials = &upstreamauth.ClientCredentials{ID: o.ClientID, Secret: secret, PrivateKey: key, Issuer: o.Issuer}
		return nil
	}
	c.Client = upstreamauth.ClientConfig{MetadataURL: o.ClientMetadataURL, ID: o.ClientID, Secret: secret, Issuer: o.Issuer}
	return nil
}

// The management protocol's sign-in methods (mgmt.AuthManager, docs/management.md).

var _ mgmt.AuthManager = (*App)(nil)

func (a *App) authStatusResult(ctx context.Context, s *upstreamauth.Server) (*mgmt.AuthStatusResult, error) {
	st, err := s.Status(ctx)
	if err != nil {
		return nil, unavailable(err)
	}
	b, err := json.Marshal(st)
	if err != nil {
		return nil, err
	}
	return &mgmt.AuthStatusResult{Auth: b}, nil
}

// authOf resolves a server address to the installed server and its sign-in.
func (a *App) authOf(ctx context.Context, ref mgmt.ServerRef) (store.MCPServer, *upstreamauth.Server, error) {
	m, err := a.resolve(ctx, ref)
	if err != nil {
		return m, nil, err
	}
	s, err := a.authServerOf(ctx, &m)
	return m, s, err
}

// AuthStatus implements mgmt.AuthManager.
func (a *App) AuthStatus(ctx context.Context, _ mgmt.Caller, p mgmt.AuthParams) (*mgmt.AuthStatusResult, error) {
	_, s, err := a.authOf(ctx, p.ServerRef)
	if err != nil {
		return nil, err
	}
	return a.authStatusResult(ctx, s)
}

// AuthLoginStart implements mgmt.AuthManager.
func (a *App) AuthLoginStart(ctx context.Context, _ mgmt.Caller, p mgmt.AuthLoginStartParams) (*mgmt.AuthLoginStartResult, error) {
	m, err := a.resolve(ctx, p.ServerRef)
	if err != nil {
		return nil, err
	}
	// The login outlives this request: its listener waits for the browser.
	l, err := a.startAuthLogin(context.WithoutCancel(ctx), &m)
	if err != nil {
		return nil, signInError(err)
	}
	if p.Headless != nil && *p.Headless {
		go func() {
			// The login's own timeout bounds it; a failure ends the login, which
			// login_complete reports.
			if err := l.login.Follow(context.WithoutCancel(ctx)); err != nil {
				a.log.Warn("oauth: the headless sign-in stopped", "server", l.Server, "err", err)
				l.Cancel()
			}
		}()
	}
	return &mgmt.AuthLoginStartResult{Server: l.Server, URL: l.URL, RedirectURI: l.RedirectURI, ExpiresAt: l.ExpiresAt.Unix()}, nil
}

// AuthLoginComplete implements mgmt.AuthManager.
func (a *App) AuthLoginComplete(ctx context.Context, _ mgmt.Caller, p mgmt.AuthLoginCompleteParams) (*mgmt.AuthStatusResult, error) {
	m, s, err := a.authOf(ctx, p.ServerRef)
	if err != nil {
		return nil, err
	}
	a.auths.mu.Lock()
	l := a.auths.pending[m.Name]
	a.auths.mu.Unlock()
	if l == nil {
		return nil, &mgmt.Error{Code: mgmt.CodeConflict, Field: "name", Message: fmt.Sprintf(
			"no sign-in to %q is under way: start one with mcp/auth/login_start", m.Name)}
	}
	if p.CallbackURL != "" {
		err = l.Complete(ctx, p.CallbackURL)
	} else {
		err = l.Wait(ctx)
	}
	if err != nil {
		return nil, signInError(err)
	}
	return a.authStatusResult(ctx, s)
}

// AuthLogout implements mgmt.AuthManager.
func (a *App) AuthLogout(ctx context.Context, _ mgmt.Caller, p mgmt.AuthLogoutParams) (*mgmt.AuthStatusResult, error) {
	m, s, err := a.authOf(ctx, p.ServerRef)
	if err != nil {
		return nil, err
	}
	if err := s.Logout(ctx, upstreamauth.LogoutOptions{Revoke: p.Revoke != nil && *p.Revoke}); err != nil {
		return nil, unavailable(err)
	}
	if up := a.Upstreams(); up != nil {
		_ = up.Restart(ctx, m.Name) // the connection holding the old token goes; the next start parks
	}
	return a.authStatusResult(ctx, s)
}

// signInError is a failed sign-in as the protocol answers it: conflict, with
// upstreamauth's message (bounded, never a secret).
func signInError(err error) error {
	var me *mgmt.Error
	if errors.As(err, &me) {
		return err
	}
	return fmt.Errorf("%w: %w", &mgmt.Error{Code: mgmt.CodeConflict, Message: err.Error()}, err)
}
