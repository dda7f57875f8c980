package upstreamauth_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/toolgate/toolgate/internal/upstream"
	"github.com/toolgate/toolgate/internal/upstreamauth"
	"github.com/toolgate/toolgate/internal/upstreamauth/upstreamauthtest"
)

// TestHostileAuthorizationEndpoint: an authorization URL a browser must not
// open (a script, a file, a shell's metacharacters over plain http, the
// metadata service) is refused before anyone opens it, headless or not.
func TestHostileAuthorizationEndpoint(t *testing.T) {
	pwn := t.TempDir() + "/pwn"
	for _, ep := range []string{
		"javascript:alert(1)",
		"file:///etc/passwd",
		"http://x.example/$(touch " + pwn + ")",
		"http://169.254.169.254/authorize",
		"https://169.254.169.254/authorize",
		"https://user:pass@as.example/authorize",
	} {
		t.Run(ep, func(t *testing.T) {
			w := newWorld(t, upstreamauthtest.Options{Metadata: map[string]any{"authorization_endpoint": ep}}, upstreamauth.Config{Headless: true})
			ctx := testCtx(t)
			if _, err := w.s.StartLogin(ctx, upstreamauth.LoginOptions{}); err == nil {
				t.Errorf("StartLogin accepted %q", ep)
			}
			_, err := w.dial(ctx, w.s)
			var ae *upstream.AuthRequiredError
			if !errors.As(err, &ae) || ae.Reason != upstream.AuthReasonAuthorizationFailed {
				t.Errorf("dial: %v", err)
			}
			if len(w.fx.AuthorizationRequests()) != 0 {
				t.Errorf("the authorization endpoint was reached")
			}
		})
	}
	if _, err := os.Stat(pwn); err == nil {
		t.Errorf("%s was created", pwn)
	}
}

// TestMetadataForAnotherResource: protected resource metadata naming another
// resource is refused; nothing it names is contacted.
func TestMetadataForAnotherResource(t *testing.T) {
	w := newWorld(t, upstreamauthtest.Options{}, upstreamauth.Config{Headless: true})
	w.fx.ClaimResource("https://evil.example/mcp")
	ctx := testCtx(t)
	_, err := w.dial(ctx, w.s)
	var ae *upstream.AuthRequiredError
	if !errors.As(err, &ae) || ae.Reason != upstream.AuthReasonAuthorizationFailed || !strings.Contains(ae.Detail, "evil.example") {
		t.Fatalf("dial: %v", err)
	}
	if n := w.fx.ASRequests(); n != 0 {
		t.Errorf("the authorization server got %d requests", n)
	}
}

// TestAuthorizationServerUnreachableByPolicy: metadata pointing the client
// at the cloud metadata service or an internal name is refused by the
// server's netguard policy.
func TestAuthorizationServerUnreachableByPolicy(t *testing.T) {
	for _, issuer := range []string{"http://169.254.169.254", "https://metadata.google.internal", "javascript:alert(1)", "https://[fe80::1]"} {
		w := newWorld(t, upstreamauthtest.Options{}, upstreamauth.Config{Headless: true})
		w.fx.MoveTo(issuer)
		_, err := w.dial(testCtx(t), w.s)
		var ae *upstream.AuthRequiredError
		if !errors.As(err, &ae) || ae.Reason != upstream.AuthReasonAuthorizationFailed {
			t.Errorf("%s: %v", issuer, err)
		}
	}
}

// TestTokenRedirectNotFollowed: a token endpoint that redirects elsewhere
// does not get the code, the verifier or the client's secret sent on.
func TestTokenRedirectNotFollowed(t *testing.T) {
	var hits atomic.Int32
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	t.Cleanup(elsewhere.Close)
	w := newWorld(t, upstreamauthtest.Options{TokenRedirect: elsewhere.URL + "/steal"}, upstreamauth.Config{Headless: true})
	_, err := w.dial(testCtx(t), w.s)
	if err == nil {
		t.Fatal("signed in through a redirected token endpoint")
	}
	if hits.Load() != 0 {
		t.Errorf("the redirect was followed")
	}
	w.noCanary(t)
}

// TestCallbackListenerRefusesStrangers: the loopback listener answers only
// its path and method, and binds only to loopback.
func TestCallbackListenerRefusesStrangers(t *testing.T) {
	w := newWorld(t, upstreamauthtest.Options{}, upstreamauth.Config{})
	ctx := testCtx(t)
	l, err := w.s.StartLogin(ctx, upstreamauth.LoginOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Cancel()
	base := strings.TrimSuffix(l.RedirectURI, "/callback")
	for _, tc := range []struct {
		method, path string
		want         int
	}{{"GET", "/", 404}, {"GET", "/callback/../x", 404}, {"POST", "/callback", 405}, {"GET", "/callback", 400}} {
		req, _ := http.NewRequest(tc.method, base+tc.path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%s %s: %d, want %d", tc.method, tc.path, resp.StatusCode, tc.want)
		}
	}
	for _, addr := range []string{"0.0.0.0:0", "192.0.2.1:0", "localhost:0", ":0"} {
		if _, err := upstreamauth.New(upstreamauth.Config{Server: "x", URL: w.fx.URL, Store: w.store, Guard: w.guard, CallbackAddr: addr}); err == nil {
			t.Errorf("callback address %s accepted", addr)
		}
	}
}

// TestHeadlessRedirectElsewhere: an authorization server that sends the
// headless browser somewhere the policy refuses, or that does not answer,
// with a code in the URL: the sign-in fails, and the code appears in no error
// or log line.
func TestHeadlessRedirectElsewhere(t *testing.T) {
	for _, target := range []string{"http://169.254.169.254/cb", "https://127.0.0.1:1/cb"} {
		evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, target+"?code=code-"+canary+"-leak&state="+r.URL.Query().Get("state"), http.StatusFound)
		}))
		t.Cleanup(evil.Close)
		w := newWorld(t, upstreamauthtest.Options{Metadata: map[string]any{"authorization_endpoint": evil.URL + "/authorize"}}, upstreamauth.Config{Headless: true})
		_, err := w.dial(testCtx(t), w.s)
		var ae *upstream.AuthRequiredError
		if !errors.As(err, &ae) || ae.Reason != upstream.AuthReasonAuthorizationFailed || !strings.Contains(ae.Detail, strings.TrimPrefix(strings.TrimPrefix(target, "http://"), "https://")) {
			t.Fatalf("%s: dial: %v", target, err)
		}
		w.noCanary(t)
	}
}
