//go:build linux

package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Run runs spec confined and returns what it did. A command that exits non-zero is not
// an error. Errors are ErrUnavailable (wrapped with the reason) when confinement cannot
// be provided, ctx's error when ctx ends first, or a setup error for a bad Spec.
func Run(ctx context.Context, spec Spec) (*Result, error) {
	if len(spec.Argv) == 0 || spec.Argv[0] == "" {
		return nil, errors.New("sandbox: empty argv")
	}
	if !filepath.IsAbs(spec.Dir) {
		return nil, fmt.Errorf("sandbox: working directory %q is not absolute", spec.Dir)
	}
	if st, err := os.Stat(spec.Dir); err != nil || !st.IsDir() {
		return nil, fmt.Errorf("sandbox: working directory %q is not a directory", spec.Dir)
	}
	caps := Probe()
	if !caps.Available {
		return nil, fmt.Errorf("%w: %s", ErrUnavailable, caps.Reason)
	}
	timeout := spec.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	maxOut := spec.MaxOutput
	if maxOut <= 0 {
		maxOut = DefaultMaxOutput
	}

	id := currentIdentity()
	scratch, err := os.MkdirTemp("", "toolgate-scratch-")
	if err != nil {
		return nil, fmt.Errorf("sandbox: creating scratch directory: %w", err)
	}
	defer removeAll(scratch)

	binds, err := planBinds(spec)
	if err != nil {
		return nil, err
	}
	ro := spec.ReadOnlyRoots
	if ro == nil {
		ro = DefaultReadOnlyRoots
	}
	filtered := spec.FilteredRoots
	if filtered == nil {
		filtered = FilteredRoots
	}
	read, listOnly, err := planReadsCached(ro, filtered)
	if err != nil {
		return nil, err
	}
	writable := append([]string{spec.Dir, scratch}, spec.WritableRoots...)
	mounts, err := prepareMounts(id, writable, ro)
	if err != nil {
		return nil, err
	}
	defer mounts.close()
	lim := limitsFor(spec, timeout)
	leaf, err := cgroup().newLeaf(lim.procs, lim.memory)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	defer leaf.remove()
	cfg := helperConfig{
		Mode:      "exec",
		Argv:      spec.Argv,
		Env:       childEnv(spec.Env, scratch),
		Dir:       spec.Dir,
		NewNet:    !spec.AllowInternet,
		MountProc: true,
		Landlock:  true,
		ReadOnly:  read,
		Writable:  writable,
		Binds:     binds,
		DropCaps:  true,
		Seccomp:   caps.seccompOK,

		ReadDirOnly:    listOnly,
		Rlimits:        lim.rlimits(leaf),
		Attach:         mounts.attach,
		ReadOnlyMounts: true,
		Script:         spec.Script,
	}

	runCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	out := newCappedOutput(maxOut, cancel)
	stopWatch := watchLeaf(leaf, cancel)
	start := time.Now()
	state, setupErr, err := runHelper(runCtx, helperRun{cfg: cfg, flags: cloneFlags(!spec.AllowInternet), id: id,
		leaf: leaf, extra: mounts.files, stdout: out.stdout(), stderr: out.stderr()})
	res := &Result{Duration: time.Since(start)}
	pidsHit := stopWatch()
	res.Stdout, res.Stderr, res.Truncated = out.result()
	switch {
	case pidsHit:
		res.LimitExceeded = "processes"
	case leaf != nil && leaf.oomKilled():
		res.LimitExceeded = "memory"
	}
	if errors.Is(err, errStart) {
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	if err != nil {
		return nil, err
	}
	if msg, ok := strings.CutPrefix(setupErr, execFailedPrefix); ok {
		return nil, fmt.Errorf("sandbox: %s", msg)
	}
	if setupErr != "" {
		return nil, fmt.Errorf("%w: setting up confinement: %s", ErrUnavailable, setupErr)
	}
	res.ExitCode = state.ExitCode()
	if ws, ok := state.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		res.Signal = ws.Signal().String()
	}
	if !res.Truncated && !pidsHit && res.Signal != "" && runCtx.Err() != nil {
		if ctx.Err() != nil {
			return res, fmt.Errorf("sandbox: %w", ctx.Err())
		}
		res.TimedOut = true
	}
	return res, nil
}

// errStart marks a failure to create the helper (namespaces refused by the kernel).
var errStart = errors.New("starting the confined helper")

// cloneFlags are the namespaces every confined command gets.
func cloneFlags(newNet bool) uintptr {
	f := uintptr(syscall.CLONE_NEWUSER | syscall.CLONE_NEWPID | syscall.CLONE_NEWNS |
		syscall.CLONE_NEWIPC | syscall.CLONE_NEWUTS)
	if newNet {
		f |= syscall.CLONE_NEWNET
	}
	return f
}

// childEnv copies env, dropping any HOME/TMPDIR, and points both at scratch.
func childEnv(env []string, scratch string) []string {
	out := make([]string, 0, len(env)+2)
	for _, kv := range env {
		if strings.HasPrefix(kv, "HOME=") || strings.HasPrefix(kv, "TMPDIR=") {
			continue
		}
		out = append(out, kv)
	}
	return append(out, "HOME="+scratch, "TMPDIR="+scratch)
}

// planBinds turns ReadOnlyPaths into the ordered bind mounts the helper makes: pins for
// the ancestors first (shallowest first), then the read-only binds.
func planBinds(spec Spec) ([]bind, error) {
	roots := append([]string{spec.Dir}, spec.WritableRoots...)
	pinned := map[string]bool{}
	var pins, ros []bind
	for _, p := range spec.ReadOnlyPaths {
		p = filepath.Clean(p)
		fi, err := os.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("%w: checking protected path %s: %v", ErrUnavailable, p, err)
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return nil, fmt.Errorf("%w: protected path %s is a symbolic link, so it cannot be kept read-only", ErrUnavailable, p)
		}
		root := ""
		for _, r := range roots {
			r = filepath.Clean(r)
			if p != r && strings.HasPrefix(p, r+string(filepath.Separator)) {
				root = r
				break
			}
		}
		if root == "" {
			return nil, fmt.Errorf("sandbox: read-only path %s is not inside a writable root", p)
		}
		rel, _ := filepath.Rel(root, p)
		parts := strings.Split(rel, string(filepath.Separator))
		for i := 1; i < len(parts); i++ {
			a := filepath.Join(root, filepath.Join(parts[:i]...))
			if pinned[a] {
				continue
			}
			afi, err := os.Lstat(a)
			if err != nil || afi.Mode()&fs.ModeSymlink != 0 {
				return nil, fmt.Errorf("%w: ancestor %s of protected path is not a plain directory", ErrUnavailable, a)
			}
			pinned[a] = true
			pins = append(pins, bind{Path: a})
		}
		ros = append(ros, bind{Path: p, ReadOnly: true})
	}
	// Shallow pins first, so deeper mounts land on the pinned mounts.
	sortByDepth(pins)
	return append(pins, ros...), nil
}

func sortByDepth(b []bind) {
	depth := func(s string) int { return strings.Count(s, string(filepath.Separator)) }
	for i := 1; i < len(b); i++ {
		for j := i; j > 0 && depth(b[j].Path) < depth(b[j-1].Path); j-- {
			b[j], b[j-1] = b[j-1], b[j]
		}
	}
}

// helperRun is one start of the helper.
type helperRun struct {
	cfg   helperConfig
	flags uintptr
	id    identity
	leaf  *cgroupLeaf
	// extra are descriptors the helper inherits after the config and status pipes
	// (from firstAttachFD on).
	extra []*os.File
	// started, when set, runs once the helper exists and before it is sent its
	// configuration (it is then waiting, having done nothing).
	started        func(pid int) error
	stdout, stderr io.Writer
}

// runHelper starts the re-executed helper with r.cfg in the given namespaces, waits for
// it and reports its final state, or the setup failure it wrote to the status pipe.
func runHelper(ctx context.Context, r helperRun) (*os.ProcessState, string, error) {
	data, err := json.Marshal(r.cfg)
	if err != nil {
		return nil, "", fmt.Errorf("sandbox: encoding helper config: %w", err)
	}
	cfgR, cfgW, err := os.Pipe()
	if err != nil {
		return nil, "", fmt.Errorf("sandbox: config pipe: %w", err)
	}
	defer cfgR.Close()
	defer cfgW.Close()
	stR, stW, err := os.Pipe()
	if err != nil {
		return nil, "", fmt.Errorf("sandbox: status pipe: %w", err)
	}
	defer stR.Close()
	defer stW.Close()

	cmd := exec.CommandContext(ctx, "/proc/self/exe")
	cmd.Args = []string{helperArg0}
	cmd.Env = r.cfg.Env
	cmd.Dir = "/"
	cmd.Stdin = nil // /dev/null
	out, err := newOutputPipes(r.id, r.stdout, r.stderr)
	if err != nil {
		return nil, "", err
	}
	defer out.close()
	cmd.Stdout, cmd.Stderr = out.stdoutW, out.stderrW
	cmd.ExtraFiles = append([]*os.File{cfgR, stW}, r.extra...)
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags: r.flags,
		// The helper is the init of its PID namespace: killing it kills every process
		// the command started. Pdeathsig covers toolgate itself dying.
		Pdeathsig: syscall.SIGKILL,
	}
	r.id.apply(cmd.SysProcAttr)
	leaf := r.leaf
	if leaf != nil && leaf.fd >= 0 {
		cmd.SysProcAttr.UseCgroupFD = true
		cmd.SysProcAttr.CgroupFD = leaf.fd
	}
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second

	// Pdeathsig fires when the thread that started the child exits; keep this goroutine
	// on one thread until the child is gone.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := cmd.Start(); err != nil {
		if ctx.Err() != nil {
			return nil, "", fmt.Errorf("sandbox: %w", ctx.Err())
		}
		return nil, "", fmt.Errorf("%w: %v", errStart, err)
	}
	cfgR.Close()
	stW.Close()
	out.started()
	// Until it is sent its configuration the helper waits, having done nothing: a
	// failure here kills it before anything ran.
	abort := func(err error) (*os.ProcessState, string, error) {
		_ = cmd.Process.Signal(syscall.SIGKILL)
		cfgW.Close()
		_ = cmd.Wait()
		out.drain(cmd.WaitDelay)
		return nil, "", fmt.Errorf("%w: %v", errStart, err)
	}
	if err := leaf.enter(cmd.Process.Pid); err != nil {
		return abort(fmt.Errorf("placing the helper in its cgroup: %w", err))
	}
	if r.started != nil {
		if err := r.started(cmd.Process.Pid); err != nil {
			return abort(err)
		}
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, _ = cfgW.Write(data)
		cfgW.Close()
	}()
	status, _ := io.ReadAll(io.LimitReader(stR, 64<<10))
	waitErr := cmd.Wait()
	wg.Wait()
	out.drain(cmd.WaitDelay)
	if cmd.ProcessState == nil {
		return nil, "", fmt.Errorf("sandbox: waiting for the helper: %w", waitErr)
	}
	if len(status) > 0 {
		return cmd.ProcessState, string(bytes.TrimSpace(status)), nil
	}
	return cmd.ProcessState, "", nil
}

// outputPipes carry the helper's stdout and stderr to writers. toolgate makes them
// itself (rather than letting os/exec) to give them to the sandbox's uid: a command
// that reopens its output (echo > /dev/stdout, tee /dev/stderr: a reopen of
// /proc/self/fd/N) is checked against the pipe's owner, which would otherwise be
// toolgate's root.
type outputPipes struct {
	stdoutR, stdoutW, stderrR, stderrW *os.File
	wg                                 sync.WaitGroup
	copying                            bool
	dst                                [2]io.Writer
}

func newOutputPipes(id identity, stdout, stderr io.Writer) (*outputPipes, error) {
	p := &outputPipes{dst: [2]io.Writer{stdout, stderr}}
	var err error
	if p.stdoutR, p.stdoutW, err = os.Pipe(); err != nil {
		return nil, fmt.Errorf("sandbox: stdout pipe: %w", err)
	}
	if p.stderrR, p.stderrW, err = os.Pipe(); err != nil {
		p.close()
		return nil, fmt.Errorf("sandbox: stderr pipe: %w", err)
	}
	if id.remapped {
		for _, f := range []*os.File{p.stdoutW, p.stderrW} {
			if err := f.Chown(id.uid, id.gid); err != nil {
				p.close()
				return nil, fmt.Errorf("sandbox: handing the output pipes to uid %d: %w", id.uid, err)
			}
		}
	}
	return p, nil
}

// started closes toolgate's copies of the write ends (the helper has its own) and
// starts copying.
func (p *outputPipes) started() {
	p.stdoutW.Close()
	p.stderrW.Close()
	p.copying = true
	for i, r := range []*os.File{p.stdoutR, p.stderrR} {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			_, _ = io.Copy(p.dst[i], r)
		}()
	}
}

// drain waits for the copies to reach end of file, which they do once the helper (the
// PID namespace's init, whose death kills every process holding a write end) is gone;
// after max it closes the read ends so that nothing can hold the call.
func (p *outputPipes) drain(max time.Duration) {
	if !p.copying {
		return
	}
	done := make(chan struct{})
	go func() { p.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(max):
		p.stdoutR.Close()
		p.stderrR.Close()
		<-done
	}
}

func (p *outputPipes) close() {
	for _, f := range []*os.File{p.stdoutR, p.stdoutW, p.stderrR, p.stderrW} {
		if f != nil {
			f.Close()
		}
	}
}

// removeAll removes the scratch directory even when the command left directories
// without write or search permission in it.
func removeAll(dir string) {
	if err := os.RemoveAll(dir); err == nil {
		return
	}
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if d != nil && d.IsDir() {
			_ = os.Chmod(p, 0o700)
		}
		return nil
	})
	_ = os.RemoveAll(dir)
}

// cappedOutput collects stdout and stderr under one byte budget. Reaching the budget
// calls stop (which kills the tree) and discards the rest.
type cappedOutput struct {
	mu        sync.Mutex
	left      int
	out, err  bytes.Buffer
	truncated bool
	stop      func()
}

func newCappedOutput(max int, stop func()) *cappedOutput {
	return &cappedOutput{left: max, stop: stop}
}

type streamWriter struct {
	c   *cappedOutput
	buf *bytes.Buffer
}

func (c *cappedOutput) stdout() io.Writer { return streamWriter{c, &c.out} }
func (c *cappedOutput) stderr() io.Writer { return streamWriter{c, &c.err} }

func (w streamWriter) Write(p []byte) (int, error) {
	c := w.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.truncated {
		return len(p), nil
	}
	if len(p) > c.left {
		w.buf.Write(p[:c.left])
		c.left = 0
		c.truncated = true
		c.stop()
		return len(p), nil
	}
	w.buf.Write(p)
	c.left -= len(p)
	return len(p), nil
}

func (c *cappedOutput) result() (stdout, stderr []byte, truncated bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return bytes.Clone(c.out.Bytes()), bytes.Clone(c.err.Bytes()), c.truncated
}
