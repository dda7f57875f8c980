package hygiene

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/testenv"
)

// TestTrustDecisionsOnlyFromTheOwner keeps the decisions about upstream trust — an
// approval, a rejection, a trust policy, forgetting a server's pins — where only the
// owner reaches them (docs/trust.md, "Reviewing and deciding"): the CLI, the app
// methods it and the management protocol call, and the packages that implement them.
// A call from anywhere else (a local or control-plane tool, a surface) would let an
// MCP tool decide what an upstream may publish. The management protocol's files join
// the list when they call these methods.
func TestTrustDecisionsOnlyFromTheOwner(t *testing.T) {
	root := testenv.RepoRoot(t)
	decide := regexp.MustCompile(`\b(ApprovePin|RejectPin|SetTrustPolicy|ForgetTrust|ApproveHold|RejectHold|PutPin)\(`)
	allowed := map[string]bool{
		"internal/app/trust.go":     true, // the app's methods
		"internal/cli/pins.go":      true, // toolgate pins
		"internal/store/pins.go":    true, // the store
		"internal/toolpin/store.go": true, // the interface
		"internal/app/manage.go":    true, // the management protocol's uninstall (owner or admin only)
	}
	allowedDirs := []string{"internal/toolpin/", "internal/store/"}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != root && (strings.HasPrefix(n, ".") || n == "testdata" || n == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if allowed[rel] {
			return nil
		}
		for _, dir := range allowedDirs {
			if strings.HasPrefix(rel, dir) {
				return nil
			}
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(b), "\n") {
			if m := decide.FindString(line); m != "" && !strings.HasPrefix(strings.TrimSpace(line), "//") {
				t.Errorf("%s:%d calls %s: upstream trust is decided only by the owner (docs/trust.md)", rel, i+1, strings.TrimSuffix(m, "("))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
