package harness

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

func BenchmarkMerge(b *testing.B) {
	for _, c := range []struct{ id, file string }{
		{"claude-code", "json.json"}, {"vscode", "jsonc.json"}, {"codex", "config.toml"}, {"goose", "goose.yaml"},
	} {
		h, _ := Lookup(c.id)
		in, err := os.ReadFile(filepath.Join("testdata", "existing", c.file))
		if err != nil {
			b.Fatal(err)
		}
		b.Run(c.id, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := h.Merge(in, httpServer); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkNamer measures publishing a 1000-tool catalogue for Cursor, where every
// dotted id needs a short form.
func BenchmarkNamer(b *testing.B) {
	h, _ := Lookup("cursor")
	ids := make([]string, 1000)
	for i := range ids {
		ids[i] = fmt.Sprintf("server%d.some_tool_name_%d", i%20, i)
	}
	b.ReportAllocs()
	for b.Loop() {
		n := h.Namer("toolgate")
		for _, id := range ids {
			n.Name(id)
		}
	}
}
