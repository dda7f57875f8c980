package mgmt_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/mgmt"
	"github.com/toolgate/toolgate/internal/mgmt/mgmttest"
)

// post serves one POST body through the serve stack and returns status and body.
func post(t *testing.T, h http.Handler, token, body string) (int, string) {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, mgmt.Path, strings.NewReader(body))
	req.Host = "127.0.0.1:7077"
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code, rec.Body.String()
}

// errorOf decodes an error answer's code and data.
func errorOf(t *testing.T, body string) (code string, field string) {
	t.Helper()
	var a struct {
		Error *struct {
			Data struct {
				Code  string `json:"code"`
				Field string `json:"field"`
			} `json:"data"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &a); err != nil || a.Error == nil {
		t.Fatalf("not an error answer: %s", body)
	}
	return a.Error.Data.Code, a.Error.Data.Field
}

// Every param of every method refuses a value of the wrong type (null included), and
// every method refuses a member it does not take, naming it.
func TestParamsWrongTypesAndUnknownMembers(t *testing.T) {
	stack, _ := serveStack(t, mgmttest.NewSeeded(), mgmt.Options{})
	methods := map[string]map[string]string{ // method → param → a valid value
		mgmt.MethodList:      {"workspace_id": `"ws_000000000000000001"`},
		mgmt.MethodInstall:   {"workspace_id": `"ws_000000000000000001"`, "scope_kind": `"workspace"`, "config_json": `"{}"`, "enabled": "true", "allow_implicit_invocation": "false"},
		mgmt.MethodPolicySet: {"workspace_id": `"ws_000000000000000001"`, "scope_kind": `"workspace"`, "name": `"filesystem"`, "enabled": "true", "allow_implicit_invocation": "false"},
		mgmt.MethodRestart:   {"workspace_id": `"ws_000000000000000001"`, "scope_kind": `"workspace"`, "name": `"filesystem"`},
		mgmt.MethodUninstall: {"workspace_id": `"ws_000000000000000001"`, "scope_kind": `"workspace"`, "name": `"filesystem"`},
		mgmt.MethodDetails:   {"workspace_id": `"ws_000000000000000001"`, "scope_kind": `"workspace"`, "name": `"filesystem"`},
	}
	wrong := []string{"null", "1", "[]", "{}", `"true"`, "false"}
	for method, params := range methods {
		for name, valid := range params {
			for _, bad := range wrong {
				if bad == valid || (bad == "false" && (valid == "true" || valid == "false")) || (bad == `"true"` && valid[0] == '"') {
					continue
				}
				var members []string
				for n, v := range params {
					if n == name {
						v = bad
					}
					members = append(members, fmt.Sprintf("%q:%s", n, v))
				}
				body := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":%q,"params":{%s}}`, method, strings.Join(members, ","))
				status, answer := post(t, stack, ownerToken, body)
				code, field := errorOf(t, answer)
				if status != 200 || code != mgmt.CodeInvalidParams || field != name {
					t.Errorf("%s with %s=%s: HTTP %d, %s field %q; want invalid_params field %q", method, name, bad, status, code, field, name)
				}
			}
		}
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":%q,"params":{"workspace_ID":"x"}}`, method)
		if _, answer := post(t, stack, ownerToken, body); !strings.Contains(answer, `"field":"workspace_ID"`) {
			t.Errorf("%s with an unknown member: %s", method, answer)
		}
	}
}

// A body over the cap is refused 413 whether or not it declares its length; one that
// declares a length over the cap is refused before any of it is read.
func TestBodyCaps(t *testing.T) {
	stack, _ := serveStack(t, mgmttest.NewSeeded(), mgmt.Options{MaxBodyBytes: 1024})
	big := `{"jsonrpc":"2.0","id":1,"method":"mcp/install","params":{"config_json":"` + strings.Repeat("a", 4096) + `"}}`

	declared := &countingReader{r: strings.NewReader(big)}
	req := httptest.NewRequest(http.MethodPost, mgmt.Path, declared)
	req.ContentLength = int64(len(big))
	req.Host = "127.0.0.1:7077"
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+ownerToken)
	rec := httptest.NewRecorder()
	stack.ServeHTTP(rec, req)
	if rec.Code != http.StatusRequestEntityTooLarge || declared.n != 0 {
		t.Fatalf("declared length over the cap: HTTP %d after reading %d bytes", rec.Code, declared.n)
	}

	chunked := &countingReader{r: strings.NewReader(big)}
	req = httptest.NewRequest(http.MethodPost, mgmt.Path, chunked)
	req.ContentLength = -1
	req.Host = "127.0.0.1:7077"
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+ownerToken)
	rec = httptest.NewRecorder()
	stack.ServeHTTP(rec, req)
	if rec.Code != http.StatusRequestEntityTooLarge || chunked.n > 1024+512 {
		t.Fatalf("chunked body over the cap: HTTP %d after reading %d bytes", rec.Code, chunked.n)
	}
	if code, _ := errorOf(t, rec.Body.String()); code != mgmt.CodeTooLarge {
		t.Fatalf("code %s", code)
	}
}

type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

// An unauthenticated or non-admin caller costs the server no body read: the body is
// never touched.
func TestRefusedBeforeBodyIsRead(t *testing.T) {
	fake := mgmttest.NewSeeded()
	stack, _ := serveStack(t, fake, mgmt.Options{})
	for token, want := range map[string]int{"": 401, "bad": 401, readerToken: 403} {
		body := &countingReader{r: strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"mcp/uninstall","params":{"name":"filesystem"}}`)}
		req := httptest.NewRequest(http.MethodPost, mgmt.Path, body)
		req.Host = "127.0.0.1:7077"
		req.Header.Set("Content-Type", "application/json")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		rec := httptest.NewRecorder()
		stack.ServeHTTP(rec, req)
		if rec.Code != want || body.n != 0 {
			t.Errorf("token %q: HTTP %d after reading %d bytes, want %d and none", token, rec.Code, body.n, want)
		}
	}
	// Two Authorization headers are two readings of one request: refused.
	req := httptest.NewRequest(http.MethodPost, mgmt.Path, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"mcp/list"}`))
	req.Host = "127.0.0.1:7077"
	req.Header.Set("Content-Type", "application/json")
	req.Header.Add("Authorization", "Bearer "+ownerToken)
	req.Header.Add("Authorization", "Bearer "+readerToken)
	rec := httptest.NewRecorder()
	stack.ServeHTTP(rec, req)
	if rec.Code != 401 {
		t.Errorf("two Authorization headers: HTTP %d", rec.Code)
	}
	if n := len(fake.Calls()); n != 0 {
		t.Fatalf("refused callers reached the manager %d times", n)
	}
}

// Nesting beyond rpcwire's limit is a parse error, decided before anything is built.
func TestDeepNesting(t *testing.T) {
	stack, _ := serveStack(t, mgmttest.NewSeeded(), mgmt.Options{})
	body := `{"jsonrpc":"2.0","id":1,"method":"mcp/list","params":{"workspace_id":` + strings.Repeat("[", 100) + strings.Repeat("]", 100) + `}}`
	status, answer := post(t, stack, ownerToken, body)
	if code, _ := errorOf(t, answer); status != 400 || code != mgmt.CodeParseError {
		t.Fatalf("HTTP %d %s", status, answer)
	}
}

// The caller's identity reaches the Manager as authenticated, and Checked's defaults
// are applied before it: the Manager sees scope_kind "workspace" for an install that
// named none.
func TestCallerAndDefaultsReachManager(t *testing.T) {
	fake := mgmttest.New()
	stack, _ := serveStack(t, fake, mgmt.Options{})
	post(t, stack, adminToken, `{"jsonrpc":"2.0","id":1,"method":"mcp/install","params":{"config_json":"{\"mcpServers\":{\"a\":{\"command\":\"x\"}}}"}}`)
	calls := fake.Calls()
	if len(calls) != 1 {
		t.Fatalf("calls: %+v", calls)
	}
	p := calls[0].Params.(mgmt.InstallParams)
	if calls[0].Caller != (mgmt.Caller{Principal: "ops"}) || p.ScopeKind != mgmt.ScopeWorkspace || !p.EnabledValue() || p.ImplicitValue() {
		t.Fatalf("call: %+v params %+v", calls[0], p)
	}
}

// failing is a Manager whose every method fails as configured.
type failing struct {
	*mgmttest.Manager
	err   error
	panic bool
}

func (f *failing) List(context.Context, mgmt.Caller, mgmt.ListParams) (*mgmt.ListResult, error) {
	if f.panic {
		panic("boom: /home/someone/secret-path")
	}
	return nil, f.err
}

// A Manager's own errors are answered by their code; any other error, a nil answer or
// a panic is internal_error whose message says nothing of the cause (it goes to the
// log only).
func TestManagerFailures(t *testing.T) {
	for _, c := range []struct {
		name     string
		f        *failing
		wantCode string
		wantMsg  string
	}{
		{"mgmt error wrapped", &failing{err: fmt.Errorf("resolving: %w", mgmt.Errorf(mgmt.CodeUnavailable, "unavailable: the store is closing"))}, mgmt.CodeUnavailable, "unavailable: the store is closing"},
		{"plain error", &failing{err: errors.New("open /home/someone/secret-path: permission denied")}, mgmt.CodeInternal, "internal error"},
		{"unknown code", &failing{err: &mgmt.Error{Code: "made_up", Message: "/home/someone/secret-path"}}, mgmt.CodeInternal, "internal error"},
		{"nil result", &failing{}, mgmt.CodeInternal, "internal error"},
		{"panic", &failing{panic: true}, mgmt.CodeInternal, "internal error"},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.f.Manager = mgmttest.New()
			var logs bytes.Buffer
			stack, _ := serveStack(t, c.f, mgmt.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			status, answer := post(t, stack, ownerToken, `{"jsonrpc":"2.0","id":1,"method":"mcp/list"}`)
			code, _ := errorOf(t, answer)
			if status != 200 || code != c.wantCode || !strings.Contains(answer, `"message":"`+c.wantMsg+`"`) {
				t.Fatalf("HTTP %d %s", status, answer)
			}
			if c.wantCode == mgmt.CodeInternal && strings.Contains(answer, "secret-path") {
				t.Fatalf("the cause leaked into the answer: %s", answer)
			}
			if c.wantCode == mgmt.CodeInternal && c.name != "nil result" && !strings.Contains(logs.String(), "secret-path") {
				t.Fatalf("the cause is not in the log: %s", logs.String())
			}
		})
	}
}
