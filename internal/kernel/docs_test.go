package kernel_test

import (
	"context"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/toolgate/toolgate/internal/kernel"
	"github.com/toolgate/toolgate/internal/policy"
)

// codesInSource returns every Code constant's value declared in errors.go.
func codesInSource(t *testing.T) map[string]bool {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "errors.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	codes := map[string]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		vs, ok := n.(*ast.ValueSpec)
		if !ok || vs.Type == nil {
			return true
		}
		if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != "Code" {
			return true
		}
		for _, v := range vs.Values {
			if lit, ok := v.(*ast.BasicLit); ok {
				s, _ := strconv.Unquote(lit.Value)
				codes[s] = true
			}
		}
		return true
	})
	return codes
}

func TestReasonCodesDocumented(t *testing.T) {
	src := codesInSource(t)
	if len(src) < 14 {
		t.Fatalf("found only %d codes in errors.go", len(src))
	}
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "reason-codes.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `([a-z_]+)` \\|").FindAllStringSubmatch(string(b), -1) {
		doc[m[1]] = true
	}
	for c := range src {
		if !doc[c] {
			t.Errorf("code %q is not in docs/reason-codes.md", c)
		}
	}
	for c := range doc {
		if !src[c] {
			t.Errorf("docs/reason-codes.md lists %q, which errors.go does not define", c)
		}
	}
}

// A tool's own coded refusal reaches the caller and the audit log unchanged.
func TestToolCodesPassThrough(t *testing.T) {
	for _, ke := range []*kernel.Error{
		kernel.Denied(kernel.CodeUnsafeRepositoryConfig, "core.fsmonitor is set"),
		kernel.Failed(kernel.CodeInvalidRef, "no such revision"),
		kernel.Denied(kernel.CodeProtectedPathChanged, "the command created .mcp.json; removed"),
	} {
		f := newFixture(t, &kernel.Tool{ID: "git.status", InputSchema: json.RawMessage(`{"type":"object"}`),
			Run: func(context.Context, *kernel.Call) (*kernel.Output, error) { return nil, ke }})
		f.grants(t, policy.Grant{Principal: "p", Tool: "git.*"})
		refusal(t, call(t, f.turn(t, "p"), "git.status", `{}`), ke.Status, ke.Code)
		want := "failed"
		if ke.Status == kernel.StatusDenied {
			want = "denied"
		}
		if e := f.aud.Last(); e.Code != string(ke.Code) || string(e.Decision) != want {
			t.Errorf("audit %s/%q, want %s/%q", e.Decision, e.Code, want, ke.Code)
		}
	}
}
