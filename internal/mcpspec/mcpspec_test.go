package mcpspec_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/toolgate/toolgate/internal/mcpspec"
)

func encode(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Raw members travel as they were written: key order, unknown members and number
// spelling survive an encoding (only insignificant white space goes).
func TestRawMembersSurvive(t *testing.T) {
	schema := `{"type":"object","$defs":{"z":{"const":1.50}},"properties":{"n":{"type":"integer","maximum":12345678901234567890}},"x-vendor":true}`
	tool := mcpspec.Tool{Name: "files.read", InputSchema: json.RawMessage(schema), Meta: json.RawMessage(`{"b":1,"a":2}`)}
	got := encode(t, tool)
	want := `{"name":"files.read","inputSchema":` + schema + `,"_meta":{"b":1,"a":2}}`
	if got != want {
		t.Errorf("tool:\n got %s\nwant %s", got, want)
	}

	block := `{"type":"text","text":"hi","z":{"k":1e2},"a":[]}`
	res := mcpspec.CallResult{Content: []json.RawMessage{json.RawMessage(block)}, StructuredContent: json.RawMessage(`{"y":1,"x":2}`)}
	if got, want := encode(t, res), `{"content":[`+block+`],"structuredContent":{"y":1,"x":2},"isError":false}`; got != want {
		t.Errorf("call result:\n got %s\nwant %s", got, want)
	}
}

// The list results carry their cache hints only in the stateless revision, and
// resultType with them.
func TestListResultHints(t *testing.T) {
	items := []json.RawMessage{json.RawMessage(`{"name":"a.b"}`)}
	older := mcpspec.ListToolsResult{Tools: items, Meta: map[string]any{mcpspec.MetaCatalogHash: "h"}}
	if got, want := encode(t, older), `{"tools":[{"name":"a.b"}],"_meta":{"toolgate/catalogHash":"h"}}`; got != want {
		t.Errorf("older revision:\n got %s\nwant %s", got, want)
	}
	modern := older
	modern.ResultType = mcpspec.ResultComplete
	modern.CacheHints = mcpspec.CacheHints{TTLMs: 5000, CacheScope: mcpspec.CacheScopePrivate}
	if got, want := encode(t, modern), `{"resultType":"complete","tools":[{"name":"a.b"}],"ttlMs":5000,"cacheScope":"private","_meta":{"toolgate/catalogHash":"h"}}`; got != want {
		t.Errorf("stateless revision:\n got %s\nwant %s", got, want)
	}
	page := mcpspec.ListResourcesResult{Resources: []json.RawMessage{}, NextCursor: "c2"}
	if got, want := encode(t, page), `{"resources":[],"nextCursor":"c2"}`; got != want {
		t.Errorf("resources page:\n got %s\nwant %s", got, want)
	}
	d := mcpspec.DiscoverResult{ResultType: mcpspec.ResultComplete, SupportedVersions: mcpspec.Versions(),
		Capabilities: json.RawMessage(`{}`), CacheHints: mcpspec.CacheHints{TTLMs: 1, CacheScope: mcpspec.CacheScopePublic}, Meta: map[string]any{}}
	if got, want := encode(t, d), `{"resultType":"complete","supportedVersions":["2026-07-28","2025-11-25","2025-06-18","2025-03-26","2024-11-05"],"capabilities":{},"ttlMs":1,"cacheScope":"public","_meta":{}}`; got != want {
		t.Errorf("discover:\n got %s\nwant %s", got, want)
	}
}

// What a client reads from an upstream server decodes into the vocabulary with the
// raw parts kept.
func TestDecodeCatalogueItems(t *testing.T) {
	var r mcpspec.Resource
	if err := json.Unmarshal([]byte(`{"uri":"file:///a","name":"a","size":12,"annotations":{"priority":0.50},"unknown":1}`), &r); err != nil {
		t.Fatal(err)
	}
	if r.URI != "file:///a" || r.Size == nil || *r.Size != 12 || string(r.Annotations) != `{"priority":0.50}` {
		t.Errorf("resource %+v", r)
	}
	var tpl mcpspec.ResourceTemplate
	if err := json.Unmarshal([]byte(`{"uriTemplate":"file:///{path}","name":"files"}`), &tpl); err != nil || tpl.URITemplate != "file:///{path}" {
		t.Errorf("template %+v %v", tpl, err)
	}
	var p mcpspec.Prompt
	if err := json.Unmarshal([]byte(`{"name":"review","arguments":[{"name":"code","required":true}]}`), &p); err != nil ||
		len(p.Arguments) != 1 || !p.Arguments[0].Required {
		t.Errorf("prompt %+v %v", p, err)
	}
	var g mcpspec.GetPromptResult
	if err := json.Unmarshal([]byte(`{"messages":[{"role":"user","content":{"type":"text","text":"x"}}]}`), &g); err != nil ||
		len(g.Messages) != 1 || string(g.Messages[0]) != `{"role":"user","content":{"type":"text","text":"x"}}` {
		t.Errorf("get prompt %+v %v", g, err)
	}
	var c mcpspec.CompleteResult
	if err := json.Unmarshal([]byte(`{"completion":{"values":["py","pyc"],"total":10,"hasMore":true}}`), &c); err != nil ||
		len(c.Completion.Values) != 2 || c.Completion.Total == nil || *c.Completion.Total != 10 || !c.Completion.HasMore {
		t.Errorf("completion %+v %v", c, err)
	}
	req := mcpspec.CompleteParams{Ref: json.RawMessage(`{"type":"ref/prompt","name":"review"}`), Argument: mcpspec.CompletionArgument{Name: "code", Value: "p"}}
	if got, want := encode(t, req), `{"ref":{"type":"ref/prompt","name":"review"},"argument":{"name":"code","value":"p"}}`; got != want {
		t.Errorf("complete params:\n got %s\nwant %s", got, want)
	}
}

func TestVersions(t *testing.T) {
	all := mcpspec.Versions()
	if all[0] != mcpspec.ModernVersion || !slices.Equal(all[1:], mcpspec.SessionVersions) || mcpspec.SessionVersions[0] != mcpspec.LatestVersion {
		t.Fatalf("versions %v, session versions %v", all, mcpspec.SessionVersions)
	}
	all[1] = "changed"
	if mcpspec.SessionVersions[0] != mcpspec.LatestVersion {
		t.Error("Versions returned the session versions' own array")
	}
	if !mcpspec.IsSessionVersion("2024-11-05") || mcpspec.IsSessionVersion(mcpspec.ModernVersion) || mcpspec.IsSessionVersion("") {
		t.Error("IsSessionVersion")
	}
}

func TestCapabilityFor(t *testing.T) {
	for method, want := range map[string]string{
		mcpspec.MethodElicitationCreate: "elicitation", mcpspec.MethodSamplingCreateMessage: "sampling",
		mcpspec.MethodRootsList: "roots", mcpspec.MethodPing: "", "tools/call": "",
	} {
		if got := mcpspec.CapabilityFor(method); got != want {
			t.Errorf("CapabilityFor(%q) = %q, want %q", method, got, want)
		}
	}
}

func TestNoPeer(t *testing.T) {
	p := mcpspec.NoPeer{Capabilities: json.RawMessage(`{"elicitation":{}}`)}
	if string(p.ClientCapabilities()) != `{"elicitation":{}}` {
		t.Errorf("capabilities %s", p.ClientCapabilities())
	}
	if _, err := p.Request(context.Background(), mcpspec.MethodElicitationCreate, nil); !errors.Is(err, mcpspec.ErrPeerUnsupported) {
		t.Errorf("Request: %v", err)
	}
}
