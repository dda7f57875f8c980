// Package shelltool is the local bash tool: a shell command run in the workspace under
// the sandbox package's confinement. It never runs a command unconfined: where the
// machine cannot provide the sandbox, the tool refuses with sandbox_unavailable.
//
// Runner is the same confinement for other commands (declarative tools), so every
// command toolgate runs for an agent gets one environment policy: built from scratch
// (never toolgate's tokens or any secret of its own environment), stdin empty, protected
// repository files read-only.
package shelltool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/toolgate/toolgate/internal/kernel"
	"github.com/toolgate/toolgate/internal/sandbox"
	"github.com/toolgate/toolgate/internal/workspace"
)

// Defaults for Options left at zero.
const (
	DefaultTimeout    = 60 * time.Second
	DefaultMaxTimeout = 600 * time.Second
	DefaultMaxOutput  = 256 << 10
	DefaultPath       = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	maxCommandBytes   = 64 << 10
)

// Options configure the bash tool and Runner.
type Options struct {
	// AllowInternet keeps the host network; otherwise commands get a fresh, empty
	// network namespace.
	AllowInternet bool
	// DefaultTimeout applies when a call gives none; MaxTimeout bounds what a call may
	// ask for.
	DefaultTimeout, MaxTimeout time.Duration
	// MaxOutput caps stdout plus stderr in bytes.
	MaxOutput int
	// Path is the child's PATH (DefaultPath when empty).
	Path string
	// ExtraReadOnly and ExtraWritable add directories beyond the system directories
	// (read-only) and the workspace plus scratch (writable), e.g. a toolchain or a
	// module cache.
	ExtraReadOnly, ExtraWritable []string
	// MaxProcesses, MaxMemory and MaxFileSize are per-call resource limits (the
	// sandbox's defaults when zero; see sandbox.Spec).
	MaxProcesses int
	MaxMemory    int64
	MaxFileSize  int64
}

func (o Options) withDefaults() Options {
	if o.DefaultTimeout <= 0 {
		o.DefaultTimeout = DefaultTimeout
	}
	if o.MaxTimeout <= 0 {
		o.MaxTimeout = DefaultMaxTimeout
	}
	if o.DefaultTimeout > o.MaxTimeout {
		o.DefaultTimeout = o.MaxTimeout
	}
	if o.MaxOutput <= 0 {
		o.MaxOutput = DefaultMaxOutput
	}
	if o.Path == "" {
		o.Path = DefaultPath
	}
	return o
}

// protectedInWorkspace are workspace paths made read-only inside the sandbox when they
// exist (workspace.IsProtected names the same kind of files for the file tools).
var protectedInWorkspace = []string{
	".git/config", ".git/hooks", ".git/info", ".git/config.worktree", ".git/commondir",
	".gitattributes", ".gitmodules", ".toolgate", ".agents/tools",
}

// Runner runs commands in one workspace under the sandbox.
type Runner struct {
	ws   *workspace.Workspace
	opts Options
}

// NewRunner returns a Runner for ws.
func NewRunner(ws *workspace.Workspace, opts Options) *Runner {
	return &Runner{ws: ws, opts: opts.withDefaults()}
}

// Env returns the whole environment a confined command gets (HOME and TMPDIR are then
// pointed at the per-call scratch directory by the sandbox). Nothing comes from
// toolgate's own environment.
func (r *Runner) Env() []string {
	return []string{"PATH=" + r.opts.Path, "LANG=C.UTF-8", "LC_ALL=C.UTF-8", "TERM=dumb"}
}

// Run runs argv in the workspace. allowInternet is honoured only when the Runner's
// options allow the internet. timeout <= 0 means the default; it is capped at
// MaxTimeout. Errors wrap sandbox.ErrUnavailable when confinement is missing.
func (r *Runner) Run(ctx context.Context, argv []string, allowInternet bool, timeout time.Duration) (*sandbox.Result, error) {
	return r.run(ctx, argv, nil, allowInternet, timeout)
}

// run is Run with a script the command reads from sandbox.ScriptFD (nil for none).
func (r *Runner) run(ctx context.Context, argv []string, script []byte, allowInternet bool, timeout time.Duration) (*sandbox.Result, error) {
	if timeout <= 0 {
		timeout = r.opts.DefaultTimeout
	}
	if timeout > r.opts.MaxTimeout {
		timeout = r.opts.MaxTimeout
	}
	dir := r.ws.Dir()
	if err := ensureHooksDir(dir); err != nil {
		return nil, err
	}
	ro, err := ensureAgentsTools(r.ws)
	if err != nil {
		return nil, err
	}
	if fi, err := os.Lstat(filepath.Join(dir, ".git")); err == nil && fi.Mode().IsRegular() {
		// A gitdir pointer: keep it from being redirected to another repository.
		ro = append(ro, filepath.Join(dir, ".git"))
	}
	for _, p := range protectedInWorkspace {
		ro = append(ro, filepath.Join(dir, filepath.FromSlash(p)))
	}
	var roRoots []string
	if len(r.opts.ExtraReadOnly) > 0 {
		roRoots = append(append(roRoots, sandbox.DefaultReadOnlyRoots...), r.opts.ExtraReadOnly...)
	}
	return sandbox.Run(ctx, sandbox.Spec{
		Argv:          argv,
		Script:        script,
		Dir:           dir,
		Env:           r.Env(),
		AllowInternet: allowInternet && r.opts.AllowInternet,
		Timeout:       timeout,
		MaxOutput:     r.opts.MaxOutput,
		WritableRoots: r.opts.ExtraWritable,
		ReadOnlyRoots: roRoots,
		ReadOnlyPaths: ro,
		MaxProcesses:  r.opts.MaxProcesses,
		MaxMemory:     r.opts.MaxMemory,
		MaxFileSize:   r.opts.MaxFileSize,
	})
}

// ensureHooksDir creates .git/hooks when .git is a directory without one, so it can be
// mounted read-only: otherwise a command could create hooks that the person's own git
// would later run. (git init creates the same empty directory.)
func ensureHooksDir(dir string) error {
	gitDir := filepath.Join(dir, ".git")
	fi, err := os.Lstat(gitDir)
	if err != nil || !fi.IsDir() {
		return nil
	}
	hooks := filepath.Join(gitDir, "hooks")
	if _, err := os.Lstat(hooks); errors.Is(err, fs.ErrNotExist) {
		if err := os.Mkdir(hooks, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("creating %s to protect it: %w", hooks, err)
		}
	}
	return nil
}

// Tools returns the bash tool for ws.
func Tools(ws *workspace.Workspace, opts Options) []*kernel.Tool {
	r := NewRunner(ws, opts)
	return []*kernel.Tool{r.bashTool()}
}

func (r *Runner) bashTool() *kernel.Tool {
	o := r.opts
	caps := sandbox.Probe()
	state := describe(caps, o)
	internet := o.AllowInternet
	schema := map[string]any{
		"$schema": "https://json-schema.org/draft/2020-12/schema",
		"type":    "object",
		"properties": map[string]any{
			"command": map[string]any{
				"type": "string", "minLength": 1, "maxLength": maxCommandBytes,
				"description": "Bash script to run (as bash --noprofile --norc -c would). The working directory is the workspace; stdin is empty.",
			},
			"timeout_seconds": map[string]any{
				"type": "integer", "minimum": 1, "maximum": int(o.MaxTimeout / time.Second),
				"description": fmt.Sprintf("Seconds before the whole process tree is killed (default %d).", int(o.DefaultTimeout/time.Second)),
			},
		},
		"required":             []string{"command"},
		"additionalProperties": false,
	}
	outSchema := map[string]any{
		"$schema": "https://json-schema.org/draft/2020-12/schema",
		"type":    "object",
		"properties": map[string]any{
			"exit_code": map[string]any{"type": "integer", "description": "Exit status; -1 when ended by a signal."},
			"signal":    map[string]any{"type": "string"},
			"stdout":    map[string]any{"type": "string"},
			"stderr":    map[string]any{"type": "string"},
			"truncated": map[string]any{"type": "boolean", "description": "Output reached the cap; the command was stopped there."},
			"limit_exceeded": map[string]any{"type": "string", "enum": []string{"processes", "memory"},
				"description": "A resource limit of the call was reached: processes (the process limit; the command was stopped) or memory (the kernel killed a process of the call)."},
			"duration_ms": map[string]any{"type": "integer", "minimum": 0},
		},
		"required":             []string{"exit_code", "stdout", "stderr", "truncated", "duration_ms"},
		"additionalProperties": false,
	}
	return &kernel.Tool{
		ID:    "local.bash",
		Title: "Run a bash command in the workspace",
		Description: "Runs a bash command in the workspace, confined: " + state +
			fmt.Sprintf(" Output (stdout plus stderr) is capped at %d bytes; past the cap the command is stopped and the result says truncated. A command that exits non-zero is a normal result.", o.MaxOutput),
		InputSchema:  mustJSON(schema),
		OutputSchema: mustJSON(outSchema),
		Annotations:  kernel.Annotations{Destructive: true, OpenWorld: &internet},
		Source:       "toolgate",
		Access: func(map[string]any) (kernel.Access, error) {
			return kernel.Access{Action: kernel.ActionExecute, Resource: "path:."}, nil
		},
		Run: r.runBash,
	}
}

// describe states the confinement in force, for the tool description.
func describe(c sandbox.Capabilities, o Options) string {
	internet := o.AllowInternet
	fileCap := o.MaxFileSize
	if fileCap <= 0 {
		fileCap = sandbox.DefaultMaxFileSize
	}
	if !c.Available {
		return "UNAVAILABLE on this machine (" + c.Reason + "), so every call is refused."
	}
	net := "no network (a fresh network namespace)"
	if internet {
		net = "network allowed"
	}
	return fmt.Sprintf("writes only inside the workspace and a scratch HOME/TMPDIR (Landlock ABI %d; every other mount is read-only, so no file metadata changes outside them either), %s, a private PID namespace (the timeout kills every process it started), a minimal environment, .git/config and .git/hooks read-only, no secrets under /etc (only world-readable files there). Limits: processes: %s; memory: %s; files at most %d MiB; %d open files per process.",
		c.LandlockABI, net, c.ProcessLimit, c.MemoryLimit, fileCap>>20, sandbox.DefaultMaxOpenFiles)
}

type bashResult struct {
	ExitCode  int    `json:"exit_code"`
	Signal    string `json:"signal,omitempty"`
	Stdout    string `json:"stdout"`
	Stderr    string `json:"stderr"`
	Truncated bool   `json:"truncated"`
	// LimitExceeded is "processes" or "memory" when the call reached that limit.
	LimitExceeded string `json:"limit_exceeded,omitempty"`
	DurationMS    int64  `json:"duration_ms"`
}

func (r *Runner) runBash(ctx context.Context, call *kernel.Call) (*kernel.Output, error) {
	cmd, ok := call.Args["command"].(string)
	if !ok || cmd == "" {
		return nil, kernel.Failed(kernel.CodeInvalidArguments, "command must be a non-empty string")
	}
	if len(cmd) > maxCommandBytes || strings.IndexByte(cmd, 0) >= 0 {
		return nil, kernel.Failed(kernel.CodeInvalidArguments, "command must be at most %d bytes without NUL bytes", maxCommandBytes)
	}
	timeout := r.opts.DefaultTimeout
	if v, present := call.Args["timeout_seconds"]; present {
		secs, ok := number(v)
		if !ok || secs < 1 || time.Duration(secs)*time.Second > r.opts.MaxTimeout {
			return nil, kernel.Failed(kernel.CodeInvalidArguments, "timeout_seconds must be an integer from 1 to %d", int(r.opts.MaxTimeout/time.Second))
		}
		timeout = time.Duration(secs) * time.Second
	}
	res, err := r.run(ctx, bashArgv, []byte(cmd), true, timeout)
	if err != nil {
		if errors.Is(err, sandbox.ErrUnavailable) {
			return nil, kernel.Failed(kernel.CodeSandboxUnavailable, "bash refused: %v", err)
		}
		if ctx.Err() != nil {
			return nil, kernel.Failed(kernel.CodeTimeout, "bash call ended: %v", ctx.Err())
		}
		return nil, fmt.Errorf("running bash: %w", err)
	}
	if res.TimedOut {
		return nil, kernel.Failed(kernel.CodeTimeout, "bash command timed out after %s; the whole process tree was killed", timeout).WithRetryable(false)
	}
	br := bashResult{
		ExitCode:   res.ExitCode,
		Signal:     res.Signal,
		Stdout:     strings.ToValidUTF8(string(res.Stdout), string(utf8.RuneError)),
		Stderr:     strings.ToValidUTF8(string(res.Stderr), string(utf8.RuneError)),
		Truncated:  res.Truncated,
		DurationMS: res.Duration.Milliseconds(),

		LimitExceeded: res.LimitExceeded,
	}
	return &kernel.Output{Text: render(br, r.opts.MaxOutput), Structured: br}, nil
}

// bashArgv runs a command that is not in it. bash's argv, like every process's, is in
// /proc/PID/cmdline, which every user of the host can read; the command (which may hold
// a token or a private path) travels instead in the sandbox's script descriptor, a
// memory file. The bootstrap reads it whole (a seekable file: in blocks), closes the
// descriptor so the command's own processes never see it, and runs it with eval, which
// parses and executes it exactly as -c does (command by command, so a later syntax
// error does not stop earlier commands): $0 stays /bin/bash, there are no positional
// parameters, exit status, traps, set -e, aliases and line numbers are those of -c,
// and BASH_EXECUTION_STRING is the command. The one visible difference: a syntax error
// is reported as "/bin/bash: eval: line N: …" instead of "/bin/bash: -c: line N: …".
// C is unset before the command runs.
var bashArgv = []string{"/bin/bash", "--noprofile", "--norc", "-c",
	fmt.Sprintf(`IFS= read -r -d '' -u %d C; exec %d<&-; BASH_EXECUTION_STRING=$C; eval "unset -v C; $C"`, sandbox.ScriptFD, sandbox.ScriptFD)}

// render is the text form of a bash result: stdout, then stderr and the exit status
// under explicit headers, then the truncation marker.
func render(b bashResult, max int) string {
	var s strings.Builder
	s.WriteString(b.Stdout)
	if b.Stderr != "" {
		if s.Len() > 0 && !strings.HasSuffix(s.String(), "\n") {
			s.WriteByte('\n')
		}
		s.WriteString("[stderr]\n")
		s.WriteString(b.Stderr)
	}
	if s.Len() > 0 && !strings.HasSuffix(s.String(), "\n") {
		s.WriteByte('\n')
	}
	if b.Truncated {
		fmt.Fprintf(&s, "[output truncated: the %d-byte cap was reached and the command was stopped]\n", max)
	}
	switch b.LimitExceeded {
	case "processes":
		s.WriteString("[process limit reached: a fork was refused, so the command was stopped]\n")
	case "memory":
		s.WriteString("[memory limit reached: the kernel killed a process of this command]\n")
	}
	if b.Signal != "" {
		fmt.Fprintf(&s, "[killed by signal: %s]", b.Signal)
	} else {
		fmt.Fprintf(&s, "[exit code %d]", b.ExitCode)
	}
	return s.String()
}

// number accepts a JSON number that is a whole value.
func number(v any) (int64, bool) {
	switch n := v.(type) {
	case float64:
		if n != float64(int64(n)) {
			return 0, false
		}
		return int64(n), true
	case int:
		return int64(n), true
	case int64:
		return n, true
	case json.Number:
		i, err := n.Int64()
		return i, err == nil
	}
	return 0, false
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
