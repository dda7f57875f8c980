package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/internal/app"
	"github.com/toolgate/toolgate/internal/policy"
	"github.com/toolgate/toolgate/internal/textscan"
	"github.com/toolgate/toolgate/internal/toolpin"
)

func init() { register(57, newPinsCmd) }

// The pins command is how the owner decides what an upstream server may publish
// (docs/trust.md): the pins, the held definitions, approvals, rejections and each
// server's trust policy. It goes through app.Admin, never through an MCP tool.
func newPinsCmd(env *Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "pins",
		Short: "Review and decide upstream servers' tool definitions (pins, holds, trust policy)",
		Long: `Each upstream tool's definition is pinned the first time toolgate sees it (or held for
approval when the server's pin policy is "approve"). A definition that changes afterwards
is quarantined: left out of new catalogues, its calls refused tool_quarantined, until you
approve the change here. Definitions whose text hides something (bidi controls, tag
characters, instructions aimed at the model) are held at the server's hold level.
Decisions name the digest you reviewed (shown by "pins show"). See docs/trust.md.`,
	}
	cmd.AddCommand(newPinsLsCmd(env), newPinsShowCmd(env), newPinsDecideCmd(env, "approve"), newPinsDecideCmd(env, "reject"), newPinsPolicyCmd(env))
	return cmd
}

func pinsServerArg(s string) error {
	if !policy.ValidNamespace(s) {
		return fmt.Errorf("%q is not a server name (lower-case letters, digits, '_' and '-')", s)
	}
	return nil
}

func newPinsLsCmd(env *Env) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "ls [SERVER] [--json]",
		Short: "List the held definitions of every server, or one server's pins and holds",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := openAdmin(cmd.Context(), env)
			if err != nil {
				return err
			}
			defer st.Close()
			tw := tabwriter.NewWriter(env.Out, 0, 4, 2, ' ', 0)
			if len(args) == 0 {
				holds, err := st.Holds(cmd.Context())
				if err != nil {
					return err
				}
				if asJSON {
					return pinsJSON(env, pinsNonNil(holds))
				}
				fmt.Fprintln(tw, "SERVER\tTOOL\tREASON\tSTATE\tDIGEST")
				for _, h := range holds {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", h.Server, textscan.Escape(h.Tool, 64), h.Reason, h.State, h.Digest)
				}
				return tw.Flush()
			}
			if err := pinsServerArg(args[0]); err != nil {
				return err
			}
			d, err := st.Pins(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if asJSON {
				return pinsJSON(env, d)
			}
			fmt.Fprintln(tw, "TOOL\tSTATE\tDIGEST\tAPPROVED BY")
			for _, p := range d.Pins {
				by := p.ApprovedBy
				if by == "" {
					by = "(first use)"
				}
				fmt.Fprintf(tw, "%s\tpinned\t%s\t%s\n", textscan.Escape(p.Tool, 64), p.Digest, escOneLine(by, 64))
			}
			for _, h := range d.Holds {
				fmt.Fprintf(tw, "%s\theld (%s, %s)\t%s\t\n", textscan.Escape(h.Tool, 64), h.Reason, h.State, h.Digest)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func newPinsShowCmd(env *Env) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "show SERVER TOOL [--json]",
		Short: "Show a tool's pin and held definition: the difference, the findings, the digest to approve",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			server, tool := args[0], args[1]
			if err := pinsServerArg(server); err != nil {
				return err
			}
			st, err := openAdmin(cmd.Context(), env)
			if err != nil {
				return err
			}
			defer st.Close()
			d, err := st.Pins(cmd.Context(), server)
			if err != nil {
				return err
			}
			var pin *toolpin.Pin
			for i := range d.Pins {
				if d.Pins[i].Tool == tool {
					pin = &d.Pins[i]
				}
			}
			var held *app.HeldTool
			for i := range d.Holds {
				if d.Holds[i].Tool == tool {
					held = &d.Holds[i]
				}
			}
			if pin == nil && held == nil {
				return fmt.Errorf("server %s has no pin or held definition for tool %q (see toolgate pins ls %s)", server, textscan.Escape(tool, 200), server)
			}
			if asJSON {
				return pinsJSON(env, struct {
					Pin  *toolpin.Pin  `json:"pin"`
					Hold *app.HeldTool `json:"hold"`
				}{pin, held})
			}
			w := env.Out
			if pin != nil {
				fmt.Fprintf(w, "pinned:   %s (first seen %s", pin.Digest, pin.FirstSeen.Format("2006-01-02 15:04:05Z"))
				if pin.Approved() {
					fmt.Fprintf(w, ", approved by %s", escOneLine(pin.ApprovedBy, 64))
				}
				fmt.Fprintln(w, ")")
			}
			if held == nil {
				fmt.Fprintln(w, "nothing held: the pinned definition is the one published")
				return nil
			}
			fmt.Fprintf(w, "held:     %s (%s, %s; first seen %s, last seen %s)\n", held.Digest, held.Reason, held.State,
				held.FirstSeen.Format("2006-01-02 15:04:05Z"), held.LastSeen.Format("2006-01-02 15:04:05Z"))
			for _, f := range held.Findings {
				fmt.Fprintf(w, "finding:  %s\n", f.String())
			}
			switch {
			case held.Diff != nil:
				fmt.Fprintf(w, "\n%s\n", held.Diff.String())
			default:
				fmt.Fprintf(w, "\ndefinition:\n%s\n", textscan.Escape(string(held.Canonical), toolpin.MaxDiffBytes))
			}
			fmt.Fprintf(w, "\nto approve: toolgate pins approve %s %s --digest %s\n", server, pinsQuote(tool), held.Digest)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func newPinsDecideCmd(env *Env, verb string) *cobra.Command {
	var digest, by string
	cmd := &cobra.Command{
		Use:   verb + " SERVER TOOL --digest DIGEST",
		Short: strings.ToUpper(verb[:1]) + verb[1:] + " a held definition (the digest shown by pins show)",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			server, tool := args[0], args[1]
			if err := pinsServerArg(server); err != nil {
				return err
			}
			if by == "" {
				by = escCurrentUser()
			}
			st, err := openAdmin(cmd.Context(), env)
			if err != nil {
				return err
			}
			defer st.Close()
			if verb == "approve" {
				err = st.ApprovePin(cmd.Context(), server, tool, digest, by)
			} else {
				err = st.RejectPin(cmd.Context(), server, tool, digest, by)
			}
			if errors.Is(err, toolpin.ErrNoHold) {
				return fmt.Errorf("server %s holds no definition of tool %q (see toolgate pins ls %s)", server, textscan.Escape(tool, 200), server)
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(env.Out, "%s %s: %sd %s\n", server, textscan.Escape(tool, 200), verb, digest)
			return nil
		},
	}
	cmd.Flags().StringVar(&digest, "digest", "", "the digest of the definition you reviewed (required)")
	cmd.Flags().StringVar(&by, "by", "", "who decided (default: the current user)")
	return cmd
}

func newPinsPolicyCmd(env *Env) *cobra.Command {
	var pin, holdAt string
	var trusted bool
	cmd := &cobra.Command{
		Use:   "policy SERVER [--pin tofu|approve] [--hold-at high|medium|low|info|never] [--trusted=true|false]",
		Short: "Show or change a server's trust policy",
		Long: `--pin tofu (the default) pins a new tool on first sight; approve holds every new tool
for you. --hold-at is the scanner severity that holds a definition nobody approved
(default high; never: flag only). --trusted lets the server's readOnlyHint make a call a
read (otherwise a write); untrusted, every call of its tools is an execute action
whatever its annotations claim. Only the flags given change.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := pinsServerArg(args[0]); err != nil {
				return err
			}
			st, err := openAdmin(cmd.Context(), env)
			if err != nil {
				return err
			}
			defer st.Close()
			p, err := st.TrustPolicy(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			f := cmd.Flags()
			if f.Changed("pin") {
				p.Pin = pin
			}
			if f.Changed("hold-at") {
				p.HoldAt = holdAt
			}
			if f.Changed("trusted") {
				p.Trusted = trusted
			}
			if f.Changed("pin") || f.Changed("hold-at") || f.Changed("trusted") {
				if err := st.SetTrustPolicy(cmd.Context(), p); err != nil {
					return err
				}
				if p, err = st.TrustPolicy(cmd.Context(), args[0]); err != nil {
					return err
				}
			}
			return pinsJSON(env, p)
		},
	}
	cmd.Flags().StringVar(&pin, "pin", "", "tofu or approve")
	cmd.Flags().StringVar(&holdAt, "hold-at", "", "high, medium, low, info or never")
	cmd.Flags().BoolVar(&trusted, "trusted", false, "let the server's annotations decide read or write")
	return cmd
}

func pinsNonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func pinsJSON(env *Env, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(env.Out, "%s\n", b)
	return err
}

// shellQuote quotes a tool name for the command line shown to the owner.
func pinsQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.')
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(textscan.Escape(s, 200), "'", `'\''`) + "'"
}
