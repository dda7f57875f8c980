// Package daemon is toolgate serve's HTTP server over one App: a listener carrying /mcp
// (MCP over Streamable HTTP, a session per initialize), /v1/tools and /v1/tools/invoke
// (the HTTP API), /v1/rpc (the management protocol, POST and WebSocket), /healthz,
// /readyz and /metrics, behind the Host/Origin guard, and its orderly shutdown.
// It is the app's: the CLI and tests import it, no other package does. See
// docs/kernel.md ("toolgate serve") and docs/architecture.md.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/toolgate/toolgate/internal/app"
	"github.com/toolgate/toolgate/internal/httpapi"
	"github.com/toolgate/toolgate/internal/listenaddr"
	"github.com/toolgate/toolgate/internal/mcpserver"
	"github.com/toolgate/toolgate/internal/mgmt"
	"github.com/toolgate/toolgate/internal/telemetry"
)

// Options configures a Daemon.
type Options struct {
	// Listen is "HOST:PORT"; HOST is an IP address, localhost or empty (every
	// interface), port 0 picks a free one (listenaddr.ParseBind).
	Listen string
	// AllowedHosts are Host/Origin names accepted beyond the loopback names (for a
	// listener beyond loopback).
	AllowedHosts []string
	// Logger receives failures (never tokens or arguments); nil discards.
	Logger *slog.Logger
}

// AnswerGrace is how long, once the drain deadline passed and the kernel cancelled the
// calls still running, their answers may take to reach their clients before the
// connections are closed.
const AnswerGrace = 5 * time.Second

// Daemon is toolgate serve's listener and the handlers behind it.
type Daemon struct {
	a       *app.App
	mcp     *mcpserver.Handler
	mgmt    *mgmt.Handler
	srv     *http.Server
	addr    *net.TCPAddr
	url     string
	created bool
	served  chan error
	// stopWatch stops ending the sessions other replicas ended.
	stopWatch func()
}

// Start reads (creating on first use) the data directory's owner token, builds the
// handlers, listens on opts.Listen and serves until Shutdown.
func Start(a *app.App, opts Options) (*Daemon, error) {
	host, _, err := listenaddr.ParseBind(opts.Listen)
	if err != nil {
		return nil, err
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	owner, created, err := a.OwnerToken()
	if err != nil {
		return nil, err
	}
	auth := a.Authenticate(owner)
	mcpOpts := mcpserver.HandlerOptions{
		Path:         "/mcp",
		Authenticate: auth,
		OpenTurn: func(ctx context.Context, principal string) (mcpserver.Turn, error) {
			return a.OpenTurn(ctx, app.TurnRequest{Principal: principal, Transport: "http"})
		},
		ServerInfo:   app.ServerInfo(),
		Instructions: app.Instructions,
		AllowedHosts: opts.AllowedHosts,
		Logger:       log,
	}
	watchEnded, err := shareSessions(a, &mcpOpts) // replicas on PostgreSQL
	if err != nil {
		return nil, err
	}
	mcpH := mcpserver.NewHandler(mcpOpts)
	stopWatch := func() {}
	if watchEnded != nil {
		stopWatch = watchEnded(mcpH)
	}
	apiH, err := httpapi.New(httpapi.Options{
		Authenticate: auth,
		OpenTurn: func(ctx context.Context, principal string) (httpapi.Turn, error) {
			return a.OpenTurn(ctx, app.TurnRequest{Principal: principal, Transport: "api"})
		},
		Logger: log,
	})
	if err != nil {
		stopWatch()
		mcpH.Close()
		return nil, err
	}
	// The management protocol (docs/management.md): the owner token, or a principal
	// holding an allow grant on toolgate.admin. Its sockets are cross-origin only for
	// the names --allow-host adds.
	mgmtH, err := mgmt.NewHandler(mgmt.Options{
		Manager:        a,
		Authenticate:   a.ManagementAuth(owner),
		OriginPatterns: opts.AllowedHosts,
		Logger:         log,
	})
	if err != nil {
		mcpH.Close()
		return nil, err
	}
	mux := http.NewServeMux()
	// /mcp is one explicit route, not "POST /mcp" and "DELETE /mcp" patterns: the
	// contract answers any other method 405 with a JSON body and Allow: POST, DELETE,
	// after the Host, Origin and Content-Type checks (docs/http-contract.md, "Order of
	// checks"); a pattern mux answers 405 in text/plain, before them. The HTTP API's
	// routes and /healthz are method patterns (their 405 is the mux's, with Allow).
	mux.Handle("/mcp", mcpH)
	mux.Handle("/v1/", apiH)
	mux.Handle(mgmt.Path, mgmtH)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		_, _ = w.Write([]byte(`{"status":"ok"}` + "\n"))
	})
	mux.Handle("GET /readyz", &readiness{check: a.Ready, log: log})
	a.Metrics().SetSessions(mcpH.Sessions)
	mux.Handle("GET /metrics", ownerOnly(owner, a.Metrics().Handler()))
	// The guard runs once per request, here (the /mcp Handler sees it passed), and
	// the policy is brought up to date from the store once per request
	// (app.Request), however many steps of the request would read it.
	// Each request continues its caller's W3C trace (telemetry.Middleware).
	perRequest := telemetry.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mux.ServeHTTP(w, r.WithContext(a.Request(r.Context())))
	}))
	srv := &http.Server{
		Handler:           mcpserver.Guard(perRequest, opts.AllowedHosts),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	ln, err := net.Listen("tcp", opts.Listen)
	if err != nil {
		stopWatch()
		mcpH.Close()
		mgmtH.Close()
		return nil, fmt.Errorf("listening on %s: %w", opts.Listen, err)
	}
	addr := ln.Addr().(*net.TCPAddr)
	d := &Daemon{a: a, mcp: mcpH, mgmt: mgmtH, srv: srv, addr: addr, url: listenaddr.BaseURL(host, addr),
		created: created, served: make(chan error, 1), stopWatch: stopWatch}
	go func() { d.served <- srv.Serve(ln) }()
	// The management commands find the daemon through this file (app.DaemonFile);
	// without it they open the data directory themselves, which is still correct.
	if err := a.WriteDaemonFile(d.url); err != nil {
		log.Warn("the management commands will not find this daemon", "err", err)
	}
	return d, nil
}

// URL is the daemon's base URL for a client on this machine ("http://127.0.0.1:7077"):
// the address bound, and for a wildcard bind the loopback address of its family.
func (d *Daemon) URL() string { return d.url }

// Addr is the address bound (0.0.0.0 or :: for every interface).
func (d *Daemon) Addr() *net.TCPAddr { return d.addr }

// Loopback reports whether the daemon accepts connections from this machine only.
// What was bound decides, not the name asked for.
func (d *Daemon) Loopback() bool { return d.addr.IP.IsLoopback() }

// Sessions is the number of live /mcp sessions this daemon holds.
func (d *Daemon) Sessions() int { return d.mcp.Sessions() }

// CreatedOwnerToken reports whether Start created the owner token (a first start).
func (d *Daemon) CreatedOwnerToken() bool { return d.created }

// Wait returns nil once ctx ends, or the error that stopped the server first.
func (d *Daemon) Wait(ctx context.Context) error {
	select {
	case err := <-d.served:
		d.served <- err // for Shutdown
		return fmt.Errorf("serving: %w", err)
	case <-ctx.Done():
		return nil
	}
}

// Shutdown stops the daemon losing no outcome. The listener closes at once and idle
// connections go; requests in flight keep theirs until they finish, drain passes or
// hurry ends (a second signal). Then the kernel cancels the calls still running and
// writes each one's outcome (cancelled_by_shutdown, App.Shutdown), their answers are
// still sent for up to AnswerGrace, and only then do the sessions and connections
// close. The store stays open: the caller closes the App last. It returns how many
// calls were cancelled.
func (d *Daemon) Shutdown(hurry context.Context, drain time.Duration) (cancelled int, err error) {
	d.a.RemoveDaemonFile() // management commands stop coming here
	dctx, cancel := context.WithTimeout(hurry, drain)
	defer cancel()
	err = d.srv.Shutdown(dctx)
	cancelled = d.a.Shutdown()
	d.stopWatch()
	d.mcp.Close()  // ends the sessions, and with them their open event streams
	d.mgmt.Close() // management sockets: hijacked, so Shutdown did not wait for them
	if err != nil {
		gctx, gcancel := context.WithTimeout(context.Background(), AnswerGrace)
		defer gcancel()
		if err := d.srv.Shutdown(gctx); err != nil {
			d.srv.Close()
		}
	}
	if serr := <-d.served; serr != nil && !errors.Is(serr, http.ErrServerClosed) {
		return cancelled, fmt.Errorf("serving: %w", serr)
	}
	return cancelled, nil
}
