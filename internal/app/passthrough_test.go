package app_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/app"
	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/mcpserver"
	"github.com/toolgate/toolgate/internal/upstream/upstreamtest"
	"github.com/toolgate/toolgate/internal/upstream/upstreamtest/fixturedata"
)

// everythingWorld is an App hosting the go-sdk's conformance server as upstream
// "everything" over stdio, its catalogue published; the upstream's requests to the
// client reach the caller of the call they belong to.
func everythingWorld(t *testing.T) *upstreamWorld {
	t.Helper()
	spec, marker := upstreamtest.EverythingSpec(t)
	w := &upstreamWorld{markers: map[string]string{spec.Name: marker}}
	w.open(t, upstreamtest.Dialer{ToClient: true}.Host(spec), nil)
	w.sync(t, spec.Name, true, true)
	return w
}

// serverBridge is what `toolgate bridge --no-auth --server NAME` serves: one turn
// narrowed to the server's tools under their raw names, on a loopback bridge.
func serverBridge(t *testing.T, w *upstreamWorld, server string) *mcpserver.Bridge {
	t.Helper()
	tr, err := w.a.OpenTurn(context.Background(), app.TurnRequest{Transport: "bridge",
		Capabilities: []string{server + ".*"}, Namer: w.a.RawNamer(server)})
	if err != nil {
		t.Fatal(err)
	}
	b, err := mcpserver.NewBridge(tr, mcpserver.BridgeOptions{ServerInfo: app.ServerInfo(), Instructions: app.Instructions})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// awkwardWorld hosts the stdio fixture as "fx" answering the item methods with
// fixturedata's awkward JSON.
func awkwardWorld(t *testing.T) *upstreamWorld {
	t.Helper()
	caps := strings.TrimSuffix(fixturedata.Capabilities, "}") + `,"completions":{}}`
	spec, marker := upstreamtest.Spec(t, "-awkward-items", "-caps", caps)
	spec.Name = "fx"
	w := &upstreamWorld{markers: map[string]string{"fx": marker}}
	w.open(t, upstreamtest.NewHost(spec), nil)
	w.sync(t, "fx", true, true)
	return w
}

// rpc posts one JSON-RPC message to a bridge (in the 2026-07-28 revision when modern)
// and returns the answer's result or error bytes.
func rpc(t *testing.T, url string, modern bool, method, params string) (result, rpcErr string) {
	t.Helper()
	caps := ""
	if modern {
		caps = "{}"
	}
	return rpcAs(t, url, caps, method, params)
}

// rpcAs is rpc for a 2026-07-28 request declaring the client capabilities caps (a
// legacy one when caps is empty).
func rpcAs(t *testing.T, url, caps, method, params string) (result, rpcErr string) {
	t.Helper()
	modern := caps != ""
	if modern {
		meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":` + caps + `}`
		if params == "" || params == "{}" {
			params = "{" + meta + "}"
		} else {
			params = strings.TrimSuffix(params, "}") + "," + meta + "}"
		}
	}
	body := `{"jsonrpc":"2.0","id":7,"method":"` + method + `"`
	if params != "" {
		body += `,"params":` + params
	}
	body += "}"
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if modern {
		req.Header.Set("MCP-Protocol-Version", "2026-07-28")
		req.Header.Set("Mcp-Method", method)
		var p struct{ Name, URI string }
		json.Unmarshal([]byte(params), &p)
		if p.Name != "" {
			req.Header.Set("Mcp-Name", p.Name)
		} else if p.URI != "" {
			req.Header.Set("Mcp-Name", p.URI)
		}
	} else {
		req.Header.Set("MCP-Protocol-Version", "2025-06-18")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var env struct {
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	data := sseData(b)
	if err := json.Unmarshal(data, &env); err != nil {
		t.Fatalf("%s: not a JSON-RPC answer (%d): %s", method, resp.StatusCode, b)
	}
	// The result's own bytes, cut from the answer (Unmarshal into RawMessage keeps
	// them, but check against the raw answer too).
	if env.Result != nil && !strings.Contains(string(data), string(env.Result)) {
		t.Fatalf("%s: result bytes not found in the answer", method)
	}
	return string(env.Result), string(env.Error)
}

func initialize(t *testing.T, url string) string {
	t.Helper()
	res, e := rpc(t, url, false, "initialize", `{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}`)
	if e != "" {
		t.Fatal(e)
	}
	return res
}

// An upstream's resources, templates, prompts and completions reach the client
// byte for byte in both eras: numbers as written (1.50, 1e2), $schema, $ref, $defs,
// additionalProperties, HTML characters, unknown members and content types. The
// 2026-07-28 list results gain resultType, ttlMs and cacheScope in front, nothing else.
func TestPassthroughBytes(t *testing.T) {
	w := awkwardWorld(t)
	w.grant(t, "fx.*")
	b := serverBridge(t, w, "fx")
	init := initialize(t, b.URL())
	caps, _ := json.Marshal(json.RawMessage(init))
	if !strings.Contains(string(caps), `"capabilities":{"tools":{"listChanged":false},"completions":{},"logging":{},"prompts":{"listChanged":true},"resources":{"listChanged":true,"subscribe":false}}`) {
		t.Errorf("initialize advertises %s", init)
	}
	cases := []struct{ method, params, want string }{
		{"resources/list", `{}`, fixturedata.AwkwardResources},
		{"resources/templates/list", `{}`, fixturedata.AwkwardTemplates},
		{"resources/read", `{"uri":"fixture://awkward"}`, fixturedata.AwkwardRead},
		{"prompts/list", `{}`, fixturedata.AwkwardPrompts},
		{"prompts/get", `{"name":"awkward","arguments":{"n":"1"}}`, fixturedata.AwkwardPrompt},
		{"completion/complete", `{"ref":{"type":"ref/prompt","name":"awkward"},"argument":{"name":"n","value":"1"}}`, fixturedata.AwkwardCompletion},
	}
	for _, c := range cases {
		got, e := rpc(t, b.URL(), false, c.method, c.params)
		if got != c.want {
			t.Errorf("%s:\n got %s (error %s)\nwant %s", c.method, got, e, c.want)
		}
		got, e = rpc(t, b.URL(), true, c.method, c.params)
		front := `{"resultType":"complete",`
		if strings.HasSuffix(c.method, "/list") {
			front += `"ttlMs":5000,"cacheScope":"private",`
		}
		if want := front + strings.TrimPrefix(c.want, "{"); got != want {
			t.Errorf("%s (2026-07-28):\n got %s (error %s)\nwant %s", c.method, got, e, want)
		}
	}
}

// Resources and prompts are published and read only under a grant that covers them:
// a grant on fx.prompts shows the prompts and no resource; a read of a resource the
// caller may not see is "resource not found", audited as denied; an allowed read is
// audited as allowed with the resource it read.
func TestPassthroughGrants(t *testing.T) {
	w := awkwardWorld(t)
	w.grant(t, "fx.prompts")
	b := serverBridge(t, w, "fx")
	init := initialize(t, b.URL())
	if strings.Contains(init, `"resources"`) || !strings.Contains(init, `"prompts"`) {
		t.Errorf("initialize advertises %s", init)
	}
	if got, _ := rpc(t, b.URL(), false, "resources/list", `{}`); got != `{"resources":[]}` {
		t.Errorf("resources/list = %s", got)
	}
	if got, _ := rpc(t, b.URL(), false, "resources/templates/list", `{}`); got != `{"resourceTemplates":[]}` {
		t.Errorf("resources/templates/list = %s", got)
	}
	_, e := rpc(t, b.URL(), false, "resources/read", `{"uri":"fixture://awkward"}`)
	if e != `{"code":-32002,"message":"resource not found: fixture://awkward"}` {
		t.Errorf("resources/read of an ungranted resource: %s", e)
	}
	if got, _ := rpc(t, b.URL(), false, "prompts/get", `{"name":"awkward"}`); got != fixturedata.AwkwardPrompt {
		t.Errorf("prompts/get = %s", got)
	}
	// Hostile params: the wrong types, control characters, unknown references.
	for _, c := range []struct{ method, params, code string }{
		{"resources/read", `{"uri":5}`, `"code":-32602`},
		{"resources/read", `{}`, `"code":-32602`},
		{"resources/read", `{"uri":"fixture://items/\u0000"}`, `"code":-32002`},
		{"prompts/get", `{"name":["awkward"]}`, `"code":-32602`},
		{"prompts/get", `{"name":"nope"}`, `"code":-32602`},
		{"completion/complete", `{"ref":{"type":"ref/other","name":"awkward"}}`, `"code":-32602`},
		{"completion/complete", `{"ref":"x"}`, `"code":-32602`},
		{"resources/subscribe", `{"uri":"fixture://awkward"}`, `"code":-32002`},
	} {
		if _, e := rpc(t, b.URL(), false, c.method, c.params); !strings.Contains(e, c.code) {
			t.Errorf("%s %s: %s, want %s", c.method, c.params, e, c.code)
		}
	}
	evs, err := w.a.Store().ListAudit(context.Background(), audit.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	var denied, allowed bool
	for _, ev := range evs {
		switch {
		case ev.Tool == "fx.resources" && ev.Decision == audit.Denied && ev.Resource == "mcp:fx/fixture://awkward" && ev.Code == "no_matching_grant":
			denied = true
		case ev.Tool == "fx.prompts" && ev.Decision == audit.Allowed && ev.Resource == "mcp:fx/prompt/awkward" && ev.Action == "read":
			allowed = true
		}
	}
	if !denied || !allowed {
		t.Errorf("audit: denied read recorded %v, allowed get recorded %v: %+v", denied, allowed, evs)
	}
}
