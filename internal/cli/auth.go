package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"runtime"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/internal/mgmt"
	"github.com/toolgate/toolgate/internal/upstreamauth"
)

// toolgate auth login|status|logout: a remote server's OAuth sign-in
// (docs/upstream-auth.md), through the management protocol's sign-in methods
// (docs/management.md), so the login runs in the daemon when one serves the data
// directory (its connections use the tokens) and in this process otherwise (the
// tokens go to the keystore, and the process hosting the server restarts it).

func init() { register(58, newAuthCmd) }

func newAuthCmd(env *Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "auth",
		Short: "Sign in to remote MCP servers that use OAuth (login, status, logout)",
	}
	cmd.AddCommand(newAuthLoginCmd(env), newAuthStatusCmd(env), newAuthLogoutCmd(env))
	return cmd
}

// withAuth runs fn with the data directory's Manager's sign-in methods (checked).
func withAuth(cmd *cobra.Command, env *Env, fn func(context.Context, mgmt.AuthManager, mgmt.Caller) error) error {
	ctx := cmd.Context()
	m, who, closeM, err := openManager(ctx, env)
	if err != nil {
		return err
	}
	if closeM != nil {
		defer closeM()
	}
	am, ok := mgmt.Checked(m).(mgmt.AuthManager)
	if !ok {
		return errors.New("this data directory's manager has no sign-in methods")
	}
	return fn(ctx, am, who)
}

func newAuthLoginCmd(env *Env) *cobra.Command {
	var f manageFlags
	var open, paste, headless bool
	cmd := &cobra.Command{
		Use:   "login NAME|ID",
		Short: "Sign in to a remote MCP server with OAuth: prints the URL to open, waits for the redirect",
		Long: `login starts the server's OAuth sign-in (discovery, a registered client, PKCE) and prints
the authorization URL on standard output. Open it in a browser on this machine: the
authorization server sends the browser back to a listener on 127.0.0.1, the code is
exchanged, the tokens are sealed in the keystore and the server, parked in
auth_required, starts. --open also opens the URL with the desktop's opener (xdg-open,
open); it is never opened otherwise, since the daemon or an SSH session may run where
nobody sees a browser. --paste reads, from standard input, the URL the browser was
sent to (for a browser on another machine, which cannot reach the listener).
--headless follows the authorization server's redirects itself, for authorization
servers that redirect at once (tests, automation).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withAuth(cmd, env, func(ctx context.Context, am mgmt.AuthManager, who mgmt.Caller) error {
				ref := f.ref(args[0])
				sp := mgmt.AuthLoginStartParams{ServerRef: ref}
				if headless {
					sp.Headless = &headless
				}
				start, err := am.AuthLoginStart(ctx, who, sp)
				if err != nil {
					return err
				}
				fmt.Fprintln(env.Out, start.URL)
				fmt.Fprintf(env.Err, "Open the URL above to sign in to %s; waiting for the redirect to %s (until %s).\n",
					start.Server, start.RedirectURI, time.Unix(start.ExpiresAt, 0).Format(time.Kitchen))
				p := mgmt.AuthLoginCompleteParams{ServerRef: ref}
				if open && !headless {
					if err := openBrowser(start.URL); err != nil {
						fmt.Fprintf(env.Err, "Could not open a browser (%v): open the URL yourself.\n", err)
					}
				}
				if paste {
					fmt.Fprintln(env.Err, "Paste the URL the browser was sent to:")
					line, err := bufio.NewReader(io.LimitReader(env.In, 16<<10)).ReadString('\n')
					if err != nil && line == "" {
						return fmt.Errorf("reading the pasted URL: %w", err)
					}
					p.CallbackURL = strings.TrimSpace(line)
				}
				res, err := am.AuthLoginComplete(ctx, who, p)
				if err != nil {
					return err
				}
				return writeAuth(env, &f, res)
			})
		},
	}
	f.add(cmd, true)
	fl := cmd.Flags()
	fl.BoolVar(&open, "open", false, "open the URL with the desktop's browser")
	fl.BoolVar(&paste, "paste", false, "read the URL the browser was sent to from standard input")
	fl.BoolVar(&headless, "headless", false, "follow the authorization server's immediate redirects without a browser")
	return cmd
}

func newAuthStatusCmd(env *Env) *cobra.Command {
	var f manageFlags
	cmd := &cobra.Command{
		Use:   "status [NAME|ID]",
		Short: "Show the OAuth sign-in of one remote MCP server, or of every one that signs in",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withAuth(cmd, env, func(ctx context.Context, am mgmt.AuthManager, who mgmt.Caller) error {
				if len(args) == 1 {
					res, err := am.AuthStatus(ctx, who, mgmt.AuthParams{ServerRef: f.ref(args[0])})
					if err != nil {
						return err
					}
					return writeAuth(env, &f, res)
				}
				m, _ := am.(mgmt.Manager)
				if m == nil {
					return errors.New("this data directory's manager cannot list servers")
				}
				list, err := m.List(ctx, who, mgmt.ListParams{WorkspaceID: f.workspace})
				if err != nil {
					return err
				}
				var all []json.RawMessage
				for _, s := range list.Servers {
					res, err := am.AuthStatus(ctx, who, mgmt.AuthParams{ServerRef: mgmt.ServerRef{WorkspaceID: f.workspace, ServerID: s.ID}})
					var me *mgmt.Error
					if errors.As(err, &me) && me.Code == mgmt.CodeConflict {
						continue // does not sign in
					}
					if err != nil {
						return err
					}
					all = append(all, res.Auth)
				}
				if f.asJSON {
					b, err := mgmt.Encode(map[string]any{"servers": nonNilRaw(all)})
					if err != nil {
						return err
					}
					_, err = env.Out.Write(append(b, '\n'))
					return err
				}
				if len(all) == 0 {
					_, err := fmt.Fprintln(env.Out, "No installed server signs in with OAuth.")
					return err
				}
				for _, a := range all {
					if err := writeStatus(env.Out, a); err != nil {
						return err
					}
				}
				return nil
			})
		},
	}
	f.add(cmd, false)
	return cmd
}

func newAuthLogoutCmd(env *Env) *cobra.Command {
	var f manageFlags
	var revoke bool
	cmd := &cobra.Command{
		Use:   "logout NAME|ID",
		Short: "Forget a remote MCP server's OAuth tokens (--revoke: at the authorization server too)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withAuth(cmd, env, func(ctx context.Context, am mgmt.AuthManager, who mgmt.Caller) error {
				p := mgmt.AuthLogoutParams{ServerRef: f.ref(args[0])}
				if revoke {
					p.Revoke = &revoke
				}
				res, err := am.AuthLogout(ctx, who, p)
				if err != nil {
					return err
				}
				return writeAuth(env, &f, res)
			})
		},
	}
	f.add(cmd, true)
	cmd.Flags().BoolVar(&revoke, "revoke", false, "revoke the tokens at the authorization server (RFC 7009) when it allows")
	return cmd
}

func nonNilRaw(s []json.RawMessage) []json.RawMessage {
	if s == nil {
		return []json.RawMessage{}
	}
	return s
}

func writeAuth(env *Env, f *manageFlags, res *mgmt.AuthStatusResult) error {
	if f.asJSON {
		b, err := mgmt.Encode(res)
		if err != nil {
			return err
		}
		_, err = env.Out.Write(append(b, '\n'))
		return err
	}
	return writeStatus(env.Out, res.Auth)
}

// writeStatus prints one upstreamauth.Status for a person.
func writeStatus(w io.Writer, raw json.RawMessage) error {
	var st upstreamauth.Status
	if err := json.Unmarshal(raw, &st); err != nil {
		return fmt.Errorf("reading a sign-in status: %w", err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s", st.Server, st.State)
	if st.Reason != "" {
		fmt.Fprintf(&b, " (%s: %s)", st.Reason, st.Detail)
	}
	b.WriteByte('\n')
	row := func(k, v string) {
		if v != "" {
			fmt.Fprintf(&b, "  %-12s %s\n", k, v)
		}
	}
	row("issuer", st.Issuer)
	row("client_id", st.ClientID)
	row("grant", st.Grant)
	row("scopes", strings.Join(st.Scopes, " "))
	if !st.ExpiresAt.IsZero() {
		row("expires", st.ExpiresAt.Local().Format(time.RFC3339))
	}
	if st.Grant != "" {
		row("refreshable", fmt.Sprint(st.Refreshable))
	}
	row("want_scopes", strings.Join(st.WantScopes, " "))
	if st.LoginPending {
		row("login", "pending")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// openBrowser hands the URL to the desktop's opener as one argument (never through
// a shell), and does not wait for the browser.
func openBrowser(rawURL string) error {
	opener := "xdg-open"
	if runtime.GOOS == "darwin" {
		opener = "open"
	}
	c := exec.Command(opener, rawURL)
	if err := c.Start(); err != nil {
		return err
	}
	go func() { _ = c.Wait() }()
	return nil
}
