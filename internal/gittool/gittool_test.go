package gittool_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/toolgate/toolgate/internal/gittool"
	"github.com/toolgate/toolgate/internal/kernel"
	"github.com/toolgate/toolgate/internal/workspace"
)

// rawGit runs the real git as a person would, with their config honoured: the setup
// of test repositories and the positive controls that prove a payload is live.
func rawGit(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_AUTHOR_NAME=Tester", "GIT_AUTHOR_EMAIL=tester@example.com",
		"GIT_COMMITTER_NAME=Tester", "GIT_COMMITTER_EMAIL=tester@example.com", "GIT_ALLOW_PROTOCOL=ext:file:ssh")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Logf("git %v: %v\n%s", args, err, out)
	}
	return string(out)
}

func write(t testing.TB, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// newRepo makes a repository with one commit (by Tester) and no identity configured.
func newRepo(t testing.TB) string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	dir := t.TempDir()
	rawGit(t, dir, "init", "-q", "-b", "main")
	write(t, filepath.Join(dir, "README.md"), "hello\n")
	rawGit(t, dir, "add", "README.md")
	rawGit(t, dir, "commit", "-q", "-m", "initial")
	return dir
}

type kit struct {
	dir   string
	tools map[string]*kernel.Tool
}

func newKit(t testing.TB, dir string, opts gittool.Options) *kit {
	t.Helper()
	ws, err := workspace.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	k := &kit{dir: ws.Dir(), tools: map[string]*kernel.Tool{}}
	for _, tl := range gittool.Tools(ws, opts) {
		k.tools[strings.TrimPrefix(tl.ID, "local.")] = tl
	}
	return k
}

// call runs a tool as the kernel would: Access first (a refusal there stops the call),
// then Run.
func (k *kit) call(t testing.TB, name string, args map[string]any) (*kernel.Output, error) {
	t.Helper()
	tl := k.tools[name]
	if tl == nil {
		t.Fatalf("no tool %s", name)
	}
	if args == nil {
		args = map[string]any{}
	}
	if _, err := tl.Access(args); err != nil {
		return nil, err
	}
	return tl.Run(context.Background(), &kernel.Call{ID: "c", Principal: "default", Tool: tl, Args: args})
}

func (k *kit) mustCall(t testing.TB, name string, args map[string]any) string {
	t.Helper()
	out, err := k.call(t, name, args)
	if err != nil {
		t.Fatalf("%s(%v): %v", name, args, err)
	}
	return out.Text
}

// codeOf is the reason code the kernel reports for a tool's error.
func codeOf(err error) kernel.Code {
	if ke, ok := kernel.AsError(err); ok {
		return ke.Code
	}
	return ""
}

func absent(t testing.TB, path string) {
	t.Helper()
	if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s exists: the payload ran", path)
	}
}

func present(t testing.TB, path string) {
	t.Helper()
	if _, err := os.Lstat(path); err != nil {
		t.Errorf("control failed: %s was not created, so the payload is not live: %v", path, err)
	}
}

func TestSchemasAnnotationsAccess(t *testing.T) {
	k := newKit(t, newRepo(t), gittool.Options{})
	want := map[string]bool{"git_status": true, "git_diff": true, "git_log": true, "git_show": true,
		"git_branch": true, "git_add": false, "git_commit": false, "git_checkout": false}
	if len(k.tools) != len(want) {
		t.Errorf("got %d tools, want %d", len(k.tools), len(want))
	}
	for name, ro := range want {
		tl := k.tools[name]
		if tl == nil {
			t.Errorf("missing %s", name)
			continue
		}
		if tl.Annotations.ReadOnly != ro || tl.Source != "toolgate" {
			t.Errorf("%s: annotations %+v source %q", name, tl.Annotations, tl.Source)
		}
		c := jsonschema.NewCompiler()
		var doc any
		json.Unmarshal(tl.InputSchema, &doc)
		if err := c.AddResource(name, doc); err != nil {
			t.Fatal(err)
		}
		sch, err := c.Compile(name)
		if err != nil {
			t.Errorf("%s schema: %v", name, err)
			continue
		}
		var extra any
		json.Unmarshal([]byte(`{"bogus":1}`), &extra)
		if sch.Validate(extra) == nil {
			t.Errorf("%s accepts unknown properties", name)
		}
		if name == "git_diff" {
			var dash any
			json.Unmarshal([]byte(`{"target":"--output=/tmp/x"}`), &dash)
			if sch.Validate(dash) == nil {
				t.Errorf("git_diff schema accepts a target starting with '-'")
			}
		}
	}
	for _, tc := range []struct {
		tool string
		args map[string]any
		want kernel.Access
	}{
		{"git_status", nil, kernel.Access{Action: kernel.ActionRead, Resource: "repo:."}},
		{"git_log", map[string]any{"paths": []any{"src/a.go"}}, kernel.Access{Action: kernel.ActionRead, Resource: "path:src/a.go"}},
		{"git_add", map[string]any{"paths": []any{"src/a.go", "src/b/c.go"}}, kernel.Access{Action: kernel.ActionWrite, Resource: "path:src"}},
		{"git_add", map[string]any{"paths": []any{"a.go", "b.go"}}, kernel.Access{Action: kernel.ActionWrite, Resource: "path:."}},
		{"git_commit", map[string]any{"message": "m"}, kernel.Access{Action: kernel.ActionWrite, Resource: "repo:."}},
		{"git_checkout", map[string]any{"ref": "main"}, kernel.Access{Action: kernel.ActionWrite, Resource: "repo:."}},
		{"git_show", map[string]any{"revision": "HEAD", "path": "./README.md"}, kernel.Access{Action: kernel.ActionRead, Resource: "path:README.md"}},
	} {
		if args := tc.args; args == nil {
			tc.args = map[string]any{}
		}
		got, err := k.tools[tc.tool].Access(tc.args)
		if err != nil || got != tc.want {
			t.Errorf("%s %v: Access = %+v, %v; want %+v", tc.tool, tc.args, got, err, tc.want)
		}
	}
}

func TestEveryToolOnARealRepository(t *testing.T) {
	dir := newRepo(t)
	k := newKit(t, dir, gittool.Options{})
	write(t, filepath.Join(dir, "src", "a.txt"), "one\n")
	if out := k.mustCall(t, "git_status", nil); !strings.Contains(out, "## main") || !strings.Contains(out, "?? src/a.txt") {
		t.Errorf("status = %q", out)
	}
	k.mustCall(t, "git_add", map[string]any{"paths": []any{"src/a.txt"}})
	if out := k.mustCall(t, "git_diff", map[string]any{"staged": true}); !strings.Contains(out, "+one") {
		t.Errorf("staged diff = %q", out)
	}
	out := k.mustCall(t, "git_commit", map[string]any{"message": "add a\n\nbody"})
	if !strings.Contains(out, "add a") {
		t.Errorf("commit = %q", out)
	}
	if author := rawGit(t, dir, "log", "-1", "--format=%an <%ae>"); strings.TrimSpace(author) != "toolgate <toolgate@localhost>" {
		t.Errorf("author = %q, want the fixed toolgate identity", author)
	}
	logOut, err := k.call(t, "git_log", map[string]any{"max_count": float64(5)})
	if err != nil {
		t.Fatal(err)
	}
	commits := logOut.Structured.(map[string]any)["commits"]
	b, _ := json.Marshal(commits)
	var entries []map[string]string
	json.Unmarshal(b, &entries)
	if len(entries) != 2 || entries[0]["subject"] != "add a" || entries[1]["author"] != "Tester" || len(entries[0]["commit"]) != 40 {
		t.Errorf("log = %s", b)
	}
	if out := k.mustCall(t, "git_log", map[string]any{"paths": []any{"README.md"}}); strings.Count(out, "\n") != 0 || !strings.Contains(out, "initial") {
		t.Errorf("log for README.md = %q", out)
	}
	if out := k.mustCall(t, "git_show", map[string]any{"revision": "HEAD"}); !strings.Contains(out, "src/a.txt") || !strings.Contains(out, "+one") {
		t.Errorf("show = %q", out)
	}
	if out := k.mustCall(t, "git_show", map[string]any{"revision": "HEAD~1", "path": "README.md"}); out != "hello\n" {
		t.Errorf("show file = %q", out)
	}
	write(t, filepath.Join(dir, "README.md"), "hello\nworld\n")
	if out := k.mustCall(t, "git_diff", map[string]any{"paths": []any{"README.md"}, "context_lines": float64(0)}); !strings.Contains(out, "+world") {
		t.Errorf("diff = %q", out)
	}
	if out := k.mustCall(t, "git_diff", map[string]any{"target": "HEAD~1"}); !strings.Contains(out, "src/a.txt") {
		t.Errorf("diff against HEAD~1 = %q", out)
	}
	rawGit(t, dir, "checkout", "--", "README.md")
	k.mustCall(t, "git_checkout", map[string]any{"ref": "HEAD~1", "create_branch": "feature/x"})
	if out := k.mustCall(t, "git_branch", nil); !strings.Contains(out, "* feature/x") || !strings.Contains(out, "  main") {
		t.Errorf("branch = %q", out)
	}
	if _, err := os.Stat(filepath.Join(dir, "src", "a.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("checkout of HEAD~1 left src/a.txt")
	}
	k.mustCall(t, "git_checkout", map[string]any{"ref": "main"})
	if out := k.mustCall(t, "git_branch", nil); !strings.Contains(out, "* main") {
		t.Errorf("after switching back: %q", out)
	}
	k.mustCall(t, "git_checkout", map[string]any{"ref": "HEAD~1"})
	if out := k.mustCall(t, "git_status", nil); !strings.Contains(out, "HEAD (no branch)") {
		t.Errorf("detached status = %q", out)
	}
	// Failures are error results with the subcommand named.
	_, err = k.call(t, "git_commit", map[string]any{"message": "nothing"})
	if codeOf(err) != kernel.CodeToolFailed || !strings.Contains(err.Error(), "git commit failed") {
		t.Errorf("empty commit: %v", err)
	}
}

func TestEmptyRepositoryLog(t *testing.T) {
	dir := t.TempDir()
	rawGit(t, dir, "init", "-q")
	k := newKit(t, dir, gittool.Options{})
	if out := k.mustCall(t, "git_log", nil); out != "(no commits yet)" {
		t.Errorf("log = %q", out)
	}
}

// TestRepositoryConfigPayloadsNeverRun plants each execution-capable config key with a
// payload that creates a marker file, proves with the person's own git that the payload
// is live, and checks that every git tool refuses with unsafe_repository_config and the
// marker never appears.
func TestRepositoryConfigPayloadsNeverRun(t *testing.T) {
	cases := []struct {
		name    string
		setup   func(t *testing.T, dir, marker string)
		control []string // a git command that runs the payload when config is honoured
	}{
		{"fsmonitor", func(t *testing.T, dir, m string) {
			rawGit(t, dir, "config", "core.fsmonitor", "touch "+m+"; false")
		}, []string{"status"}},
		{"filter", func(t *testing.T, dir, m string) {
			rawGit(t, dir, "config", "filter.x.clean", "touch "+m+"; cat")
			write(t, filepath.Join(dir, ".gitattributes"), "*.txt filter=x\n")
			write(t, filepath.Join(dir, "f.txt"), "data\n")
		}, []string{"add", "f.txt"}},
		{"textconv", func(t *testing.T, dir, m string) {
			rawGit(t, dir, "config", "diff.x.textconv", "touch "+m+"; cat")
			write(t, filepath.Join(dir, ".gitattributes"), "*.md diff=x\n")
			write(t, filepath.Join(dir, "README.md"), "changed\n")
		}, []string{"diff"}},
		{"external diff", func(t *testing.T, dir, m string) {
			rawGit(t, dir, "config", "diff.external", "touch "+m)
			write(t, filepath.Join(dir, "README.md"), "changed\n")
		}, []string{"diff"}},
		{"sshCommand", func(t *testing.T, dir, m string) {
			rawGit(t, dir, "config", "core.sshCommand", "touch "+m+"; false")
		}, []string{"ls-remote", "ssh://example.invalid/repo"}},
		{"ext transport", func(t *testing.T, dir, m string) {
			rawGit(t, dir, "config", "protocol.ext.allow", "always")
			rawGit(t, dir, "config", "remote.origin.url", "ext::sh -c touch% "+m)
		}, []string{"ls-remote", "origin"}},
		{"alias", func(t *testing.T, dir, m string) {
			rawGit(t, dir, "config", "alias.st", "!touch "+m)
		}, []string{"st"}},
		{"include", func(t *testing.T, dir, m string) {
			write(t, filepath.Join(dir, "evil.cfg"), "[core]\n\tfsmonitor = touch "+m+"; false\n")
			rawGit(t, dir, "config", "include.path", filepath.Join(dir, "evil.cfg"))
		}, []string{"status"}},
		{"includeIf", func(t *testing.T, dir, m string) {
			write(t, filepath.Join(dir, "evil.cfg"), "[core]\n\tfsmonitor = touch "+m+"; false\n")
			rawGit(t, dir, "config", "includeIf.gitdir:/.path", filepath.Join(dir, "evil.cfg"))
		}, []string{"status"}},
		{"hooksPath", func(t *testing.T, dir, m string) {
			write(t, filepath.Join(dir, "h", "pre-commit"), "#!/bin/sh\ntouch "+m+"\n")
			os.Chmod(filepath.Join(dir, "h", "pre-commit"), 0o755)
			rawGit(t, dir, "config", "core.hooksPath", filepath.Join(dir, "h"))
		}, []string{"commit", "--allow-empty", "-m", "x"}},
		{"gpg program", func(t *testing.T, dir, m string) {
			rawGit(t, dir, "config", "gpg.program", filepath.Join(dir, "gpg.sh"))
			write(t, filepath.Join(dir, "gpg.sh"), "#!/bin/sh\ntouch "+m+"\nexit 1\n")
			os.Chmod(filepath.Join(dir, "gpg.sh"), 0o755)
			rawGit(t, dir, "config", "commit.gpgSign", "true")
		}, []string{"commit", "--allow-empty", "-m", "x"}},
		{"worktree config", func(t *testing.T, dir, m string) {
			rawGit(t, dir, "config", "extensions.worktreeConfig", "true")
			rawGit(t, dir, "config", "--worktree", "core.fsmonitor", "touch "+m+"; false")
		}, []string{"status"}},
	}
	tools := []struct {
		name string
		args map[string]any
	}{
		{"git_status", nil}, {"git_diff", nil}, {"git_log", nil},
		{"git_show", map[string]any{"revision": "HEAD"}}, {"git_add", map[string]any{"paths": []any{"f.txt"}}},
		{"git_commit", map[string]any{"message": "m", "allow_empty": true}}, {"git_branch", nil},
		{"git_checkout", map[string]any{"ref": "main"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// Control: the payload runs under the person's own git.
			ctl := newRepo(t)
			ctlMarker := filepath.Join(t.TempDir(), "control-ran")
			tc.setup(t, ctl, ctlMarker)
			rawGit(t, ctl, tc.control...)
			present(t, ctlMarker)

			dir := newRepo(t)
			marker := filepath.Join(t.TempDir(), "payload-ran")
			tc.setup(t, dir, marker)
			k := newKit(t, dir, gittool.Options{})
			for _, tl := range tools {
				_, err := k.call(t, tl.name, tl.args)
				if codeOf(err) != kernel.CodeUnsafeRepositoryConfig {
					t.Errorf("%s: err = %v, want unsafe_repository_config", tl.name, err)
				}
			}
			absent(t, marker)
		})
	}
}

// TestHooksNeverRun: a hook file alone needs no config, so calls go ahead, with hooks
// switched off.
func TestHooksNeverRun(t *testing.T) {
	ctl := newRepo(t)
	dir := newRepo(t)
	for _, d := range []string{ctl, dir} {
		for _, h := range []string{"pre-commit", "commit-msg", "post-commit", "post-checkout", "reference-transaction", "post-index-change"} {
			p := filepath.Join(d, ".git", "hooks", h)
			write(t, p, "#!/bin/sh\ntouch "+filepath.Join(d, "..", filepath.Base(d)+"-hook-"+h)+"\n")
			os.Chmod(p, 0o755)
		}
	}
	rawGit(t, ctl, "commit", "--allow-empty", "-q", "-m", "x")
	present(t, filepath.Join(ctl, "..", filepath.Base(ctl)+"-hook-pre-commit"))

	k := newKit(t, dir, gittool.Options{})
	write(t, filepath.Join(dir, "f.txt"), "x\n")
	k.mustCall(t, "git_add", map[string]any{"paths": []any{"f.txt"}})
	k.mustCall(t, "git_commit", map[string]any{"message": "with hooks present"})
	k.mustCall(t, "git_checkout", map[string]any{"ref": "HEAD~1", "create_branch": "b"})
	for _, h := range []string{"pre-commit", "commit-msg", "post-commit", "post-checkout", "reference-transaction", "post-index-change"} {
		absent(t, filepath.Join(dir, "..", filepath.Base(dir)+"-hook-"+h))
	}
}

// TestOptionInjectionRefused: values that git could read as options never reach git.
func TestOptionInjectionRefused(t *testing.T) {
	dir := newRepo(t)
	k := newKit(t, dir, gittool.Options{})
	out := filepath.Join(t.TempDir(), "written")
	for _, tc := range []struct {
		tool string
		args map[string]any
		code kernel.Code
	}{
		{"git_diff", map[string]any{"target": "--output=" + out}, kernel.CodeInvalidRef},
		{"git_diff", map[string]any{"target": "HEAD --output=" + out}, kernel.CodeInvalidRef},
		{"git_log", map[string]any{"revision": "--output=" + out}, kernel.CodeInvalidRef},
		{"git_show", map[string]any{"revision": "--output=" + out}, kernel.CodeInvalidRef},
		{"git_checkout", map[string]any{"ref": "--orphan=x"}, kernel.CodeInvalidRef},
		{"git_checkout", map[string]any{"ref": "HEAD", "create_branch": "--force"}, kernel.CodeInvalidRef},
		{"git_checkout", map[string]any{"ref": "HEAD", "create_branch": "bad..name"}, kernel.CodeInvalidRef},
		{"git_checkout", map[string]any{"ref": "no-such-branch"}, kernel.CodeInvalidRef},
		{"git_show", map[string]any{"revision": "HEAD\n--output=" + out}, kernel.CodeInvalidRef},
		{"git_show", map[string]any{"revision": strings.Repeat("a", 300)}, kernel.CodeInvalidRef},
		{"git_add", map[string]any{"paths": []any{"--output=" + out}}, kernel.CodeInvalidArguments},
		{"git_add", map[string]any{"paths": []any{"-A"}}, kernel.CodeInvalidArguments},
		{"git_diff", map[string]any{"paths": []any{"--output=" + out}}, kernel.CodeInvalidArguments},
	} {
		_, err := k.call(t, tc.tool, tc.args)
		if codeOf(err) != tc.code {
			t.Errorf("%s %v: err = %v, want %s", tc.tool, tc.args, err, tc.code)
		}
	}
	absent(t, out)
	if st := rawGit(t, dir, "status", "--porcelain"); st != "" {
		t.Errorf("repository changed: %q", st)
	}
	if br := rawGit(t, dir, "branch", "--list"); strings.TrimSpace(br) != "* main" {
		t.Errorf("branches changed: %q", br)
	}
}

// TestPathsOutsideRefused: staging a file from outside the workspace (CVE-2026-27735).
func TestPathsOutsideRefused(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "ws")
	os.Mkdir(dir, 0o755)
	rawGit(t, dir, "init", "-q", "-b", "main")
	write(t, filepath.Join(parent, "secret.txt"), "secret\n")
	os.Mkdir(filepath.Join(parent, "ws_evil"), 0o755)
	write(t, filepath.Join(parent, "ws_evil", "x.txt"), "x\n")
	os.Symlink(filepath.Join(parent, "secret.txt"), filepath.Join(dir, "abs-link"))
	os.Symlink("../secret.txt", filepath.Join(dir, "rel-link"))
	os.Symlink("/", filepath.Join(dir, "root"))
	k := newKit(t, dir, gittool.Options{})
	for _, p := range []string{"../secret.txt", filepath.Join(parent, "secret.txt"), "../ws_evil/x.txt", "a/../../secret.txt", "root/etc/passwd", "rel-link/x", "ok\x00.txt"} {
		_, err := k.call(t, "git_add", map[string]any{"paths": []any{p}})
		if codeOf(err) != kernel.CodePathOutsideWorkspace {
			t.Errorf("git_add %q: err = %v, want path_outside_workspace", p, err)
		}
		_, err = k.call(t, "git_log", map[string]any{"paths": []any{p}})
		if codeOf(err) != kernel.CodePathOutsideWorkspace {
			t.Errorf("git_log %q: err = %v, want path_outside_workspace", p, err)
		}
	}
	if staged := rawGit(t, dir, "diff", "--cached", "--name-only"); staged != "" {
		t.Errorf("something was staged: %q", staged)
	}
}

// TestRepositoryAboveWorkspaceUntouched: a workspace inside someone else's repository
// does not let git operate on that repository.
func TestRepositoryAboveWorkspaceUntouched(t *testing.T) {
	outer := newRepo(t)
	sub := filepath.Join(outer, "sub")
	write(t, filepath.Join(sub, "f.txt"), "x\n")
	k := newKit(t, sub, gittool.Options{})
	_, err := k.call(t, "git_add", map[string]any{"paths": []any{"f.txt"}})
	if err == nil {
		t.Fatalf("git_add in a workspace without its own repository succeeded")
	}
	_, err = k.call(t, "git_log", nil)
	if err == nil {
		t.Errorf("git_log read the repository above the workspace")
	}
	if staged := rawGit(t, outer, "diff", "--cached", "--name-only"); staged != "" {
		t.Errorf("outer repository changed: %q", staged)
	}
}

// TestWorktreeRedirectRefused: core.worktree would point git at files outside.
func TestWorktreeRedirectRefused(t *testing.T) {
	dir := newRepo(t)
	rawGit(t, dir, "config", "core.worktree", t.TempDir())
	k := newKit(t, dir, gittool.Options{})
	if _, err := k.call(t, "git_status", nil); codeOf(err) != kernel.CodeUnsafeRepositoryConfig {
		t.Errorf("err = %v", err)
	}
}

func TestOutputCapped(t *testing.T) {
	dir := newRepo(t)
	write(t, filepath.Join(dir, "big.txt"), strings.Repeat("0123456789abcdef\n", 4096))
	rawGit(t, dir, "add", "big.txt")
	rawGit(t, dir, "commit", "-q", "-m", "big")
	k := newKit(t, dir, gittool.Options{MaxOutput: 2000})
	out := k.mustCall(t, "git_show", map[string]any{"revision": "HEAD"})
	if !strings.HasSuffix(out, "[output truncated: git printed more than 2000 bytes and was stopped]") || len(out) > 2200 {
		t.Errorf("len %d, tail %q", len(out), out[max(0, len(out)-120):])
	}
}

// TestTimeoutKillsGit uses a stand-in for git that never finishes and starts a child:
// the call ends with code timeout and the process group is gone.
func TestTimeoutKillsGit(t *testing.T) {
	dir := newRepo(t)
	b := make([]byte, 6)
	rand.Read(b)
	mark := "tgmark" + hex.EncodeToString(b)
	fake := filepath.Join(t.TempDir(), "git")
	write(t, fake, fmt.Sprintf("#!/bin/bash\n(exec -a %s sleep 1000) &\nexec -a %s-2 sleep 1000\n", mark, mark))
	os.Chmod(fake, 0o755)
	k := newKit(t, dir, gittool.Options{Git: fake, Timeout: 500 * time.Millisecond})
	_, err := k.call(t, "git_status", nil)
	if codeOf(err) != kernel.CodeTimeout {
		t.Errorf("err = %v, want timeout", err)
	}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if c, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline")); err == nil && bytes.Contains(c, []byte(mark)) {
			t.Errorf("process %s survived: %q", e.Name(), c)
		}
	}
}

func TestGitMissing(t *testing.T) {
	k := newKit(t, t.TempDir(), gittool.Options{Path: t.TempDir()})
	_, err := k.call(t, "git_status", nil)
	if codeOf(err) != kernel.CodeToolFailed || !strings.Contains(err.Error(), "git not found") {
		t.Errorf("err = %v", err)
	}
}

func BenchmarkGitStatus(b *testing.B) {
	k := newKit(b, newRepo(b), gittool.Options{})
	for b.Loop() {
		if _, err := k.call(b, "git_status", nil); err != nil {
			b.Fatal(err)
		}
	}
}
