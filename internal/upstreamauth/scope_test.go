package upstreamauth_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/upstream"
	"github.com/toolgate/toolgate/internal/upstreamauth"
	"github.com/toolgate/toolgate/internal/upstreamauth/upstreamauthtest"
)

// TestStepUpHeadless: a 403 insufficient_scope on tools/call leads to a new
// authorization asking for what was granted plus what the server wants, and
// the call is sent again.
func TestStepUpHeadless(t *testing.T) {
	w := newWorld(t, upstreamauthtest.Options{Scopes: []string{"read"}, Require: map[string][]string{"tools/call": {"write"}}},
		upstreamauth.Config{Headless: true})
	ctx := testCtx(t)
	c := w.connect(t, ctx, w.s)
	if _, err := c.Call(ctx, "tools/list", nil); err != nil {
		t.Fatal(err)
	}
	if err := w.call(ctx, c); err != nil {
		t.Fatal(err)
	}
	ar := w.fx.AuthorizationRequests()
	if len(ar) != 2 || ar[0].Query.Get("scope") != "read offline_access" || ar[1].Query.Get("scope") != "read offline_access write" {
		t.Errorf("authorization requests: %v", ar)
	}
	everyTokenRequestNamesTheServer(t, w.fx)
}

// TestStepUpLimit: a server that keeps asking for a scope the authorization
// server never grants gets the step-ups MaxStepUps allows, then an error —
// three authorization requests in all, not a loop.
func TestStepUpLimit(t *testing.T) {
	w := newWorld(t, upstreamauthtest.Options{Scopes: []string{"read"}, Require: map[string][]string{"tools/call": {"admin"}}, NeverGrant: []string{"admin"}},
		upstreamauth.Config{Headless: true})
	ctx := testCtx(t)
	c := w.connect(t, ctx, w.s)
	for range 3 {
		err := w.call(ctx, c)
		var ae *upstream.AuthRequiredError
		if !errors.As(err, &ae) || !ae.InsufficientScope() || !slices.Contains(ae.Scopes, "admin") {
			t.Fatalf("call: %v", err)
		}
	}
	if n := len(w.fx.AuthorizationRequests()); n != 1+upstreamauth.DefaultMaxStepUps {
		t.Errorf("%d authorization requests, want %d", n, 1+upstreamauth.DefaultMaxStepUps)
	}
	// The connection is not lost for other methods.
	if _, err := c.Call(ctx, "tools/list", nil); err != nil {
		t.Errorf("tools/list after the refusals: %v", err)
	}
}

// TestScopeAlreadyGranted: a 403 for scopes the token holds is not answered
// with another authorization (the server will not change its mind).
func TestScopeAlreadyGranted(t *testing.T) {
	w := newWorld(t, upstreamauthtest.Options{Scopes: []string{"read"}}, upstreamauth.Config{Headless: true})
	ctx := testCtx(t)
	w.connect(t, ctx, w.s) // signs in, with read
	// A 403 for read, which the token holds: as from a server that will not
	// change its mind.
	ch := &upstream.AuthRequiredError{StatusCode: 403, Challenge: []string{`Bearer error="insufficient_scope", scope="read"`}}
	cred, err := w.s.Authorization(ctx)
	if err != nil {
		t.Fatal(err)
	}
	retry, err := w.s.Challenged(ctx, ch, cred)
	var ae *upstream.AuthRequiredError
	if retry || !errors.As(err, &ae) || !ae.InsufficientScope() {
		t.Errorf("retry %v, %v", retry, err)
	}
	if n := len(w.fx.AuthorizationRequests()); n != 1 {
		t.Errorf("%d authorization requests", n)
	}
}

// TestStepUpPerson: without Headless the call fails with the scopes to
// grant, the connection goes on, and the next login asks for them.
func TestStepUpPerson(t *testing.T) {
	w := newWorld(t, upstreamauthtest.Options{Scopes: []string{"read"}, Require: map[string][]string{"tools/call": {"write"}}}, upstreamauth.Config{})
	ctx := testCtx(t)
	login(t, w)
	c := w.connect(t, ctx, w.s)
	err := w.call(ctx, c)
	var ae *upstream.AuthRequiredError
	if !errors.As(err, &ae) || !ae.InsufficientScope() || strings.Join(ae.Scopes, " ") != "read offline_access write" {
		t.Fatalf("call: %v", err)
	}
	if _, err := c.Call(ctx, "tools/list", nil); err != nil {
		t.Errorf("tools/list: %v", err)
	}
	st, _ := w.s.Status(ctx)
	if st.State != upstreamauth.StateSignedIn || strings.Join(st.WantScopes, " ") != "read offline_access write" {
		t.Errorf("status %+v", st)
	}
	login(t, w)
	ar := w.fx.AuthorizationRequests()
	if got := ar[len(ar)-1].Query.Get("scope"); got != "read offline_access write" {
		t.Errorf("second login asked for %q", got)
	}
	if err := w.call(ctx, c); err != nil {
		t.Errorf("call after the second login: %v", err)
	}
}

// TestStepUpAfterHeadlessLogin: a Server with no automatic mode whose login was
// followed headlessly (toolgate auth login --headless: the authorization server
// redirected at once) steps up the same way, by itself, within MaxStepUps; the
// grant it stores says so, so another process's Server over it does too.
func TestStepUpAfterHeadlessLogin(t *testing.T) {
	followLogin := func(t *testing.T, w *world) {
		t.Helper()
		ctx := testCtx(t)
		l, err := w.s.StartLogin(ctx, upstreamauth.LoginOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Follow(ctx); err != nil {
			t.Fatal(err)
		}
		if err := l.Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("step-up", func(t *testing.T) {
		w := newWorld(t, upstreamauthtest.Options{Scopes: []string{"read"}, Require: map[string][]string{"tools/call": {"write"}}}, upstreamauth.Config{})
		ctx := testCtx(t)
		followLogin(t, w)
		c := w.connect(t, ctx, w.s)
		if err := w.call(ctx, c); err != nil {
			t.Fatalf("call after a headless login: %v", err)
		}
		ar := w.fx.AuthorizationRequests()
		if len(ar) != 2 || ar[1].Query.Get("scope") != "read offline_access write" {
			t.Errorf("authorization requests: %v", ar)
		}
		if g, err := w.store.LoadGrant(ctx, "files"); err != nil || g == nil || !g.Headless || !slices.Contains(g.Scopes, "write") {
			t.Errorf("stored grant %+v, %v: want a headless one with write", g, err)
		}
	})
	t.Run("limit", func(t *testing.T) {
		w := newWorld(t, upstreamauthtest.Options{Scopes: []string{"read"}, Require: map[string][]string{"tools/call": {"admin"}}, NeverGrant: []string{"admin"}},
			upstreamauth.Config{})
		ctx := testCtx(t)
		followLogin(t, w)
		c := w.connect(t, ctx, w.s)
		for range 3 {
			var ae *upstream.AuthRequiredError
			if err := w.call(ctx, c); !errors.As(err, &ae) || !ae.InsufficientScope() {
				t.Fatalf("call: %v", err)
			}
		}
		if n := len(w.fx.AuthorizationRequests()); n != 1+upstreamauth.DefaultMaxStepUps {
			t.Errorf("%d authorization requests, want %d", n, 1+upstreamauth.DefaultMaxStepUps)
		}
	})
}
