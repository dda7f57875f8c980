package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/internal/app"
	"github.com/toolgate/toolgate/internal/localtools"
	"github.com/toolgate/toolgate/internal/mcpserver"
	"github.com/toolgate/toolgate/internal/version"
	"github.com/toolgate/toolgate/internal/workspace"
)

func init() { register(20, newMCPCmd) }

type mcpFlags struct {
	workspace     string
	localTools    bool
	noLocalTools  bool
	toolPrefix    string
	tools         string
	profile       string
	group         string
	databaseDir   string
	allowInternet bool
	harness       string // shorten names this harness would reject (see docs/harnesses.md)
	serverName    string // the server's key in the harness file, for --harness
	capabilities  []string
	drain         time.Duration
}

func newMCPCmd(env *Env) *cobra.Command {
	var f mcpFlags
	cmd := &cobra.Command{
		Use:   "mcp",
		Short: "Serve MCP over stdio: local tools confined to a workspace, plus the control plane",
		Long: `toolgate mcp speaks MCP over stdin/stdout for a harness to spawn (Claude Desktop,
Cursor, Goose, …). It publishes file, bash, git, ask_user and declarative tools confined to
--workspace as toolgate_local_<name>, and control-plane tools as toolgate_server_<name>.
Every call is authorized against the grants of --group and audited.

Without --workspace it never uses the current directory: it creates a fresh, private
folder under the OS temp directory (toolgate/workspace/…) and prints its path on stderr;
if that fails, local tools are disabled and only the control plane is served.

` + capabilityHelp + `
When the client closes stdin, calls in flight may finish for up to --drain; SIGTERM or
Ctrl-C cancels them at once. Either way each cut call is recorded in the audit trail
(failed, cancelled_by_shutdown) before toolgate exits.

Stdout carries the protocol only; all diagnostics go to stderr.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cmd.Flags().Changed("local-tools") && cmd.Flags().Changed("no-local-tools") && f.localTools == f.noLocalTools {
				return errors.New("--local-tools and --no-local-tools contradict each other")
			}
			if err := checkCapabilities(f.capabilities); err != nil {
				return err
			}
			return runMCP(cmd, env, f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.workspace, "workspace", "", "workspace directory the local tools are confined to (default: a fresh private folder under the OS temp directory)")
	fl.BoolVar(&f.localTools, "local-tools", true, "publish the local tools (files, bash, git, ask_user, declarative tools)")
	fl.BoolVar(&f.noLocalTools, "no-local-tools", false, "publish the control plane only")
	fl.StringVar(&f.toolPrefix, "tool-prefix", localtools.DefaultPrefix, "prefix of local tool names; none for unprefixed (read_file, bash, …)")
	fl.StringVar(&f.tools, "tools", "", "comma-separated local tools to publish (e.g. read_file,write_file,bash); default all")
	fl.StringVar(&f.profile, "tools-profile", "", "preset set of local tools: "+strings.Join(localtools.ProfileNames(), ", ")+" (default all)")
	fl.StringVar(&f.group, "group", app.DefaultPrincipal, "the principal whose grants apply to this session")
	fl.StringVar(&f.databaseDir, "database-dir", "", "data directory holding the store (default: the global --data-dir resolution)")
	fl.BoolVar(&f.allowInternet, "allow-internet", false, "let bash and declarative tools reach the network")
	fl.StringVar(&f.harness, "harness", "", "publish stable short forms of names this harness would reject (written by toolgate config/connect)")
	fl.StringVar(&f.serverName, "server-name", "toolgate", "with --harness: the server's name in the harness file")
	fl.DurationVar(&f.drain, "drain", 10*time.Second, "after the client closes stdin, how long calls in flight may take to finish before they are cancelled (each still gets its audit outcome)")
	addCapabilityFlag(fl, &f.capabilities)
	return cmd
}

func runMCP(cmd *cobra.Command, env *Env, f mcpFlags) error {
	ctx := cmd.Context()
	log := slog.New(slog.NewTextHandler(env.Err, &slog.HandlerOptions{Level: slog.LevelWarn}))
	prefix, err := localtools.ParsePrefix(f.toolPrefix)
	if err != nil {
		return err
	}
	if strings.TrimSpace(f.group) == "" {
		return errors.New("--group must not be empty")
	}
	dataDir := f.databaseDir
	if dataDir != "" {
		if dataDir, err = filepath.Abs(dataDir); err != nil {
			return fmt.Errorf("--database-dir: %w", err)
		}
	} else if dataDir, err = env.DataDir(); err != nil {
		return err
	}
	var names []string
	if strings.TrimSpace(f.tools) != "" {
		names = strings.Split(f.tools, ",")
	}

	cfg := localtools.Config{AllowInternet: f.allowInternet, Profile: f.profile, Tools: names, Warn: env.Err, Version: version.String(), DataDir: dataDir,
		ControlPlane: env.controlPlane}
	local := f.localTools && !f.noLocalTools
	if !local {
		cfg.DisabledReason = "disabled by --no-local-tools"
	} else {
		dir := f.workspace
		if dir == "" {
			dir, err = freshSandbox()
			if err != nil {
				cfg.DisabledReason = "no workspace: " + err.Error()
				fmt.Fprintf(env.Err, "toolgate: local tools disabled, serving the control plane only: %v\n", err)
			} else {
				fmt.Fprintf(env.Err, "toolgate: no --workspace given; using the fresh sandbox folder %s\n", dir)
			}
		}
		if dir != "" {
			ws, err := workspace.Open(dir)
			if err != nil {
				return fmt.Errorf("--workspace: %w", err)
			}
			defer ws.Close()
			cfg.Workspace = ws
		}
	}
	if cfg.Workspace == nil {
		// --tools and --tools-profile only name local tools; with none, they are moot
		// (checked still, so a typo'd profile is reported).
		if f.profile != "" {
			if _, ok := localtools.Profiles[f.profile]; !ok {
				return fmt.Errorf("unknown tools profile %q (known: %s)", f.profile, strings.Join(localtools.ProfileNames(), ", "))
			}
		}
		cfg.Profile, cfg.Tools = "", nil
	}
	tools, err := localtools.Build(cfg)
	if err != nil {
		return err
	}
	a, err := env.openApp(ctx, dataDir, tools, log)
	if err != nil {
		return err
	}
	defer a.Close()
	// The turn is fixed for the session's life: servers installed but never fetched
	// yet get a bounded moment to publish their tools first (a persisted catalogue
	// needs none).
	wctx, wcancel := context.WithTimeout(ctx, app.FirstCatalogWait)
	a.WaitFirstCatalogs(wctx)
	wcancel()
	namer, alias, err := harnessNames(f.harness, f.serverName, localtools.Namer(prefix))
	if err != nil {
		return err
	}
	tc, err := splitCapabilities(f.capabilities)
	if err != nil {
		return err
	}
	turn, err := a.OpenTurn(ctx, app.TurnRequest{Principal: f.group, Transport: "stdio", Namer: namer, Alias: alias,
		Capabilities: tc.patterns, Selections: tc.selections})
	if err != nil {
		return err
	}
	reportSelections(env.Err, turn)
	defer turn.Close()
	// The stdio server runs on a context of its own, so that ending it never cancels
	// a call before the kernel has: shutdown goes through a.Shutdown, which records
	// each cut call as cancelled_by_shutdown, and only then is the server stopped.
	serveCtx, stopServe := context.WithCancel(context.WithoutCancel(ctx))
	defer stopServe()
	in := &eofSignal{r: env.In, ended: make(chan struct{})}
	served := make(chan error, 1)
	go func() {
		served <- mcpserver.ServeStdio(serveCtx, in, env.Out, turn, mcpserver.StdioOptions{
			ServerInfo:   app.ServerInfo(),
			Instructions: app.Instructions,
			Logger:       log,
		})
	}()
	select {
	case err = <-served:
	case <-in.ended:
		// The client closed our input: what it sent is still answered, calls in flight
		// may finish for up to --drain (or until a signal), then are cancelled.
		drain := time.NewTimer(f.drain)
		defer drain.Stop()
		select {
		case err = <-served:
		case <-drain.C:
			a.Shutdown()
			err = <-served
		case <-ctx.Done():
			a.Shutdown()
			err = <-served
		}
	case <-ctx.Done():
		// A signal: the client wants us gone (MCP's stdio shutdown sends SIGTERM after
		// closing the input): cancel now, record, answer, exit.
		a.Shutdown()
		stopServe()
		err = <-served
	}
	if err != nil && serveCtx.Err() == nil {
		return fmt.Errorf("serving MCP over stdio: %w", err)
	}
	return nil
}

// eofSignal passes reads through and closes ended once the reader reports an error
// (end of input or a failure): the moment the client can send nothing more.
type eofSignal struct {
	r     io.Reader
	once  sync.Once
	ended chan struct{}
}

func (e *eofSignal) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err != nil {
		e.once.Do(func() { close(e.ended) })
	}
	return n, err
}

// freshSandbox creates a new private folder under <tmp>/toolgate/workspace. The shared
// parents may already exist; they are accepted only if they are real directories owned
// by this user and not writable by others, so another local user cannot plant a link
// or pre-create the folder the tools are confined to.
func freshSandbox() (string, error) {
	base := filepath.Join(os.TempDir(), "toolgate", "workspace")
	if err := os.MkdirAll(base, 0o700); err != nil {
		return "", fmt.Errorf("creating %s: %w", base, err)
	}
	for _, d := range []string{filepath.Dir(base), base} {
		fi, err := os.Lstat(d)
		if err != nil {
			return "", fmt.Errorf("checking %s: %w", d, err)
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !fi.IsDir() || fi.Mode()&os.ModeSymlink != 0 {
			return "", fmt.Errorf("%s is not a directory", d)
		}
		if ok && int(st.Uid) != os.Getuid() {
			return "", fmt.Errorf("%s belongs to another user (uid %d)", d, st.Uid)
		}
		if fi.Mode().Perm()&0o022 != 0 {
			return "", fmt.Errorf("%s is writable by other users (mode %v)", d, fi.Mode().Perm())
		}
	}
	dir, err := os.MkdirTemp(base, "run-")
	if err != nil {
		return "", fmt.Errorf("creating a folder in %s: %w", base, err)
	}
	return dir, nil
}
