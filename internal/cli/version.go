package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/internal/version"
)

func init() { register(90, newVersionCmd) }

func newVersionCmd(env *Env) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print toolgate's build version (also served as serverInfo.version)",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			_, err := fmt.Fprintf(env.Out, "toolgate %s\n", version.String())
			return err
		},
	}
}
