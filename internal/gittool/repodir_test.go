package gittool_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/gittool"
	"github.com/toolgate/toolgate/internal/kernel"
)

// A repository whose files live outside the workspace is refused by every git tool,
// and the outside repository is neither read nor written. Each layout is first shown
// to work for a person's git (the control), so the refusal is what stops it.
func TestRepositoryDirectoryOutsideRefused(t *testing.T) {
	setups := map[string]func(t *testing.T, ws, outside string){
		"gitdir file": func(t *testing.T, ws, outside string) {
			write(t, filepath.Join(ws, ".git"), "gitdir: "+filepath.Join(outside, ".git")+"\n")
		},
		"commondir": func(t *testing.T, ws, outside string) {
			rawGit(t, ws, "init", "-q", "-b", "main")
			write(t, filepath.Join(ws, ".git", "commondir"), filepath.Join(outside, ".git")+"\n")
		},
		"symlinked objects and refs": func(t *testing.T, ws, outside string) {
			rawGit(t, ws, "init", "-q", "-b", "main")
			for _, d := range []string{"objects", "refs"} {
				os.RemoveAll(filepath.Join(ws, ".git", d))
				if err := os.Symlink(filepath.Join(outside, ".git", d), filepath.Join(ws, ".git", d)); err != nil {
					t.Fatal(err)
				}
			}
		},
		"alternates": func(t *testing.T, ws, outside string) {
			rawGit(t, ws, "init", "-q", "-b", "main")
			write(t, filepath.Join(ws, ".git", "objects", "info", "alternates"), filepath.Join(outside, ".git", "objects")+"\n")
			head := strings.TrimSpace(rawGit(t, outside, "rev-parse", "HEAD"))
			write(t, filepath.Join(ws, ".git", "refs", "heads", "main"), head+"\n")
		},
	}
	for name, setup := range setups {
		t.Run(name, func(t *testing.T) {
			outside := newRepo(t)
			write(t, filepath.Join(outside, "secret.txt"), "outside-secret-31f\n")
			rawGit(t, outside, "add", "secret.txt")
			rawGit(t, outside, "commit", "-q", "-m", "outside-secret-31f")
			headBefore := rawGit(t, outside, "rev-parse", "HEAD")
			ws := t.TempDir()
			write(t, filepath.Join(ws, "README.md"), "mine\n")
			setup(t, ws, outside)
			if out := rawGit(t, ws, "log", "-1", "--format=%s"); !strings.Contains(out, "outside-secret-31f") {
				t.Fatalf("control: a person's git does not see the outside repository: %q", out)
			}
			k := newKit(t, ws, gittool.Options{})
			for _, c := range []struct {
				tool string
				args map[string]any
			}{
				{"git_status", map[string]any{}},
				{"git_log", map[string]any{}},
				{"git_show", map[string]any{"revision": "HEAD"}},
				{"git_diff", map[string]any{}},
				{"git_branch", map[string]any{}},
				{"git_add", map[string]any{"paths": []any{"README.md"}}},
				{"git_commit", map[string]any{"message": "pwned"}},
				{"git_checkout", map[string]any{"ref": "HEAD", "create_branch": "evil"}},
			} {
				out, err := k.call(t, c.tool, c.args)
				if codeOf(err) != kernel.CodePathOutsideWorkspace {
					t.Errorf("%s = %v, %v; want path_outside_workspace", c.tool, out, err)
				}
				if out != nil && strings.Contains(out.Text, "outside-secret-31f") {
					t.Errorf("%s read the outside repository: %s", c.tool, out.Text)
				}
				if err != nil && strings.Contains(err.Error(), "outside-secret-31f") {
					t.Errorf("%s leaked the outside repository in its error: %v", c.tool, err)
				}
			}
			if after := rawGit(t, outside, "rev-parse", "HEAD"); after != headBefore {
				t.Errorf("outside HEAD moved: %s -> %s", headBefore, after)
			}
			if st := rawGit(t, outside, "status", "--porcelain"); st != "" {
				t.Errorf("outside repository changed: %q", st)
			}
			if br := rawGit(t, outside, "branch", "--list", "evil"); br != "" {
				t.Errorf("branch created in the outside repository: %q", br)
			}
		})
	}
}

// A symbolic link that stays inside hooks/ is no reason to refuse: hooks never run.
func TestHooksLinkAllowed(t *testing.T) {
	dir := newRepo(t)
	os.RemoveAll(filepath.Join(dir, ".git", "hooks"))
	if err := os.Symlink("/nonexistent-hooks", filepath.Join(dir, ".git", "hooks")); err != nil {
		t.Fatal(err)
	}
	k := newKit(t, dir, gittool.Options{})
	if out := k.mustCall(t, "git_status", map[string]any{}); !strings.Contains(out, "main") {
		t.Errorf("status = %q", out)
	}
}

// A switch that would write protected files (a declarative tool definition, a
// .gitattributes) is refused and changes nothing; one that touches none still works.
func TestCheckoutRefusesProtectedChanges(t *testing.T) {
	dir := newRepo(t)
	rawGit(t, dir, "switch", "-q", "-c", "evil")
	write(t, filepath.Join(dir, ".agents", "tools", "main", "p.json"), "{}\n")
	write(t, filepath.Join(dir, ".gitattributes"), "* diff=x\n")
	rawGit(t, dir, "add", ".agents", ".gitattributes")
	rawGit(t, dir, "commit", "-q", "-m", "evil")
	rawGit(t, dir, "switch", "-q", "main")
	rawGit(t, dir, "switch", "-q", "-c", "plain")
	write(t, filepath.Join(dir, "plain.txt"), "plain\n")
	rawGit(t, dir, "add", "plain.txt")
	rawGit(t, dir, "commit", "-q", "-m", "plain")
	rawGit(t, dir, "switch", "-q", "main")
	k := newKit(t, dir, gittool.Options{})
	for _, args := range []map[string]any{{"ref": "evil"}, {"ref": "evil", "create_branch": "evil2"}} {
		out, err := k.call(t, "git_checkout", args)
		if codeOf(err) != kernel.CodeProtectedPath || !strings.Contains(err.Error(), ".agents/tools/main/p.json") {
			t.Errorf("git_checkout %v = %v, %v; want protected_path naming the file", args, out, err)
		}
	}
	for _, p := range []string{".agents", ".gitattributes"} {
		absent(t, filepath.Join(dir, p))
	}
	if head := strings.TrimSpace(rawGit(t, dir, "symbolic-ref", "--short", "HEAD")); head != "main" {
		t.Errorf("HEAD = %s after the refusals", head)
	}
	if br := rawGit(t, dir, "branch", "--list", "evil2"); br != "" {
		t.Errorf("branch evil2 was created: %q", br)
	}
	k.mustCall(t, "git_checkout", map[string]any{"ref": "plain"})
	present(t, filepath.Join(dir, "plain.txt"))
}

// A work-tree file with another hard link (someone linked a file from outside the
// workspace in): git_add would copy its content into the repository and git_diff would
// print it, so both refuse, as read_file does; staged diffs and an ordinary file (the
// control) still work.
func TestHardLinkedFilesNotRead(t *testing.T) {
	dir := newRepo(t)
	outside := filepath.Join(t.TempDir(), "secret")
	write(t, outside, "outside-secret-51c2\n")
	if err := os.Link(outside, filepath.Join(dir, "linked.txt")); err != nil {
		t.Fatal(err)
	}
	k := newKit(t, dir, gittool.Options{})
	for _, args := range []map[string]any{{"paths": []string{"linked.txt"}}, {"paths": []string{"."}}} {
		if out, err := k.call(t, "git_add", args); codeOf(err) != kernel.CodePathOutsideWorkspace || !strings.Contains(err.Error(), "linked.txt") {
			t.Errorf("git_add %v = %v, %v; want path_outside_workspace", args, out, err)
		}
	}
	if st := rawGit(t, dir, "status", "--porcelain"); !strings.Contains(st, "?? linked.txt") {
		t.Errorf("linked.txt was staged: %q", st)
	}
	// A tracked file replaced by a hard link to the outside file.
	tracked := filepath.Join(dir, "README.md")
	os.Remove(tracked)
	if err := os.Link(outside, tracked); err != nil {
		t.Fatal(err)
	}
	for _, args := range []map[string]any{{}, {"paths": []string{"README.md"}}, {"target": "HEAD"}} {
		out, err := k.call(t, "git_diff", args)
		if codeOf(err) != kernel.CodePathOutsideWorkspace || (out != nil && strings.Contains(out.Text, "outside-secret")) {
			t.Errorf("git_diff %v = %v, %v; want path_outside_workspace", args, out, err)
		}
	}
	k.mustCall(t, "git_diff", map[string]any{"staged": true})
	// Control: once the file has one name again, both work.
	os.Remove(outside)
	os.Remove(filepath.Join(dir, "linked.txt"))
	write(t, filepath.Join(dir, "plain.txt"), "plain\n")
	if out := k.mustCall(t, "git_diff", map[string]any{}); !strings.Contains(out, "outside-secret") {
		t.Errorf("control diff = %q", out)
	}
	k.mustCall(t, "git_add", map[string]any{"paths": []string{"."}})
}
