package cli

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/internal/app"
)

func init() { register(41, newTokenCmd) }

func newTokenCmd(env *Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "token",
		Short: "Mint and check execution tokens",
		Long: `An execution token says which principal and session a caller is, for a limited time.
It carries no authority: every call made with it is still authorized against the
principal's grants. Tokens are signed with a key kept in the data directory.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newTokenMintCmd(env), newTokenVerifyCmd(env))
	return cmd
}

func newTokenMintCmd(env *Env) *cobra.Command {
	var principal, session string
	var ttl time.Duration
	cmd := &cobra.Command{
		Use:   "mint [--principal P] [--ttl D] [--session S]",
		Short: "Print one execution token on stdout",
		Long: `mint prints one execution token on stdout and nothing else, so it can be captured:

  export TOOLGATE_TOKEN=$(toolgate token mint --principal ci-agent --ttl 15m)

--ttl is a Go duration (30s, 15m, 2h) of at most 720h. Without --session a random
session id is chosen.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if ttl <= 0 {
				return fmt.Errorf("token mint: --ttl must be positive, got %s", ttl)
			}
			if ttl < time.Second {
				return fmt.Errorf("token mint: --ttl %s is shorter than the one-second precision of tokens", ttl)
			}
			if ttl > app.MaxTokenTTL {
				return fmt.Errorf("token mint: --ttl %s is longer than the %s limit", ttl, app.MaxTokenTTL)
			}
			m, err := openAdmin(cmd.Context(), env)
			if err != nil {
				return err
			}
			defer m.Close()
			tok, err := m.MintToken(cmd.Context(), principal, session, ttl)
			if err != nil {
				return err
			}
			fmt.Fprintln(env.Out, tok)
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&principal, "principal", app.DefaultPrincipal, "principal the token identifies")
	fl.DurationVar(&ttl, "ttl", time.Hour, "how long the token is valid")
	fl.StringVar(&session, "session", "", "session id the token identifies (default: random)")
	return cmd
}

func newTokenVerifyCmd(env *Env) *cobra.Command {
	return &cobra.Command{
		Use:   "verify TOKEN|-",
		Short: "Check a token and print whom it identifies",
		Long: `verify checks a token's signature and lifetime against this data directory's key
and prints its principal, session and expiry. "-" reads the token from stdin. It exits
non-zero for a forged, expired or malformed token.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			tok := args[0]
			if tok == "-" {
				if env.In == nil {
					return errors.New("token verify: no stdin to read the token from")
				}
				b, err := io.ReadAll(io.LimitReader(env.In, app.MaxTokenBytes+2))
				if err != nil {
					return fmt.Errorf("token verify: reading stdin: %w", err)
				}
				tok = strings.TrimSpace(string(b))
			}
			m, err := openAdmin(cmd.Context(), env)
			if err != nil {
				return err
			}
			defer m.Close()
			c, err := m.VerifyToken(cmd.Context(), tok)
			if err != nil {
				if errors.Is(err, app.ErrInvalidToken) {
					return &ExitError{Code: 1, Err: err}
				}
				return err
			}
			fmt.Fprintf(env.Out, "principal: %s\nsession:   %s\nissued:    %s\nexpires:   %s\n",
				tableCell(c.Principal), tableCell(c.Session), c.IssuedAt.Format(time.RFC3339), c.Expires.Format(time.RFC3339))
			return nil
		},
	}
}
