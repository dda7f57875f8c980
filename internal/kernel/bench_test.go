package kernel_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/kernel"
	"github.com/toolgate/toolgate/internal/kernel/kerneltest"
	"github.com/toolgate/toolgate/internal/mcpspec"
	"github.com/toolgate/toolgate/internal/policy"
)

// BenchmarkCallAuthorized is the kernel's own cost per authorized call: name lookup,
// strict argument parse, schema validation, access derivation and normalisation, the
// policy decision, the audit event (to an in-memory log) and the result, around a tool
// that does nothing.
func BenchmarkCallAuthorized(b *testing.B) {
	k, err := kernel.New(kernel.Options{Audit: discardAudit{}, Escalations: &kerneltest.Escalations{},
		HashArg: func([]byte) string { return "h" }})
	if err != nil {
		b.Fatal(err)
	}
	if err := k.Register(echoTool("files.read")); err != nil {
		b.Fatal(err)
	}
	f := &fixture{k: k}
	var gs []policy.Grant
	for i := 0; i < 50; i++ {
		gs = append(gs, policy.Grant{Principal: fmt.Sprintf("other%d", i), Tool: "*"})
	}
	gs = append(gs, policy.Grant{Principal: "p", Tool: "files.*", Action: "read", Resource: "path:docs/"})
	f.grants(b, gs...)
	tr := f.turn(b, "p")
	req := &mcpspec.CallRequest{Name: "files.read", Arguments: json.RawMessage(`{"msg":"hello","path":"docs/guide/intro.md"}`)}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		r, err := tr.CallTool(ctx, req)
		if err != nil || r.IsError {
			b.Fatalf("%v %+v", err, r)
		}
	}
}

// discardAudit accepts every event and keeps none, so the benchmark measures the kernel
// rather than a growing in-memory log.
type discardAudit struct{}

func (discardAudit) AppendAudit(context.Context, *audit.Event) error { return nil }

func catalogue512(b *testing.B) *fixture {
	var tools []*kernel.Tool
	for i := 0; i < kernel.MaxCatalog-1; i++ {
		tools = append(tools, echoTool(fmt.Sprintf("ns%d.tool_%03d", i%16, i)))
	}
	f := newFixture(b, tools...)
	f.grants(b, policy.Grant{Principal: "p", Tool: "*"}) // 511 + toolgate.escalate = 512
	return f
}

// BenchmarkOpenTurn512 opens a turn on a 512-tool catalogue that is already resolved
// for this principal and policy (the common case: the HTTP API opens a turn per
// request).
func BenchmarkOpenTurn512(b *testing.B) {
	f := catalogue512(b)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		tr, err := f.k.OpenTurn(ctx, kernel.TurnOptions{Principal: "p"})
		if err != nil {
			b.Fatal(err)
		}
		if l, _ := tr.ListTools(ctx); len(l.Tools) != kernel.MaxCatalog {
			b.Fatalf("%d tools", len(l.Tools))
		}
	}
}

// BenchmarkOpenTurn512Uncached resolves a 512-tool catalogue from scratch each time (a
// Namer bypasses the catalogue cache): the cost after any grant, namespace or
// registry change.
func BenchmarkOpenTurn512Uncached(b *testing.B) {
	f := catalogue512(b)
	ctx := context.Background()
	same := func(id string) string { return id }
	b.ReportAllocs()
	for b.Loop() {
		tr, err := f.k.OpenTurn(ctx, kernel.TurnOptions{Principal: "p", Namer: same})
		if err != nil {
			b.Fatal(err)
		}
		if l, _ := tr.ListTools(ctx); len(l.Tools) != kernel.MaxCatalog {
			b.Fatalf("%d tools", len(l.Tools))
		}
	}
}

// BenchmarkListTools512 is tools/list on an open turn at 512 tools, including encoding
// the answer body as the MCP layer does.
func BenchmarkListTools512(b *testing.B) {
	f := catalogue512(b)
	ctx := context.Background()
	tr := f.turn(b, "p")
	b.ReportAllocs()
	for b.Loop() {
		l, err := tr.ListTools(ctx)
		if err != nil {
			b.Fatal(err)
		}
		body, err := json.Marshal(map[string]any{"tools": l.Tools, "_meta": map[string]string{
			mcpspec.MetaCatalogHash: l.CatalogHash, mcpspec.MetaExecutionID: l.ExecutionID}})
		if err != nil || len(body) == 0 {
			b.Fatal(err)
		}
	}
}

// BenchmarkCallAuthorizedNarrowed is BenchmarkCallAuthorized on a turn opened with 16
// capabilities, the one allowing the call last: the cost capabilities add per call.
func BenchmarkCallAuthorizedNarrowed(b *testing.B) {
	k, err := kernel.New(kernel.Options{Audit: discardAudit{}, Escalations: &kerneltest.Escalations{},
		HashArg: func([]byte) string { return "h" }})
	if err != nil {
		b.Fatal(err)
	}
	if err := k.Register(echoTool("files.read")); err != nil {
		b.Fatal(err)
	}
	if err := k.SetGrants([]policy.Grant{{ID: "g", Principal: "p", Tool: "files.*", Action: "read", Resource: "path:docs/", Effect: policy.Allow}}); err != nil {
		b.Fatal(err)
	}
	var caps []string
	for i := 0; i < 15; i++ {
		caps = append(caps, fmt.Sprintf("ns%d.*", i))
	}
	caps = append(caps, "files.*:read")
	tr, err := k.OpenTurn(context.Background(), kernel.TurnOptions{Principal: "p", Capabilities: caps})
	if err != nil {
		b.Fatal(err)
	}
	req := &mcpspec.CallRequest{Name: "files.read", Arguments: json.RawMessage(`{"msg":"hello","path":"docs/guide/intro.md"}`)}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		r, err := tr.CallTool(ctx, req)
		if err != nil || r.IsError {
			b.Fatalf("%v %+v", err, r)
		}
	}
}

// BenchmarkOpenTurn512Narrowed opens a turn with 4 capabilities on the 512-tool
// registry (128 tools published), its catalogue already resolved: the cost of parsing
// the capabilities on every open plus the cached lookup.
func BenchmarkOpenTurn512Narrowed(b *testing.B) {
	f := catalogue512(b)
	ctx := context.Background()
	caps := []string{"ns0.*", "ns1.*", "ns2.*:read", "ns3.*"}
	b.ReportAllocs()
	for b.Loop() {
		tr, err := f.k.OpenTurn(ctx, kernel.TurnOptions{Principal: "p", Capabilities: caps})
		if err != nil {
			b.Fatal(err)
		}
		if l, _ := tr.ListTools(ctx); len(l.Tools) != 128 {
			b.Fatalf("%d tools", len(l.Tools))
		}
	}
}
