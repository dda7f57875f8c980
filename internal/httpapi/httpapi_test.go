package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/httpapi"
	"github.com/toolgate/toolgate/internal/kernel"
	"github.com/toolgate/toolgate/internal/kernel/kerneltest"
	"github.com/toolgate/toolgate/internal/mcpspec"
	"github.com/toolgate/toolgate/internal/policy"
)

type env struct {
	k    *kernel.Kernel
	aud  *kerneltest.Audit
	srv  *httptest.Server
	fail bool
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{aud: &kerneltest.Audit{}}
	k, err := kernel.New(kernel.Options{Audit: e.aud, Escalations: &kerneltest.Escalations{}})
	if err != nil {
		t.Fatal(err)
	}
	err = k.Register(&kernel.Tool{ID: "files.read", Description: "read", Annotations: kernel.Annotations{ReadOnly: true},
		InputSchema:  json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`),
		OutputSchema: json.RawMessage(`{"type":"object"}`),
		Access: func(a map[string]any) (kernel.Access, error) {
			return kernel.Access{Action: kernel.ActionRead, Resource: "path:" + a["path"].(string)}, nil
		},
		Run: func(_ context.Context, c *kernel.Call) (*kernel.Output, error) {
			return &kernel.Output{Structured: map[string]any{"who": c.Principal, "path": c.Access.Resource}}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	if err := k.SetGrants([]policy.Grant{{ID: "g1", Principal: "alice", Tool: "files.*", Action: "read", Resource: "path:docs/", Effect: policy.Allow}}); err != nil {
		t.Fatal(err)
	}
	e.k = k
	h, err := httpapi.New(httpapi.Options{
		Authenticate: func(tok string, present bool) (string, bool) {
			switch tok {
			case "tok-alice":
				return "alice", true
			case "tok-bob":
				return "bob", true
			}
			return "", false
		},
		OpenTurn: func(ctx context.Context, p string) (httpapi.Turn, error) {
			if e.fail {
				return nil, errors.New("catalogue too large")
			}
			return k.OpenTurn(ctx, kernel.TurnOptions{Principal: p, Transport: "api"})
		},
		MaxBodyBytes: 1 << 10,
	})
	if err != nil {
		t.Fatal(err)
	}
	e.srv = httptest.NewServer(h)
	t.Cleanup(e.srv.Close)
	return e
}

func (e *env) do(t *testing.T, method, path, token, body string, hdr ...string) (int, http.Header, string) {
	t.Helper()
	req, _ := http.NewRequest(method, e.srv.URL+path, strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Add(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var sb strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		sb.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return resp.StatusCode, resp.Header, sb.String()
}

func TestAuthentication(t *testing.T) {
	e := newEnv(t)
	for _, c := range []struct {
		method, path, token string
		hdr                 []string
	}{
		{"GET", "/v1/tools", "", nil},
		{"GET", "/v1/tools", "wrong", nil},
		{"POST", "/v1/tools/invoke", "", nil},
		{"GET", "/v1/tools", "", []string{"Authorization", "Basic dG9rLWFsaWNlOg=="}},
		{"GET", "/v1/tools", "tok-alice", []string{"Authorization", "Bearer tok-bob"}}, // two headers
	} {
		status, h, body := e.do(t, c.method, c.path, c.token, `{"name":"files.read","arguments":{"path":"docs/a"}}`, c.hdr...)
		if status != 401 || body != `{"error":"unauthorized"}` || h.Get("WWW-Authenticate") != `Bearer realm="toolgate"` {
			t.Errorf("%s %s token %q: %d %q %v", c.method, c.path, c.token, status, body, h)
		}
	}
	if n := len(e.aud.Events()); n != 0 {
		t.Errorf("unauthenticated requests reached the kernel: %d events", n)
	}
}

func TestListIsTheTurnCatalogue(t *testing.T) {
	e := newEnv(t)
	status, _, body := e.do(t, "GET", "/v1/tools", "tok-alice", "")
	if status != 200 {
		t.Fatalf("%d %s", status, body)
	}
	var got mcpspec.ListToolsResult
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatal(err)
	}
	tr, _ := e.k.OpenTurn(context.Background(), kernel.TurnOptions{Principal: "alice", Transport: "stdio"})
	want, _ := tr.ListTools(context.Background())
	if len(got.Tools) != 1 || string(got.Tools[0]) != string(want.Tools[0]) {
		t.Errorf("tools %s, want %s", got.Tools, want.Tools)
	}
	if got.Meta[mcpspec.MetaCatalogHash] != want.CatalogHash || got.Meta[mcpspec.MetaExecutionID] == "" {
		t.Errorf("_meta %v, want hash %s", got.Meta, want.CatalogHash)
	}
	// bob has no grant: an empty list, not an error.
	_, _, body = e.do(t, "GET", "/v1/tools", "tok-bob", "")
	if !strings.HasPrefix(body, `{"tools":[],"_meta":{`) {
		t.Errorf("bob's list %s", body)
	}
}

func TestInvokeIsTheToolCall(t *testing.T) {
	e := newEnv(t)
	status, _, body := e.do(t, "POST", "/v1/tools/invoke", "tok-alice", `{"name":"files.read","arguments":{"path":"docs/x/../a.md"}}`)
	if status != 200 {
		t.Fatalf("%d %s", status, body)
	}
	var res mcpspec.CallResult
	if err := json.Unmarshal([]byte(body), &res); err != nil {
		t.Fatal(err)
	}
	if res.IsError || string(res.StructuredContent) != `{"path":"path:docs/a.md","who":"alice"}` {
		t.Errorf("result %s", body)
	}
	ev := e.aud.Last()
	if ev.Principal != "alice" || ev.Transport != "api" || ev.GrantID != "g1" || ev.Resource != "path:docs/a.md" {
		t.Errorf("audit %+v", ev)
	}
	// Refusals are 200 results, exactly as over MCP.
	for _, c := range []struct{ token, body, code string }{
		{"tok-alice", `{"name":"files.read","arguments":{"path":"docs/../src/x"}}`, "no_matching_grant"},
		{"tok-bob", `{"name":"files.read","arguments":{"path":"docs/a"}}`, "tool_unavailable"},
		{"tok-alice", `{"name":"files.nope"}`, "tool_unavailable"},
		{"tok-alice", `{"name":"files.read","arguments":{}}`, "invalid_arguments"},
		{"tok-alice", `{"name":"files.read"}`, "invalid_arguments"},
	} {
		status, _, body := e.do(t, "POST", "/v1/tools/invoke", c.token, c.body)
		var r mcpspec.CallResult
		json.Unmarshal([]byte(body), &r)
		if status != 200 || !r.IsError || r.Meta["toolgate/code"] != c.code {
			t.Errorf("%s: %d %s, want a %s result", c.body, status, body, c.code)
		}
	}
}

func TestInvokeHostileBodies(t *testing.T) {
	e := newEnv(t)
	before := len(e.aud.Events())
	for _, b := range []string{
		``,
		`nope`,
		`[]`,
		`"files.read"`,
		`{"name":"files.read"} {"name":"x"}`,
		`{"name":"files.read","name":"files.write"}`,
		`{"name":"files.read","NAME":"files.write"}`,
		`{"name":"files.read","arguments":{"path":"docs/a","path":"/etc/passwd"}}`,
		`{"name":"files.read","arguments":{"path":"docs/a","ſ":1,"s":2}}`,
		`{"name":"files.read","arguments":[1]}`,
		`{"name":"files.read","arguments":"x"}`,
		`{"name":"files.read","extra":1}`,
		// Members are matched by their exact names, as tools/call matches them: a
		// lone case variant is an unknown member, not another spelling.
		`{"Name":"files.read"}`,
		`{"NAME":"files.read","arguments":{"path":"docs/a"}}`,
		`{"name":"files.read","Arguments":{"path":"docs/a"}}`,
		`{"name\u0000":"files.read"}`,
		`{"name":""}`,
		`{"name":7}`,
		`{"name":"files.read"},"method":"other"`,
		`{"name":"a` + "\xff" + `"}`,
		strings.Repeat(`{"a":`, 100) + `1` + strings.Repeat(`}`, 100),
	} {
		status, _, body := e.do(t, "POST", "/v1/tools/invoke", "tok-alice", b)
		if status != 400 || !strings.HasPrefix(body, `{"error":"invalid_request","message":`) {
			t.Errorf("body %q: %d %s", b, status, body)
		}
	}
	status, _, body := e.do(t, "POST", "/v1/tools/invoke", "tok-alice", `{"name":"files.read","arguments":{"path":"`+strings.Repeat("a", 2000)+`"}}`)
	if status != 413 || !strings.Contains(body, "request_too_large") {
		t.Errorf("oversized body: %d %s", status, body)
	}
	if n := len(e.aud.Events()); n != before {
		t.Errorf("rejected bodies reached the kernel: %d events", n-before)
	}
}

func TestMethodsAndFailures(t *testing.T) {
	e := newEnv(t)
	if status, h, _ := e.do(t, "POST", "/v1/tools", "tok-alice", "{}"); status != 405 || !strings.Contains(h.Get("Allow"), "GET") {
		t.Errorf("POST /v1/tools: %d allow %q", status, h.Get("Allow"))
	}
	if status, _, _ := e.do(t, "GET", "/v1/tools/invoke", "tok-alice", ""); status != 405 {
		t.Errorf("GET invoke: %d", status)
	}
	if status, _, _ := e.do(t, "GET", "/v1/other", "tok-alice", ""); status != 404 {
		t.Errorf("unknown path: %d", status)
	}
	e.fail = true
	status, _, body := e.do(t, "GET", "/v1/tools", "tok-alice", "")
	if status != 503 || !strings.Contains(body, "catalog_unavailable") || strings.Contains(body, "too large") {
		t.Errorf("failing OpenTurn: %d %s", status, body)
	}
	if _, err := httpapi.New(httpapi.Options{}); err == nil {
		t.Errorf("New without Authenticate succeeded")
	}
}

// A result another server wrote (passed through by a forwarding tool) is the invoke's
// body as it was written.
func TestInvokePassesARawResultThrough(t *testing.T) {
	raw := `{"content":[{"type":"text","text":"<hi>","z":1.50}],"isError":false,"x-upstream":{"b":1,"a":2}}`
	k, err := kernel.New(kernel.Options{Audit: &kerneltest.Audit{}, Escalations: &kerneltest.Escalations{}})
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Register(&kernel.Tool{ID: "up.echo", InputSchema: json.RawMessage(`{"type":"object"}`),
		Run: func(context.Context, *kernel.Call) (*kernel.Output, error) {
			return &kernel.Output{Result: json.RawMessage(raw)}, nil
		}}); err != nil {
		t.Fatal(err)
	}
	if err := k.SetGrants([]policy.Grant{{ID: "g", Principal: "alice", Tool: "up.*", Action: "*", Effect: policy.Allow}}); err != nil {
		t.Fatal(err)
	}
	h, err := httpapi.New(httpapi.Options{
		Authenticate: func(tok string, present bool) (string, bool) { return "alice", tok == "tok-alice" },
		OpenTurn: func(ctx context.Context, p string) (httpapi.Turn, error) {
			return k.OpenTurn(ctx, kernel.TurnOptions{Principal: p, Transport: "api"})
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	e := &env{srv: srv}
	status, hdr, body := e.do(t, "POST", "/v1/tools/invoke", "tok-alice", `{"name":"up.echo"}`)
	if status != 200 || body != raw || hdr.Get("Content-Type") != "application/json" || hdr.Get("Cache-Control") != "no-store" {
		t.Errorf("%d %v\n got %s\nwant %s", status, hdr, body, raw)
	}
}
