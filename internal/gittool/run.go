// Package gittool is the local git tools (git_status, git_diff, git_log, git_show,
// git_add, git_commit, git_branch, git_checkout) for one workspace.
//
// A repository is data an agent can write, and git turns some of that data into
// commands (core.fsmonitor, filters, hooks, pagers, external diff and textconv drivers,
// aliases, credential helpers, remote transports). So git runs here with argv only,
// never a shell; with an environment built from scratch (no system or global config, no
// terminal prompts, no pager); with -c settings that switch off every such hook that a
// -c can switch off; and before each call the repository's own config is read and the
// call refused (unsafe_repository_config) when it has a key that could run a program.
// User values never reach git as options: revisions and new branch names are checked
// in Go against git's ref-name rules (refname.go: no leading '-', no control
// characters, none of git's revision operators beyond ^N and ~N), revisions are
// resolved with rev-parse --verify and passed after --end-of-options, and paths are
// confined to the workspace and passed after --.
// git only sees the repository at the workspace root (GIT_CEILING_DIRECTORIES), so a
// repository above the workspace is never touched.
package gittool

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/toolgate/toolgate/internal/kernel"
	"github.com/toolgate/toolgate/internal/workspace"
)

// Defaults for Options left at zero.
const (
	DefaultTimeout   = 30 * time.Second
	DefaultMaxOutput = 256 << 10
	DefaultPath      = "/usr/local/bin:/usr/bin:/bin"
	DefaultName      = "toolgate"
	DefaultEmail     = "toolgate@localhost"
)

// Options configure the git tools.
type Options struct {
	// Timeout bounds each git process.
	Timeout time.Duration
	// MaxOutput caps what one git process may print, in bytes; past it the process is
	// killed and the result says truncated.
	MaxOutput int
	// Git is the git executable (looked up in Path when empty).
	Git string
	// Path is git's PATH.
	Path string
	// Name and Email are the identity used for commits when the repository configures
	// none.
	Name, Email string
}

func (o Options) withDefaults() Options {
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.MaxOutput <= 0 {
		o.MaxOutput = DefaultMaxOutput
	}
	if o.Path == "" {
		o.Path = DefaultPath
	}
	if o.Name == "" {
		o.Name = DefaultName
	}
	if o.Email == "" {
		o.Email = DefaultEmail
	}
	return o
}

// neutralise is passed to every git process, before the subcommand. Each entry turns
// off a way the repository (or a file an agent wrote) could make git run a program,
// reach the network, or leave a background process behind. -c values also reach the
// git processes git itself starts (through GIT_CONFIG_PARAMETERS).
var neutralise = []string{
	"--no-pager",
	"--literal-pathspecs",
	"-c", "core.fsmonitor=false",
	"-c", "core.hooksPath=/dev/null",
	"-c", "core.pager=cat",
	"-c", "core.editor=false",
	"-c", "core.askPass=",
	"-c", "core.sshCommand=false",
	"-c", "credential.helper=",
	"-c", "protocol.allow=never",
	"-c", "protocol.ext.allow=never",
	"-c", "protocol.file.allow=never",
	"-c", "diff.external=",
	"-c", "commit.gpgSign=false",
	"-c", "tag.gpgSign=false",
	"-c", "log.showSignature=false",
	"-c", "gc.auto=0",
	"-c", "maintenance.auto=false",
	"-c", "submodule.recurse=false",
	"-c", "status.submoduleSummary=false",
	"-c", "diff.ignoreSubmodules=all",
	"-c", "core.untrackedCache=false",
	"-c", "color.ui=false",
}

// runner runs git for one workspace.
type runner struct {
	ws   *workspace.Workspace
	opts Options
	git  string
	// gitErr is why git could not be found, reported by every call.
	gitErr error
}

func newRunner(ws *workspace.Workspace, opts Options) *runner {
	r := &runner{ws: ws, opts: opts.withDefaults()}
	r.git = r.opts.Git
	if r.git == "" {
		for _, dir := range filepath.SplitList(r.opts.Path) {
			p := filepath.Join(dir, "git")
			if _, err := exec.LookPath(p); err == nil {
				r.git = p
				break
			}
		}
	}
	if r.git == "" {
		r.gitErr = fmt.Errorf("git not found in %s", r.opts.Path)
	}
	return r
}

// env is git's whole environment.
func (r *runner) env(readOnly bool) []string {
	env := []string{
		"PATH=" + r.opts.Path,
		"HOME=/nonexistent",
		"LANG=C.UTF-8",
		"LC_ALL=C.UTF-8",
		"TERM=dumb",
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_ATTR_NOSYSTEM=1",
		"GIT_TERMINAL_PROMPT=0",
		"GIT_PROTOCOL_FROM_USER=0",
		"GIT_NO_LAZY_FETCH=1",
		"GIT_PAGER=cat",
		"PAGER=cat",
		"GIT_EDITOR=false",
		"GIT_SEQUENCE_EDITOR=false",
		"GIT_CEILING_DIRECTORIES=" + filepath.Dir(r.ws.Dir()),
	}
	if readOnly {
		// Reads never take the index lock to refresh it.
		env = append(env, "GIT_OPTIONAL_LOCKS=0")
	}
	return env
}

// gitResult is one finished git process.
type gitResult struct {
	stdout, stderr []byte
	exitCode       int
	truncated      bool
}

// run runs git with the neutralising options and args in the workspace. A non-zero exit
// is not an error; a timeout is a *kernel.Error with code timeout.
func (r *runner) run(ctx context.Context, readOnly bool, stdin string, extra []string, args ...string) (*gitResult, error) {
	if r.gitErr != nil {
		return nil, kernel.Failed(kernel.CodeToolFailed, "%v", r.gitErr)
	}
	ctx, cancel := context.WithTimeout(ctx, r.opts.Timeout)
	defer cancel()
	argv := append(append(append([]string{}, neutralise...), extra...), args...)
	cmd := exec.CommandContext(ctx, r.git, argv...)
	cmd.Dir = r.ws.Dir()
	cmd.Env = r.env(readOnly)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	out := &capped{left: r.opts.MaxOutput, stop: cancel}
	cmd.Stdout = out.writer(&out.out)
	cmd.Stderr = out.writer(&out.err)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 2 * time.Second
	err := cmd.Run()
	res := &gitResult{truncated: out.truncated}
	res.stdout, res.stderr = out.out.Bytes(), out.err.Bytes()
	if ctx.Err() != nil && !out.truncated {
		return nil, kernel.Failed(kernel.CodeTimeout, "git %s timed out after %s", firstWord(args), r.opts.Timeout)
	}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		res.exitCode = ee.ExitCode()
	case out.truncated:
		res.exitCode = -1
	default:
		return nil, fmt.Errorf("running git %s: %w", firstWord(args), err)
	}
	return res, nil
}

func firstWord(args []string) string {
	if len(args) == 0 {
		return ""
	}
	return args[0]
}

// capped collects output under one budget; reaching it stops the process.
type capped struct {
	mu        sync.Mutex
	left      int
	out, err  bytes.Buffer
	truncated bool
	stop      func()
}

type cappedWriter struct {
	c   *capped
	buf *bytes.Buffer
}

func (c *capped) writer(b *bytes.Buffer) io.Writer { return cappedWriter{c, b} }

func (w cappedWriter) Write(p []byte) (int, error) {
	w.c.mu.Lock()
	defer w.c.mu.Unlock()
	if w.c.truncated {
		return len(p), nil
	}
	if len(p) > w.c.left {
		w.buf.Write(p[:w.c.left])
		w.c.left = 0
		w.c.truncated = true
		w.c.stop()
		return len(p), nil
	}
	w.buf.Write(p)
	w.c.left -= len(p)
	return len(p), nil
}

// preflight refuses to go on unless the workspace root is the top of a repository
// whose directory lies wholly inside the workspace and whose own config cannot make git
// run a program.
func (r *runner) preflight(ctx context.Context) error {
	res, err := r.run(ctx, true, "", nil, "config", "--list", "--name-only", "--show-scope", "--no-includes", "-z")
	if err != nil {
		return err
	}
	if res.exitCode != 0 {
		return r.failure("config", res)
	}
	var bad []string
	fields := strings.Split(string(res.stdout), "\x00")
	for i := 0; i+1 < len(fields); i += 2 {
		scope, key := fields[i], fields[i+1]
		if scope == "command" {
			continue // our own -c settings
		}
		if unsafeKey(key) {
			bad = append(bad, scope+":"+key)
		}
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		return kernel.Denied(kernel.CodeUnsafeRepositoryConfig,
			"the repository's config has keys that make git run programs (%s); the git tools refuse to run until a person removes them", strings.Join(bad, ", "))
	}
	// Only now, with include.* refused, may git read the config with its includes.
	if err := r.checkRepoDir(ctx); err != nil {
		return err
	}
	res, err = r.run(ctx, true, "", nil, "rev-parse", "--show-toplevel")
	if err != nil {
		return err
	}
	if res.exitCode != 0 {
		return r.failure("rev-parse", res)
	}
	top := strings.TrimSpace(string(res.stdout))
	if top != r.ws.Dir() {
		return kernel.Denied(kernel.CodePathOutsideWorkspace, "the repository's work tree (%s) is not the workspace", top)
	}
	return nil
}

// unsafeKey reports whether a config key (as git lists it: section and variable
// lower-cased, subsection verbatim) can make git run a program, write files outside the
// repository (trace2 targets), or point git at another work tree.
func unsafeKey(key string) bool {
	k := strings.ToLower(key)
	section, rest, _ := strings.Cut(k, ".")
	variable := rest
	if i := strings.LastIndexByte(rest, '.'); i >= 0 {
		variable = rest[i+1:]
	}
	switch section {
	case "filter", "alias", "include", "includeif", "credential", "pager", "difftool",
		"mergetool", "sendemail", "browser", "man", "guitool", "trace2", "protocol", "uploadpack":
		return true
	case "core":
		switch variable {
		case "fsmonitor", "hookspath", "sshcommand", "pager", "editor", "askpass", "gitproxy",
			"worktree", "alternaterefscommand":
			return true
		}
	case "diff":
		return variable == "command" || variable == "textconv" || variable == "external"
	case "merge":
		return variable == "driver"
	case "remote":
		return variable == "uploadpack" || variable == "receivepack" || variable == "vcs"
	case "submodule":
		return variable == "update"
	case "sequence":
		return variable == "editor"
	case "interactive":
		return variable == "difffilter"
	case "gpg":
		// gpg.ssh.defaultKeyCommand runs when a commit is ssh-signed without a key.
		return variable == "program" || variable == "defaultkeycommand"
	case "trailer":
		// trailer.<token>.command/cmd run whenever trailers are interpreted.
		return variable == "command" || variable == "cmd"
	case "web":
		return variable == "browser"
	}
	return false
}

// failure turns a failed git process into an error result naming the subcommand.
func (r *runner) failure(sub string, res *gitResult) error {
	msg := strings.TrimSpace(string(res.stderr))
	if len(msg) > 2000 {
		msg = msg[:2000] + "…"
	}
	return kernel.Failed(kernel.CodeToolFailed, "git %s failed (exit %d): %s", sub, res.exitCode, msg)
}

// maxRevBytes bounds a revision string.
const maxRevBytes = 256

// checkRevision refuses, before git sees it, a revision outside the forms CheckRevision
// accepts (which also rules out anything git could read as an option).
func checkRevision(what, rev string) error {
	if err := CheckRevision(rev); err != nil {
		return kernel.Failed(kernel.CodeInvalidRef, "%s %q is not a revision the git tools accept: %v", what, clipRev(rev), err)
	}
	return nil
}

// clipRev bounds how much of a refused value is echoed back.
func clipRev(s string) string {
	if len(s) <= maxRevBytes {
		return s
	}
	return s[:maxRevBytes] + "…"
}

// resolveCommit checks rev and resolves it to a full commit id with rev-parse --verify.
func (r *runner) resolveCommit(ctx context.Context, what, rev string) (string, error) {
	if err := checkRevision(what, rev); err != nil {
		return "", err
	}
	res, err := r.run(ctx, true, "", nil, "rev-parse", "--verify", "--quiet", "--end-of-options", rev+"^{commit}")
	if err != nil {
		return "", err
	}
	id := strings.TrimSpace(string(res.stdout))
	if res.exitCode != 0 || id == "" || strings.ContainsAny(id, " \n") {
		return "", kernel.Failed(kernel.CodeInvalidRef, "%s %q does not name a commit in this repository", what, rev)
	}
	return id, nil
}

// checkBranchName validates a new branch name with CheckBranchName: git's
// check-ref-format rules, in process.
func checkBranchName(name string) error {
	if err := CheckBranchName(name); err != nil {
		return kernel.Failed(kernel.CodeInvalidRef, "%q is not a valid branch name: %v", clipRev(name), err)
	}
	return nil
}

// paths checks and confines user paths, returning workspace-relative ones.
func (r *runner) paths(raw []string) ([]string, error) {
	out := make([]string, 0, len(raw))
	for _, p := range raw {
		if strings.HasPrefix(p, "-") {
			return nil, kernel.Failed(kernel.CodeInvalidArguments, "path %q starts with '-'; write ./%s for a file of that name", p, p)
		}
		rel, err := r.ws.Rel(p)
		if err != nil {
			return nil, err
		}
		out = append(out, rel)
	}
	return out, nil
}
