package names_test

import (
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/names"
)

// FuzzKey: a key holds only [a-z0-9_-], is a fixed point, and does not see ASCII case.
func FuzzKey(f *testing.F) {
	for _, s := range []string{"read_file", "Read.File", "re\u0430d", "ｒｅａｄ", "a\u200bb", "\xff", "mcp__x__y", "\U0001D42B"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		k := names.Key(s)
		for _, c := range k {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
				t.Fatalf("Key(%q) = %q holds %q", s, k, c)
			}
		}
		if names.Key(k) != k {
			t.Fatalf("Key is not a fixed point on %q", s)
		}
		if names.Key(strings.ToUpper(s)) != k && isASCII(s) {
			t.Fatalf("Key(%q) sees case", s)
		}
	})
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// FuzzRegistry: whatever is added, no two registered tools ever share a key in any
// form (the invariant shadowing protection is), and each name resolves to its owner.
func FuzzRegistry(f *testing.F) {
	f.Add("read.file", "local.read_file", "evil.toolgate_escalate")
	f.Add("a.b_c", "a_b.c", "A.B.C")
	f.Fuzz(func(t *testing.T, a, b, c string) {
		r := names.New(names.Options{BareUpstream: len(a)%2 == 0})
		r.AddAll([]string{"toolgate.escalate", "local.read_file", "server.status"})
		for _, id := range []string{a, b, c} {
			_ = r.Add(id)
		}
		owner := map[string]string{}
		for _, id := range r.IDs() {
			for _, fm := range r.Forms(id) {
				k := names.Key(fm.Name)
				if o, ok := owner[k]; ok && o != id {
					t.Fatalf("%s and %s share the key %q", o, id, k)
				}
				owner[k] = id
				if got, _, ok := r.Resolve(fm.Name); !ok || got != id {
					t.Fatalf("%s resolves to %q, not %s", fm, got, id)
				}
			}
		}
	})
}
