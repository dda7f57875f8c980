package localmcp

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The git tools through the binary: a whole small workflow, plus the hostile cases that
// must be refused without effect (paths out, option injection, repository hooks).
func TestGitTools(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	w := newWorld(t)
	init := exec.Command("git", "init", "-q", "-b", "main", w.ws)
	if out, err := init.CombinedOutput(); err != nil {
		t.Fatalf("git init: %v\n%s", err, out)
	}
	marker := filepath.Join(w.parent, "hook-ran")
	os.WriteFile(filepath.Join(w.ws, ".git", "hooks", "pre-commit"), []byte("#!/bin/sh\ntouch "+marker+"\n"), 0o755)
	s := w.start(t)
	g := func(name string) string { return "toolgate_local_git_" + name }

	s.ok(pWrite, map[string]any{"path": "a.txt", "content": "alpha\n"})
	if st := s.ok(g("status"), map[string]any{}); !strings.Contains(st, "a.txt") {
		t.Errorf("status = %s", st)
	}
	s.ok(g("add"), map[string]any{"paths": []string{"a.txt", "README.md", "src/main.go"}})
	s.ok(g("commit"), map[string]any{"message": "first commit"})
	if _, err := os.Stat(marker); err == nil {
		t.Errorf("the repository's pre-commit hook ran")
	}
	if lg := s.ok(g("log"), map[string]any{"max_count": 5}); !strings.Contains(lg, "first commit") {
		t.Errorf("log = %s", lg)
	}
	s.ok(pWrite, map[string]any{"path": "a.txt", "content": "beta\n"})
	if d := s.ok(g("diff"), map[string]any{}); !strings.Contains(d, "-alpha") || !strings.Contains(d, "+beta") {
		t.Errorf("diff = %s", d)
	}
	if sh := s.ok(g("show"), map[string]any{"revision": "HEAD", "path": "a.txt"}); !strings.Contains(sh, "alpha") {
		t.Errorf("show = %s", sh)
	}
	s.ok(g("checkout"), map[string]any{"ref": "HEAD", "create_branch": "feature"})
	if br := s.ok(g("branch"), map[string]any{}); !strings.Contains(br, "feature") {
		t.Errorf("branch = %s", br)
	}

	for _, c := range []struct {
		tool string
		args map[string]any
	}{
		{"add", map[string]any{"paths": []string{"../secret"}}},
		{"add", map[string]any{"paths": []string{"rel"}}},
		{"diff", map[string]any{"target": "--output=" + filepath.Join(w.parent, "pwned")}},
		{"log", map[string]any{"revision": "--output=" + filepath.Join(w.parent, "pwned")}},
		{"show", map[string]any{"revision": "HEAD", "path": "../secret"}},
		{"checkout", map[string]any{"ref": "-b"}},
	} {
		r := s.call(g(c.tool), c.args)
		if !r.isError || r.status == "" {
			t.Errorf("git_%s %v = %+v; want a refusal", c.tool, c.args, r)
		}
	}
	// Branch names git would create but that read as something else ("@" is HEAD in
	// every later revision), and revision syntax beyond a commit: refused invalid_ref,
	// nothing created.
	for _, c := range []struct {
		tool string
		args map[string]any
	}{
		{"checkout", map[string]any{"ref": "HEAD", "create_branch": "@"}},
		{"checkout", map[string]any{"ref": "HEAD", "create_branch": "refs/heads/x"}},
		{"checkout", map[string]any{"ref": "HEAD", "create_branch": "x\u202egpj.exe"}},
		{"checkout", map[string]any{"ref": "HEAD", "create_branch": "a..b"}},
		{"checkout", map[string]any{"ref": "HEAD", "create_branch": "x.lock"}},
		{"checkout", map[string]any{"ref": "HEAD", "create_branch": "@{-1}"}},
		{"log", map[string]any{"revision": ":/first"}},
		{"show", map[string]any{"revision": "HEAD^{tree}"}},
		{"diff", map[string]any{"target": "main..feature"}},
	} {
		if r := s.call(g(c.tool), c.args); !r.isError || r.code != "invalid_ref" {
			t.Errorf("git_%s %v = %+v; want invalid_ref", c.tool, c.args, r)
		}
	}
	if br := s.ok(g("branch"), map[string]any{}); len(strings.Split(strings.TrimSpace(br), "\n")) != 2 || strings.Contains(br, "@") || strings.Contains(br, "refs/") {
		t.Errorf("branches after the refusals:\n%s", br)
	}
	w.unchanged(t)
}
