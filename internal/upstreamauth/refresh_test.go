package upstreamauth_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/toolgate/toolgate/internal/upstream"
	"github.com/toolgate/toolgate/internal/upstreamauth"
	"github.com/toolgate/toolgate/internal/upstreamauth/upstreamauthtest"
)

// TestRefreshOnExpiry, on synctest's clock: a token about to lapse is
// refreshed before it is sent (RefreshAhead), one that lapsed is refreshed,
// and one the server stops taking early (a 401) is refreshed and the request
// sent again — each time with the resource indicator, and never a login.
func TestRefreshOnExpiry(t *testing.T) {
	w := newWorld(t, upstreamauthtest.Options{AccessTTL: time.Hour}, upstreamauth.Config{Headless: true})
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		c := w.connect(t, ctx, w.s)
		if err := w.call(ctx, c); err != nil {
			t.Fatal(err)
		}
		refreshes := func() int { return tokenRequests(w.fx, "refresh_token") }

		// 30 s before expiry: within the minute ahead, so refreshed first,
		// though the token would still have been taken.
		time.Sleep(time.Hour - 30*time.Second)
		unauthorized := w.fx.MCPRequests(401)
		if err := w.call(ctx, c); err != nil {
			t.Fatal(err)
		}
		if refreshes() != 1 || w.fx.MCPRequests(401) != unauthorized {
			t.Errorf("ahead of expiry: %d refreshes, %d more 401s", refreshes(), w.fx.MCPRequests(401)-unauthorized)
		}

		// Long past expiry (and refused by the server, as lapsed tokens are).
		time.Sleep(3 * time.Hour)
		w.fx.ExpireAccessTokens()
		if err := w.call(ctx, c); err != nil {
			t.Fatal(err)
		}
		if refreshes() != 2 || w.fx.MCPRequests(401) != unauthorized {
			t.Errorf("after expiry: %d refreshes, %d more 401s", refreshes(), w.fx.MCPRequests(401)-unauthorized)
		}

		// Revoked at the server while the client thinks it valid: the 401 is
		// answered with a refresh, and the call goes through.
		w.fx.ExpireAccessTokens()
		if err := w.call(ctx, c); err != nil {
			t.Fatal(err)
		}
		if refreshes() != 3 || w.fx.MCPRequests(401) != unauthorized+1 {
			t.Errorf("after a revocation: %d refreshes, %d more 401s", refreshes(), w.fx.MCPRequests(401)-unauthorized)
		}
		if len(w.fx.AuthorizationRequests()) != 1 {
			t.Errorf("%d authorization requests: a refresh signed in again", len(w.fx.AuthorizationRequests()))
		}
	})
	everyTokenRequestNamesTheServer(t, w.fx)
	w.noCanary(t)
}

// TestShortLivedTokensNoStorm: a token that lives less than twice
// RefreshAhead is refreshed at half its life, not on every request.
func TestShortLivedTokensNoStorm(t *testing.T) {
	w := newWorld(t, upstreamauthtest.Options{AccessTTL: 40 * time.Second}, upstreamauth.Config{Headless: true})
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		c := w.connect(t, ctx, w.s)
		for range 10 {
			if err := w.call(ctx, c); err != nil {
				t.Fatal(err)
			}
		}
		if n := tokenRequests(w.fx, "refresh_token"); n != 0 {
			t.Errorf("%d refreshes of a fresh 40 s token", n)
		}
		time.Sleep(21 * time.Second)
		for range 10 {
			if err := w.call(ctx, c); err != nil {
				t.Fatal(err)
			}
		}
		if n := tokenRequests(w.fx, "refresh_token"); n != 1 {
			t.Errorf("%d refreshes past half the lifetime, want 1", n)
		}
	})
}

// TestConcurrentExpiryOneRefresh: requests that meet an expiry together
// share one refresh.
func TestConcurrentExpiryOneRefresh(t *testing.T) {
	w := newWorld(t, upstreamauthtest.Options{}, upstreamauth.Config{Headless: true})
	ctx := testCtx(t)
	c := w.connect(t, ctx, w.s)
	w.fx.ExpireAccessTokens()
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for range 16 {
		wg.Go(func() { errs <- w.call(ctx, c) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if n := tokenRequests(w.fx, "refresh_token"); n != 1 {
		t.Errorf("%d refreshes for 16 concurrent requests, want 1", n)
	}
}

// TestRevokedGrantParks: once the authorization server refuses the refresh
// token, the server is parked: the call fails with grant_revoked, and no later
// call or dial sends anything (no token request, no MCP request) until a
// login; the refused grant is gone from the store, so a restart does not try
// it again either.
func TestRevokedGrantParks(t *testing.T) {
	w := newWorld(t, upstreamauthtest.Options{EchoSecrets: true}, upstreamauth.Config{})
	ctx := testCtx(t)
	login(t, w)
	c := w.connect(t, ctx, w.s)
	if err := w.call(ctx, c); err != nil {
		t.Fatal(err)
	}
	w.fx.RevokeRefreshTokens()
	w.fx.ExpireAccessTokens()
	tokens, mcp := len(w.fx.TokenRequests()), w.fx.MCPTotal()
	err := w.call(ctx, c)
	var ae *upstream.AuthRequiredError
	if !errors.As(err, &ae) || ae.Reason != upstream.AuthReasonGrantRevoked {
		t.Fatalf("call after the revocation: %v", err)
	}
	if got := len(w.fx.TokenRequests()) - tokens; got != 1 {
		t.Errorf("%d token requests for the refused refresh, want 1", got)
	}
	// The authorization server quoted the refresh token in its refusal
	// (EchoSecrets): what reached the log says [redacted] instead.
	if !strings.Contains(w.logs.String(), "the refresh token [redacted] is revoked") {
		t.Errorf("the refusal is not in the log, redacted:\n%s", w.logs.String())
	}
	if got := w.fx.MCPTotal() - mcp; got != 1 {
		t.Errorf("%d MCP requests, want the one refused", got)
	}
	tokens, mcp = len(w.fx.TokenRequests()), w.fx.MCPTotal()
	for range 20 {
		if _, err := w.dial(ctx, w.s); !errors.As(err, &ae) || ae.Reason != upstream.AuthReasonGrantRevoked {
			t.Fatalf("parked dial: %v", err)
		}
	}
	if len(w.fx.TokenRequests()) != tokens || w.fx.MCPTotal() != mcp {
		t.Errorf("a parked server sent %d token and %d MCP requests", len(w.fx.TokenRequests())-tokens, w.fx.MCPTotal()-mcp)
	}
	if st, _ := w.s.Status(ctx); st.State != upstreamauth.StateSignInRequired || st.Reason != upstream.AuthReasonGrantRevoked {
		t.Errorf("status %+v", st)
	}
	if g, err := w.store.LoadGrant(ctx, "files"); g != nil || err != nil {
		t.Errorf("the refused grant is still stored: %v", err)
	}
	// A restart: nothing stored, one 401, parked, no token request.
	s2 := w.server(t, upstreamauth.Config{})
	tokens, mcp = len(w.fx.TokenRequests()), w.fx.MCPTotal()
	for range 5 {
		if _, err := w.dial(ctx, s2); !errors.As(err, &ae) || ae.Reason != upstream.AuthReasonLoginRequired {
			t.Fatalf("after a restart: %v", err)
		}
	}
	if len(w.fx.TokenRequests()) != tokens || w.fx.MCPTotal() != mcp+1 {
		t.Errorf("after a restart: %d token and %d MCP requests; want 0 and 1", len(w.fx.TokenRequests())-tokens, w.fx.MCPTotal()-mcp)
	}
	// A login lifts the park.
	login(t, w)
	c2 := w.connect(t, ctx, w.s)
	if err := w.call(ctx, c2); err != nil {
		t.Fatal(err)
	}
	w.noCanary(t)
}

// login signs the world's Server in as a person would (the browser follows
// the authorization server's redirect).
func login(t *testing.T, w *world) {
	t.Helper()
	ctx := testCtx(t)
	l, err := w.s.StartLogin(ctx, upstreamauth.LoginOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := browse(l.URL); err != nil {
		t.Fatal(err)
	}
	if err := l.Wait(ctx); err != nil {
		t.Fatal(err)
	}
}
