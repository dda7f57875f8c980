package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/internal/app"
	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/harness"
	"github.com/toolgate/toolgate/internal/kernel"
	"github.com/toolgate/toolgate/internal/mcpserver"
	"github.com/toolgate/toolgate/internal/mcpspec"
	"github.com/toolgate/toolgate/internal/policy"
)

func init() { register(73, newRunCmd) }

type runFlags struct {
	harness      string
	principal    string
	stdio        bool
	name         string
	workspace    string
	keepFile     bool
	capabilities []string
}

// runBridgeHook, when set (by tests), sees the bridge after the harness exited and the
// bridge closed.
var runBridgeHook func(*mcpserver.Bridge)

func newRunCmd(env *Env) *cobra.Command {
	var f runFlags
	cmd := &cobra.Command{
		Use:   "run --harness NAME [flags] -- CMD [ARGS...]",
		Short: "Run one harness turn against a fresh bridge, then print its outcome and audit summary",
		Long: `toolgate run resolves the principal's catalogue once, opens a bridge for it (Streamable
HTTP on 127.0.0.1, a free port and a fresh execution token; or, with --stdio, a
connection file that starts "toolgate mcp"), writes the harness's connection file into a
private temporary folder (0700), and runs CMD with the terminal passed through, pointed
at that file through the harness's own flags or environment:

` + launchHelp() + `
The bridge lives for the turn: the harness may end its session (DELETE) and initialize
again, and gets the bridge's next session on the same catalogue. When CMD exits the
bridge closes (every session id it issued then answers 404 unknown_session), the
folder is removed, and the turn's outcome (completed, escalated, failed) and audit
summary are printed on stderr. toolgate exits with CMD's exit code.

Tools whose canonical ids break the harness's naming rules are published under stable
short forms; each is listed before CMD starts.

` + capabilityHelp + `In the --stdio form the capabilities are passed on to the "toolgate mcp" the
connection file starts.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.ArgsLenAtDash() != 0 {
				return errors.New("put the harness command after --, e.g. toolgate run --harness claude-code -- claude")
			}
			if err := checkCapabilities(f.capabilities); err != nil {
				return err
			}
			return runHarness(cmd.Context(), env, f, args)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.harness, "harness", "", "the harness CMD is: "+strings.Join(launchable(), ", "))
	fl.StringVar(&f.principal, "principal", app.DefaultPrincipal, "the principal whose grants decide the turn")
	fl.BoolVar(&f.stdio, "stdio", false, "let the harness start `toolgate mcp` over stdio instead of connecting to an HTTP bridge")
	fl.StringVar(&f.name, "name", harness.DefaultServerName, "the server's name in the connection file")
	fl.StringVar(&f.workspace, "workspace", "", "also publish the local file/bash/git tools confined to this directory (stdio form: default the current directory)")
	fl.BoolVar(&f.keepFile, "print-file", false, "print the connection file's path and content on stderr before running (the token is redacted)")
	addCapabilityFlag(fl, &f.capabilities)
	_ = cmd.MarkFlagRequired("harness")
	return cmd
}

func launchable() []string {
	var out []string
	for _, h := range harness.All() {
		if h.CanLaunch() {
			out = append(out, h.ID)
		}
	}
	return out
}

func launchHelp() string {
	var b strings.Builder
	for _, h := range harness.All() {
		if h.CanLaunch() {
			fmt.Fprintf(&b, "  %-12s %s\n", h.ID, h.LaunchDoc)
		}
	}
	return b.String()
}

// runTTL bounds the execution token of one run; the bridge closes when the harness
// exits, whichever comes first.
const runTTL = 24 * time.Hour

func runHarness(ctx context.Context, env *Env, f runFlags, argv []string) error {
	h, err := harness.Lookup(f.harness)
	if err != nil {
		return err
	}
	if !h.CanLaunch() {
		return fmt.Errorf("%s cannot be started by toolgate run (it is an application or takes its options in code); use toolgate connect %s or toolgate config %s", h.Title, h.ID, h.ID)
	}
	if strings.TrimSpace(f.principal) == "" {
		return errors.New("--principal must not be empty")
	}
	if err := (harness.Server{Name: f.name, Command: "x"}).Validate(); err != nil {
		return err
	}
	dataDir, err := env.DataDir()
	if err != nil {
		return err
	}
	dbURL, err := env.DatabaseURL()
	if err != nil {
		return err
	}
	if f.stdio && dbURL != "" {
		// The harness's toolgate mcp would need the database URL, password and all, in
		// the harness's configuration or environment; without it, it would open another
		// store (the data directory's SQLite) and decide by other grants.
		return errors.New("--stdio does not work with a PostgreSQL store (--database-url, " + app.EnvDatabaseURL +
			"): the harness would need the database password; use the HTTP bridge (the default)")
	}
	log := slog.New(slog.NewTextHandler(env.Err, &slog.HandlerOptions{Level: slog.LevelWarn}))

	// With --stdio the harness starts its own toolgate mcp, which builds its tools.
	var tools []*kernel.Tool
	if !f.stdio {
		var closeWS func()
		if tools, closeWS, err = ownTools(env, f.workspace, dataDir, "toolgate run"); err != nil {
			return err
		}
		defer closeWS()
	}
	a, err := env.openApp(ctx, dataDir, tools, log)
	if err != nil {
		return err
	}
	defer a.Close()

	dir, err := privateRunDir()
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	start := time.Now()
	var (
		s      harness.Server
		turn   app.Turn
		bridge *mcpserver.Bridge
	)
	if f.stdio {
		cf := connFlags{principal: f.principal, name: f.name, workspace: f.workspace}
		if s, err = cf.server(ctx, env, h, func() (*app.App, error) { return a, nil }); err != nil {
			return err
		}
		for _, c := range f.capabilities {
			s.Args = append(s.Args, "--capability", c)
		}
		if ids, err := catalogueIDs(ctx, a, f.principal); err == nil {
			reportNames(env.Err, h, s.ServerName(), narrowIDs(ids, f.capabilities), true)
		}
	} else {
		namer := h.Namer(f.name)
		tc, err := splitCapabilities(f.capabilities)
		if err != nil {
			return err
		}
		turn, err = a.OpenTurn(ctx, app.TurnRequest{Principal: f.principal, Transport: "http", Namer: namer.Name, Alias: namer.Alias,
			Capabilities: tc.patterns, Selections: tc.selections})
		if err != nil {
			return err
		}
		reportSelections(env.Err, turn)
		for _, r := range namer.Renames() {
			fmt.Fprintf(env.Err, "toolgate: short form: %s is published as %s (shown as %s): the canonical id %s\n", r.Canonical, r.Published, r.Alias, r.Reason)
		}
		if list, err := turn.ListTools(ctx); err == nil {
			reportPublished(env.Err, h, f.name, list)
		}
		principal := f.principal
		// Only this bridge's own token opens it, in whichever of its sessions
		// (app.BridgeSessionPrefix, with the bridge's id); the id exists once the
		// bridge does.
		var bridgeID atomic.Pointer[string]
		bridge, err = mcpserver.NewBridge(turn, mcpserver.BridgeOptions{
			ServerInfo:   app.ServerInfo(),
			Instructions: app.Instructions,
			Logger:       log,
			Authorize: func(token string, present bool) bool {
				id := bridgeID.Load()
				return id != nil && a.BridgeAuthorizer(principal, *id)(token, present)
			},
		})
		if err != nil {
			_ = turn.Close()
			return err
		}
		defer bridge.Close()
		bid := bridge.ID()
		bridgeID.Store(&bid)
		tok, err := a.MintBridgeToken(f.principal, bid, int(runTTL/time.Second))
		if err != nil {
			return fmt.Errorf("minting the bridge token: %w", err)
		}
		s = harness.Server{Name: f.name, URL: bridge.URL(), Headers: map[string]string{"Authorization": "Bearer " + tok}}
	}

	content, err := h.Render(s)
	if err != nil {
		return err
	}
	file := filepath.Join(dir, h.FileName)
	if err := harness.WriteFileAtomic(file, content, 0o600); err != nil {
		return err
	}
	if f.keepFile {
		fmt.Fprintf(env.Err, "toolgate: %s:\n%s", file, redactBearer(string(content)))
	}
	launch, err := h.Launch(argv, file, s)
	if err != nil {
		return err
	}
	code, runErr := runChild(ctx, env, launch)

	// The turn is over: calls the harness left running are cancelled and recorded
	// (cancelled_by_shutdown) by the kernel before the bridge goes, then the bridge
	// closes (every session id it issued answers 404 from now on).
	var outcome app.Outcome
	turnID := ""
	if bridge != nil {
		a.Shutdown()
		outcome, turnID = turn.Outcome(), turn.ID()
		_ = bridge.Close()
		if runBridgeHook != nil {
			runBridgeHook(bridge)
		}
	}
	summarize(ctx, env.Err, a, f, start, turnID, outcome)
	if runErr != nil {
		return runErr
	}
	if code != 0 {
		return &ExitError{Code: code}
	}
	return nil
}

// narrowIDs keeps the canonical ids the capabilities cover, so the stdio form's name
// check speaks only of tools its "toolgate mcp" will publish. caps were checked already.
func narrowIDs(ids, caps []string) []string {
	tc, err := splitCapabilities(caps)
	if err != nil || len(tc.selections) > 0 {
		return ids // selections add tools: keep every id for the check
	}
	c, err := policy.CompileCapabilities(tc.patterns)
	if err != nil || c == nil {
		return ids
	}
	out := ids[:0:0]
	for _, id := range ids {
		if c.Covers(id) {
			out = append(out, id)
		}
	}
	return out
}

// reportPublished checks the names the bridge actually publishes against the harness.
func reportPublished(w io.Writer, h *harness.Harness, server string, list *mcpspec.ToolList) {
	var names []string
	for _, raw := range list.Tools {
		var t struct {
			Name string `json:"name"`
		}
		if err := json.Unmarshal(raw, &t); err == nil {
			names = append(names, t.Name)
		}
	}
	for _, fd := range h.Check(server, names) {
		if !fd.Renamed {
			fmt.Fprintf(w, "toolgate: name problem: %s\n", fd)
		}
	}
}

// runChild runs the harness with the terminal passed through and returns its exit code.
// Ctrl-C reaches the harness from the terminal directly (it decides what an interrupt
// means); a SIGTERM or SIGHUP sent to toolgate alone is forwarded to it.
func runChild(ctx context.Context, env *Env, l harness.Launch) (int, error) {
	path, err := exec.LookPath(l.Args[0])
	if err != nil {
		return 127, fmt.Errorf("starting the harness: %w", err)
	}
	c := exec.Command(path, l.Args[1:]...)
	c.Args[0] = l.Args[0]
	c.Stdin, c.Stdout, c.Stderr = env.In, env.Out, env.Err
	// The harness reaches toolgate through its bridge only; it gets no database URL
	// (which may carry a password).
	c.Env = append(withoutEnv(os.Environ(), app.EnvDatabaseURL), l.Env...)
	c.WaitDelay = 5 * time.Second
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	if err := c.Start(); err != nil {
		return 127, fmt.Errorf("starting the harness: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- c.Wait() }()
	for {
		select {
		case s := <-sigs:
			_ = c.Process.Signal(s)
		case err := <-done:
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
					return 128 + int(ws.Signal()), nil
				}
				return ee.ExitCode(), nil
			}
			if err != nil {
				return 1, fmt.Errorf("running the harness: %w", err)
			}
			return 0, nil
		}
	}
}

// summarize prints the turn's outcome and its audit events, counted by decision and tool.
func summarize(ctx context.Context, w io.Writer, a *app.App, f runFlags, start time.Time, turnID string, outcome app.Outcome) {
	ctx = context.WithoutCancel(ctx)
	evs, err := a.Audit(ctx, audit.Filter{Principal: f.principal, Since: start.Add(-time.Second)})
	if err != nil {
		fmt.Fprintf(w, "toolgate: reading the audit trail: %v\n", err)
		return
	}
	var mine []audit.Event
	for _, e := range evs {
		if turnID != "" && e.TurnID != turnID {
			continue
		}
		if turnID == "" && (e.Transport != "stdio" || e.Time.Before(start.Add(-time.Second))) {
			continue
		}
		mine = append(mine, e)
	}
	if turnID == "" {
		// The stdio form's turn ran in the process the harness started; its outcome is
		// what its audit events say.
		outcome = app.OutcomeCompleted
		for _, e := range mine {
			if e.Decision == audit.Escalated {
				outcome = app.OutcomeEscalated
			}
		}
	}
	byDecision := map[audit.Decision]int{}
	byTool := map[string]map[audit.Decision]int{}
	for _, e := range mine {
		byDecision[e.Decision]++
		if byTool[e.Tool] == nil {
			byTool[e.Tool] = map[audit.Decision]int{}
		}
		byTool[e.Tool][e.Decision]++
	}
	label := "turn " + turnID
	if turnID == "" {
		label = "stdio turn(s) of " + f.principal
	}
	fmt.Fprintf(w, "toolgate: %s %s: %d audit event(s): %d allowed, %d denied, %d failed, %d escalated\n",
		label, outcome, len(mine), byDecision[audit.Allowed], byDecision[audit.Denied], byDecision[audit.Failed], byDecision[audit.Escalated])
	tools := make([]string, 0, len(byTool))
	for t := range byTool {
		tools = append(tools, t)
	}
	sort.Strings(tools)
	for _, t := range tools {
		var parts []string
		for _, d := range []audit.Decision{audit.Allowed, audit.Denied, audit.Failed, audit.Escalated} {
			if n := byTool[t][d]; n > 0 {
				parts = append(parts, fmt.Sprintf("%d %s", n, d))
			}
		}
		fmt.Fprintf(w, "toolgate:   %s: %s\n", t, strings.Join(parts, ", "))
	}
}

// privateRunDir creates the 0700 folder a run's connection file lives in, under the
// user's cache directory rather than the shared temp directory: some harnesses (Gemini
// CLI) refuse a settings file with a world-writable ancestor such as /tmp.
func privateRunDir() (string, error) {
	base := ""
	if c, err := os.UserCacheDir(); err == nil {
		base = filepath.Join(c, "toolgate", "runs")
		if err := os.MkdirAll(base, 0o700); err != nil {
			base = ""
		}
	}
	if base == "" {
		base = os.TempDir()
	}
	dir, err := os.MkdirTemp(base, "run-")
	if err != nil {
		return "", fmt.Errorf("creating the private connection folder: %w", err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		_ = os.RemoveAll(dir)
		return "", fmt.Errorf("securing %s: %w", dir, err)
	}
	return dir, nil
}

// withoutEnv returns env less the variable name.
func withoutEnv(env []string, name string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		if !strings.HasPrefix(kv, name+"=") {
			out = append(out, kv)
		}
	}
	return out
}
