package netguard

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// seen records the requests a test server received.
type seen struct {
	mu   sync.Mutex
	reqs []*http.Request
}

func (s *seen) add(r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reqs = append(s.reqs, r)
}

func (s *seen) all() []*http.Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*http.Request(nil), s.reqs...)
}

// servers starts two loopback HTTP servers reached through two names, home.test and
// other.test (the fake resolver maps both to 127.0.0.1): two origins, no traffic off
// the machine.
func servers(t *testing.T, home http.HandlerFunc) (homeURL, otherURL string, homeSeen, otherSeen *seen, res *fakeResolver) {
	t.Helper()
	homeSeen, otherSeen = &seen{}, &seen{}
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		homeSeen.add(r)
		home(w, r)
	}))
	os := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		otherSeen.add(r)
		io.WriteString(w, "other")
	}))
	t.Cleanup(hs.Close)
	t.Cleanup(os.Close)
	_, hp, _ := net.SplitHostPort(hs.Listener.Addr().String())
	_, op, _ := net.SplitHostPort(os.Listener.Addr().String())
	res = newResolver(map[string][]string{"home.test": {"127.0.0.1"}, "other.test": {"127.0.0.1"}})
	return "http://home.test:" + hp, "http://other.test:" + op, homeSeen, otherSeen, res
}

// testPolicy reaches loopback through the test names over plain http.
var testPolicy = Policy{Loopback: LoopbackAllow, InsecureHTTP: true}

func secretHeaders(context.Context) (http.Header, error) {
	return http.Header{"X-Api-Key": {"SECRET-KEY"}, "Authorization": {"Bearer SECRET-TOKEN"}}, nil
}

func get(t *testing.T, c *http.Client, url string, hdr map[string]string) (string, error) {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b), nil
}

func noSecrets(t *testing.T, where string, reqs []*http.Request) {
	t.Helper()
	for _, r := range reqs {
		for k, vs := range r.Header {
			for _, v := range vs {
				if strings.Contains(v, "SECRET") {
					t.Errorf("%s received %s: %s", where, k, v)
				}
			}
		}
	}
}

func TestClientHeadersAndRedirects(t *testing.T) {
	var otherURL string
	homeURL, otherURL, homeSeen, otherSeen, res := servers(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/same":
			http.Redirect(w, r, "/final", http.StatusTemporaryRedirect)
		case "/away":
			http.Redirect(w, r, otherURL+"/landed", http.StatusTemporaryRedirect)
		case "/metadata":
			http.Redirect(w, r, "http://169.254.169.254/latest/meta-data/", http.StatusFound)
		case "/metadata-name":
			http.Redirect(w, r, "http://metadata.google.internal/", http.StatusFound)
		case "/decimal":
			http.Redirect(w, r, "http://2852039166/", http.StatusFound)
		case "/file":
			http.Redirect(w, r, "file:///etc/passwd", http.StatusFound)
		case "/loop":
			http.Redirect(w, r, "/loop", http.StatusFound)
		default:
			io.WriteString(w, "home "+r.Header.Get("X-Api-Key"))
		}
	})
	g := NewGuard(testPolicy, res)
	newClient := func(r Redirects) *http.Client {
		c, err := NewClient(g, ClientOptions{URL: homeURL + "/mcp", Redirects: r, HeaderNames: []string{"x-api-key", "Authorization"}, Headers: secretHeaders})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	same := newClient(RedirectSameOrigin)

	// Configured headers go to the origin, after a same-origin redirect too.
	if body, err := get(t, same, homeURL+"/same", nil); err != nil || body != "home SECRET-KEY" {
		t.Fatalf("same-origin redirect: %q, %v", body, err)
	}
	// Another origin: refused; the other server never hears of it.
	_, err := get(t, same, homeURL+"/away", nil)
	var re *RedirectError
	if !errors.As(err, &re) || !strings.Contains(err.Error(), "leaves the server's origin") {
		t.Fatalf("cross-origin redirect: %v", err)
	}
	if n := len(otherSeen.all()); n != 0 {
		t.Fatalf("the other origin received %d requests", n)
	}
	// A request the caller sends to another origin itself gets no configured header,
	// even one the caller set on it.
	if body, err := get(t, same, otherURL+"/direct", map[string]string{"X-Api-Key": "SECRET-CALLER", "Authorization": "Bearer SECRET-CALLER"}); err != nil || body != "other" {
		t.Fatalf("direct request to the other origin: %q %v", body, err)
	}
	noSecrets(t, "the other origin", otherSeen.all())

	// Cross-origin allowed: followed, without any secret.
	cross := newClient(RedirectCrossOrigin)
	if body, err := get(t, cross, homeURL+"/away", map[string]string{"Cookie": "session=SECRET-COOKIE", "Authorization": "Bearer SECRET-CALLER"}); err != nil || body != "other" {
		t.Fatalf("allowed cross-origin redirect: %q, %v", body, err)
	}
	noSecrets(t, "the other origin", otherSeen.all())
	if got := otherSeen.all(); len(got) != 2 || got[1].URL.Path != "/landed" {
		t.Fatalf("other origin saw %d requests", len(got))
	}

	// Whatever the policy, a redirect is validated like a configured URL, and refused
	// before anything is dialled.
	for _, path := range []string{"/metadata", "/metadata-name", "/decimal", "/file"} {
		if _, err := get(t, cross, homeURL+path, nil); !errors.As(err, &re) {
			t.Errorf("redirect %s: %v, want a refused redirect", path, err)
		}
	}
	res.mu.Lock()
	for host := range res.calls {
		if host != "home.test" && host != "other.test" {
			t.Errorf("the resolver was asked for %s", host)
		}
	}
	res.mu.Unlock()
	if _, err := get(t, same, homeURL+"/loop", nil); !errors.As(err, &re) || !strings.Contains(err.Error(), "more than 10 redirects") {
		t.Errorf("redirect loop: %v", err)
	}
	none := newClient(RedirectNone)
	if _, err := get(t, none, homeURL+"/same", nil); !errors.As(err, &re) {
		t.Errorf("RedirectNone followed a redirect: %v", err)
	}
	noSecrets(t, "the other origin", otherSeen.all())
	for _, r := range homeSeen.all() {
		if r.Header.Get("X-Api-Key") != "SECRET-KEY" {
			t.Errorf("a request to the origin (%s) lacked its configured header", r.URL.Path)
		}
	}
}

func TestClientRefusesBeforeDialing(t *testing.T) {
	homeURL, _, _, _, res := servers(t, func(w http.ResponseWriter, r *http.Request) {})
	g, dialled := recordingGuard(testPolicy, res)
	c, err := NewClient(g, ClientOptions{URL: homeURL})
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{"http://169.254.169.254/", "http://[::ffff:a9fe:a9fe]/", "http://0251.0376.0251.0376/", "http://metadata.google.internal/", "ftp://home.test/", "http://１６９．２５４．１６９．２５４/"} {
		if _, err := get(t, c, u, nil); err == nil {
			t.Errorf("%s: no error", u)
		}
	}
	if len(*dialled) != 0 || res.lookups() != 0 {
		t.Errorf("hostile URLs dialled %v after %d lookups", *dialled, res.lookups())
	}
	if _, err := NewClient(g, ClientOptions{URL: "https://169.254.169.254/"}); !errors.Is(err, ErrDenied) {
		t.Errorf("NewClient for a denied URL: %v", err)
	}
}

func TestClientHeaderErrors(t *testing.T) {
	homeURL, _, homeSeen, _, res := servers(t, func(w http.ResponseWriter, r *http.Request) {})
	g := NewGuard(testPolicy, res)
	undeclared, _ := NewClient(g, ClientOptions{URL: homeURL, HeaderNames: []string{"X-A"},
		Headers: func(context.Context) (http.Header, error) { return http.Header{"X-B": {"SECRET"}}, nil }})
	if _, err := get(t, undeclared, homeURL, nil); err == nil || !strings.Contains(err.Error(), "not one of the server's configured headers") {
		t.Errorf("undeclared header: %v", err)
	}
	failing, _ := NewClient(g, ClientOptions{URL: homeURL, HeaderNames: []string{"X-A"},
		Headers: func(context.Context) (http.Header, error) { return nil, errors.New("keystore locked") }})
	if _, err := get(t, failing, homeURL, nil); err == nil || !strings.Contains(err.Error(), "keystore locked") {
		t.Errorf("header source failure: %v", err)
	}
	if n := len(homeSeen.all()); n != 0 {
		t.Errorf("%d requests were sent without their headers", n)
	}
}

// TestNoEnvironmentProxy: a proxy from the environment would make the address
// connected to the proxy's; the transport ignores it.
func TestNoEnvironmentProxy(t *testing.T) {
	proxy := listen(t)
	t.Setenv("HTTP_PROXY", "http://"+proxy.Addr().String())
	t.Setenv("HTTPS_PROXY", "http://"+proxy.Addr().String())
	homeURL, _, homeSeen, _, res := servers(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	c, err := NewClient(NewGuard(testPolicy, res), ClientOptions{URL: homeURL})
	if err != nil {
		t.Fatal(err)
	}
	if body, err := get(t, c, homeURL, nil); err != nil || body != "ok" {
		t.Fatalf("get: %q %v", body, err)
	}
	if len(homeSeen.all()) != 1 {
		t.Fatal("the request did not reach the server")
	}
	settle(t, proxy, 0)
}

// TestRebindingThroughTheClient: with keep-alives off every request dials; the name
// first resolves to the server, then to the metadata address, and the second request
// is refused at dial time.
func TestRebindingThroughTheClient(t *testing.T) {
	homeURL, _, homeSeen, _, res := servers(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	res.answers["home.test"] = [][]string{{"127.0.0.1"}, {"169.254.169.254"}}
	g := NewGuard(testPolicy, res)
	tr := NewTransport(g)
	tr.DisableKeepAlives = true
	c, err := NewClient(g, ClientOptions{URL: homeURL, Transport: tr})
	if err != nil {
		t.Fatal(err)
	}
	if body, err := get(t, c, homeURL, nil); err != nil || body != "ok" {
		t.Fatalf("first request: %q %v", body, err)
	}
	if _, err := get(t, c, homeURL, nil); !errors.Is(err, ErrDenied) {
		t.Fatalf("second request after rebinding: %v", err)
	}
	if n := len(homeSeen.all()); n != 1 {
		t.Fatalf("server saw %d requests", n)
	}
}
