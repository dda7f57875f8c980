package upstreamauth_test

import (
	"errors"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/upstream"
	"github.com/toolgate/toolgate/internal/upstreamauth"
	"github.com/toolgate/toolgate/internal/upstreamauth/upstreamauthtest"
)

// TestHeadlessSignIn: a server that answers 401 is signed in to without a
// person — discovery from the challenge, a dynamic registration, PKCE S256
// (verified by the fixture), the resource indicator on the authorization and
// token requests, offline_access since the authorization server supports it —
// and the call goes through.
func TestHeadlessSignIn(t *testing.T) {
	w := newWorld(t, upstreamauthtest.Options{Scopes: []string{"read"}}, upstreamauth.Config{Headless: true})
	ctx := testCtx(t)
	c := w.connect(t, ctx, w.s)
	if err := w.call(ctx, c); err != nil {
		t.Fatal(err)
	}
	if w.fx.Registrations() != 1 {
		t.Errorf("%d registrations", w.fx.Registrations())
	}
	ar := w.fx.AuthorizationRequests()
	if len(ar) != 1 {
		t.Fatalf("%d authorization requests", len(ar))
	}
	q := ar[0].Query
	if q.Get("code_challenge_method") != "S256" || q.Get("resource") != w.fx.URL || q.Get("scope") != "read offline_access" {
		t.Errorf("authorization request %v", q)
	}
	if n := tokenRequests(w.fx, "authorization_code"); n != 1 {
		t.Errorf("%d code exchanges", n)
	}
	everyTokenRequestNamesTheServer(t, w.fx)
	st, err := w.s.Status(ctx)
	if err != nil || st.State != upstreamauth.StateSignedIn || !st.Refreshable || st.Issuer != w.fx.Issuer ||
		!slices.Equal(st.Scopes, []string{"read", "offline_access"}) {
		t.Errorf("status %+v %v", st, err)
	}
	// The grant and the registration are sealed in the keystore (no token
	// or secret in clear in what the backend holds) and a new Server (a
	// restart) uses them without signing in again.
	g, err := w.store.LoadGrant(ctx, "files")
	if err != nil || !strings.Contains(g.AccessToken.RevealString(), canary) || !strings.Contains(g.RefreshToken.RevealString(), canary) {
		t.Fatalf("stored grant: %v", err)
	}
	for _, name := range []string{"oauth.grant", "oauth.client"} {
		blob := w.mem.Blob("oauth:user", "files", name)
		if len(blob) == 0 || strings.Contains(string(blob), canary) || strings.Contains(string(blob), "access-") {
			t.Errorf("%s at rest: %d bytes, clear: %v", name, len(blob), strings.Contains(string(blob), canary))
		}
	}
	s2 := w.server(t, upstreamauth.Config{})
	c2 := w.connect(t, ctx, s2)
	if err := w.call(ctx, c2); err != nil || len(w.fx.AuthorizationRequests()) != 1 {
		t.Errorf("after a restart: %v, %d authorization requests", err, len(w.fx.AuthorizationRequests()))
	}
	w.noCanary(t)
}

// TestPersonLogin: without Headless a 401 parks the server (one request, no
// retry, no token request: every later dial fails before sending anything);
// a person's login through the loopback listener lifts it.
func TestPersonLogin(t *testing.T) {
	w := newWorld(t, upstreamauthtest.Options{}, upstreamauth.Config{})
	ctx := testCtx(t)
	_, err := w.dial(ctx, w.s)
	var ae *upstream.AuthRequiredError
	if !errors.As(err, &ae) || ae.Reason != upstream.AuthReasonLoginRequired || !strings.Contains(ae.Detail, "toolgate auth login files") {
		t.Fatalf("dial without credentials: %v", err)
	}
	for range 5 {
		if _, err := w.dial(ctx, w.s); !errors.As(err, &ae) {
			t.Fatalf("parked dial: %v", err)
		}
	}
	if w.fx.MCPTotal() != 1 || len(w.fx.TokenRequests()) != 0 {
		t.Errorf("a parked server sent %d MCP and %d token requests; want 1 and 0", w.fx.MCPTotal(), len(w.fx.TokenRequests()))
	}
	if st, _ := w.s.Status(ctx); st.State != upstreamauth.StateSignInRequired || st.Reason != upstream.AuthReasonLoginRequired {
		t.Errorf("status %+v", st)
	}
	l, err := w.s.StartLogin(ctx, upstreamauth.LoginOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(l.RedirectURI, "http://127.0.0.1:") || !strings.HasSuffix(l.RedirectURI, "/callback") {
		t.Errorf("redirect URI %s", l.RedirectURI)
	}
	if st, _ := w.s.Status(ctx); !st.LoginPending {
		t.Errorf("status %+v", st)
	}
	// A callback without this login's state is refused and does not end it.
	cb, _ := url.Parse(l.RedirectURI)
	cb.RawQuery = url.Values{"code": {"forged"}, "state": {"guess"}}.Encode()
	if resp, err := http.Get(cb.String()); err != nil || resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("forged callback: %v %v", resp, err)
	}
	// The person's browser: the authorization server redirects to the
	// listener.
	resp, err := http.Get(l.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "Signed in") {
		t.Fatalf("callback page %d %s", resp.StatusCode, body)
	}
	if err := l.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if err := l.Wait(ctx); err != nil {
		t.Errorf("a second Wait: %v", err)
	}
	// The listener is gone.
	if _, err := http.Get(l.RedirectURI); err == nil {
		t.Errorf("the listener still answers")
	}
	c := w.connect(t, ctx, w.s)
	if err := w.call(ctx, c); err != nil {
		t.Fatal(err)
	}
	everyTokenRequestNamesTheServer(t, w.fx)
	w.noCanary(t, l.URL)
}

// TestLoginComplete: a person whose browser cannot reach the listener pastes
// the URL it was sent to; one with another state or path is refused.
func TestLoginComplete(t *testing.T) {
	w := newWorld(t, upstreamauthtest.Options{}, upstreamauth.Config{})
	ctx := testCtx(t)
	l, err := w.s.StartLogin(ctx, upstreamauth.LoginOptions{})
	if err != nil {
		t.Fatal(err)
	}
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noFollow.Get(l.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	back := resp.Header.Get("Location")
	u, _ := url.Parse(back)
	forged := *u
	q := forged.Query()
	q.Set("state", "other")
	forged.RawQuery = q.Encode()
	if err := l.Complete(ctx, forged.String()); err == nil {
		t.Errorf("a callback with another state completed the login")
	}
	other := *u
	other.Path = "/elsewhere"
	if err := l.Complete(ctx, other.String()); err == nil {
		t.Errorf("a callback to another path completed the login")
	}
	if err := l.Complete(ctx, back); err != nil {
		t.Fatal(err)
	}
	if st, _ := w.s.Status(ctx); st.State != upstreamauth.StateSignedIn {
		t.Errorf("status %+v", st)
	}
	// The listener took no callback: a late one is refused.
	if resp, err := http.Get(back); err == nil && resp.StatusCode == http.StatusOK {
		t.Errorf("a late callback was accepted")
	}
}

// TestLoginCancelledAndReplaced: Cancel ends a login, a newer login ends an
// older one.
func TestLoginCancelledAndReplaced(t *testing.T) {
	w := newWorld(t, upstreamauthtest.Options{}, upstreamauth.Config{})
	ctx := testCtx(t)
	first, err := w.s.StartLogin(ctx, upstreamauth.LoginOptions{})
	if err != nil {
		t.Fatal(err)
	}
	second, err := w.s.StartLogin(ctx, upstreamauth.LoginOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Wait(ctx); !errors.Is(err, upstreamauth.ErrLoginCancelled) {
		t.Errorf("replaced login: %v", err)
	}
	second.Cancel()
	if err := second.Wait(ctx); !errors.Is(err, upstreamauth.ErrLoginCancelled) {
		t.Errorf("cancelled login: %v", err)
	}
}

// TestLegacyEraSignIn: the Authorizer is the same for a server reached with
// initialize (and for the probe that falls back to it).
func TestLegacyEraSignIn(t *testing.T) {
	for _, era := range []upstream.Era{upstream.EraLegacy, upstream.EraProbe} {
		w := newWorld(t, upstreamauthtest.Options{}, upstreamauth.Config{Headless: true})
		ctx := testCtx(t)
		c, err := upstream.DialHTTP(ctx, upstream.HTTPSpec{URL: w.fx.URL, Auth: w.s, Transport: transport(w.guard)}, upstream.Options{Era: era})
		if err != nil {
			t.Fatalf("%v: %v", era, err)
		}
		if err := w.call(ctx, c); err != nil {
			t.Errorf("%v: %v", era, err)
		}
		c.Close()
		everyTokenRequestNamesTheServer(t, w.fx)
	}
}

// TestLogout: the tokens are revoked at the authorization server and
// forgotten here; the server is parked as login_required, costing nothing.
func TestLogout(t *testing.T) {
	w := newWorld(t, upstreamauthtest.Options{}, upstreamauth.Config{})
	ctx := testCtx(t)
	login(t, w)
	if err := w.s.Logout(ctx, upstreamauth.LogoutOptions{Revoke: true, ForgetClient: true}); err != nil {
		t.Fatal(err)
	}
	if n := w.fx.Revocations(); n != 2 {
		t.Errorf("%d tokens revoked, want the refresh and the access token", n)
	}
	if g, _ := w.store.LoadGrant(ctx, "files"); g != nil {
		t.Errorf("the grant is still stored")
	}
	if c, _ := w.store.LoadClient(ctx, "files"); c != nil {
		t.Errorf("the registration is still stored")
	}
	st, _ := w.s.Status(ctx)
	if st.State != upstreamauth.StateSignInRequired || st.Reason != upstream.AuthReasonLoginRequired {
		t.Errorf("status %+v", st)
	}
	mcp := w.fx.MCPTotal()
	if _, err := w.dial(ctx, w.s); err == nil || w.fx.MCPTotal() != mcp {
		t.Errorf("after logout: %v, %d requests", err, w.fx.MCPTotal()-mcp)
	}
	w.noCanary(t)
}
