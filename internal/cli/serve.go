package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/internal/app"
	"github.com/toolgate/toolgate/internal/httpapi"
	"github.com/toolgate/toolgate/internal/kernel"
	"github.com/toolgate/toolgate/internal/mcpserver"
)

func init() { register(10, newServeCmd) }

// serveTestTools are registered in addition to the local tools; only tests set it (to
// hold a call in flight across a shutdown).
var serveTestTools []*kernel.Tool

type serveFlags struct {
	listen     string
	workspace  string
	allowHosts []string
	drain      time.Duration
}

// answerGrace is how long, once the drain deadline passed and the kernel cancelled the
// calls still running, their answers may take to reach their clients before the
// connections are closed.
const answerGrace = 5 * time.Second

// DefaultListen is where `toolgate serve` listens unless told otherwise.
const DefaultListen = "127.0.0.1:7077"

func newServeCmd(env *Env) *cobra.Command {
	var f serveFlags
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the daemon: /mcp, /v1/tools, /v1/tools/invoke and /healthz on one listener",
		Long: `serve runs toolgate as a daemon over the data directory. One HTTP server carries
  /mcp               MCP over Streamable HTTP; each session gets its own turn and catalogue
  /v1/tools          GET: the caller's effective catalogue (the same as tools/list)
  /v1/tools/invoke   POST {"name","arguments"}: the same ToolCall as tools/call
  /healthz           GET: liveness, no authentication
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

// isLoopbackListen reports whether a listen address binds only loopback.
func isLoopbackListen(addr string) (bool, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false, fmt.Errorf("--listen %q: %w", addr, err)
	}
	if host == "localhost" {
		return true, nil
	}
	ip := net.ParseIP(host)
	if ip == nil {
		if host == "" {
			return false, nil // ":7077" binds every interface
		}
		return false, fmt.Errorf("--listen %q: host must be an IP address or localhost", addr)
	}
	return ip.IsLoopback(), nil
}

func runServe(ctx context.Context, env *Env, f serveFlags) error {
	log := slog.New(slog.NewTextHandler(env.Err, &slog.HandlerOptions{Level: slog.LevelWarn}))
	loopback, err := isLoopbackListen(f.listen)
	if err != nil {
		return err
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
	a, err := app.Open(ctx, app.Options{DataDir: dataDir, Tools: tools, Logger: log})
	if err != nil {
		return err
	}
	defer a.Close()
	owner, created, err := a.OwnerToken()
	if err != nil {
		return err
	}
	auth := a.Authenticate(owner)

	mcpH := mcpserver.NewHandler(mcpserver.HandlerOptions{
		Path:         "/mcp",
		Authenticate: auth,
		OpenTurn: func(ctx context.Context, principal string) (mcpserver.Turn, error) {
			return a.OpenTurn(ctx, app.TurnRequest{Principal: principal, Transport: "http"})
		},
		ServerInfo:   app.ServerInfo(),
		Instructions: app.Instructions,
		AllowedHosts: f.allowHosts,
		Logger:       log,
	})
	defer mcpH.Close()
	apiH, err := httpapi.New(httpapi.Options{
		Authenticate: auth,
		OpenTurn: func(ctx context.Context, principal string) (httpapi.Turn, error) {
			return a.OpenTurn(ctx, app.TurnRequest{Principal: principal, Transport: "api"})
		},
		Logger: log,
	})
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcpH)
	mux.Handle("/v1/", apiH)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		_, _ = w.Write([]byte(`{"status":"ok"}` + "\n"))
	})
	srv := &http.Server{
		Handler:           mcpserver.Guard(mux, f.allowHosts),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	ln, err := net.Listen("tcp", f.listen)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", f.listen, err)
	}
	base := "http://" + ln.Addr().String()
	tokenPath := filepath.Join(dataDir, app.OwnerTokenFile)
	w := env.Err
	fmt.Fprintf(w, "toolgate: data directory %s\n", dataDir)
	if created {
		fmt.Fprintf(w, "toolgate: created the owner token %s (mode 0600)\n", tokenPath)
	}
	if !loopback {
		fmt.Fprintf(w, "toolgate: warning: listening beyond loopback; every request must carry a bearer token\n")
	}
	fmt.Fprintf(w, "toolgate: MCP endpoint %s/mcp; connect with:\n", base)
	fmt.Fprintf(w, "  curl -s %s/v1/tools -H \"Authorization: Bearer $(cat %s)\"\n", base, tokenPath)
	fmt.Fprintf(w, "  or mint a token for a principal: toolgate token mint --principal NAME\n")
	// Last, so that a supervisor waiting for this line has seen everything above.
	fmt.Fprintf(w, "toolgate: listening on %s\n", base)

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serving: %w", err)
	case <-ctx.Done():
	}
	fmt.Fprintf(w, "toolgate: shutting down; draining in-flight calls (up to %s; a second signal cancels them now)\n", f.drain)
	// The listener closes at once and idle connections go; requests in flight keep
	// theirs until they finish, the drain deadline passes or a second signal comes.
	// Then the kernel cancels the calls still running and writes each one's outcome
	// (cancelled_by_shutdown), their answers are still sent, and only then do the
	// sessions and connections close. The store closes last (a.Close, deferred).
	dctx, cancel := context.WithTimeout(env.Hurry(), f.drain)
	defer cancel()
	err = srv.Shutdown(dctx)
	cancelled := a.Shutdown()
	mcpH.Close() // ends the sessions, and with them their open event streams
	if err != nil {
		gctx, gcancel := context.WithTimeout(context.Background(), answerGrace)
		defer gcancel()
		if err := srv.Shutdown(gctx); err != nil {
			srv.Close()
		}
	}
	if serr := <-errc; serr != nil && !errors.Is(serr, http.ErrServerClosed) {
		return fmt.Errorf("serving: %w", serr)
	}
	if cancelled > 0 {
		fmt.Fprintf(w, "toolgate: stopped; %d call(s) still running were cancelled and recorded as cancelled_by_shutdown\n", cancelled)
		return nil
	}
	fmt.Fprintf(w, "toolgate: stopped\n")
	return nil
}
