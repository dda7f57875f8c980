package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/internal/app"
	"github.com/toolgate/toolgate/internal/policy"
)

func init() { register(40, newGrantCmd) }

// openAdmin opens the data directory for a management command (grant, token, audit,
// escalations, namespaces): app.Admin, which opens no kernel, so that a grant the kernel
// refuses to compile can still be listed and removed.
func openAdmin(ctx context.Context, env *Env) (*app.Admin, error) {
	dbURL, err := env.DatabaseURL()
	if err != nil {
		return nil, err
	}
	dir, err := env.DataDir()
	if err != nil {
		return nil, err
	}
	return app.OpenAdmin(ctx, dir, dbURL)
}

func newGrantCmd(env *Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "grant",
		Short: "Add, list and remove grants",
		Long: `A grant lets (or, with --deny, forbids) a principal use tools: principal × tool
pattern × action × resource scope. Nothing is allowed without a grant, and an explicit
deny wins over any allow. Changes apply to turns opened afterwards, including by a
running daemon.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newGrantAddCmd(env), newGrantLsCmd(env), newGrantRmCmd(env))
	return cmd
}

func newGrantAddCmd(env *Env) *cobra.Command {
	var g policy.Grant
	var deny bool
	cmd := &cobra.Command{
		Use:   "add --principal P --tool PATTERN [--action A] [--resource R] [--deny] [--note N]",
		Short: "Add a grant and print its id",
		Long: `add stores one grant and prints its id on stdout.

  --principal  an exact principal (agent, session or group identity), or "*" for everyone
  --tool       "*", "namespace.*", or a canonical tool id such as files.read
  --action     read, write, execute or * (default *)
  --resource   "" or "*" for any resource; a value ending in "/" is a prefix over
               normalised resources ("path:docs/" covers "path:docs/a.md"); anything
               else must match exactly. It must be written normalised, as calls are
               matched after normalisation: "path:docs/../x" is refused (write
               "path:x"), as is a path that is absolute or climbs out of the workspace
  --deny       forbid instead of allow; a matching deny wins over every allow

A grant the policy could not apply is refused here, with the reason, rather than
stored: every stored grant takes effect as written.`,
		Example: `  toolgate grant add --principal alice --tool files.read --action read --resource path:docs/
  toolgate grant add --principal '*' --tool bash.* --deny --note "no shell for anyone"`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			g.Effect = policy.Allow
			if deny {
				g.Effect = policy.Deny
			}
			if err := app.ValidateGrant(g); err != nil {
				return fmt.Errorf("grant add: %w", err)
			}
			m, err := openAdmin(cmd.Context(), env)
			if err != nil {
				return err
			}
			defer m.Close()
			added, err := m.AddGrant(cmd.Context(), g)
			if err != nil {
				return err
			}
			fmt.Fprintln(env.Out, added.ID)
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&g.Principal, "principal", "", "principal the grant applies to, or * (required)")
	fl.StringVar(&g.Tool, "tool", "", "tool pattern: *, namespace.* or namespace.tool (required)")
	fl.StringVar(&g.Action, "action", "*", "read, write, execute or *")
	fl.StringVar(&g.Resource, "resource", "", "resource scope (empty or * for any; a trailing / makes a prefix)")
	fl.BoolVar(&deny, "deny", false, "make this an explicit deny")
	fl.StringVar(&g.Note, "note", "", "free-text note kept with the grant")
	_ = cmd.MarkFlagRequired("principal")
	_ = cmd.MarkFlagRequired("tool")
	return cmd
}

// grantJSON is the stable JSON shape `grant ls --json` prints.
type grantJSON struct {
	ID        string    `json:"id"`
	Principal string    `json:"principal"`
	Tool      string    `json:"tool"`
	Action    string    `json:"action"`
	Resource  string    `json:"resource"`
	Effect    string    `json:"effect"`
	CreatedAt time.Time `json:"created_at"`
	Note      string    `json:"note,omitempty"`
}

func newGrantLsCmd(env *Env) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:     "ls [--json]",
		Aliases: []string{"list"},
		Short:   "List grants, oldest first",
		Long: `ls prints every grant as a table, or with --json as one JSON array of objects with
id, principal, tool, action, resource, effect, created_at and note.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			m, err := openAdmin(cmd.Context(), env)
			if err != nil {
				return err
			}
			defer m.Close()
			grants, err := m.Grants(cmd.Context())
			if err != nil {
				return err
			}
			if asJSON {
				out := make([]grantJSON, 0, len(grants))
				for _, g := range grants {
					out = append(out, grantJSON{g.ID, g.Principal, g.Tool, g.Action, g.Resource, string(g.Effect), g.CreatedAt, g.Note})
				}
				enc := json.NewEncoder(env.Out)
				enc.SetEscapeHTML(false)
				enc.SetIndent("", "  ")
				return enc.Encode(out)
			}
			return printGrantTable(env.Out, grants)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON instead of a table")
	return cmd
}

func printGrantTable(w io.Writer, grants []policy.Grant) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tPRINCIPAL\tTOOL\tACTION\tRESOURCE\tEFFECT\tCREATED\tNOTE")
	for _, g := range grants {
		res := g.Resource
		if res == "" {
			res = "*"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", tableCell(g.ID), tableCell(g.Principal), tableCell(g.Tool),
			tableCell(g.Action), tableCell(res), g.Effect, g.CreatedAt.Format(time.RFC3339), tableCell(g.Note))
	}
	return tw.Flush()
}

func newGrantRmCmd(env *Env) *cobra.Command {
	return &cobra.Command{
		Use:     "rm ID...",
		Aliases: []string{"remove"},
		Short:   "Remove grants by id",
		Long:    `rm removes each named grant. An unknown id is an error; the others are still removed.`,
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, ids []string) error {
			m, err := openAdmin(cmd.Context(), env)
			if err != nil {
				return err
			}
			defer m.Close()
			var errs []error
			for _, id := range ids {
				if err := m.RemoveGrant(cmd.Context(), id); err != nil {
					if errors.Is(err, app.ErrNotFound) {
						err = fmt.Errorf("no grant with id %s", tableCell(id))
					}
					errs = append(errs, err)
				}
			}
			return errors.Join(errs...)
		},
	}
}

// tableCell makes a stored value safe to print in a terminal table: control and
// invisible characters (which could move the cursor, forge a line or hide text) and
// invalid UTF-8 are shown as escapes, and an empty value as "-".
func tableCell(s string) string {
	if s == "" {
		return "-"
	}
	clean := true
	for _, r := range s {
		if r == utf8.RuneError || !unicode.IsPrint(r) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	q := fmt.Sprintf("%+q", s)
	return strings.TrimSuffix(strings.TrimPrefix(q, `"`), `"`)
}
