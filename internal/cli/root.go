// Package cli holds toolgate's command-line surface. Each command is a thin adapter that
// parses flags and calls into the packages that own the behaviour; commands register
// themselves from their own files with register, so adding one touches no shared list.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"sync/atomic"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/internal/app"
	"github.com/toolgate/toolgate/internal/sandbox"
	"github.com/toolgate/toolgate/internal/version"
)

// Stdio is the process's standard streams, passed in so every command runs in tests.
type Stdio struct {
	In  io.Reader
	Out io.Writer
	Err io.Writer
}

// Env is what every command receives: the streams and the resolved global flags.
type Env struct {
	Stdio
	// dataDir is the --data-dir flag value; use DataDir to resolve it.
	dataDir string
	// hurry ends when a second interrupt arrives (Main): a command draining after the
	// first one (the command's context) stops waiting. Nil never ends.
	hurry context.Context
	// databaseURL is the --database-url flag value; use DatabaseURL to resolve it.
	databaseURL string
	// auditDurability is the --audit-durability flag value; use durability to resolve it.
	auditDurability string
	// opened is the App openApp opened, for the control-plane tools built before it
	// (controlPlane).
	opened atomic.Pointer[app.App]
}

// Hurry is a context that ends on the second SIGINT, SIGTERM or SIGHUP: the first one asks a
// command to stop (its context ends, and in-flight calls may finish up to the drain
// deadline); the second cuts that wait short. Calls are cancelled then, never dropped:
// each still gets its outcome event.
func (e *Env) Hurry() context.Context {
	if e.hurry == nil {
		return context.Background()
	}
	return e.hurry
}

// DataDir resolves --data-dir, then $TOOLGATE_HOME, then the user's data directory plus
// "/toolgate". It does not create the directory.
func (e *Env) DataDir() (string, error) {
	if e.dataDir != "" {
		return filepath.Abs(e.dataDir)
	}
	if h := os.Getenv("TOOLGATE_HOME"); h != "" {
		return filepath.Abs(h)
	}
	base := os.Getenv("XDG_DATA_HOME")
	if base == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("finding the data directory: %w (set --data-dir or TOOLGATE_HOME)", err)
		}
		base = filepath.Join(home, ".local", "share")
	}
	return filepath.Join(base, "toolgate"), nil
}

type commandFactory struct {
	order int
	make  func(*Env) *cobra.Command
}

var factories []commandFactory

// register adds a top-level command. order only sorts the help listing.
func register(order int, make func(*Env) *cobra.Command) {
	factories = append(factories, commandFactory{order, make})
}

// ExitError carries a specific exit code out of a command.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit status %d", e.Code)
	}
	return e.Err.Error()
}
func (e *ExitError) Unwrap() error { return e.Err }

// NewRoot builds the command tree for one invocation.
func NewRoot(env *Env) *cobra.Command {
	root := &cobra.Command{
		Use:   "toolgate",
		Short: "An MCP gateway that hosts tools, decides every call, and records each decision",
		Long: `toolgate stands between AI agent harnesses and the tools they use. It hosts tool
servers, adds sandboxed file, bash and git tools, authorizes every call against grants,
writes an audit event per decision, and re-publishes the permitted catalogue over MCP.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version.String(),
	}
	root.SetVersionTemplate("toolgate {{.Version}}\n")
	root.SetIn(env.In)
	root.SetOut(env.Out)
	root.SetErr(env.Err)
	root.PersistentFlags().StringVar(&env.dataDir, "data-dir", "",
		"data directory (default $TOOLGATE_HOME, else the user's data directory plus /toolgate)")
	root.PersistentFlags().StringVar(&env.databaseURL, "database-url", "",
		"PostgreSQL store shared by replicas, postgres://USER:PASSWORD@HOST:PORT/DB (default $TOOLGATE_DATABASE_URL, else SQLite in the data directory)")
	root.PersistentFlags().StringVar(&env.auditDurability, "audit-durability", "",
		"process: a call's audit event survives a kill of toolgate; power: it is fsynced before the tool runs, surviving a power cut (default $TOOLGATE_AUDIT_DURABILITY, else process)")
	fs := append([]commandFactory(nil), factories...)
	sort.SliceStable(fs, func(i, j int) bool { return fs[i].order < fs[j].order })
	for _, f := range fs {
		root.AddCommand(f.make(env))
	}
	return root
}

// Main runs one command line as the toolgate process and returns its exit code. The
// first SIGINT, SIGTERM or SIGHUP cancels the command's context (its cause names the
// signal); a second one ends Env.Hurry. SIGHUP is caught too because its default
// action ends the process on the spot, with calls running and their outcomes unwritten
// (a closed terminal sends it); under nohup, which ignores it, it stays ignored.
func Main(args []string, stdio Stdio) int {
	sigs := make(chan os.Signal, 2)
	stopSignals := []os.Signal{os.Interrupt, syscall.SIGTERM}
	if !signal.Ignored(syscall.SIGHUP) {
		stopSignals = append(stopSignals, syscall.SIGHUP)
	}
	signal.Notify(sigs, stopSignals...)
	defer signal.Stop(sigs)
	ctx, stop := context.WithCancelCause(context.Background())
	defer stop(nil)
	hurry, hurryNow := context.WithCancel(context.Background())
	defer hurryNow()
	go func() {
		for i := 0; ; i++ {
			select {
			case s := <-sigs:
				if i == 0 {
					stop(fmt.Errorf("%v received", s))
				} else {
					hurryNow()
					return
				}
			case <-hurry.Done():
				return
			}
		}
	}()
	return run(ctx, hurry, args, stdio)
}

// Run executes one command line and returns the process exit code. Errors go to stderr.
func Run(ctx context.Context, args []string, stdio Stdio) int {
	return run(ctx, nil, args, stdio)
}

func run(ctx, hurry context.Context, args []string, stdio Stdio) int {
	if err := sandbox.StopInheritingDescriptors(); err != nil {
		fmt.Fprintf(stdio.Err, "toolgate: %v\n", err)
		return 1
	}
	env := &Env{Stdio: stdio, hurry: hurry}
	root := NewRoot(env)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	var ee *ExitError
	if errors.As(err, &ee) {
		if ee.Err != nil {
			fmt.Fprintf(stdio.Err, "toolgate: %v\n", ee.Err)
		}
		return ee.Code
	}
	fmt.Fprintf(stdio.Err, "toolgate: %v\n", err)
	return 1
}
