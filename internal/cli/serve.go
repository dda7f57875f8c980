package cli

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/internal/app/daemon"
	"github.com/toolgate/toolgate/internal/kernel"
	"github.com/toolgate/toolgate/internal/listenaddr"
	"github.com/toolgate/toolgate/internal/telemetry"
)

func init() { register(10, newServeCmd) }

type serveFlags struct {
	listen     string
	workspace  string
	allowHosts []string
	drain      time.Duration
}

// DefaultListen is where `toolgate serve` listens unless told otherwise.
const DefaultListen = "127.0.0.1:7077"

func newServeCmd(env *Env) *cobra.Command {
	var f serveFlags
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the daemon: /mcp, /v1/tools, /v1/tools/invoke, /v1/rpc, /healthz, /readyz and /metrics on one listener",
		Long: `serve runs toolgate as a daemon over the data directory. One HTTP server carries
  /mcp               MCP over Streamable HTTP; each session gets its own turn and catalogue
  /v1/tools          GET: the caller's effective catalogue (the same as tools/list)
  /v1/tools/invoke   POST {"name","arguments"}: the same ToolCall as tools/call
  /v1/rpc            the management protocol (POST, WebSocket): install and manage MCP servers
  /healthz           GET: liveness, no authentication
  /readyz            GET: readiness (the store answers, its schema is current), no authentication
  /metrics           GET: Prometheus metrics, the owner token only
Every /mcp and /v1 request needs "Authorization: Bearer TOKEN": the owner token (the file
owner-token in the data directory, created on first start; it speaks for the principal
"default") or an execution token from "toolgate token mint".

It listens on loopback by default. A non-loopback --listen is accepted only because
authentication is always enforced; name the host clients use with --allow-host (the
Host/Origin check refuses everything else). SIGTERM or Ctrl-C stops accepting, lets
in-flight calls finish (up to --drain), then cancels those still running, records each
one's outcome in the audit trail (failed, cancelled_by_shutdown) and exits; a second
signal cancels them at once.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runServe(cmd.Context(), env, f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.listen, "listen", DefaultListen, "address to listen on (host:port; port 0 picks a free one)")
	fl.StringVar(&f.workspace, "workspace", "", "serve the local file tools confined to this directory")
	fl.StringSliceVar(&f.allowHosts, "allow-host", nil, "extra Host/Origin names accepted beyond loopback (for a non-loopback --listen)")
	fl.DurationVar(&f.drain, "drain", 30*time.Second, "how long in-flight calls may take to finish after SIGTERM before they are cancelled (each still gets its audit outcome)")
	return cmd
}

// serveTestTools are registered in addition to the local tools; only tests set it (to
// hold a call in flight across a shutdown).
var serveTestTools []*kernel.Tool

func runServe(ctx context.Context, env *Env, f serveFlags) error {
	// Records logged with a request's context carry its trace_id (docs/deployment.md).
	log := slog.New(telemetry.LogHandler(slog.NewTextHandler(env.Err, &slog.HandlerOptions{Level: slog.LevelWarn})))
	host, _, err := listenaddr.ParseBind(f.listen)
	if err != nil {
		return err // before anything is opened
	}
	dataDir, err := env.DataDir()
	if err != nil {
		return err
	}
	tools, closeWS, err := ownTools(env, f.workspace, dataDir, "toolgate serve")
	if err != nil {
		return err
	}
	defer closeWS()
	tools = append(tools, serveTestTools...)
	a, err := env.openApp(ctx, dataDir, tools, log)
	if err != nil {
		return err
	}
	defer a.Close() // last: the store closes after every outcome is written
	d, err := daemon.Start(a, daemon.Options{Listen: f.listen, AllowedHosts: f.allowHosts, Logger: log})
	if err != nil {
		return err
	}
	base := d.URL()
	tokenPath := a.OwnerTokenPath()
	w := env.Err
	fmt.Fprintf(w, "toolgate: data directory %s\n", dataDir)
	if db := a.Database(); db != "" {
		fmt.Fprintf(w, "toolgate: database %s\n", db) // password redacted
	}
	fmt.Fprintf(w, "toolgate: audit durability %s\n", a.Durability())
	if d.CreatedOwnerToken() {
		fmt.Fprintf(w, "toolgate: created the owner token %s (mode 0600)\n", tokenPath)
	}
	if !d.Loopback() {
		warnBeyondLoopback(w, "the daemon", "a bearer token", host, d.Addr())
	}
	fmt.Fprintf(w, "toolgate: MCP endpoint %s/mcp; connect with:\n", base)
	fmt.Fprintf(w, "  curl -s %s/v1/tools -H \"Authorization: Bearer $(cat %s)\"\n", base, tokenPath)
	fmt.Fprintf(w, "  or mint a token for a principal: toolgate token mint --principal NAME\n")
	fmt.Fprintf(w, "toolgate: management protocol %s/v1/rpc (toolgate install, ls, policy set, restart, uninstall, details use it)\n", base)
	// Last, so that a supervisor waiting for this line has seen everything above.
	fmt.Fprintf(w, "toolgate: listening on %s\n", base)

	if err := d.Wait(ctx); err != nil {
		_, _ = d.Shutdown(env.Hurry(), 0)
		return err
	}
	fmt.Fprintf(w, "toolgate: shutting down; draining in-flight calls (up to %s; a second signal cancels them now)\n", f.drain)
	cancelled, err := d.Shutdown(env.Hurry(), f.drain)
	if err != nil {
		return err
	}
	if cancelled > 0 {
		fmt.Fprintf(w, "toolgate: stopped; %d call(s) still running were cancelled and recorded as cancelled_by_shutdown\n", cancelled)
		return nil
	}
	fmt.Fprintf(w, "toolgate: stopped\n")
	return nil
}
