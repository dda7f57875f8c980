package netguard

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestDocsMatchCode keeps docs/trust.md's deny table, name list and private ranges
// equal to the code's.
func TestDocsMatchCode(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "trust.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	_, reach, ok := strings.Cut(doc, "### Addresses")
	if !ok {
		t.Fatal("docs/trust.md has no Addresses section")
	}
	table := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `([0-9a-f:./]+)` \\|").FindAllStringSubmatch(reach, -1) {
		table[m[1]] = true
	}
	for _, r := range DefaultDeny {
		if !table[r.Prefix.String()] {
			t.Errorf("DefaultDeny has %s, the docs' table does not", r.Prefix)
		}
		delete(table, r.Prefix.String())
	}
	for p := range table {
		t.Errorf("the docs' table lists %s, DefaultDeny does not", p)
	}
	for _, n := range DefaultDenyNames {
		if !strings.Contains(reach, "`"+n.Name+"`") {
			t.Errorf("default deny name %s is not in the docs", n.Name)
		}
	}
	for _, r := range append(PrivateRanges, LoopbackRanges...) {
		s := r.Prefix.String()
		if r.Prefix.IsSingleIP() {
			s = r.Prefix.Addr().String()
		}
		if !strings.Contains(reach, "`"+s+"`") {
			t.Errorf("range %s is not in the docs", s)
		}
	}
}
