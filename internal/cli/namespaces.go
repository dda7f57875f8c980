package cli

import (
	"fmt"
	"sort"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/internal/policy"
)

func init() { register(55, newNamespacesCmd) }

func newNamespacesCmd(env *Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "namespaces",
		Aliases: []string{"namespace", "ns"},
		Short:   "Enable or disable a namespace of tools as a whole",
		Long: `A namespace (local, server, toolgate, one per upstream server) can be switched off as a
whole: its tools leave every catalogue opened afterwards, whatever the grants say, and a
call to one is refused tool_unavailable (the audit event says namespace_disabled).
Namespaces are enabled unless disabled here. Turns already open keep their catalogue.`,
	}
	set := func(use, short string, enabled bool) *cobra.Command {
		return &cobra.Command{
			Use:   use + " NAMESPACE",
			Short: short,
			Args:  cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				ns := args[0]
				if !policy.ValidNamespace(ns) {
					return fmt.Errorf("%q is not a namespace (lower-case letters, digits, '_' and '-')", ns)
				}
				st, err := openAdmin(cmd.Context(), env)
				if err != nil {
					return err
				}
				defer st.Close()
				if err := st.SetNamespaceEnabled(cmd.Context(), ns, enabled); err != nil {
					return err
				}
				state := "disabled"
				if enabled {
					state = "enabled"
				}
				fmt.Fprintf(env.Out, "%s %s\n", ns, state)
				return nil
			},
		}
	}
	ls := &cobra.Command{
		Use:   "ls",
		Short: "List the namespaces that have been switched (all others are enabled)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := openAdmin(cmd.Context(), env)
			if err != nil {
				return err
			}
			defer st.Close()
			m, err := st.Namespaces(cmd.Context())
			if err != nil {
				return err
			}
			names := make([]string, 0, len(m))
			for n := range m {
				names = append(names, n)
			}
			sort.Strings(names)
			tw := tabwriter.NewWriter(env.Out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAMESPACE\tSTATE")
			for _, n := range names {
				state := "disabled"
				if m[n] {
					state = "enabled"
				}
				fmt.Fprintf(tw, "%s\t%s\n", escOneLine(n, 64), state)
			}
			return tw.Flush()
		},
	}
	cmd.AddCommand(ls, set("enable", "Enable a namespace", true), set("disable", "Disable a namespace", false))
	return cmd
}
