// Package shelltool is the local bash tool: a shell command run in the workspace under
// the sandbox package's confinement. It never runs a command unconfined: where the
// machine cannot provide the sandbox, the tool refuses with sandbox_unavailable.
//
// Runner is the same confinement for other commands (declarative tools), so every
// command toolgate runs for an agent gets one environment policy: built from scratch
// (never toolgate's tokens or any secret of its own environment), stdin empty, and the
// workspace's protected paths (internal/protect) neither changed nor left behind.
package shelltool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/toolgate/toolgate/internal/kernel"
	"github.com/toolgate/toolgate/internal/protect"
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
//
// The workspace's protected paths (internal/protect) are kept from the command: those
// that exist are mounted read-only (their ancestors pinned, so they cannot be renamed
// away), and when the command has ended — every process of it, since the sandbox's PID
// namespace dies with it — the workspace is scanned again, and any protected path that
// was not there before, or is another file than it was, is removed: a mount cannot
// protect a path that does not exist yet, and a concurrent call's removal can detach a
// mount. The result is then returned with a *ProtectedChangeError.
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
	before, err := protect.Scan(dir, r.opts.ExtraWritable)
	if err != nil {
		return nil, fmt.Errorf("%w: protecting the workspace's protected paths: %v", sandbox.ErrUnavailable, err)
	}
	var roRoots []string
	if len(r.opts.ExtraReadOnly) > 0 {
		roRoots = append(append(roRoots, sandbox.DefaultReadOnlyRoots...), r.opts.ExtraReadOnly...)
	}
	res, err := sandbox.Run(ctx, sandbox.Spec{
		Argv:          argv,
		Script:        script,
		Dir:           dir,
		Env:           r.Env(),
		AllowInternet: allowInternet && r.opts.AllowInternet,
		Timeout:       timeout,
		MaxOutput:     r.opts.MaxOutput,
		WritableRoots: r.opts.ExtraWritable,
		ReadOnlyRoots: roRoots,
		ReadOnlyPaths: before.ReadOnlyPaths(),
		MaxProcesses:  r.opts.MaxProcesses,
		MaxMemory:     r.opts.MaxMemory,
		MaxFileSize:   r.opts.MaxFileSize,
	})
	if errors.Is(err, sandbox.ErrUnavailable) {
		return nil, err // nothing ran
	}
	// Checked even when the call was cancelled: the command may have run.
	changes, scanErr := before.Changes()
	if len(changes) > 0 {
		before.Remove(changes)
		return res, &ProtectedChangeError{Changes: changes, Err: err}
	}
	if scanErr != nil && err == nil {
		return res, &ProtectedChangeError{ScanErr: scanErr}
	}
	return res, err
}

// ProtectedChangeError reports what Run removed: protected paths the command created
// or replaced. The command's result stands otherwise (Run returns it alongside).
type ProtectedChangeError struct {
	Changes []protect.Change
	// ScanErr is set when the workspace could not be scanned again after the command,
	// so what it left could not be checked.
	ScanErr error
	// Err is the run's own error, if any (a cancelled call).
	Err error
}

func (e *ProtectedChangeError) Error() string { return e.describe() }

func (e *ProtectedChangeError) Unwrap() error { return e.Err }

// maxListedChanges bounds the paths a refusal names.
const maxListedChanges = 20

func (e *ProtectedChangeError) describe() string {
	if len(e.Changes) == 0 {
		return fmt.Sprintf("the workspace could not be checked for protected paths after the command (%v), so whether it left one is not known", e.ScanErr)
	}
	var parts []string
	for i, c := range e.Changes {
		if i == maxListedChanges {
			parts = append(parts, fmt.Sprintf("and %d more", len(e.Changes)-i))
			break
		}
		what := "replaced"
		if c.Created {
			what = "created"
		}
		if c.Removed {
			parts = append(parts, fmt.Sprintf("%s (%s, removed)", c.Path, what))
		} else {
			parts = append(parts, fmt.Sprintf("%s (%s; could not be removed: %v)", c.Path, what, c.Err))
		}
	}
	return "the command created or replaced protected paths: " + strings.Join(parts, ", ") +
		". Protected paths (git's, harness, editor and shell configuration; docs/toolgate-mcp.md) would make a harness, an editor, a shell or git run code outside the sandbox; bash never leaves one created or changed (write one with write_file under a grant that names it). The rest of what the command did stands"
}

// KernelError is the refusal a tool answers with: protected_path_changed, saying what
// was removed, followed by the command's own output (so the rest of its work is not
// lost to the caller).
func (e *ProtectedChangeError) KernelError(output string) *kernel.Error {
	msg := e.describe()
	if output != "" {
		msg += ". Its output:\n" + output
	}
	return kernel.Denied(kernel.CodeProtectedPathChanged, "%s", msg)
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
	return fmt.Sprintf("writes only inside the workspace and a scratch HOME/TMPDIR (Landlock ABI %d; every other mount is read-only, so no file metadata changes outside them either), %s, a private PID namespace (the timeout kills every process it started), a minimal environment, protected paths (.git, harness, editor and shell configuration such as .mcp.json, .claude, .vscode, .envrc) read-only, and any the command creates removed when it ends (the call is then refused with protected_path_changed), no secrets under /etc (only world-readable files there). Limits: processes: %s; memory: %s; files at most %d MiB; %d open files per process.",
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
	var pc *ProtectedChangeError
	if errors.As(err, &pc) {
		out := ""
		if res != nil {
			out = render(r.result(res), r.opts.MaxOutput)
		}
		return nil, pc.KernelError(out)
	}
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
	br := r.result(res)
	return &kernel.Output{Text: render(br, r.opts.MaxOutput), Structured: br}, nil
}

func (r *Runner) result(res *sandbox.Result) bashResult {
	return bashResult{
		ExitCode:   res.ExitCode,
		Signal:     res.Signal,
		Stdout:     strings.ToValidUTF8(string(res.Stdout), string(utf8.RuneError)),
		Stderr:     strings.ToValidUTF8(string(res.Stderr), string(utf8.RuneError)),
		Truncated:  res.Truncated,
		DurationMS: res.Duration.Milliseconds(),

		LimitExceeded: res.LimitExceeded,
	}
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
