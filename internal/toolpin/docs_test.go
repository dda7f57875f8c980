package toolpin

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestDocsMatchCode keeps docs/trust.md's limits and diff bounds equal to the code's.
func TestDocsMatchCode(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "trust.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	for name, want := range map[string]int{"MaxDefinitionBytes": MaxDefinitionBytes, "MaxDepth": MaxDepth, "MaxNameBytes": MaxNameBytes} {
		m := regexp.MustCompile("(?m)^\\| `" + name + "` \\| ([0-9]+) \\|").FindStringSubmatch(doc)
		if m == nil || m[1] != strconv.Itoa(want) {
			t.Errorf("%s: docs %v, code %d", name, m, want)
		}
	}
	for name, want := range map[string]int{"MaxDiffPaths": MaxDiffPaths, "MaxDiffLines": MaxDiffLines, "MaxDiffBytes": MaxDiffBytes} {
		m := regexp.MustCompile("\\(`" + name + "`\\) \\| ([0-9]+)").FindStringSubmatch(doc)
		if m == nil || m[1] != strconv.Itoa(want) {
			t.Errorf("%s: docs %v, code %d", name, m, want)
		}
	}
	if !strings.Contains(doc, "| characters per shown line | "+strconv.Itoa(diffLineRunes)+" |") {
		t.Errorf("diff line length %d is not in the docs", diffLineRunes)
	}
	for _, v := range []Verdict{New, Pending, Unchanged, Changed, Refused} {
		if !strings.Contains(doc, "| `"+string(v)+"` |") {
			t.Errorf("verdict %s is not in the docs' table", v)
		}
	}
}
