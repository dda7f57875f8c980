package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/internal/app"
	"github.com/toolgate/toolgate/internal/mcpconfig"
	"github.com/toolgate/toolgate/internal/mgmt"
)

// The MCP server management commands (install, ls, policy set, restart, uninstall,
// details) are clients of the management protocol (docs/management.md). Each one asks
// openManager for the protocol's implementation over the data directory and calls one
// method; the result is printed with the mgmt renderers, or with --json as the exact
// protocol result.

func init() {
	register(50, newInstallCmd)
	register(51, newLsCmd)
	register(52, newPolicyCmd)
	register(53, newRestartCmd)
	register(54, newUninstallCmd)
	register(56, newDetailsCmd)
}

// openManager returns the management protocol's implementation for env's data
// directory: a mgmt.Client of the daemon serving it when one does (app.FindDaemon: the
// daemon.json it writes there, a stale one detected), authenticated with the data
// directory's owner token, else the app opened in-process, with the caller it acts as
// (the owner, for a person at the data directory). release closes what it opened. The
// commands wrap what it returns in mgmt.Checked, so both paths read params the same
// way; both run the same app methods, in the daemon or here.
var openManager = func(ctx context.Context, env *Env) (m mgmt.Manager, who mgmt.Caller, release func() error, err error) {
	who = mgmt.Caller{Principal: app.DefaultPrincipal, Owner: true}
	dataDir, err := env.DataDir()
	if err != nil {
		return nil, who, nil, err
	}
	info, running, err := app.FindDaemon(dataDir)
	if err != nil {
		return nil, who, nil, err
	}
	if running {
		tok, err := app.OwnerTokenOf(dataDir)
		if err != nil {
			return nil, who, nil, fmt.Errorf("the daemon at %s serves this data directory, but: %w", info.URL, err)
		}
		return mgmt.NewClient(info.URL, tok, nil), who, nil, nil
	}
	// A command relays to the process hosting the upstream servers, if one does, and
	// never hosts them itself: `toolgate ls` must not start every required server for
	// the length of one command. With none hosting, it reports what the store has.
	log := slog.New(slog.NewTextHandler(env.Err, &slog.HandlerOptions{Level: slog.LevelWarn}))
	a, err := env.openAppWith(ctx, app.Options{DataDir: dataDir, Logger: log, Upstreams: app.UpstreamsRelayOnly})
	if err != nil {
		return nil, who, nil, err
	}
	return a, who, a.Close, nil
}

// manageFlags are the flags every management command shares.
type manageFlags struct {
	workspace string
	scope     string
	asJSON    bool
}

func (f *manageFlags) add(cmd *cobra.Command, scoped bool) {
	fl := cmd.Flags()
	fl.StringVar(&f.workspace, "workspace-id", "", "workspace (ws_…; default: the data directory's default workspace)")
	if scoped {
		fl.StringVar(&f.scope, "scope", "", `scope kind: "workspace" (default) or "user" (every workspace)`)
	}
	fl.BoolVar(&f.asJSON, "json", false, "print the protocol's result as JSON instead of a table")
}

// ref addresses the server named by arg: a server id (mcp_…) or a name.
func (f *manageFlags) ref(arg string) mgmt.ServerRef {
	r := mgmt.ServerRef{WorkspaceID: f.workspace, ScopeKind: f.scope}
	if mgmt.IsServerID(arg) {
		r.ServerID = arg
	} else {
		r.Name = arg
	}
	return r
}

// manage runs call against the data directory's Manager and prints its result.
func manage[R any](cmd *cobra.Command, env *Env, f *manageFlags, call func(context.Context, mgmt.Manager, mgmt.Caller) (R, error), human func(io.Writer, R) error) error {
	ctx := cmd.Context()
	m, who, closeM, err := openManager(ctx, env)
	if err != nil {
		return err
	}
	if closeM != nil {
		defer closeM()
	}
	res, err := call(ctx, mgmt.Checked(m), who)
	if err != nil {
		return err
	}
	if f.asJSON {
		b, err := mgmt.Encode(res)
		if err != nil {
			return err
		}
		_, err = env.Out.Write(append(b, '\n'))
		return err
	}
	return human(env.Out, res)
}

func newInstallCmd(env *Env) *cobra.Command {
	var f manageFlags
	var enabled, implicit bool
	cmd := &cobra.Command{
		Use:   "install FILE|-",
		Short: "Install or update MCP servers from an mcpServers config file (- reads stdin)",
		Long: `install reads an MCP client config (the mcpServers JSON that Claude Desktop, Cursor or
VS Code write; docs/mcp-config.md) and installs every server in it, or updates one whose
definition changed. Secret values (env, headers, tokens) go to the keystore; nothing shows
them again. Each server's outcome is printed with its diagnostics; the exit status is 1
unless every server is valid. --enabled (default true) and --allow-implicit-invocation
(default false) set the installed servers' policy.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			data, err := readConfigArg(env, args[0])
			if err != nil {
				return err
			}
			p := mgmt.InstallParams{WorkspaceID: f.workspace, ScopeKind: f.scope, ConfigJSON: string(data)}
			if cmd.Flags().Changed("enabled") {
				p.Enabled = &enabled
			}
			if cmd.Flags().Changed("allow-implicit-invocation") {
				p.AllowImplicitInvocation = &implicit
			}
			var status string
			err = manage(cmd, env, &f, func(ctx context.Context, m mgmt.Manager, who mgmt.Caller) (*mgmt.InstallResult, error) {
				r, err := m.Install(ctx, who, p)
				if r != nil {
					status = r.Status
				}
				return r, err
			}, mgmt.WriteInstall)
			if err == nil && status != mgmt.InstallOK {
				return &ExitError{Code: 1}
			}
			return err
		},
	}
	f.add(cmd, true)
	cmd.Flags().BoolVar(&enabled, "enabled", true, "install the servers enabled")
	cmd.Flags().BoolVar(&implicit, "allow-implicit-invocation", false, "publish the servers' tools to turns that did not select them")
	return cmd
}

// readConfigArg reads FILE, or stdin for "-", up to the config size limit.
func readConfigArg(env *Env, arg string) ([]byte, error) {
	var r io.Reader
	name := arg
	if arg == "-" {
		r, name = env.In, "standard input"
	} else {
		fh, err := os.Open(arg)
		if err != nil {
			return nil, fmt.Errorf("reading the config: %w", err)
		}
		defer fh.Close()
		r = fh
	}
	data, err := io.ReadAll(io.LimitReader(r, mcpconfig.MaxConfigBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading the config from %s: %w", name, err)
	}
	if len(data) > mcpconfig.MaxConfigBytes {
		return nil, fmt.Errorf("the config in %s is larger than %d bytes", name, mcpconfig.MaxConfigBytes)
	}
	return data, nil
}

func newLsCmd(env *Env) *cobra.Command {
	var f manageFlags
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List the installed MCP servers with their state, policy and tool counts",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return manage(cmd, env, &f, func(ctx context.Context, m mgmt.Manager, who mgmt.Caller) (*mgmt.ListResult, error) {
				return m.List(ctx, who, mgmt.ListParams{WorkspaceID: f.workspace})
			}, mgmt.WriteList)
		},
	}
	f.add(cmd, false)
	return cmd
}

func newPolicyCmd(env *Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "policy",
		Short: "Change an installed MCP server's policy",
		Args:  cobra.NoArgs,
	}
	var f manageFlags
	var enabled, implicit bool
	set := &cobra.Command{
		Use:   "set NAME|ID [--enabled=BOOL] [--allow-implicit-invocation=BOOL]",
		Short: "Enable or disable a server, or allow its tools in turns that did not select them",
		Long: `policy set changes what is given and keeps the rest. A disabled server stays
installed and its process stops; a server without implicit invocation publishes its tools
only to turns that select it (--capability mcpServer=NAME).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			p := mgmt.PolicySetParams{ServerRef: f.ref(args[0])}
			if cmd.Flags().Changed("enabled") {
				p.Enabled = &enabled
			}
			if cmd.Flags().Changed("allow-implicit-invocation") {
				p.AllowImplicitInvocation = &implicit
			}
			if p.Enabled == nil && p.AllowImplicitInvocation == nil {
				return errors.New("policy set: give --enabled or --allow-implicit-invocation (or both)")
			}
			return manage(cmd, env, &f, func(ctx context.Context, m mgmt.Manager, who mgmt.Caller) (*mgmt.PolicySetResult, error) {
				return m.SetPolicy(ctx, who, p)
			}, mgmt.WritePolicy)
		},
	}
	f.add(set, true)
	set.Flags().BoolVar(&enabled, "enabled", true, "whether the server is available")
	set.Flags().BoolVar(&implicit, "allow-implicit-invocation", false, "whether its tools reach turns that did not select it")
	cmd.AddCommand(set)
	return cmd
}

// serverCmd is a command about one installed server: NAME|ID, the addressing flags,
// one call and its renderer.
func serverCmd[R any](env *Env, use, short string, call func(context.Context, mgmt.Manager, mgmt.Caller, mgmt.ServerRef) (R, error), human func(io.Writer, R) error) *cobra.Command {
	var f manageFlags
	cmd := &cobra.Command{
		Use:   use + " NAME|ID",
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ref := f.ref(args[0])
			return manage(cmd, env, &f, func(ctx context.Context, m mgmt.Manager, who mgmt.Caller) (R, error) {
				return call(ctx, m, who, ref)
			}, human)
		},
	}
	f.add(cmd, true)
	return cmd
}

func newRestartCmd(env *Env) *cobra.Command {
	return serverCmd(env, "restart", "Restart an MCP server's process (after its credentials or environment changed)",
		func(ctx context.Context, m mgmt.Manager, who mgmt.Caller, ref mgmt.ServerRef) (*mgmt.RestartResult, error) {
			return m.Restart(ctx, who, mgmt.RestartParams{ServerRef: ref})
		}, mgmt.WriteRestart)
}

func newUninstallCmd(env *Env) *cobra.Command {
	return serverCmd(env, "uninstall", "Stop and remove an MCP server (its past calls and audit events are kept)",
		func(ctx context.Context, m mgmt.Manager, who mgmt.Caller, ref mgmt.ServerRef) (*mgmt.UninstallResult, error) {
			return m.Uninstall(ctx, who, mgmt.UninstallParams{ServerRef: ref})
		}, mgmt.WriteUninstall)
}

func newDetailsCmd(env *Env) *cobra.Command {
	return serverCmd(env, "details", "Show an MCP server's catalogue, health, recent audit and name bindings",
		func(ctx context.Context, m mgmt.Manager, who mgmt.Caller, ref mgmt.ServerRef) (*mgmt.DetailsResult, error) {
			return m.Details(ctx, who, mgmt.DetailsParams{ServerRef: ref})
		}, mgmt.WriteDetails)
}
