package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/toolgate/toolgate/internal/app"
	"github.com/toolgate/toolgate/internal/kernel"
	"github.com/toolgate/toolgate/internal/listenaddr"
	"github.com/toolgate/toolgate/internal/mcpserver"
	"github.com/toolgate/toolgate/internal/policy"
)

func init() { register(30, newBridgeCmd) }

// bridgeTestTools are registered in addition to the bridge's own tools; only tests
// set it (to hold a call in flight across an interrupt).
var bridgeTestTools []*kernel.Tool

type bridgeFlags struct {
	principal    string
	listen       string
	stdio        bool
	noAuth       bool
	ttl          time.Duration
	allowHosts   []string
	capabilities []string
	server       string
}

func newBridgeCmd(env *Env) *cobra.Command {
	var f bridgeFlags
	cmd := &cobra.Command{
		Use:   "bridge",
		Short: "Open one turn's MCP bridge for a principal and serve it until interrupted",
		Long: `toolgate bridge resolves the principal's permitted catalogue once and serves that one
turn over Streamable HTTP (default) or stdio (--stdio) until it is interrupted (Ctrl-C,
SIGTERM), or with --stdio until its input ends.

Over HTTP it prints the bridge URL as the first line of stdout and, unless --no-auth, an
execution token as the second; clients send it as "Authorization: Bearer <token>". Both
protocol eras are served on the one endpoint, all on the same turn (one catalogue, one
catalogHash): each 2025 client's initialize opens a session of its own (at most 16 live at
once), a DELETE ends that session only, and a stateless 2026-07-28 client needs none. An
interrupt cancels the calls still running, records each one as cancelled_by_shutdown and
exits. --no-auth drops the token check and is refused unless the listen address is
loopback. The URL names the address bound (for 0.0.0.0 or [::], the loopback address of
that family); listening beyond loopback is announced on stderr, and other machines reach a
wildcard bind only under a name given with --allow-host.

--server NAME publishes one installed upstream server's tools under the server's own
(raw) names, a transparent view of that server for clients and test suites that expect
them: the turn is narrowed to NAME.* and selects the server (so a server whose
allow_implicit_invocation is false is served too); each call is still authorized
against the grants and audited under its canonical id (NAME.<tool>). A server that is
not installed, is disabled or whose tools no grant allows is an error.

` + capabilityHelp + `
Stdout carries only the URL and token (or, with --stdio, the protocol); diagnostics go
to stderr.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if f.stdio && cmd.Flags().Changed("listen") {
				return errors.New("--stdio and --listen contradict each other")
			}
			if err := checkCapabilities(f.capabilities); err != nil {
				return err
			}
			if f.server != "" && !policy.ValidNamespace(f.server) {
				return fmt.Errorf("--server %q is not a server name", f.server)
			}
			return runBridge(cmd, env, f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.principal, "principal", app.DefaultPrincipal, "the principal whose grants decide the turn")
	fl.StringVar(&f.listen, "listen", "127.0.0.1:0", "address to listen on (port 0 picks a free port)")
	fl.BoolVar(&f.stdio, "stdio", false, "serve MCP over stdin/stdout instead of HTTP")
	fl.BoolVar(&f.noAuth, "no-auth", false, "serve without a bearer token (loopback addresses only)")
	fl.DurationVar(&f.ttl, "ttl", 24*time.Hour, "lifetime of the printed execution token")
	fl.StringSliceVar(&f.allowHosts, "allow-host", nil, "extra Host/Origin value accepted besides loopback names (for a non-loopback --listen)")
	fl.StringVar(&f.server, "server", "", "publish this installed upstream server's tools only, under their raw names")
	addCapabilityFlag(fl, &f.capabilities)
	return cmd
}

// capabilityHelp is the paragraph run, bridge and mcp add to their --help.
const capabilityHelp = `--capability PATTERN[:ACTION] (repeatable) narrows the turn below what the grants
allow. PATTERN is a tool pattern as grants write it ("*", "ns.*" or a canonical id) and
ACTION, if given, is read, write or execute. Only tools some capability's pattern
matches are published (others answer tool_unavailable, like any unpublished tool), and
a call must also match a capability's action, else it is refused outside_capability.
Patterns name canonical ids (local.read_file), never a surface's published names. A
capability never widens: what the grants refuse stays refused and hidden. A malformed
capability is an error before anything starts.
--capability mcpServer=NAME and --capability mcpTool=SERVER/RAW_TOOL select an installed
server's tools (all of them, or the one whose own name is RAW_TOOL) for this turn, those
of a server whose allow_implicit_invocation is false included; patterns narrow,
selections add. A selection grants nothing: the grants still decide. Each selection is
reported on stderr as accepted or rejected (unknown server or tool, disabled, not
granted) and audited.
`

// addCapabilityFlag registers the repeatable --capability flag.
func addCapabilityFlag(fl *pflag.FlagSet, caps *[]string) {
	fl.StringArrayVar(caps, "capability", nil, "narrow the turn to tools matching `PATTERN[:ACTION]` (\"*\", \"ns.*\" or \"ns.name\"; ACTION read, write or execute), or select a server's tools with mcpServer=NAME or mcpTool=SERVER/RAW_TOOL; repeatable; never widens the grants")
}

// checkCapabilities refuses malformed --capability values before any store or
// harness is touched, with the same rules the kernel applies when the turn opens.
func checkCapabilities(caps []string) error {
	_, err := splitCapabilities(caps)
	return err
}

func runBridge(cmd *cobra.Command, env *Env, f bridgeFlags) error {
	ctx := cmd.Context()
	if strings.TrimSpace(f.principal) == "" {
		return errors.New("--principal must not be empty")
	}
	var host string
	var port int
	if !f.stdio {
		h, p, err := net.SplitHostPort(f.listen)
		if err != nil {
			return fmt.Errorf("--listen %q: %w (want host:port, e.g. 127.0.0.1:0)", f.listen, err)
		}
		if port, err = strconv.Atoi(p); err != nil || port < 0 || port > 65535 {
			return fmt.Errorf("--listen %q: invalid port", f.listen)
		}
		host = h
		if host == "" {
			return fmt.Errorf("--listen %q: give a host (127.0.0.1 for loopback)", f.listen)
		}
		if f.noAuth && !listenaddr.IsLoopback(host) {
			return fmt.Errorf("--no-auth is only allowed on a loopback address (127.0.0.1, ::1, localhost), not %q", host)
		}
		if !f.noAuth && (f.ttl <= 0 || f.ttl > app.MaxTokenTTL) {
			return fmt.Errorf("--ttl must be between 1s and %s", app.MaxTokenTTL)
		}
	}
	dataDir, err := env.DataDir()
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(env.Err, &slog.HandlerOptions{Level: slog.LevelWarn}))
	tools, closeWS, err := ownTools(env, "", dataDir, "toolgate bridge")
	if err != nil {
		return err
	}
	defer closeWS()
	tools = append(tools, bridgeTestTools...)
	a, err := env.openApp(ctx, dataDir, tools, log)
	if err != nil {
		return err
	}
	defer a.Close()
	// A bridge's turn is fixed for its life (docs/kernel.md): see mcp.go.
	wctx, wcancel := context.WithTimeout(ctx, app.FirstCatalogWait)
	a.WaitFirstCatalogs(wctx)
	wcancel()
	transport := "http"
	if f.stdio {
		transport = "stdio"
	}
	tc, err := splitCapabilities(f.capabilities)
	if err != nil {
		return err
	}
	req := app.TurnRequest{Principal: f.principal, Transport: transport, Capabilities: tc.patterns, Selections: tc.selections}
	if f.server != "" {
		req.Capabilities = append(req.Capabilities, f.server+".*")
		req.Selections = append(req.Selections, kernel.Selection{ID: "--server", Kind: kernel.SelectServer, Server: f.server, ScopeKind: "workspace"})
		req.Namer = a.RawNamer(f.server)
	}
	turn, err := a.OpenTurn(ctx, req)
	if err != nil {
		return err
	}
	reportSelections(env.Err, turn)
	if f.server != "" {
		for _, d := range app.Selections(turn) {
			if d.Selection.ID == "--server" && !d.Accepted {
				_ = turn.Close()
				return fmt.Errorf("--server %s: %s", f.server, d.Message)
			}
		}
	}
	info := app.ServerInfo()

	if f.stdio {
		defer turn.Close()
		return serveBridgeStdio(ctx, env, a, turn, mcpserver.StdioOptions{ServerInfo: info, Instructions: app.Instructions, Logger: log})
	}

	opts := mcpserver.BridgeOptions{Host: host, Port: port, ServerInfo: info, Instructions: app.Instructions, Logger: log, AllowedHosts: f.allowHosts}
	// Only this bridge's own token opens it, whichever of its sessions a request
	// names: one minted for another bridge of the same principal (perhaps with
	// other --capability values) or for toolgate serve does not
	// (app.BridgeSessionPrefix, with the bridge's id). The id exists once the
	// bridge does; until then no token is accepted.
	var bridgeID atomic.Pointer[string]
	if !f.noAuth {
		principal := f.principal
		opts.Authorize = func(token string, present bool) bool {
			id := bridgeID.Load()
			return id != nil && a.BridgeAuthorizer(principal, *id)(token, present)
		}
	}
	b, err := mcpserver.NewBridge(turn, opts)
	if err != nil {
		_ = turn.Close()
		return err
	}
	defer b.Close() // ends the sessions and closes the turn
	bid := b.ID()
	bridgeID.Store(&bid)
	token := ""
	if !f.noAuth {
		if token, err = a.MintBridgeToken(f.principal, bid, int(f.ttl/time.Second)); err != nil {
			return fmt.Errorf("minting the bridge token: %w", err)
		}
	}
	if !b.Loopback() {
		// Before the URL, so that whoever waits for the URL has seen this too.
		warnBeyondLoopback(env.Err, "the bridge", "the bearer token", host, b.Addr())
	}
	if _, err := fmt.Fprintln(env.Out, b.URL()); err != nil {
		return fmt.Errorf("printing the bridge URL: %w", err)
	}
	if token != "" {
		if _, err := fmt.Fprintln(env.Out, token); err != nil {
			return fmt.Errorf("printing the bridge token: %w", err)
		}
	}
	// The bridge lives for its turn: clients come and go (a DELETE ends one
	// session, an initialize opens the next) until an interrupt. Then the kernel
	// cancels the calls still running and records each one's outcome
	// (cancelled_by_shutdown), their answers are sent, and only then do the
	// sessions, the turn and the listener close; the store closes last (a.Close).
	select {
	case <-ctx.Done():
	case <-b.Done():
		a.Shutdown()
		return errors.New("the bridge's listener stopped")
	}
	a.Shutdown()
	return b.Close()
}

// serveBridgeStdio serves the turn over stdin/stdout until the input ends (after
// answering what was read) or an interrupt. The server runs on a context of its
// own, so that an interrupt never cancels a call before the kernel has: the
// kernel cancels the calls still running and records each one
// (cancelled_by_shutdown), and only then is the server stopped.
func serveBridgeStdio(ctx context.Context, env *Env, a *app.App, turn mcpserver.Turn, opts mcpserver.StdioOptions) error {
	serveCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	defer stop()
	served := make(chan error, 1)
	go func() { served <- mcpserver.ServeStdio(serveCtx, env.In, env.Out, turn, opts) }()
	var err error
	select {
	case err = <-served:
	case <-ctx.Done():
		a.Shutdown()
		stop()
		err = <-served
	}
	if err != nil && serveCtx.Err() == nil {
		return fmt.Errorf("serving MCP over stdio: %w", err)
	}
	return nil
}
