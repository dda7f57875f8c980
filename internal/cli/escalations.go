package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/user"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/internal/app"
)

func init() { register(60, newEscalationsCmd) }

func newEscalationsCmd(env *Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "escalations",
		Aliases: []string{"escalation"},
		Short:   "List, approve and deny the escalations turns raised with toolgate.escalate",
		Long: `A turn that calls toolgate.escalate ends there and leaves an escalation for a person.
These commands are the person's side: no tool lets an agent approve its own escalation.
Approving or denying records the decision; the escalated turn stays ended either way.`,
	}
	cmd.AddCommand(newEscalationsLsCmd(env), newEscalationsDecideCmd(env, "approve", app.EscalationApproved),
		newEscalationsDecideCmd(env, "deny", app.EscalationDenied))
	return cmd
}

func newEscalationsLsCmd(env *Env) *cobra.Command {
	var status string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List escalations (pending by default)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch status {
			case "all":
				status = ""
			case app.EscalationPending, app.EscalationApproved, app.EscalationDenied:
			default:
				return fmt.Errorf("--status %q: want pending, approved, denied or all", status)
			}
			st, err := openAdmin(cmd.Context(), env)
			if err != nil {
				return err
			}
			defer st.Close()
			list, err := st.Escalations(cmd.Context(), status)
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(env.Out)
				for _, e := range list {
					if err := enc.Encode(escalationJSON(e)); err != nil {
						return err
					}
				}
				return nil
			}
			tw := tabwriter.NewWriter(env.Out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tSTATUS\tPRINCIPAL\tCREATED\tREASON")
			for _, e := range list {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", e.ID, e.Status, escOneLine(e.Principal, 40),
					e.CreatedAt.UTC().Format(time.RFC3339), escOneLine(e.Reason, 80))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringVar(&status, "status", app.EscalationPending, "pending, approved, denied or all")
	cmd.Flags().BoolVar(&asJSON, "json", false, "one JSON object per line")
	return cmd
}

// escOneLine keeps a table row on one line whatever an agent wrote: control characters
// (including terminal escapes) become spaces, and long text is cut.
func escOneLine(s string, n int) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return ' '
		}
		return r
	}, s)
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

type escalationRow struct {
	ID           string     `json:"id"`
	Status       string     `json:"status"`
	Principal    string     `json:"principal"`
	TurnID       string     `json:"turn_id"`
	CallID       string     `json:"call_id"`
	Reason       string     `json:"reason"`
	Note         string     `json:"note,omitempty"`
	CreatedAt    time.Time  `json:"created_at"`
	DecidedBy    string     `json:"decided_by,omitempty"`
	DecisionNote string     `json:"decision_note,omitempty"`
	DecidedAt    *time.Time `json:"decided_at,omitempty"`
}

func escalationJSON(e app.Escalation) escalationRow {
	return escalationRow{ID: e.ID, Status: e.Status, Principal: e.Principal, TurnID: e.TurnID, CallID: e.CallID,
		Reason: e.Reason, Note: e.Note, CreatedAt: e.CreatedAt, DecidedBy: e.DecidedBy, DecisionNote: e.DecisionNote, DecidedAt: e.DecidedAt}
}

func newEscalationsDecideCmd(env *Env, verb, decision string) *cobra.Command {
	var note, by string
	cmd := &cobra.Command{
		Use:   verb + " ID",
		Short: strings.ToUpper(verb[:1]) + verb[1:] + " a pending escalation",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if by == "" {
				by = escCurrentUser()
			}
			st, err := openAdmin(cmd.Context(), env)
			if err != nil {
				return err
			}
			defer st.Close()
			err = st.ResolveEscalation(cmd.Context(), args[0], decision, by, note)
			switch {
			case errors.Is(err, app.ErrNotFound):
				return fmt.Errorf("no escalation %q (see toolgate escalations ls --status all)", args[0])
			case err != nil:
				return err
			}
			fmt.Fprintf(env.Out, "%s %s\n", args[0], decision)
			return nil
		},
	}
	cmd.Flags().StringVar(&note, "note", "", "why, recorded with the decision")
	cmd.Flags().StringVar(&by, "by", "", "who decided (default: the current user)")
	return cmd
}

func escCurrentUser() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	if n := os.Getenv("USER"); n != "" {
		return n
	}
	return "unknown"
}
