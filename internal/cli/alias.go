package cli

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/internal/harness"
)

func init() { register(72, newAliasCmd) }

func newAliasCmd(env *Env) *cobra.Command {
	var name string
	cmd := &cobra.Command{
		Use:   "alias HARNESS TOOL",
		Short: "Print the name a harness shows its model for a tool",
		Long: `toolgate alias reproduces the display name HARNESS gives the canonical tool id TOOL
(for example mcp__toolgate__files_read for Claude Code, Codex and DeepSeek). When the id
breaks the harness's naming rules, toolgate publishes a stable short form for it on that
harness; the alias shown is the short form's, and stderr says why. Aliases are for
reading transcripts back to canonical ids; they never authorize anything.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			h, err := harness.Lookup(args[0])
			if err != nil {
				return err
			}
			tool := args[1]
			if strings.TrimSpace(tool) == "" || strings.ContainsAny(tool, "\x00\r\n") {
				return errors.New("TOOL must be a non-empty tool id on one line")
			}
			if err := (harness.Server{Name: name, Command: "x"}).Validate(); err != nil {
				return err
			}
			server := name
			pub := h.Names.Published(server, tool)
			if pub != tool {
				fmt.Fprintf(env.Err, "toolgate: %s is published to %s as %s: the canonical id %s\n", tool, h.Title, pub, h.Names.Problem(server, tool))
			}
			if p := h.Names.Problem(server, pub); p != "" {
				fmt.Fprintf(env.Err, "toolgate: warning: %s still %s; choose a shorter --name\n", pub, p)
			}
			_, err = fmt.Fprintln(env.Out, h.Names.Alias(server, pub))
			return err
		},
	}
	cmd.Flags().StringVar(&name, "name", harness.DefaultServerName, "the server's name in the harness file")
	return cmd
}
