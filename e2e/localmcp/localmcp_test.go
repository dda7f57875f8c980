package localmcp

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/app"
	"github.com/toolgate/toolgate/internal/policy"
	"github.com/toolgate/toolgate/internal/testenv"
)

// world is the hostile layout of security.md §1.1 plus a FIFO, a device node, a hard
// link to an outside file and git/toolgate files to protect.
type world struct {
	parent, ws, data string
	outside          map[string]string // file → content that must never change
}

func newWorld(t *testing.T) *world {
	t.Helper()
	parent := t.TempDir()
	w := &world{parent: parent, ws: filepath.Join(parent, "W"), data: filepath.Join(parent, "data"),
		outside: map[string]string{}}
	put := func(p, s string) {
		t.Helper()
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	put(filepath.Join(w.ws, "README.md"), "one\ntwo\nthree\n")
	put(filepath.Join(w.ws, "src", "main.go"), "package main\n")
	put(filepath.Join(w.ws, ".git", "hooks", "README"), "hooks\n")
	put(filepath.Join(w.ws, ".git", "config"), "[core]\n")
	for _, f := range []string{"secret", "W_evil/x", "hardtarget"} {
		p := filepath.Join(parent, f)
		put(p, "outside "+f+"\n")
		w.outside[p] = "outside " + f + "\n"
	}
	links := map[string]string{"abs": "/etc/passwd", "rel": "../secret", "d": "/", "sib": "../W_evil/x", "inlink": "README.md"}
	for n, target := range links {
		if err := os.Symlink(target, filepath.Join(w.ws, n)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Link(filepath.Join(parent, "hardtarget"), filepath.Join(w.ws, "hard")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(w.ws, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	return w
}

// unchanged checks that no file outside the workspace changed and that nothing new
// appeared next to it.
func (w *world) unchanged(t *testing.T) {
	t.Helper()
	for p, want := range w.outside {
		if b, err := os.ReadFile(p); err != nil || string(b) != want {
			t.Errorf("%s changed: %q, %v", p, b, err)
		}
	}
	ents, _ := os.ReadDir(w.parent)
	for _, e := range ents {
		switch e.Name() {
		case "W", "W_evil", "secret", "hardtarget", "data":
		default:
			t.Errorf("new entry next to the workspace: %s", e.Name())
		}
	}
	if _, err := os.Stat("/pwned"); err == nil {
		t.Errorf("/pwned exists")
	}
}

// grant adds g to the world's data directory (which a start has created).
func (w *world) grant(t *testing.T, g policy.Grant) {
	t.Helper()
	ctx := context.Background()
	a, err := app.Open(ctx, app.Options{DataDir: w.data})
	if err != nil {
		t.Fatal(err)
	}
	_, err = a.Store().AddGrant(ctx, g)
	a.Close()
	if err != nil {
		t.Fatal(err)
	}
}

func (w *world) start(t *testing.T, extra ...string) *server {
	return start(t, append([]string{"--workspace", w.ws, "--database-dir", w.data}, extra...)...)
}

const (
	pRead  = "toolgate_local_read_file"
	pWrite = "toolgate_local_write_file"
	pPatch = "toolgate_local_patch_file"
	pList  = "toolgate_local_list_files"
)

func TestCatalogueNames(t *testing.T) {
	w := newWorld(t)
	s := w.start(t)
	names := s.names()
	for _, want := range []string{pRead, pWrite, pPatch, pList, "toolgate_local_ask_user", "toolgate_local_bash",
		"toolgate_local_git_status", "toolgate_local_git_diff", "toolgate_local_git_log", "toolgate_local_git_show",
		"toolgate_local_git_add", "toolgate_local_git_commit", "toolgate_local_git_branch", "toolgate_local_git_checkout",
		"toolgate_server_status", "toolgate_server_version", "toolgate_server_list_servers", "toolgate_server_read_state",
		"toolgate_server_list_clients", "toolgate_server_manage_backup"} {
		if !slices.Contains(names, want) {
			t.Errorf("catalogue lacks %s: %v", want, names)
		}
	}
	for _, n := range names {
		if !strings.HasPrefix(n, "toolgate_local_") && !strings.HasPrefix(n, "toolgate_server_") && n != "toolgate_escalate" {
			t.Errorf("unexpected published name %s", n)
		}
	}
}

func TestFileToolsWork(t *testing.T) {
	w := newWorld(t)
	s := w.start(t)
	if got := s.ok(pRead, map[string]any{"path": "README.md"}); got != "one\ntwo\nthree\n" {
		t.Errorf("read = %q", got)
	}
	if got := s.ok(pRead, map[string]any{"path": "README.md", "offset": 2, "limit": 1}); !strings.HasPrefix(got, "two\n[truncated: showed lines 2–2") {
		t.Errorf("read range = %q", got)
	}
	if got := s.ok(pRead, map[string]any{"path": "inlink"}); got != "one\ntwo\nthree\n" {
		t.Errorf("read via inside link = %q", got)
	}
	s.ok(pWrite, map[string]any{"path": "docs/new.md", "content": "fresh\n"})
	if b, _ := os.ReadFile(filepath.Join(w.ws, "docs/new.md")); string(b) != "fresh\n" {
		t.Errorf("written = %q", b)
	}
	s.ok(pPatch, map[string]any{"patch": "--- a/README.md\n+++ b/README.md\n@@ -1,3 +1,3 @@\n one\n-two\n+TWO\n three\n"})
	if b, _ := os.ReadFile(filepath.Join(w.ws, "README.md")); string(b) != "one\nTWO\nthree\n" {
		t.Errorf("patched = %q", b)
	}
	r := s.call(pPatch, map[string]any{"patch": "--- a/README.md\n+++ b/README.md\n@@ -1,2 +1,2 @@\n one\n-nope\n+x\n"})
	if !r.isError || !strings.Contains(r.text, `expected \"nope\" at line 2, found \"TWO\"`) {
		t.Errorf("patch mismatch = %+v", r)
	}
	list := s.ok(pList, map[string]any{"max_depth": 2})
	for _, want := range []string{"README.md\n", "docs/new.md\n", "d -> /\n", "src/main.go\n", "fifo [a FIFO]\n"} {
		if !strings.Contains(list, want) {
			t.Errorf("list lacks %q:\n%s", want, list)
		}
	}
	if got := s.ok(pList, map[string]any{"pattern": "**/*.go"}); got != "src/main.go\n" {
		t.Errorf("glob = %q", got)
	}
	if got := s.ok(pList, map[string]any{"max_entries": 1}); !strings.Contains(got, "[truncated: stopped at 1 entries") {
		t.Errorf("list cap = %q", got)
	}
	w.unchanged(t)
}

func TestHostilePathsRefusedWithoutSideEffects(t *testing.T) {
	w := newWorld(t)
	s := w.start(t)
	const code = "path_outside_workspace"
	readBad := []string{"..", "../secret", "../W_evil/x", "../W_evil", filepath.Join(w.parent, "secret"), "/etc/passwd",
		"abs", "rel", "d", "d/etc/passwd", "sib", "README.md\x00.txt", "src/../../secret"}
	for _, p := range readBad {
		r := s.refused(pRead, map[string]any{"path": p}, code)
		if strings.Contains(r.text, "outside secret") || strings.Contains(r.text, "root:") {
			t.Errorf("read %q leaked content: %q", p, r.text)
		}
		s.refused(pList, map[string]any{"path": p}, code)
	}
	writeBad := append(readBad, "hard", "d/pwned", "inlink", "d/tmp/x")
	for _, p := range writeBad {
		s.refused(pWrite, map[string]any{"path": p, "content": "pwned"}, code)
		patchCode := code
		if strings.Contains(p, "\x00") {
			patchCode = "invalid_arguments" // a patch with a NUL byte is refused before any path is read
		}
		s.refused(pPatch, map[string]any{"patch": "--- /dev/null\n+++ b/" + p + "\n@@ -0,0 +1 @@\n+pwned\n"}, patchCode)
	}
	// The hard link's shared inode is untouched, and so is the in-workspace name.
	if b, _ := os.ReadFile(filepath.Join(w.ws, "hard")); string(b) != "outside hardtarget\n" {
		t.Errorf("hard link content changed: %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(w.ws, "README.md")); string(b) != "one\ntwo\nthree\n" {
		t.Errorf("README changed through inlink: %q", b)
	}
	w.unchanged(t)
}

// A FIFO or a device inside the workspace answers at once instead of blocking the call.
func TestFIFOAndDeviceNeverBlock(t *testing.T) {
	w := newWorld(t)
	paths := []string{"fifo"}
	if err := syscall.Mknod(filepath.Join(w.ws, "zero"), syscall.S_IFCHR|0o666, 1<<8|5); err == nil {
		paths = append(paths, "zero")
	} else {
		t.Logf("cannot create a /dev/zero node in the workspace (%v); the link case still runs", err)
	}
	os.Symlink("/dev/zero", filepath.Join(w.ws, "zerolink"))
	s := w.start(t)
	for _, p := range paths {
		done := make(chan result, 1)
		go func() { done <- s.call(pRead, map[string]any{"path": p}) }()
		select {
		case r := <-done:
			if !r.isError || !strings.Contains(r.text, "only regular files are read") {
				t.Errorf("read %s = %+v", p, r)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("read_file %s blocked", p)
		}
	}
	s.refused(pRead, map[string]any{"path": "zerolink"}, "path_outside_workspace")
	r := s.call(pWrite, map[string]any{"path": "fifo", "content": "x"})
	if !r.isError || !strings.Contains(r.text, "not a regular file") {
		t.Errorf("write fifo = %+v", r)
	}
}

// Protected paths need a grant that names them; the default broad grant is not enough.
func TestProtectedPathsNeedANamingGrant(t *testing.T) {
	w := newWorld(t)
	hook := filepath.Join(w.ws, ".git", "hooks", "pre-commit")
	{
		s := w.start(t)
		for _, p := range []string{".git/hooks/pre-commit", ".git/config", ".gitattributes", "src/.gitattributes", ".agents/tools/main/x.json"} {
			r := s.call(pWrite, map[string]any{"path": p, "content": "#!/bin/sh\ntouch /tmp/pwned\n"})
			if !r.isError || r.status != "denied" || r.code != "protected_path" {
				t.Errorf("write %s = %+v; want denied protected_path", p, r)
			}
			pr := s.call(pPatch, map[string]any{"patch": "--- /dev/null\n+++ b/" + p + "\n@@ -0,0 +1 @@\n+x\n"})
			if !pr.isError || pr.code != "protected_path" {
				t.Errorf("patch %s = %+v; want protected_path", p, pr)
			}
		}
		s.session.Close()
	}
	if _, err := os.Stat(hook); err == nil {
		t.Fatalf("hook written without a grant")
	}
	if b, _ := os.ReadFile(filepath.Join(w.ws, ".git", "config")); string(b) != "[core]\n" {
		t.Errorf(".git/config changed: %q", b)
	}
	// A grant naming the hook allows exactly it.
	w.grant(t, policy.Grant{Principal: "default", Tool: "local.write_file", Action: "write",
		Resource: "path:.git/hooks/pre-commit", Effect: policy.Allow, Note: "e2e"})
	s := w.start(t)
	s.ok(pWrite, map[string]any{"path": ".git/hooks/pre-commit", "content": "#!/bin/sh\n"})
	if b, _ := os.ReadFile(hook); string(b) != "#!/bin/sh\n" {
		t.Errorf("hook = %q", b)
	}
	r := s.call(pWrite, map[string]any{"path": ".git/config", "content": "x"})
	if !r.isError || r.code != "protected_path" {
		t.Errorf(".git/config with a hook-only grant = %+v", r)
	}
}

func TestAskUserAndControlPlane(t *testing.T) {
	w := newWorld(t)
	s := w.start(t)
	// The SDK picks the stateless 2026-07-28 revision: ask_user answers
	// input_required and the SDK's MRTR middleware asks and retries (both eras
	// in askuser_test.go).
	if v := s.session.InitializeResult().ProtocolVersion; v != "2026-07-28" {
		t.Errorf("negotiated %q", v)
	}
	if got := s.ok("toolgate_local_ask_user", map[string]any{"question": "Proceed with merge?"}); got != "answer to: Proceed with merge?" {
		t.Errorf("ask_user = %q", got)
	}
	if len(s.asked) != 1 {
		t.Errorf("elicitations = %v", s.asked)
	}
	// A client that cannot answer gets a clear failed result, not a hang.
	s2 := startClient(t, false, baseEnv(t), testenv.Binary(t), "mcp", "--workspace", w.ws, "--database-dir", w.data)
	r := s2.call("toolgate_local_ask_user", map[string]any{"question": "Anyone there?"})
	if !r.isError || r.status != "failed" || !strings.Contains(r.text, "elicitation") {
		t.Errorf("ask_user without elicitation = %+v", r)
	}
	st := s.ok("toolgate_server_status", map[string]any{})
	if !strings.Contains(st, `"workspace": "`+w.ws+`"`) || !strings.Contains(st, `"read_file"`) {
		t.Errorf("status = %s", st)
	}
	if v := s.ok("toolgate_server_version", map[string]any{}); !strings.Contains(v, `"version"`) {
		t.Errorf("version = %s", v)
	}
	if l := s.ok("toolgate_server_list_servers", map[string]any{}); !strings.Contains(l, `"servers": []`) {
		t.Errorf("list_servers = %s", l)
	}
	// This session is a client (the SDK speaks the stateless revision here: no
	// initialize, so no clientInfo).
	if l := s.ok("toolgate_server_list_clients", map[string]any{}); !strings.Contains(l, `"transport": "stdio"`) || !strings.Contains(l, `"principal": "default"`) {
		t.Errorf("list_clients = %s", l)
	}
	// A backup is a write: the default server.* read grant does not allow it.
	if r := s.call("toolgate_server_manage_backup", map[string]any{"action": "create"}); !r.isError || r.code != "no_matching_grant" {
		t.Errorf("manage_backup under the default grants = %+v", r)
	}
}

func TestFiltersAndPrefixes(t *testing.T) {
	w := newWorld(t)
	names := w.start(t, "--tools-profile", "minimal", "--tool-prefix", "none").names()
	if !slices.Contains(names, "read_file") || !slices.Contains(names, "list_files") || slices.Contains(names, "write_file") ||
		!slices.Contains(names, "toolgate_server_status") {
		t.Errorf("minimal/none = %v", names)
	}
	names = w.start(t, "--tools", "read_file,write_file", "--tool-prefix", "my_").names()
	if !slices.Contains(names, "my_read_file") || !slices.Contains(names, "my_write_file") || slices.Contains(names, "my_list_files") {
		t.Errorf("--tools = %v", names)
	}
	names = w.start(t, "--no-local-tools").names()
	for _, n := range names {
		if !strings.HasPrefix(n, "toolgate_server_") && n != "toolgate_escalate" {
			t.Errorf("--no-local-tools published %s", n)
		}
	}
}

func TestBadFlagsFail(t *testing.T) {
	w := newWorld(t)
	for _, args := range [][]string{
		{"--tools-profile", "bogus"}, {"--tools", "rm_rf"}, {"--tool-prefix", "a b"}, {"--workspace", filepath.Join(w.parent, "missing")},
		{"--local-tools", "--no-local-tools"},
	} {
		cmd := execBinary(t, append([]string{"mcp", "--database-dir", w.data, "--workspace", w.ws}, args...)...)
		out, err := cmd.Output()
		if err == nil {
			t.Errorf("%v succeeded", args)
		}
		if len(out) != 0 {
			t.Errorf("%v wrote to stdout: %q", args, out)
		}
	}
}
