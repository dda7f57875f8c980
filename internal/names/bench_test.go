package names_test

import (
	"fmt"
	"testing"

	"github.com/toolgate/toolgate/internal/names"
)

// BenchmarkAdd512 registers a 512-tool catalogue (16 servers of 32 tools) into a
// registry holding the built-ins: every published form of every tool is computed and
// checked.
func BenchmarkAdd512(b *testing.B) {
	ids := make([]string, 0, 512)
	for s := range 16 {
		for t := range 32 {
			ids = append(ids, fmt.Sprintf("server%d.tool_number_%d", s, t))
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		r := names.New(names.Options{})
		if refused := r.AddAll(append(append([]string{}, builtins...), ids...)); refused != nil {
			b.Fatal(refused)
		}
	}
}
