package upstream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultStopGrace is how long each stage of Stop waits for the process to go:
// after stdin is closed, and again after SIGTERM, before SIGKILL.
const DefaultStopGrace = 2 * time.Second

// BaseEnvNames are the variables a stdio server inherits from toolgate's own
// environment when its Spec has no BaseEnv: enough to find programs, a home for
// caches and a locale, nothing that could hold a secret.
var BaseEnvNames = []string{
	"PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE",
	"LC_MESSAGES", "TZ", "TMPDIR",
}

// BaseEnv returns BaseEnvNames' values from toolgate's environment, as
// "NAME=value" entries (unset names are left out).
func BaseEnv() []string {
	var env []string
	for _, name := range BaseEnvNames {
		if v, ok := os.LookupEnv(name); ok {
			env = append(env, name+"="+v)
		}
	}
	return env
}

// Spec describes a stdio server to start.
type Spec struct {
	// Name labels the server in logs and errors (for example its configured
	// name). It is not secret.
	Name string
	// Command is the program: a path, or a name looked up in the PATH of the
	// server's environment (not toolgate's). It runs as is, never through a shell.
	Command string
	// Args are the arguments after the program name. They appear in no error or
	// log line this package writes.
	Args []string
	// Env holds the declared variables; they override BaseEnv. Every value is
	// treated as a secret.
	Env map[string]string
	// BaseEnv is the environment under Env, as "NAME=value" entries. Nil means
	// BaseEnv(); an empty non-nil slice means none at all.
	BaseEnv []string
	// Dir is the working directory; empty means toolgate's.
	Dir string
	// StopGrace bounds each stage of Stop (default DefaultStopGrace).
	StopGrace time.Duration
	// StderrTailBytes and StderrTailLines bound the stderr tail kept (defaults
	// DefaultStderrTailBytes, DefaultStderrTailLines).
	StderrTailBytes, StderrTailLines int
	// Logger receives lifecycle events (start, exit, escalation). Nil discards.
	Logger *slog.Logger
}

// Process is a running stdio server and its process group. Its stdin and stdout
// belong to the one Conn that DialStdio opens on it.
type Process struct {
	name    string
	program string // Spec.Command, for messages: never the arguments
	grace   time.Duration
	log     *slog.Logger

	cmd    *exec.Cmd
	pid    int
	stdin  *pipeEnd
	stdout *pipeEnd
	stderr *pipeEnd
	tail   *tail

	secrets []string // the declared values, kept out of the tail and the logs

	dialed    atomic.Bool
	stage     atomic.Int32 // stop escalation reached: 0 none, 1 stdin closed, 2 SIGTERM, 3 SIGKILL
	stopOnce  sync.Once
	exited    chan struct{} // closed once the leader is reaped
	done      chan struct{} // closed once the whole group is gone too
	status    ExitStatus    // set before exited is closed
	stderrEOF chan struct{}
}

// Start starts the server described by spec. The error names the server and
// the program, never the arguments or the environment.
func Start(spec Spec) (*Process, error) {
	label := spec.Name
	if label == "" {
		label = filepath.Base(spec.Command)
	}
	fail := func(err error) (*Process, error) {
		return nil, fmt.Errorf("upstream: starting %s (%s): %w", label, spec.Command, err)
	}
	if spec.Command == "" {
		return fail(errors.New("no command"))
	}
	if strings.IndexByte(spec.Command, 0) >= 0 {
		return fail(errors.New("command holds a NUL byte"))
	}
	for i, a := range spec.Args {
		if strings.IndexByte(a, 0) >= 0 {
			return fail(fmt.Errorf("argument %d holds a NUL byte", i+1))
		}
	}
	env, err := buildEnv(spec.BaseEnv, spec.Env)
	if err != nil {
		return fail(err)
	}
	path, err := lookPath(spec.Command, envValue(env, "PATH"), spec.Dir)
	if err != nil {
		return fail(err)
	}
	if spec.Dir != "" {
		if fi, err := os.Stat(spec.Dir); err != nil {
			return fail(fmt.Errorf("working directory: %w", err))
		} else if !fi.IsDir() {
			return fail(fmt.Errorf("working directory %s is not a directory", spec.Dir))
		}
	}

	var opened []*os.File
	closeAll := func() {
		for _, f := range opened {
			f.Close()
		}
	}
	pipe := func() (r, w *os.File, err error) {
		r, w, err = os.Pipe()
		if err == nil {
			opened = append(opened, r, w)
		}
		return r, w, err
	}
	inR, inW, err := pipe()
	if err != nil {
		return fail(err)
	}
	outR, outW, err := pipe()
	if err != nil {
		closeAll()
		return fail(err)
	}
	errR, errW, err := pipe()
	if err != nil {
		closeAll()
		return fail(err)
	}

	cmd := &exec.Cmd{
		Path:        path,
		Args:        append([]string{spec.Command}, spec.Args...),
		Env:         env,
		Dir:         spec.Dir,
		Stdin:       inR,
		Stdout:      outW,
		Stderr:      errW,
		SysProcAttr: sysProcAttr(),
	}
	if err := spawn(cmd); err != nil {
		closeAll()
		return fail(err)
	}
	// The child holds its ends now; ours would keep its stdin from ever reaching
	// EOF and its stdout from ever ending.
	inR.Close()
	outW.Close()
	errW.Close()

	log := spec.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	grace := spec.StopGrace
	if grace <= 0 {
		grace = DefaultStopGrace
	}
	p := &Process{
		name:      label,
		program:   spec.Command,
		grace:     grace,
		log:       log.With("server", label),
		cmd:       cmd,
		pid:       cmd.Process.Pid,
		stdin:     &pipeEnd{f: inW},
		stdout:    &pipeEnd{f: outR},
		stderr:    &pipeEnd{f: errR},
		tail:      newTail(spec.StderrTailBytes, spec.StderrTailLines),
		secrets:   secretValues(spec.Env),
		exited:    make(chan struct{}),
		done:      make(chan struct{}),
		stderrEOF: make(chan struct{}),
	}
	p.log.Info("upstream process started", "program", filepath.Base(spec.Command), "pid", p.pid)
	go func() {
		p.tail.drain(p.stderr)
		close(p.stderrEOF)
	}()
	go p.wait()
	return p, nil
}

// wait reaps the leader, then makes sure nothing of its group is left.
func (p *Process) wait() {
	err := p.cmd.Wait()
	p.status = exitStatus(p.cmd.ProcessState, err)
	close(p.exited)
	p.log.Info("upstream process exited", "pid", p.pid, "status", p.status.String())
	// A leader that exits may leave children (npx's node, a shell's jobs) in the
	// group; they are the server too, so they go with it.
	if groupAlive(p.pid) {
		if p.stage.Load() < 2 {
			signalGroup(p.pid, sigTERM)
		}
		deadline := time.Now().Add(p.grace)
		for groupAlive(p.pid) && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if groupAlive(p.pid) {
			p.log.Warn("upstream process group outlived its leader; killing it", "pgid", p.pid)
			signalGroup(p.pid, sigKILL)
		}
	}
	// Give the readers a moment to see EOF now that every writer is gone, then
	// release the descriptors whatever a process that escaped the group holds.
	select {
	case <-p.stderrEOF:
	case <-time.After(100 * time.Millisecond):
	}
	p.stdin.Close()
	p.stderr.Close()
	if !p.dialed.Load() {
		p.stdout.Close() // otherwise the Conn owns it and closes it when it ends
	}
	close(p.done)
}

// Pid returns the leader's pid, which is also the process group id.
func (p *Process) Pid() int { return p.pid }

// Name returns the label the process was started with.
func (p *Process) Name() string { return p.name }

// Exited is closed once the leader has exited and been reaped.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// Done is closed once the leader is reaped and the rest of its group is gone.
func (p *Process) Done() <-chan struct{} { return p.done }

// ExitStatus reports how the leader ended; valid once Exited is closed.
func (p *Process) ExitStatus() (ExitStatus, bool) {
	select {
	case <-p.exited:
		return p.status, true
	default:
		return ExitStatus{}, false
	}
}

// StderrTail returns the last lines the server wrote to stderr (bounded by the
// Spec), with every declared environment value (of 4 bytes or more) replaced
// by [redacted]: servers print their configuration.
func (p *Process) StderrTail() string { return p.redact(p.tail.String()) }

// redact replaces the declared environment values in s.
func (p *Process) redact(s string) string {
	for _, v := range p.secrets {
		s = strings.ReplaceAll(s, v, "[redacted]")
	}
	return s
}

// secretValues returns the declared values worth redacting, longest first so a
// value that contains another is replaced whole.
func secretValues(env map[string]string) []string {
	var vs []string
	for _, v := range env {
		if len(v) >= 4 {
			vs = append(vs, v)
		}
	}
	sort.Slice(vs, func(i, j int) bool { return len(vs[i]) > len(vs[j]) })
	return vs
}

// StderrBytes returns how many bytes the server has written to stderr in all.
func (p *Process) StderrBytes() int64 { return p.tail.Total() }

// Stop ends the server: it closes stdin and waits up to the grace period, then
// sends SIGTERM to the process group and waits again, then SIGKILL to the
// group, and returns once the leader is reaped and the group is gone. If ctx
// ends first the group is killed at once and ctx's error returned. Stop may be
// called more than once and concurrently.
func (p *Process) Stop(ctx context.Context) error {
	p.stopOnce.Do(func() { go p.stop() })
	select {
	case <-p.done:
		return nil
	case <-ctx.Done():
		p.Kill()
		return ctx.Err()
	}
}

func (p *Process) stop() {
	p.escalate(1)
	p.stdin.Close()
	if p.waitExit(p.grace) {
		return
	}
	p.log.Info("upstream process ignored stdin EOF; sending SIGTERM", "pgid", p.pid)
	p.escalate(2)
	signalGroup(p.pid, sigTERM)
	if p.waitExit(p.grace) {
		return
	}
	p.log.Warn("upstream process ignored SIGTERM; sending SIGKILL", "pgid", p.pid)
	p.Kill()
}

// Kill sends SIGKILL to the whole group at once.
func (p *Process) Kill() {
	p.escalate(3)
	select {
	case <-p.done:
	default:
		signalGroup(p.pid, sigKILL)
	}
}

func (p *Process) escalate(stage int32) {
	for {
		cur := p.stage.Load()
		if cur >= stage || p.stage.CompareAndSwap(cur, stage) {
			return
		}
	}
}

func (p *Process) waitExit(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.exited:
		return true
	case <-t.C:
		return false
	}
}

// pipeEnd is our end of one of the child's standard streams; Close may be
// called any number of times from any goroutine.
type pipeEnd struct {
	f    *os.File
	once sync.Once
	err  error
}

func (e *pipeEnd) Read(b []byte) (int, error)  { return e.f.Read(b) }
func (e *pipeEnd) Write(b []byte) (int, error) { return e.f.Write(b) }
func (e *pipeEnd) Close() error {
	e.once.Do(func() { e.err = e.f.Close() })
	return e.err
}

var _ io.ReadWriteCloser = (*pipeEnd)(nil)

// buildEnv returns base overridden by declared, sorted by name so the child's
// environment does not depend on map order. A name must be non-empty and hold
// no '=' or NUL; a value must hold no NUL. Errors name the variable, never its
// value.
func buildEnv(base []string, declared map[string]string) ([]string, error) {
	if base == nil {
		base = BaseEnv()
	}
	vars := make(map[string]string, len(base)+len(declared))
	for _, kv := range base {
		name, value, ok := strings.Cut(kv, "=")
		if !ok || name == "" || strings.IndexByte(kv, 0) >= 0 {
			return nil, fmt.Errorf("base environment entry %q is not NAME=value", name)
		}
		vars[name] = value
	}
	for name, value := range declared {
		if name == "" || strings.ContainsAny(name, "=\x00") {
			return nil, fmt.Errorf("environment variable name %q is not valid", name)
		}
		if strings.IndexByte(value, 0) >= 0 {
			return nil, fmt.Errorf("environment variable %s holds a NUL byte", name)
		}
		vars[name] = value
	}
	names := make([]string, 0, len(vars))
	for name := range vars {
		names = append(names, name)
	}
	sort.Strings(names)
	env := make([]string, len(names))
	for i, name := range names {
		env[i] = name + "=" + vars[name]
	}
	return env, nil
}

func envValue(env []string, name string) string {
	for _, kv := range env {
		if n, v, ok := strings.Cut(kv, "="); ok && n == name {
			return v
		}
	}
	return ""
}

// lookPath resolves command as the server's own PATH would: a name with a slash
// is used as is (relative to dir), a bare name is searched in pathList
// (relative entries relative to dir). The result is absolute, so exec.Cmd does
// not resolve it against Dir a second time.
func lookPath(command, pathList, dir string) (string, error) {
	abs := func(p string) (string, error) {
		if !filepath.IsAbs(p) && dir != "" {
			p = filepath.Join(dir, p)
		}
		return filepath.Abs(p)
	}
	if strings.ContainsRune(command, filepath.Separator) || strings.ContainsRune(command, '/') {
		p, err := abs(command)
		if err != nil {
			return "", err
		}
		if err := executable(p); err != nil {
			return "", err
		}
		return p, nil
	}
	for _, d := range filepath.SplitList(pathList) {
		if d == "" {
			d = "."
		}
		p, err := abs(filepath.Join(d, command))
		if err == nil && executable(p) == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%q not found in the server's PATH", command)
}

func executable(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	if fi.IsDir() {
		return &fs.PathError{Op: "exec", Path: p, Err: errors.New("is a directory")}
	}
	if !isExecutable(fi) {
		return &fs.PathError{Op: "exec", Path: p, Err: fs.ErrPermission}
	}
	return nil
}
