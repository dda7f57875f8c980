package localtools

import (
	"context"
	"errors"

	"github.com/toolgate/toolgate/internal/gittool"
	"github.com/toolgate/toolgate/internal/kernel"
	"github.com/toolgate/toolgate/internal/sandbox"
	"github.com/toolgate/toolgate/internal/shelltool"
	"github.com/toolgate/toolgate/internal/workspace"
)

// confined adds the tools that run programs: bash and the git tools (each package
// confines its own processes), and, when the sandbox works on this machine, the sandbox
// runner declarative tools need. bash is registered even where the sandbox is
// unavailable (it then refuses every call with sandbox_unavailable and says so in its
// description); declarative tools are not, since all they could do is refuse.
func confined(cfg *Config, ws *workspace.Workspace) {
	opts := shelltool.Options{AllowInternet: cfg.AllowInternet}
	cfg.Extra = append(cfg.Extra, shelltool.Tools(ws, opts)...)
	cfg.Extra = append(cfg.Extra, gittool.Tools(ws, gittool.Options{})...)
	caps := sandbox.Probe()
	if cfg.Runner == nil && caps.Available {
		cfg.Runner = sandboxRunner{shelltool.NewRunner(ws, opts)}
	}
	if !caps.Available {
		cfg.warnf("toolgate: the sandbox is unavailable (%s): bash refuses every call and declarative tools are not loaded\n", caps.Reason)
	}
	prev := cfg.Status
	cfg.Status = func() map[string]any {
		m := map[string]any{"confinement": caps}
		if prev != nil {
			for k, v := range prev() {
				m[k] = v
			}
		}
		return m
	}
}

// sandboxRunner adapts shelltool's Runner to the Runner declarative tools use.
type sandboxRunner struct{ r *shelltool.Runner }

func (s sandboxRunner) Run(ctx context.Context, req RunRequest) (*RunResult, error) {
	res, err := s.r.Run(ctx, req.Argv, req.AllowInternet, req.Timeout)
	var rr *RunResult
	if res != nil {
		rr = &RunResult{Stdout: string(res.Stdout), Stderr: string(res.Stderr), ExitCode: res.ExitCode,
			Truncated: res.Truncated, TimedOut: res.TimedOut}
	}
	var pc *shelltool.ProtectedChangeError
	if errors.As(err, &pc) {
		out := ""
		if rr != nil {
			out = runOutput(rr, req.Timeout).Text
		}
		return nil, pc.KernelError(out)
	}
	if err != nil {
		if errors.Is(err, sandbox.ErrUnavailable) {
			return nil, kernel.Failed(kernel.CodeSandboxUnavailable, "the sandbox cannot confine this command, so it was not run: %v", err)
		}
		return nil, err
	}
	return rr, nil
}
