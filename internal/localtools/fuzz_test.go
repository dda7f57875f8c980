package localtools

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// FuzzPatch feeds arbitrary diffs and file contents to the parser and the applier. The
// invariant: an error or a result, never a panic or a hang; a successful apply of a
// patch with no hunks returns the input unchanged.
func FuzzPatch(f *testing.F) {
	f.Add("--- a/f\n+++ b/f\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n", "a\nb\nc\n")
	f.Add("--- /dev/null\n+++ b/n\n@@ -0,0 +1 @@\n+x\n\\ No newline at end of file\n", "")
	f.Add("--- a/f\n+++ b/f\n@@ -5,0 +6,2 @@\n+x\n+y\n", "1\n2\n3\n4\n5\n")
	f.Add("--- a/f\n+++ b/f\n@@ -1 +1 @@\n-a\n\\ No newline at end of file\n+b\n", "a")
	f.Add("@@ -1,99999999999 +1 @@\n", "x")
	f.Fuzz(func(t *testing.T, patch, content string) {
		fps, err := parsePatch(patch)
		if err != nil {
			return
		}
		for _, fp := range fps {
			out, err := apply("f", splitText(content), fp.hunks)
			if err == nil && len(fp.hunks) == 0 && out.String() != splitText(content).String() {
				t.Fatalf("empty patch changed the content")
			}
		}
	})
}

// FuzzGlob checks that any pattern and name either match or not, quickly, without a
// panic.
func FuzzGlob(f *testing.F) {
	f.Add("**/*.go", "a/b/c.go")
	f.Add("**/**/**/x", strings.Repeat("a/", 50)+"y")
	f.Add("[", "a")
	f.Fuzz(func(t *testing.T, pattern, name string) {
		if checkGlob(pattern) != nil {
			return
		}
		globMatch(pattern, name)
	})
}

// FuzzDeclarative feeds arbitrary definition files and arguments to the parser and the
// argv expansion. The invariants: an error or a definition, never a panic; an accepted
// definition runs its literal program (never a placeholder), and every expansion is
// exactly one argv element per command element, none holding a NUL, none an option
// ("-…") before a "--" unless the definition allows it for that placeholder.
func FuzzDeclarative(f *testing.F) {
	f.Add([]byte(`{"name":"lint","description":"d","command":["golangci-lint","run","{{path}}"],"inputSchema":{"type":"object","additionalProperties":false,"required":["path"],"properties":{"path":{"type":"string"}}}}`), []byte(`{"path":"./..."}`))
	f.Add([]byte(`{"name":"t","description":"d","command":["grep","--","{{q}}"],"inputSchema":{"type":"object","additionalProperties":false,"required":["q"],"properties":{"q":{"type":"string"}}}}`), []byte(`{"q":"-rf"}`))
	f.Add([]byte(`{"name":"t","description":"d","command":["x","{{n}}"],"allowLeadingDash":["n"],"inputSchema":{"type":"object","additionalProperties":false,"required":["n"],"properties":{"n":{"type":"number"}}}}`), []byte(`{"n":-1e308}`))
	f.Add([]byte(`{"name":"t","description":"d","command":["{{p}}"],"inputSchema":{"type":"object","additionalProperties":false}}`), []byte(`{}`))
	f.Add([]byte(`{"name":"t","description":"d","command":["x"],"inputSchema":{"$ref":"http://example.com/s"}} {}`), []byte(`null`))
	f.Fuzz(func(t *testing.T, file, args []byte) {
		df, spec, _, err := parseDecl(file)
		if err != nil {
			return
		}
		if len(spec.argv) != len(df.Command) || spec.holder[0] != "" || spec.argv[0] != df.Command[0] || spec.argv[0] == "" {
			t.Fatalf("accepted %q with program %q", df.Command, spec.argv)
		}
		var a map[string]any
		dec := json.NewDecoder(bytes.NewReader(args))
		dec.UseNumber()
		if dec.Decode(&a) != nil {
			return
		}
		argv, err := spec.expand(a)
		if err != nil {
			return
		}
		if len(argv) != len(df.Command) || argv[0] != df.Command[0] {
			t.Fatalf("expansion %q of %q", argv, df.Command)
		}
		afterDashDash := false
		for i, el := range argv {
			if strings.IndexByte(el, 0) >= 0 {
				t.Fatalf("argv[%d] holds a NUL", i)
			}
			if spec.holder[i] == "" {
				afterDashDash = afterDashDash || el == "--"
				continue
			}
			if strings.HasPrefix(el, "-") && !afterDashDash && !spec.dashOK[spec.holder[i]] {
				t.Fatalf("argv[%d] = %q is an option before --", i, el)
			}
		}
	})
}
