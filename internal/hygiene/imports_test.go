package hygiene

import (
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/testenv"
)

const module = "github.com/toolgate/toolgate/"

// pkgInfo is one package of the module as go list sees it (test files excluded).
type pkgInfo struct {
	imports []string // direct imports
	deps    []string // every package it depends on, transitively
}

func listPackages(t *testing.T) map[string]pkgInfo {
	t.Helper()
	cmd := exec.Command("go", "list", "-f", `{{.ImportPath}}|{{join .Imports " "}}|{{join .Deps " "}}`, "./...")
	cmd.Dir = testenv.RepoRoot(t)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	pkgs := map[string]pkgInfo{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		parts := strings.Split(line, "|")
		if len(parts) != 3 {
			t.Fatalf("go list line %q", line)
		}
		pkgs[strings.TrimPrefix(parts[0], module)] = pkgInfo{imports: strings.Fields(parts[1]), deps: strings.Fields(parts[2])}
	}
	return pkgs
}

// full is a package path as go list writes it: "internal/…" names this module's.
func full(name string) string {
	if strings.HasPrefix(name, "internal/") || strings.HasPrefix(name, "cmd/") || strings.HasPrefix(name, "e2e/") {
		return module + name
	}
	return name
}

// TestImportRules enforces the direction of imports docs/architecture.md draws: the
// kernel at the centre imports no surface, the vocabulary imports nothing of toolgate's,
// confinement stands alone, the surfaces do not reach past the kernel's interface,
// the client side never imports the server side, and the CLI holds no store, token or
// HTTP server of its own.
func TestImportRules(t *testing.T) {
	pkgs := listPackages(t)
	rule := func(pkg, why string, forbidden func(dep string) bool, transitive bool) {
		t.Helper()
		info, ok := pkgs[pkg]
		if !ok {
			t.Errorf("%s: not in go list ./... (moved? update the rule and docs/architecture.md)", pkg)
			return
		}
		list := info.imports
		if transitive {
			list = info.deps
		}
		for _, d := range list {
			if forbidden(d) {
				t.Errorf("%s depends on %s: %s", pkg, strings.TrimPrefix(d, module), why)
			}
		}
	}
	is := func(names ...string) func(string) bool {
		return func(d string) bool {
			for _, n := range names {
				if n = full(n); d == n || strings.HasPrefix(d, n+"/") {
					return true
				}
			}
			return false
		}
	}
	surfaces := is("internal/mcpserver", "internal/httpapi", "internal/httpwire", "internal/cli", "internal/app", "net/http")
	rule("internal/kernel", "the kernel imports no surface (and no HTTP)", surfaces, true)
	rule("internal/mcpspec", "the vocabulary imports nothing of toolgate's", func(d string) bool { return strings.HasPrefix(d, module) }, true)
	for _, p := range []string{"internal/workspace", "internal/protect"} {
		rule(p, "confinement stands alone: no HTTP, no kernel, no surface", is("net/http", "internal/kernel", "internal/mcpserver", "internal/rpcwire"), true)
	}
	for _, p := range []string{"internal/mcpserver", "internal/httpapi", "internal/httpwire"} {
		rule(p, "a surface reaches the kernel only through the Turn interface it declares", is("internal/kernel", "internal/app", "internal/store", "internal/policy", "internal/audit"), true)
	}
	rule("internal/mgmt", "the management protocol serves a Manager: it decides nothing about servers itself",
		is("internal/kernel", "internal/app", "internal/store", "internal/host", "internal/hostrelay", "internal/policy", "internal/audit"), true)
	for _, p := range []string{"internal/upstream", "internal/host", "internal/hostrelay", "internal/upstreamtools"} {
		rule(p, "the client side does not import the server side", is("internal/mcpserver", "internal/httpapi", "internal/cli", "internal/app"), true)
	}
	rule("internal/upstreamtools", "upstream tools are kernel tools: no store, no HTTP server, no local tools",
		is("internal/store", "internal/httpwire", "internal/localtools", "internal/mgmt"), true)
	rule("internal/cli", "a command parses its flags and calls the app: no store, token or HTTP server of its own",
		is("internal/store", "internal/exectoken", "internal/datadir", "internal/httpapi", "internal/httpwire", "net/http"), false)
	// Tracing: the OpenTelemetry API in the libraries, the SDK and the exporter in
	// cmd/toolgate only (docs/deployment.md, "Traces").
	sdk := is("go.opentelemetry.io/otel/sdk", "go.opentelemetry.io/otel/exporters")
	for pkg := range pkgs {
		if strings.HasPrefix(pkg, "internal/") {
			rule(pkg, "the OTel SDK and exporters are wired in cmd/toolgate only", sdk, true)
		}
	}
	// The daemon is the app's: only the CLI imports it.
	for pkg, info := range pkgs {
		if pkg != "internal/cli" && slices.Contains(info.imports, full("internal/app/daemon")) {
			t.Errorf("%s imports internal/app/daemon, which only the CLI may", pkg)
		}
	}
}
