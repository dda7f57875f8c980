package upstreamauth_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/toolgate/toolgate/internal/keystore"
	"github.com/toolgate/toolgate/internal/upstreamauth"
	"github.com/toolgate/toolgate/internal/upstreamauth/upstreamauthtest"
)

type eventLog struct {
	mu  sync.Mutex
	evs []upstreamauth.RequestEvent
}

func (l *eventLog) add(e upstreamauth.RequestEvent) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.evs = append(l.evs, e)
}

func (l *eventLog) kinds() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, e := range l.evs {
		out = append(out, e.Kind+":"+e.Outcome+code(e.Code))
	}
	return strings.Join(out, " ")
}

func code(c string) string {
	if c == "" {
		return ""
	}
	return "(" + c + ")"
}

// TestRequestEvents: every token-related request of a sign-in is reported
// (OnRequest, which the host audits) with its endpoint and outcome — the
// registration, the authorization response, the code exchange, a refresh, a
// refused refresh, the revocation at logout — and never a token, code or secret.
func TestRequestEvents(t *testing.T) {
	var log eventLog
	w := newWorld(t, upstreamauthtest.Options{}, upstreamauth.Config{Headless: true, OnRequest: log.add})
	ctx := testCtx(t)
	c := w.connect(t, ctx, w.s)
	if err := w.call(ctx, c); err != nil {
		t.Fatal(err)
	}
	if got, want := log.kinds(), "registration:ok authorize:ok token:ok"; got != want {
		t.Fatalf("events after the sign-in: %q, want %q", got, want)
	}
	w.fx.ExpireAccessTokens()
	if err := w.call(ctx, c); err != nil {
		t.Fatal(err)
	}
	w.fx.ExpireAccessTokens()
	w.fx.RevokeRefreshTokens()
	_ = w.call(ctx, c) // the refused refresh drops the grant; headless signs in anew
	if err := w.s.Logout(ctx, upstreamauth.LogoutOptions{Revoke: true}); err != nil {
		t.Fatal(err)
	}
	got := log.kinds()
	for _, want := range []string{"refresh:ok", "refresh:refused(invalid_grant)", "revocation:"} {
		if !strings.Contains(got, want) {
			t.Errorf("events %q: none is %q", got, want)
		}
	}
	log.mu.Lock()
	defer log.mu.Unlock()
	for _, e := range log.evs {
		if e.Server != "files" || e.Issuer != w.fx.Issuer || !strings.HasPrefix(e.Endpoint, w.fx.Issuer) || strings.Contains(e.Endpoint, "?") {
			t.Errorf("event %+v: want server files, the fixture's issuer and an endpoint without a query", e)
		}
		if s := fmt.Sprintf("%+v", e); strings.Contains(s, canary) {
			t.Errorf("event %s holds a secret", s)
		}
	}
}

// TestRequestEventsRefused: a refused client credentials request is reported
// refused with the authorization server's code.
func TestRequestEventsRefused(t *testing.T) {
	var log eventLog
	w := newWorld(t, upstreamauthtest.Options{MachineClients: map[string]string{"m2m": "right-" + canary}},
		upstreamauth.Config{OnRequest: log.add, ClientCredentials: &upstreamauth.ClientCredentials{ID: "m2m", Secret: keystore.NewSecretString("wrong-" + canary)}})
	if _, err := w.dial(testCtx(t), w.s); err == nil {
		t.Fatal("a dial with a wrong client secret succeeded")
	}
	if got := log.kinds(); got != "client_credentials:refused(invalid_client)" {
		t.Errorf("events %q", got)
	}
}
