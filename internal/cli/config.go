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
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/toolgate/toolgate/internal/app"
	"github.com/toolgate/toolgate/internal/harness"
	"github.com/toolgate/toolgate/internal/localtools"
)

func init() { register(70, newConfigCmd) }

// connFlags are the flags that say how a harness reaches toolgate, shared by config and
// connect.
type connFlags struct {
	stdio     bool
	httpURL   string
	principal string
	name      string
	workspace string
	ttl       time.Duration
	noToken   bool
}

func (f *connFlags) add(fl *pflag.FlagSet) {
	fl.BoolVar(&f.stdio, "stdio", false, "the harness starts `toolgate mcp` itself (the default)")
	fl.StringVar(&f.httpURL, "http", "", "the harness connects to this Streamable HTTP URL (e.g. http://127.0.0.1:7077/mcp from toolgate serve) with a freshly minted execution token")
	fl.StringVar(&f.principal, "principal", app.DefaultPrincipal, "the principal whose grants apply")
	fl.StringVar(&f.name, "name", harness.DefaultServerName, "the server's name in the harness file (harnesses prefix tool names with it)")
	fl.StringVar(&f.workspace, "workspace", "", "stdio form: the workspace `toolgate mcp` confines local tools to (default: the current directory)")
	fl.DurationVar(&f.ttl, "ttl", 24*time.Hour, "HTTP form: lifetime of the minted execution token")
	fl.BoolVar(&f.noToken, "no-token", false, "HTTP form: no Authorization header (for a server started without auth)")
}

func (f *connFlags) validate() error {
	if f.stdio && f.httpURL != "" {
		return errors.New("--stdio and --http contradict each other")
	}
	if strings.TrimSpace(f.principal) == "" {
		return errors.New("--principal must not be empty")
	}
	if f.httpURL == "" && (f.noToken) {
		return errors.New("--no-token only applies to --http")
	}
	if f.httpURL != "" && f.workspace != "" {
		return errors.New("--workspace only applies to the stdio form (the HTTP server has its own)")
	}
	return nil
}

// selfCommand is the absolute path of this toolgate binary, which stdio connection
// files start.
func selfCommand() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("finding the toolgate binary: %w", err)
	}
	if r, err := filepath.EvalSymlinks(exe); err == nil {
		exe = r
	}
	return filepath.Abs(exe)
}

// server builds the Server a connection file names. The HTTP form mints a token with
// the App (opened lazily by open).
func (f *connFlags) server(ctx context.Context, env *Env, h *harness.Harness, open func() (*app.App, error)) (harness.Server, error) {
	s := harness.Server{Name: f.name}
	if f.httpURL != "" {
		s.URL = f.httpURL
		if !f.noToken {
			if f.ttl <= 0 || f.ttl > app.MaxTokenTTL {
				return s, fmt.Errorf("--ttl must be between 1s and %s", app.MaxTokenTTL)
			}
			a, err := open()
			if err != nil {
				return s, err
			}
			tok, err := a.MintToken(f.principal, "", int(f.ttl/time.Second))
			if err != nil {
				return s, err
			}
			s.Headers = map[string]string{"Authorization": "Bearer " + tok}
		}
		return s, s.Validate()
	}
	exe, err := selfCommand()
	if err != nil {
		return s, err
	}
	ws := f.workspace
	if ws == "" {
		if ws, err = os.Getwd(); err != nil {
			return s, fmt.Errorf("finding the current directory: %w", err)
		}
	}
	if ws, err = filepath.Abs(ws); err != nil {
		return s, fmt.Errorf("--workspace: %w", err)
	}
	if fi, err := os.Stat(ws); err != nil || !fi.IsDir() {
		return s, fmt.Errorf("--workspace %s is not a directory", ws)
	}
	dataDir, err := env.DataDir()
	if err != nil {
		return s, err
	}
	s.Command = exe
	s.Args = []string{"mcp", "--workspace", ws, "--group", f.principal, "--database-dir", dataDir, "--harness", h.ID}
	if s.ServerName() != harness.DefaultServerName {
		s.Args = append(s.Args, "--server-name", s.ServerName())
	}
	return s, s.Validate()
}

// lazyApp opens the App on first use and closes it with close.
type lazyApp struct {
	env *Env
	ctx context.Context
	a   *app.App
}

func (l *lazyApp) open() (*app.App, error) {
	if l.a != nil {
		return l.a, nil
	}
	dir, err := l.env.DataDir()
	if err != nil {
		return nil, err
	}
	log := slog.New(slog.NewTextHandler(l.env.Err, &slog.HandlerOptions{Level: slog.LevelWarn}))
	a, err := l.env.openApp(l.ctx, dir, nil, log)
	if err != nil {
		return nil, err
	}
	l.a = a
	return a, nil
}

func (l *lazyApp) close() {
	if l.a != nil {
		_ = l.a.Close()
	}
}

// catalogueIDs returns the canonical ids the principal's catalogue publishes, by
// opening (and closing) one turn with a recording namer.
func catalogueIDs(ctx context.Context, a *app.App, principal string) ([]string, error) {
	var ids []string
	turn, err := a.OpenTurn(ctx, app.TurnRequest{Principal: principal, Transport: "check", Namer: func(id string) string {
		ids = append(ids, id)
		return id
	}})
	if err != nil {
		return nil, fmt.Errorf("resolving the catalogue of %s: %w", principal, err)
	}
	_ = turn.Close()
	return ids, nil
}

// harnessNames composes the published-name function of a surface with a harness's
// short forms: base names a canonical id (for example with a local-tool prefix), and
// any result the harness would reject is replaced by its stable short form. It also
// returns the harness's display-name function for the audit alias. With no harness it
// returns base unchanged.
func harnessNames(id, server string, base func(string) string) (namer, alias func(string) string, err error) {
	if id == "" {
		return base, nil, nil
	}
	h, err := harness.Lookup(id)
	if err != nil {
		return nil, nil, fmt.Errorf("--harness: %w", err)
	}
	if err := (harness.Server{Name: server, Command: "x"}).Validate(); err != nil {
		return nil, nil, err
	}
	rule := h.Names
	return func(canonical string) string { return rule.Published(server, base(canonical)) },
		func(published string) string { return rule.Alias(server, published) }, nil
}

// reportNames writes the catalogue check for a connection file to w. Over stdio the file
// starts `toolgate mcp --harness H`, which publishes the short forms listed; over HTTP
// the names are those of the server the file points at (toolgate serve publishes
// canonical ids), so each name the harness would reject is reported with the short form
// a `toolgate run` bridge or the stdio form would publish instead.
func reportNames(w io.Writer, h *harness.Harness, server string, ids []string, stdio bool) {
	base := func(id string) string { return id }
	if stdio {
		base = localtools.Namer(localtools.DefaultPrefix)
	}
	pub := make([]string, 0, len(ids))
	for _, id := range ids {
		pub = append(pub, base(id))
	}
	for _, f := range h.Check(server, pub) {
		switch {
		case !f.Renamed:
			fmt.Fprintf(w, "toolgate: name problem: %s\n", f)
		case stdio:
			fmt.Fprintf(w, "toolgate: short form: %s\n", f)
		default:
			fmt.Fprintf(w, "toolgate: %s %s, and toolgate serve publishes canonical ids; the stdio form (or toolgate run) publishes it as %s\n", f.Canonical, f.Reason, f.Published)
		}
	}
}

func newConfigCmd(env *Env) *cobra.Command {
	var f connFlags
	var noCheck bool
	cmd := &cobra.Command{
		Use:   "config HARNESS",
		Short: "Print the connection file a harness expects",
		Long: `toolgate config prints the file that points HARNESS at toolgate, in that harness's own
format, on stdout; stderr says which file it belongs in and lists every tool whose
canonical id the harness would reject, with the stable short form toolgate publishes
for it instead.

Harnesses: ` + strings.Join(harness.IDs(), ", ") + `.

The stdio form (default) starts "toolgate mcp --workspace DIR" with this binary's
absolute path. --http URL connects to a running toolgate serve (or any toolgate MCP
endpoint) and carries a freshly minted execution token.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			h, err := harness.Lookup(args[0])
			if err != nil {
				return err
			}
			if err := f.validate(); err != nil {
				return err
			}
			la := &lazyApp{env: env, ctx: cmd.Context()}
			defer la.close()
			s, err := f.server(cmd.Context(), env, h, la.open)
			if err != nil {
				return err
			}
			b, err := h.Render(s)
			if err != nil {
				return err
			}
			where := h.PathDoc
			if h.DefaultPath != nil {
				if p, err := h.DefaultPath(); err == nil {
					where = p + " — " + h.PathDoc
				}
			}
			if h.NoConnect {
				fmt.Fprintf(env.Err, "toolgate: %s: %s\n", h.Title, h.PathDoc)
			} else {
				fmt.Fprintf(env.Err, "toolgate: %s reads this from %s\n", h.Title, where)
			}
			if s.IsHTTP() && !f.noToken {
				fmt.Fprintf(env.Err, "toolgate: it carries an execution token for %s valid for %s; keep the file private\n", f.principal, f.ttl)
			}
			if !noCheck {
				if a, err := la.open(); errors.Is(err, app.ErrUnsafe) {
					return err // a data directory that leaks is refused, not skipped
				} else if err != nil {
					fmt.Fprintf(env.Err, "toolgate: catalogue check skipped: %v\n", err)
				} else if ids, err := catalogueIDs(cmd.Context(), a, f.principal); err != nil {
					fmt.Fprintf(env.Err, "toolgate: catalogue check skipped: %v\n", err)
				} else {
					reportNames(env.Err, h, s.ServerName(), ids, !s.IsHTTP())
				}
			}
			_, err = env.Out.Write(b)
			return err
		},
	}
	f.add(cmd.Flags())
	cmd.Flags().BoolVar(&noCheck, "no-check", false, "skip the catalogue name check")
	return cmd
}
