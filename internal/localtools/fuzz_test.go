package localtools

import (
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
