package upstreamauth_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/keystore"
	"github.com/toolgate/toolgate/internal/upstream"
	"github.com/toolgate/toolgate/internal/upstreamauth"
	"github.com/toolgate/toolgate/internal/upstreamauth/upstreamauthtest"
)

// TestIssChecked: RFC 9207. A response whose iss is not the metadata's
// issuer is refused before the code is exchanged; so is one without iss from
// a server that promises it; one without iss from a server that does not is
// taken.
func TestIssChecked(t *testing.T) {
	for _, tc := range []struct {
		name        string
		opts        upstreamauthtest.Options
		refused     bool
		detailWords string
	}{
		{"wrong", upstreamauthtest.Options{Iss: "wrong"}, true, `names the issuer "https://evil.example"`},
		{"wrong-unadvertised", upstreamauthtest.Options{Iss: "wrong", IssUnadvertised: true}, true, "https://evil.example"},
		{"missing", upstreamauthtest.Options{Iss: "omit"}, true, "has none"},
		{"not-advertised", upstreamauthtest.Options{Iss: "omit", IssUnadvertised: true}, false, ""},
		{"right-unadvertised", upstreamauthtest.Options{IssUnadvertised: true}, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, tc.opts, upstreamauth.Config{Headless: true})
			ctx := testCtx(t)
			c, err := w.dial(ctx, w.s)
			if !tc.refused {
				if err != nil {
					t.Fatal(err)
				}
				c.Close()
				return
			}
			var ae *upstream.AuthRequiredError
			if !errors.As(err, &ae) || ae.Reason != upstream.AuthReasonAuthorizationFailed || !strings.Contains(ae.Detail, tc.detailWords) {
				t.Fatalf("dial: %v", err)
			}
			if n := tokenRequests(w.fx, "authorization_code"); n != 0 {
				t.Errorf("the code was exchanged %d times", n)
			}
			// Parked: trying again costs nothing.
			mcp := w.fx.MCPTotal()
			if _, err := w.dial(ctx, w.s); err == nil || w.fx.MCPTotal() != mcp || len(w.fx.AuthorizationRequests()) != 1 {
				t.Errorf("after the refusal: %v, %d MCP requests, %d authorization requests", err, w.fx.MCPTotal()-mcp, len(w.fx.AuthorizationRequests()))
			}
		})
	}
}

// TestPreregisteredClient: a configured client is used (no registration),
// authenticating with its secret; one bound to another issuer is refused.
func TestPreregisteredClient(t *testing.T) {
	opts := upstreamauthtest.Options{Clients: map[string]string{"toolgate-desk": "s3cret-" + canary}, NoDCR: true}
	w := newWorld(t, opts, upstreamauth.Config{Headless: true,
		Client: upstreamauth.ClientConfig{ID: "toolgate-desk", Secret: keystore.NewSecretString("s3cret-" + canary)}})
	ctx := testCtx(t)
	c, err := w.dial(ctx, w.s)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	reqs := w.fx.TokenRequests()
	if w.fx.Registrations() != 0 || len(reqs) != 1 || reqs[0].ClientID != "toolgate-desk" || reqs[0].AuthMethod != "client_secret_basic" {
		t.Errorf("registrations %d, token requests %+v", w.fx.Registrations(), reqs)
	}
	w.noCanary(t)

	w2 := newWorld(t, opts, upstreamauth.Config{Headless: true,
		Client: upstreamauth.ClientConfig{ID: "toolgate-desk", Secret: keystore.NewSecretString("x"), Issuer: "https://other.example"}})
	_, err = w2.dial(ctx, w2.s)
	var ae *upstream.AuthRequiredError
	if !errors.As(err, &ae) || ae.Reason != upstream.AuthReasonClientRejected || len(w2.fx.AuthorizationRequests()) != 0 {
		t.Errorf("a client of another issuer: %v", err)
	}
}

// TestClientMetadataDocument: with CIMD supported, the configured document
// URL is the client id, with no registration.
func TestClientMetadataDocument(t *testing.T) {
	const doc = "https://toolgate.example/oauth/client.json"
	w := newWorld(t, upstreamauthtest.Options{CIMD: true}, upstreamauth.Config{Headless: true, Client: upstreamauth.ClientConfig{MetadataURL: doc}})
	ctx := testCtx(t)
	c, err := w.dial(ctx, w.s)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	ar := w.fx.AuthorizationRequests()
	if w.fx.Registrations() != 0 || len(ar) != 1 || ar[0].Query.Get("client_id") != doc {
		t.Errorf("registrations %d, authorization %v", w.fx.Registrations(), ar)
	}
	// Without CIMD at the authorization server, dynamic registration.
	w2 := newWorld(t, upstreamauthtest.Options{}, upstreamauth.Config{Headless: true, Client: upstreamauth.ClientConfig{MetadataURL: doc}})
	if c, err := w2.dial(ctx, w2.s); err != nil || w2.fx.Registrations() != 1 {
		t.Errorf("without CIMD: %v, %d registrations", err, w2.fx.Registrations())
	} else {
		c.Close()
	}
}

// TestClientCredentials: a machine-to-machine server gets its token from the
// client credentials grant (client_secret_basic, or private_key_jwt verified
// by the fixture), with the resource indicator, and renews it the same way.
func TestClientCredentials(t *testing.T) {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	der, _ := x509.MarshalPKCS8PrivateKey(key)
	pemKey := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
	for _, tc := range []struct {
		name   string
		cc     upstreamauth.ClientCredentials
		method string
	}{
		{"basic", upstreamauth.ClientCredentials{ID: "robot", Secret: keystore.NewSecretString("robot-" + canary)}, "client_secret_basic"},
		{"jwt", upstreamauth.ClientCredentials{ID: "robot-jwt", PrivateKey: keystore.NewSecret(pemKey)}, "private_key_jwt"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, upstreamauthtest.Options{Scopes: []string{"read"},
				MachineClients: map[string]string{"robot": "robot-" + canary},
				MachineKeys:    map[string]*ecdsa.PublicKey{"robot-jwt": &key.PublicKey}},
				upstreamauth.Config{ClientCredentials: &tc.cc})
			ctx := testCtx(t)
			c := w.connect(t, ctx, w.s)
			if err := w.call(ctx, c); err != nil {
				t.Fatal(err)
			}
			w.fx.ExpireAccessTokens()
			if err := w.call(ctx, c); err != nil {
				t.Fatal(err)
			}
			reqs := w.fx.TokenRequests()
			if len(reqs) != 2 || reqs[0].GrantType != "client_credentials" || reqs[0].AuthMethod != tc.method || reqs[0].Scope != "read" || reqs[0].Status != 200 {
				t.Errorf("token requests %+v", reqs)
			}
			if len(w.fx.AuthorizationRequests()) != 0 {
				t.Errorf("a machine client made an authorization request")
			}
			everyTokenRequestNamesTheServer(t, w.fx)
			if _, err := w.s.StartLogin(ctx, upstreamauth.LoginOptions{}); err == nil {
				t.Errorf("a person's login for a machine client")
			}
			w.noCanary(t, string(pemKey))
		})
	}
	// A wrong secret parks with client_rejected after one token request.
	w := newWorld(t, upstreamauthtest.Options{MachineClients: map[string]string{"robot": "right"}},
		upstreamauth.Config{ClientCredentials: &upstreamauth.ClientCredentials{ID: "robot", Secret: keystore.NewSecretString("wrong")}})
	ctx := testCtx(t)
	for range 3 {
		_, err := w.dial(ctx, w.s)
		var ae *upstream.AuthRequiredError
		if !errors.As(err, &ae) || ae.Reason != upstream.AuthReasonClientRejected {
			t.Fatalf("wrong secret: %v", err)
		}
	}
	if n := len(w.fx.TokenRequests()); n != 1 {
		t.Errorf("%d token requests with a refused secret, want 1", n)
	}
}

// TestServerMigrates: when the server's metadata names another
// authorization server, the next 401 leads to a registration there; the old
// one's client never reaches it.
func TestServerMigrates(t *testing.T) {
	w := newWorld(t, upstreamauthtest.Options{}, upstreamauth.Config{Headless: true})
	ctx := testCtx(t)
	c := w.connect(t, ctx, w.s)
	second := upstreamauthtest.New(t, upstreamauthtest.Options{Canary: canary})
	second.ServeResource(w.fx)
	w.fx.MoveTo(second.Issuer)
	if err := w.call(ctx, c); err != nil {
		t.Fatal(err)
	}
	if second.Registrations() != 1 || len(second.AuthorizationRequests()) != 1 {
		t.Errorf("at the new authorization server: %d registrations, %d authorizations", second.Registrations(), len(second.AuthorizationRequests()))
	}
	first := w.fx.TokenRequests()[0].ClientID
	for _, r := range second.TokenRequests() {
		if r.ClientID == first {
			t.Errorf("the old authorization server's client reached the new one")
		}
	}
	if st, _ := w.s.Status(ctx); st.Issuer != second.Issuer {
		t.Errorf("status %+v", st)
	}
}
