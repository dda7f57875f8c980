package gittool

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/toolgate/toolgate/internal/workspace"
)

// TestExtTransportNeutralised runs the runner's own argv against an ext:: URL: even a
// git subcommand the tools never expose cannot start a transport program, because
// protocol.allow=never travels with every call. The control shows the same URL runs
// its command when ext is allowed.
func TestExtTransportNeutralised(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	dir := t.TempDir()
	if out, err := exec.Command("git", "init", "-q", dir).CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	ws, err := workspace.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	r := newRunner(ws, Options{})
	marker := filepath.Join(t.TempDir(), "ext-ran")
	url := "ext::sh -c touch% " + marker
	for _, sub := range [][]string{{"ls-remote", url}, {"fetch", url}, {"clone", url, "c"}} {
		res, err := r.run(context.Background(), false, "", nil, sub...)
		if err != nil {
			t.Fatal(err)
		}
		if res.exitCode == 0 {
			t.Errorf("git %s succeeded", sub[0])
		}
	}
	if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("ext:: transport ran")
	}
	ctl := exec.Command("git", "-c", "protocol.ext.allow=always", "ls-remote", url)
	ctl.Dir = dir
	ctl.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
	ctl.Run()
	if _, err := os.Stat(marker); err != nil {
		t.Errorf("control: ext:: did not run when allowed, so the payload is not live: %v", err)
	}
}

func TestUnsafeKey(t *testing.T) {
	for key, want := range map[string]bool{
		"core.fsmonitor": true, "core.hooksPath": true, "core.sshCommand": true, "core.pager": true,
		"core.editor": true, "core.askPass": true, "core.gitProxy": true, "core.worktree": true,
		"filter.lfs.clean": true, "filter.x.process": true, "diff.x.textconv": true, "diff.x.command": true,
		"diff.external": true, "merge.x.driver": true, "include.path": true, "includeIf.gitdir:/x/.path": true,
		"alias.st": true, "credential.helper": true, "credential.https://x.helper": true, "pager.log": true,
		"gpg.program": true, "gpg.ssh.program": true, "sequence.editor": true, "trace2.normalTarget": true,
		"protocol.ext.allow": true, "remote.origin.uploadpack": true, "remote.origin.vcs": true,
		"submodule.x.update": true, "uploadpack.packObjectsHook": true, "core.alternateRefsCommand": true,
		"interactive.diffFilter": true, "difftool.x.cmd": true, "mergetool.x.cmd": true, "web.browser": true,
		"trailer.sign.command": true, "trailer.sign.cmd": true, "gpg.ssh.defaultKeyCommand": true,
		"trailer.sign.key": false,
		"core.bare":        false, "core.filemode": false, "remote.origin.url": false, "branch.main.remote": false,
		"user.name": false, "commit.gpgSign": false, "gpg.format": false, "diff.x.binary": false,
		"merge.x.name": false, "extensions.worktreeConfig": false, "core.repositoryformatversion": false,
		"remote.origin.fetch": false, "submodule.x.url": false,
	} {
		if got := unsafeKey(key); got != want {
			t.Errorf("unsafeKey(%q) = %v, want %v", key, got, want)
		}
	}
}
