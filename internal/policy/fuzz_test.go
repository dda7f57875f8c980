package policy

import (
	"strings"
	"testing"
)

// FuzzNormalizeResource: a normalised path resource never escapes the workspace, is
// stable under a second normalisation, and a docs/ grant never covers anything that
// normalises outside docs/.
func FuzzNormalizeResource(f *testing.F) {
	for _, s := range []string{"path:docs/../src/x", "path:docs/./a", "path:/etc", "path:..", "path:a//b/", "url:x", "path:docs/..", "path:docs\\..\\x", ""} {
		f.Add(s)
	}
	set, err := Compile([]Grant{{ID: "g", Principal: "p", Tool: "*", Action: "*", Resource: "path:docs/", Effect: Allow}})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, r string) {
		n, err := NormalizeResource(r)
		if err != nil {
			return
		}
		again, err := NormalizeResource(n)
		if err != nil || again != n {
			t.Fatalf("not stable: %q → %q → %q, %v", r, n, again, err)
		}
		if rest, ok := strings.CutPrefix(n, "path:"); ok {
			if strings.HasPrefix(rest, "/") || rest == ".." || strings.HasPrefix(rest, "../") {
				t.Fatalf("%q normalised to %q, outside the workspace", r, n)
			}
			for _, seg := range strings.Split(rest, "/") {
				if seg == ".." {
					t.Fatalf("%q normalised to %q with a .. segment", r, n)
				}
			}
			d := set.Decide(Request{Principal: "p", Tool: "x.y", Action: "read", Resource: n})
			if d.Allowed && !(rest == "docs" || strings.HasPrefix(rest, "docs/")) {
				t.Fatalf("docs/ grant allowed %q (from %q)", n, r)
			}
		}
	})
}
