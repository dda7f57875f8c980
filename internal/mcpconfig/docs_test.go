package mcpconfig

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
)

// TestDocsMatchCode keeps docs/mcp-config.md's member and limit tables equal to the
// code's.
func TestDocsMatchCode(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "mcp-config.md"))
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]memberKind{"read": memberRead, "ignored": memberIgnored, "refused": memberRefused}
	doc := map[string]memberKind{}
	for _, m := range regexp.MustCompile("(?m)^\\| `([A-Za-z]+)` \\| (read|ignored|refused) \\|").FindAllStringSubmatch(string(b), -1) {
		doc[m[1]] = kinds[m[2]]
	}
	for name, rule := range entryMembers {
		if k, ok := doc[name]; !ok || k != rule.kind {
			t.Errorf("member %q: docs say %v (listed %v), code says %v", name, k, ok, rule.kind)
		}
	}
	for name := range doc {
		if _, ok := entryMembers[name]; !ok {
			t.Errorf("docs list member %q, which the code does not know", name)
		}
	}
	limits := map[string]int{
		"MaxConfigBytes": MaxConfigBytes, "MaxServers": MaxServers, "MaxKeyBytes": MaxKeyBytes, "MaxPathBytes": MaxPathBytes,
		"MaxArgs": MaxArgs, "MaxArgBytes": MaxArgBytes, "MaxEnv": MaxEnv, "MaxEnvNameBytes": MaxEnvNameBytes,
		"MaxEnvValueBytes": MaxEnvValueBytes, "MaxHeaders": MaxHeaders, "MaxHeaderNameBytes": MaxHeaderNameBytes,
		"MaxHeaderValueBytes": MaxHeaderValueBytes, "MaxURLBytes": MaxURLBytes, "MaxDescriptionBytes": MaxDescriptionBytes,
		"MaxDiagnostics": MaxDiagnostics,
	}
	seen := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `(Max[A-Za-z]+)` \\| ([0-9]+) \\|").FindAllStringSubmatch(string(b), -1) {
		v, _ := strconv.Atoi(m[2])
		if want, ok := limits[m[1]]; !ok || v != want {
			t.Errorf("docs give %s = %d, code %d", m[1], v, want)
		}
		seen[m[1]] = true
	}
	for name := range limits {
		if !seen[name] {
			t.Errorf("limit %s is not in the docs", name)
		}
	}
}
