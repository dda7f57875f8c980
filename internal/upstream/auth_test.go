package upstream_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/toolgate/toolgate/internal/keystore"
	"github.com/toolgate/toolgate/internal/upstream"
	"github.com/toolgate/toolgate/internal/upstream/upstreamtest"
)

// fakeAuth hands out "Bearer tok-N" and, on a challenge, moves to N+1 when
// renew says so.
type fakeAuth struct {
	mu         sync.Mutex
	gen        uint64
	renew      func(ch *upstream.AuthRequiredError, used upstream.Credential) (bool, error)
	failFirst  error
	challenged []*upstream.AuthRequiredError
	accepted   atomic.Int32
}

func (a *fakeAuth) Authorization(context.Context) (upstream.Credential, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.failFirst != nil {
		return upstream.Credential{}, a.failFirst
	}
	return upstream.Credential{Header: keystore.NewSecretString("Bearer tok-" + string(rune('0'+a.gen))), Generation: a.gen}, nil
}

func (a *fakeAuth) Challenged(_ context.Context, ch *upstream.AuthRequiredError, used upstream.Credential) (bool, error) {
	a.mu.Lock()
	a.challenged = append(a.challenged, ch)
	a.mu.Unlock()
	retry, err := a.renew(ch, used)
	if retry {
		a.mu.Lock()
		a.gen++
		a.mu.Unlock()
	}
	return retry, err
}

func (a *fakeAuth) Accepted(upstream.Credential) { a.accepted.Add(1) }

// gatedServer is a stateless server that wants "Bearer tok-<want>".
func gatedServer(t *testing.T, want *atomic.Value, status int, challenge string) *recordingServer {
	inner := upstreamtest.NewStatelessServer(t, nil)
	var gate http.HandlerFunc = func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok-"+want.Load().(string) {
			w.Header().Set("WWW-Authenticate", challenge)
			http.Error(w, "no", status)
			return
		}
		proxy(w, r, inner.URL)
	}
	return wrap(t, gate)
}

func TestAuthorizerAnswersChallenges(t *testing.T) {
	var want atomic.Value
	want.Store("0")
	s := gatedServer(t, &want, http.StatusUnauthorized, `Bearer resource_metadata="https://x.example/prm"`)
	auth := &fakeAuth{renew: func(*upstream.AuthRequiredError, upstream.Credential) (bool, error) { return true, nil }}
	c := dialHTTP(t, upstream.HTTPSpec{URL: s.URL, Auth: auth, Headers: upstream.StaticHeaders{"Authorization": "Bearer configured", "X-Key": "k"}}, upstream.Options{Era: upstream.EraStateless})
	want.Store("1")
	res, err := c.Call(testCtx(t), "tools/call", json.RawMessage(`{"name":"echo","arguments":{"a":"b"}}`))
	if err != nil || !strings.Contains(string(res), `args {\"a\":\"b\"}`) {
		t.Fatalf("call after a renewal: %s %v", res, err)
	}
	if len(auth.challenged) != 1 || auth.challenged[0].StatusCode != 401 || auth.challenged[0].Challenge[0] != `Bearer resource_metadata="https://x.example/prm"` {
		t.Errorf("challenges: %+v", auth.challenged)
	}
	reqs := s.Requests()
	last, prev := reqs[len(reqs)-1], reqs[len(reqs)-2]
	if last.Body != prev.Body || last.Header.Get("Authorization") != "Bearer tok-1" || prev.Header.Get("Authorization") != "Bearer tok-0" {
		t.Errorf("the retry differs: %q %q / %s vs %s", prev.Header.Get("Authorization"), last.Header.Get("Authorization"), prev.Body, last.Body)
	}
	for _, r := range reqs {
		if r.Header.Get("Authorization") == "Bearer configured" || r.Header.Get("X-Key") != "k" {
			t.Errorf("headers %v", r.Header)
		}
	}
	if auth.accepted.Load() < 2 {
		t.Errorf("Accepted told %d times", auth.accepted.Load())
	}
}

func TestAuthorizerRoundsBounded(t *testing.T) {
	var want atomic.Value
	want.Store("never")
	s := gatedServer(t, &want, http.StatusUnauthorized, `Bearer`)
	auth := &fakeAuth{renew: func(*upstream.AuthRequiredError, upstream.Credential) (bool, error) { return true, nil }}
	_, err := upstream.DialHTTP(testCtx(t), upstream.HTTPSpec{URL: s.URL, Auth: auth}, upstream.Options{Era: upstream.EraStateless})
	var ae *upstream.AuthRequiredError
	if !errors.As(err, &ae) || ae.StatusCode != 401 {
		t.Fatalf("dial: %v", err)
	}
	if n := len(s.Requests()); n != 4 {
		t.Errorf("a request refused every time was sent %d times, want 4", n)
	}
	// An Authorizer that gives up is obeyed at once, with its error.
	s2 := gatedServer(t, &want, http.StatusUnauthorized, `Bearer`)
	parked := &upstream.AuthRequiredError{Reason: upstream.AuthReasonLoginRequired, URL: "x"}
	auth2 := &fakeAuth{renew: func(*upstream.AuthRequiredError, upstream.Credential) (bool, error) { return false, parked }}
	if _, err := upstream.DialHTTP(testCtx(t), upstream.HTTPSpec{URL: s2.URL, Auth: auth2}, upstream.Options{Era: upstream.EraStateless}); !errors.As(err, &ae) || ae != parked || len(s2.Requests()) != 1 {
		t.Errorf("dial: %v after %d requests", err, len(s2.Requests()))
	}
	// An Authorizer with nothing to offer costs no request.
	s3 := gatedServer(t, &want, http.StatusUnauthorized, `Bearer`)
	auth3 := &fakeAuth{failFirst: parked}
	if _, err := upstream.DialHTTP(testCtx(t), upstream.HTTPSpec{URL: s3.URL, Auth: auth3}, upstream.Options{}); !errors.As(err, &ae) || len(s3.Requests()) != 0 {
		t.Errorf("parked dial: %v after %d requests", err, len(s3.Requests()))
	}
}

// TestInsufficientScopeKeepsConnection: a 403 insufficient_scope fails the
// call with the scopes asked for, and the connection goes on; a 401 ends it.
func TestInsufficientScopeKeepsConnection(t *testing.T) {
	var want atomic.Value
	want.Store("0")
	var refuseCalls atomic.Bool
	inner := upstreamtest.NewStatelessServer(t, nil)
	s := wrap(t, func(w http.ResponseWriter, r *http.Request) {
		if refuseCalls.Load() && r.Header.Get("Mcp-Method") == "tools/call" {
			w.Header().Set("WWW-Authenticate", `Bearer error="insufficient_scope", scope="files:write files:read"`)
			http.Error(w, "scope", http.StatusForbidden)
			return
		}
		proxy(w, r, inner.URL)
	})
	c := dialHTTP(t, upstream.HTTPSpec{URL: s.URL}, upstream.Options{Era: upstream.EraStateless})
	refuseCalls.Store(true)
	_, err := c.Call(testCtx(t), "tools/call", json.RawMessage(`{"name":"echo"}`))
	var ae *upstream.AuthRequiredError
	if !errors.As(err, &ae) || !ae.InsufficientScope() || strings.Join(ae.Scopes, " ") != "files:write files:read" {
		t.Fatalf("call: %v", err)
	}
	if _, err := c.Call(testCtx(t), "tools/list", nil); err != nil {
		t.Errorf("the connection ended with the call: %v", err)
	}
}

// recordingServer records every request (headers and body) and hands it to
// its handler.
type recordingServer struct {
	URL  string
	mu   sync.Mutex
	reqs []upstreamtest.Request
}

func (s *recordingServer) Requests() []upstreamtest.Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]upstreamtest.Request(nil), s.reqs...)
}

func wrap(t *testing.T, h http.HandlerFunc) *recordingServer {
	s := &recordingServer{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.reqs = append(s.reqs, upstreamtest.Request{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: string(body)})
		s.mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(body))
		h(w, r)
	}))
	t.Cleanup(srv.Close)
	s.URL = srv.URL + "/mcp"
	return s
}

// proxy hands a request on to the server at target.
func proxy(w http.ResponseWriter, r *http.Request, target string) {
	u, _ := url.Parse(target)
	httputil.NewSingleHostReverseProxy(&url.URL{Scheme: u.Scheme, Host: u.Host}).ServeHTTP(w, r)
}
