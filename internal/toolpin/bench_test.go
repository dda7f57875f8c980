package toolpin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/textscan"
	"github.com/toolgate/toolgate/internal/toolpin"
	"github.com/toolgate/toolgate/internal/toolpin/toolpintest"
)

// catalogue512 is 512 tool definitions made of the real ones in
// internal/textscan/testdata/catalogues, each renamed to be unique.
func catalogue512(b *testing.B) []json.RawMessage {
	files, _ := filepath.Glob(filepath.Join("..", "textscan", "testdata", "catalogues", "*.json"))
	var real []map[string]any
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			b.Fatal(err)
		}
		var list struct{ Tools []map[string]any }
		if err := json.Unmarshal(data, &list); err != nil {
			b.Fatal(err)
		}
		real = append(real, list.Tools...)
	}
	if len(real) == 0 {
		b.Fatal("no catalogues")
	}
	out := make([]json.RawMessage, 512)
	for i := range out {
		t := real[i%len(real)]
		t["name"] = fmt.Sprintf("%s_%d", fmt.Sprint(t["name"]), i)
		raw, err := json.Marshal(t)
		if err != nil {
			b.Fatal(err)
		}
		out[i] = raw
	}
	return out
}

// BenchmarkDigest512 parses, canonicalises and digests a 512-tool catalogue.
func BenchmarkDigest512(b *testing.B) {
	tools := catalogue512(b)
	n := 0
	for _, t := range tools {
		n += len(t)
	}
	b.SetBytes(int64(n))
	b.ReportAllocs()
	for b.Loop() {
		for _, t := range tools {
			if _, err := toolpin.Parse("s", t); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkReconcile512 is one refresh of an unchanged 512-tool catalogue: parse,
// digest, scan and compare every tool against its pin in the in-memory store.
func BenchmarkReconcile512(b *testing.B) {
	tools := catalogue512(b)
	st := &toolpintest.Mem{}
	p := toolpin.Policy{HoldAt: toolpin.DefaultHoldAt, Scanner: textscan.New(textscan.Options{})}
	ctx := context.Background()
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if _, err := toolpin.Reconcile(ctx, st, "s", tools, p, at); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		r, err := toolpin.Reconcile(ctx, st, "s", tools, p, at)
		if err != nil || len(r.Published()) != 512 {
			b.Fatalf("%v %d", err, len(r.Published()))
		}
	}
}

// BenchmarkCompareLarge diffs two 60 KiB descriptions that differ in one sentence.
func BenchmarkCompareLarge(b *testing.B) {
	var sb strings.Builder
	for i := range 2000 {
		fmt.Fprintf(&sb, "Sentence %d is ordinary. ", i)
	}
	a, _ := toolpin.Parse("s", []byte(`{"name":"t","description":"`+sb.String()+`"}`))
	c, _ := toolpin.Parse("s", []byte(`{"name":"t","description":"`+strings.Replace(sb.String(), "Sentence 1000 is", "Sentence 1000 was", 1)+`"}`))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := toolpin.Compare(a.Canonical, c.Canonical); err != nil {
			b.Fatal(err)
		}
	}
}
