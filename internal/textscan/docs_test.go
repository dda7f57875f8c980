package textscan

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestDocsMatchCode keeps docs/trust.md's phrase rules, and the bounds it states,
// equal to the code's.
func TestDocsMatchCode(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "trust.md"))
	if err != nil {
		t.Fatal(err)
	}
	table := func(header string) []string {
		_, rest, ok := strings.Cut(string(b), header)
		if !ok {
			t.Fatalf("docs/trust.md has no table %q", header)
		}
		rest, _, _ = strings.Cut(rest, "\n\n")
		return strings.Split(rest, "\n")
	}
	row := regexp.MustCompile("^\\| `([a-z_-]+)` \\| (info|low|medium|high)")
	doc := map[string]string{}
	for _, line := range table("| Rule | Severity | Matches |") {
		if m := row.FindStringSubmatch(line); m != nil {
			doc[m[1]] = m[2]
		}
	}
	kinds := map[Kind]bool{}
	for _, line := range table("| Kind | Severity | Found |") {
		if m := row.FindStringSubmatch(line); m != nil {
			kinds[Kind(m[1])] = true
		}
	}
	for _, k := range []Kind{KindControl, KindBidi, KindInvisible, KindTag, KindVariation, KindPrivateUse, KindHomoglyph, KindInstruction, KindReference, KindLong, KindBlob} {
		if !kinds[k] {
			t.Errorf("kind %s is not in the docs' table", k)
		}
		delete(kinds, k)
	}
	for k := range kinds {
		t.Errorf("the docs list kind %s, which the code does not have", k)
	}
	for _, r := range rules() {
		if sev, ok := doc[r.id]; !ok || sev != r.severity.String() {
			t.Errorf("rule %s (%s): the docs say %q", r.id, r.severity, sev)
		}
		delete(doc, r.id)
	}
	for id := range doc {
		t.Errorf("the docs list rule %s, which the code does not have", id)
	}
	for text, n := range map[string]int{"at most 64 findings": MaxFindings, "at most 120\ncharacters": ExcerptRunes, "a text over 4096 characters": DefaultLongText} {
		if !regexp.MustCompile(regexp.QuoteMeta(text)).Match(b) {
			t.Errorf("the docs do not say %q (the code's bound is %d)", text, n)
		}
		if !regexp.MustCompile(strconv.Itoa(n)).Match([]byte(text)) {
			t.Errorf("test table: %q does not hold %d", text, n)
		}
	}
}
