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
	"github.com/toolgate/toolgate/internal/listenaddr"
	"github.com/toolgate/toolgate/internal/mcpserver"
	"github.com/toolgate/toolgate/internal/policy"
)

func init() { register(30, newBridgeCmd) }

type bridgeFlags struct {
	principal    string
	listen       string
	stdio        bool
	noAuth       bool
	ttl          time.Duration
	allowHosts   []string
	capabilities []string
}

func newBridgeCmd(env *Env) *cobra.Command {
	var f bridgeFlags
	cmd := &cobra.Command{
		Use:   "bridge",
		Short: "Open one turn's MCP bridge for a principal and serve it until interrupted",
		Long: `toolgate bridge resolves the principal's permitted catalogue once and serves it as
one MCP session over Streamable HTTP (default) or stdio (--stdio).

Over HTTP it prints the bridge URL as the first line of stdout and, unless --no-auth, an
execution token as the second; clients send it as "Authorization: Bearer <token>". Both
protocol eras are served on the one endpoint: a 2025 client's initialize opens the
bridge's single session, and the bridge then ends when that client deletes it; a
stateless 2026-07-28 client never deletes anything, so the bridge serves until
interrupted. --no-auth drops the token check and is refused unless the listen address is
loopback. The URL names the address bound (for 0.0.0.0 or [::], the loopback address of
that family); listening beyond loopback is announced on stderr, and other machines reach a
wildcard bind only under a name given with --allow-host.

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
`

// addCapabilityFlag registers the repeatable --capability flag.
func addCapabilityFlag(fl *pflag.FlagSet, caps *[]string) {
	fl.StringArrayVar(caps, "capability", nil, "narrow the turn to tools matching `PATTERN[:ACTION]` (\"*\", \"ns.*\" or \"ns.name\"; ACTION read, write or execute); repeatable; never widens the grants")
}

// checkCapabilities refuses malformed --capability values before any store or
// harness is touched, with the same rules the kernel applies when the turn opens.
func checkCapabilities(caps []string) error {
	if _, err := policy.CompileCapabilities(caps); err != nil {
		return fmt.Errorf("--capability: %w", err)
	}
	return nil
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
	a, err := app.Open(ctx, app.Options{DataDir: dataDir, Tools: tools, Logger: log})
	if err != nil {
		return err
	}
	defer a.Close()
	transport := "http"
	if f.stdio {
		transport = "stdio"
	}
	turn, err := a.OpenTurn(ctx, app.TurnRequest{Principal: f.principal, Transport: transport, Capabilities: f.capabilities})
	if err != nil {
		return err
	}
	info := app.ServerInfo()

	if f.stdio {
		defer turn.Close()
		// On a signal the kernel cancels the calls still running first and records them
		// cancelled_by_shutdown (App.Shutdown, as toolgate serve and toolgate mcp do); only
		// then does the server stop, which would cancel them as its connection's.
		serveCtx, stopServe := context.WithCancel(context.WithoutCancel(ctx))
		defer stopServe()
		served := make(chan error, 1)
		go func() {
			served <- mcpserver.ServeStdio(serveCtx, env.In, env.Out, turn, mcpserver.StdioOptions{ServerInfo: info, Instructions: app.Instructions, Logger: log})
		}()
		var err error
		select {
		case err = <-served:
		case <-ctx.Done():
			a.Shutdown()
			stopServe()
			err = <-served
		}
		if err != nil && ctx.Err() == nil {
			return fmt.Errorf("serving MCP over stdio: %w", err)
		}
		return nil
	}

	opts := mcpserver.BridgeOptions{Host: host, Port: port, ServerInfo: info, Instructions: app.Instructions, Logger: log, AllowedHosts: f.allowHosts}
	// Only this bridge's own token opens it: one minted for another bridge of the
	// same principal (perhaps with other --capability values) or for toolgate serve
	// does not (app.BridgeSessionPrefix). The session id exists once the bridge
	// does; until then no token is accepted.
	var sessionID atomic.Pointer[string]
	if !f.noAuth {
		principal := f.principal
		opts.Authorize = func(token string, present bool) bool {
			id := sessionID.Load()
			return id != nil && a.BridgeAuthorizer(principal, *id)(token, present)
		}
	}
	b, err := mcpserver.NewBridge(turn, opts)
	if err != nil {
		_ = turn.Close()
		return err
	}
	defer b.Close() // ends the session, which closes the turn
	sid := b.SessionID()
	sessionID.Store(&sid)
	token := ""
	if !f.noAuth {
		if token, err = a.MintBridgeToken(f.principal, b.SessionID(), int(f.ttl/time.Second)); err != nil {
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
	select {
	case <-ctx.Done():
		// A signal: the kernel cancels the calls still running and records them
		// cancelled_by_shutdown (App.Shutdown, as toolgate serve does) before the bridge
		// closes, which would cancel them as its session's.
		a.Shutdown()
	case <-b.Done():
	}
	return nil
}
