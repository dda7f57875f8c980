package upstreamtools_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/toolgate/toolgate/internal/host"
	"github.com/toolgate/toolgate/internal/kernel"
	"github.com/toolgate/toolgate/internal/kernel/kerneltest"
	"github.com/toolgate/toolgate/internal/mcpspec"
	"github.com/toolgate/toolgate/internal/names"
	"github.com/toolgate/toolgate/internal/policy"
	"github.com/toolgate/toolgate/internal/upstreamtools"
)

// fixedCaller answers every call with the same bytes, so the benchmark measures the
// kernel and this package, not an upstream.
type fixedCaller struct{ res json.RawMessage }

func (f fixedCaller) Call(context.Context, string, string, json.RawMessage, host.CallOptions) (json.RawMessage, error) {
	return f.res, nil
}

// BenchmarkUpstreamCall is one upstream tool call through the kernel (strict argument
// read, schema, access, grant, two audit appends to memory, forwarding, the raw result
// read once) with an upstream that answers at once.
func BenchmarkUpstreamCall(b *testing.B) {
	k, err := kernel.New(kernel.Options{Audit: &kerneltest.Audit{}, Escalations: &kerneltest.Escalations{}})
	if err != nil {
		b.Fatal(err)
	}
	if err := k.SetGrants([]policy.Grant{{ID: "g", Principal: "p", Tool: "*", Action: "*", Effect: policy.Allow}}); err != nil {
		b.Fatal(err)
	}
	up := fixedCaller{res: json.RawMessage(`{"content":[{"type":"text","text":"ok"}],"isError":false}`)}
	c := upstreamtools.Build("srv", host.Catalog{Version: 1, Tools: tools(
		`{"name":"search","inputSchema":{"type":"object","properties":{"q":{"type":"string"},"n":{"type":"integer"}},"required":["q"]}}`)}, up, nil)
	if _, err := k.ReplaceNamespace("srv", kernel.NamespacePolicy{}, c.Tools...); err != nil {
		b.Fatal(err)
	}
	tr, err := k.OpenTurn(context.Background(), kernel.TurnOptions{Principal: "p"})
	if err != nil {
		b.Fatal(err)
	}
	req := &mcpspec.CallRequest{Name: "srv.search", Arguments: json.RawMessage(`{"n":5,"q":"toolgate"}`)}
	b.ReportAllocs()
	for b.Loop() {
		r, err := tr.CallTool(context.Background(), req)
		if err != nil || r.IsError {
			b.Fatal(err, r)
		}
	}
}

// BenchmarkBuild is one catalogue of 200 tools made into kernel tools and registered
// (the names check and the schema compiles included): the cost of a catalogue change.
func BenchmarkBuild(b *testing.B) { benchBuild(b, false) }

// BenchmarkBuildNames is BenchmarkBuild with the shadowing check against every
// published form of every other tool (internal/names, all harnesses' rules).
func BenchmarkBuildNames(b *testing.B) { benchBuild(b, true) }

func benchBuild(b *testing.B, withNames bool) {
	var reg *names.Registry
	if withNames {
		reg = names.New(names.Options{})
		reg.AddAll([]string{"local.read_file", "local.write_file", "server.status", "toolgate.escalate"})
	}
	var list []string
	for i := range 200 {
		list = append(list, `{"name":"tool_`+itoa(i)+`","description":"d","inputSchema":{"type":"object","properties":{"q":{"type":"string"}}}}`)
	}
	cat := host.Catalog{Version: 1, Tools: tools(list...)}
	k, err := kernel.New(kernel.Options{Audit: &kerneltest.Audit{}, Escalations: &kerneltest.Escalations{}})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		c := upstreamtools.Build("srv", cat, nil, reg)
		if _, err := k.ReplaceNamespace("srv", kernel.NamespacePolicy{}, c.Tools...); err != nil {
			b.Fatal(err)
		}
	}
}
