package upstreamauthtest

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestFixtureIsStrict: the tests that pass against the fixture mean
// something only if it refuses what a wrong client sends. Each token request
// here breaks one rule and must be refused.
func TestFixtureIsStrict(t *testing.T) {
	f := New(t, Options{})
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	register := func() string {
		resp, err := http.Post(f.Issuer+"/register", "application/json",
			strings.NewReader(`{"redirect_uris":["http://127.0.0.1:9/callback"],"token_endpoint_auth_method":"none","application_type":"native"}`))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var r struct {
			ClientID string `json:"client_id"`
		}
		json.NewDecoder(resp.Body).Decode(&r)
		return r.ClientID
	}
	client := register()
	verifier := "a-verifier-of-enough-length-0123456789abcdefghijkl"
	sum := sha256.Sum256([]byte(verifier))
	code := func(resource string) string {
		q := url.Values{"response_type": {"code"}, "client_id": {client}, "redirect_uri": {"http://127.0.0.1:9/callback"},
			"state": {"s"}, "code_challenge": {base64.RawURLEncoding.EncodeToString(sum[:])}, "code_challenge_method": {"S256"}, "resource": {resource}}
		resp, err := noFollow.Get(f.Issuer + "/authorize?" + q.Encode())
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		loc, _ := url.Parse(resp.Header.Get("Location"))
		return loc.Query().Get("code")
	}
	exchange := func(form url.Values) (int, string) {
		resp, err := http.PostForm(f.Issuer+"/token", form)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var e struct {
			Error string `json:"error"`
		}
		json.NewDecoder(resp.Body).Decode(&e)
		return resp.StatusCode, e.Error
	}
	form := func(c, v, redirect, resource string) url.Values {
		return url.Values{"grant_type": {"authorization_code"}, "code": {c}, "client_id": {client}, "code_verifier": {v},
			"redirect_uri": {redirect}, "resource": {resource}}
	}
	if c := code("https://elsewhere.example/mcp"); c != "" {
		t.Errorf("a code for another resource was issued")
	}
	for name, tc := range map[string]struct {
		form url.Values
		want string
	}{
		"wrong verifier": {form(code(f.URL), verifier+"x", "http://127.0.0.1:9/callback", f.URL), "invalid_grant"},
		"wrong redirect": {form(code(f.URL), verifier, "http://127.0.0.1:8/callback", f.URL), "invalid_grant"},
		"no resource":    {form(code(f.URL), verifier, "http://127.0.0.1:9/callback", ""), "invalid_target"},
	} {
		if status, e := exchange(tc.form); status != http.StatusBadRequest || e != tc.want {
			t.Errorf("%s: %d %s, want 400 %s", name, status, e, tc.want)
		}
	}
	good := form(code(f.URL), verifier, "http://127.0.0.1:9/callback", f.URL)
	if status, e := exchange(good); status != http.StatusOK {
		t.Fatalf("a correct exchange: %d %s", status, e)
	}
	if status, e := exchange(good); status != http.StatusBadRequest || e != "invalid_grant" {
		t.Errorf("a code used twice: %d %s", status, e)
	}
}
