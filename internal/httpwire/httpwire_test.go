package httpwire_test

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/httpwire"
)

var table = map[string]httpwire.Refusal{
	"NotFound": httpwire.NotFound, "MethodNotAllowed": httpwire.MethodNotAllowed, "Unauthorized": httpwire.Unauthorized,
	"UnknownSession": httpwire.UnknownSession, "ForbiddenHost": httpwire.ForbiddenHost, "ForbiddenOrigin": httpwire.ForbiddenOrigin,
	"UnsupportedMediaType": httpwire.UnsupportedMediaType, "TooLarge": httpwire.TooLarge, "BadProtocolVersion": httpwire.BadProtocolVersion,
	"MissingSession": httpwire.MissingSession, "InvalidRequest": httpwire.InvalidRequest, "TooManySessions": httpwire.TooManySessions,
	"CatalogUnavailable": httpwire.CatalogUnavailable, "TooManyRequests": httpwire.TooManyRequests, "Internal": httpwire.Internal,
}

// Each code means one thing, and every code is documented where its surfaces are.
func TestTableIsDocumented(t *testing.T) {
	var docs strings.Builder
	for _, f := range []string{"http-contract.md", "kernel.md"} {
		b, err := os.ReadFile(filepath.Join("..", "..", "docs", f))
		if err != nil {
			t.Fatal(err)
		}
		docs.Write(b)
	}
	seen := map[string]string{}
	for name, r := range table {
		if r.Code == "" {
			continue
		}
		if prev, dup := seen[r.Code]; dup {
			t.Errorf("%s and %s share the code %q", prev, name, r.Code)
		}
		seen[r.Code] = name
		if !strings.Contains(docs.String(), `{"error":"`+r.Code+`"`) {
			t.Errorf("%s (%d %q) is in no document", name, r.Status, r.Code)
		}
	}
}

func TestWrite(t *testing.T) {
	for _, c := range []struct {
		r       httpwire.Refusal
		msg     string
		body    string
		headers map[string]string
	}{
		{httpwire.Unauthorized, "", `{"error":"unauthorized"}`, map[string]string{"WWW-Authenticate": `Bearer realm="toolgate"`, "Content-Type": "application/json"}},
		{httpwire.MethodNotAllowed, "", `{"error":"method_not_allowed"}`, map[string]string{"Allow": "POST, DELETE"}},
		{httpwire.InvalidRequest, `name is "<x>"`, `{"error":"invalid_request","message":"name is \"\u003cx\u003e\""}`, nil},
		{httpwire.NotFound, "", ``, map[string]string{"Content-Type": ""}},
	} {
		rec := httptest.NewRecorder()
		httpwire.Write(rec, c.r, c.msg)
		if rec.Code != c.r.Status || rec.Body.String() != c.body {
			t.Errorf("%v: %d %q, want %d %q", c.r, rec.Code, rec.Body, c.r.Status, c.body)
		}
		for k, v := range c.headers {
			if got := rec.Header().Get(k); got != v {
				t.Errorf("%v: %s %q, want %q", c.r, k, got, v)
			}
		}
	}
	rec := httptest.NewRecorder()
	httpwire.WriteRetry(rec, httpwire.TooManySessions, 1500*time.Millisecond)
	if rec.Code != 503 || rec.Header().Get("Retry-After") != "2" {
		t.Errorf("WriteRetry: %d Retry-After %q", rec.Code, rec.Header().Get("Retry-After"))
	}
	rec = httptest.NewRecorder()
	httpwire.WriteRetry(rec, httpwire.TooManyRequests, 0)
	if rec.Header().Get("Retry-After") != "1" {
		t.Errorf("WriteRetry(0): Retry-After %q, want 1", rec.Header().Get("Retry-After"))
	}
}

// The bearer token is read from one Authorization header, never elsewhere.
func TestBearer(t *testing.T) {
	for _, c := range []struct {
		headers        []string
		url            string
		token          string
		present, valid bool
	}{
		{nil, "/", "", false, true},
		{[]string{"Bearer abc"}, "/", "abc", true, true},
		{[]string{"bearer  abc "}, "/", "abc", true, true},
		{[]string{"Basic YTpi"}, "/", "", true, false},
		{[]string{"Bearer"}, "/", "", true, false},
		{[]string{"Bearer   "}, "/", "", true, false},
		{[]string{"Bearer a", "Bearer b"}, "/", "", true, false},
		{nil, "/?access_token=abc&token=abc", "", false, true},
	} {
		r := httptest.NewRequest("GET", c.url, nil)
		r.Header.Set("X-Control-Token", "abc")
		for _, h := range c.headers {
			r.Header.Add("Authorization", h)
		}
		tok, present, ok := httpwire.Bearer(r)
		if tok != c.token || present != c.present || ok != c.valid {
			t.Errorf("%q %s: %q %v %v, want %q %v %v", c.headers, c.url, tok, present, ok, c.token, c.present, c.valid)
		}
	}
}

func TestStatelessStatus(t *testing.T) {
	for code, want := range map[int64]int{-32601: 404, -32602: 400, -32600: 400, -32700: 400, -32020: 400, -32021: 400, -32022: 400, -32603: 200, 1: 200} {
		if got := httpwire.StatelessStatus(code); got != want {
			t.Errorf("StatelessStatus(%d) = %d, want %d", code, got, want)
		}
	}
}

func TestReadBody(t *testing.T) {
	for _, c := range []struct {
		body    string
		length  int64 // -1: chunked
		tooBig  bool
		wantErr bool
	}{
		{"0123456789", 10, false, false},
		{"0123456789", -1, false, false},
		{"0123456789a", 11, true, true},
		{"0123456789a", -1, true, true},
	} {
		r := httptest.NewRequest("POST", "/", strings.NewReader(c.body))
		r.ContentLength = c.length
		got, err := httpwire.ReadBody(httptest.NewRecorder(), r, 10)
		if (err != nil) != c.wantErr || httpwire.IsTooLarge(err) != c.tooBig || (err == nil && string(got) != c.body) {
			t.Errorf("%q (length %d): %q %v", c.body, c.length, got, err)
		}
	}
	if httpwire.IsTooLarge(http.ErrBodyNotAllowed) {
		t.Error("IsTooLarge of another error")
	}
}
