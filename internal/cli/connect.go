package cli

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/internal/harness"
)

func init() { register(71, newConnectCmd) }

func newConnectCmd(env *Env) *cobra.Command {
	var f connFlags
	var file string
	var dryRun, undo, force bool
	cmd := &cobra.Command{
		Use:   "connect HARNESS",
		Short: "Merge toolgate into a harness's own config file (with --undo to restore it)",
		Long: `toolgate connect adds toolgate's entry to HARNESS's existing config file (or creates the
file), leaving every other server, key and comment in place. It prints the change as a
diff, keeps the original bytes in FILE.toolgate-backup, and writes through a temp file
that is fsynced and renamed into place. --dry-run only prints the diff. --undo puts the
original bytes back exactly (or removes the file if connect created it); it refuses if
the file was edited since, unless --force.

Default files:
` + defaultFilesHelp() + `
Symbolic links, directories and files that do not parse are refused and left untouched.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			h, err := harness.Lookup(args[0])
			if err != nil {
				return err
			}
			if h.NoConnect {
				return fmt.Errorf("%s has no config file; print its options with toolgate config %s", h.Title, h.ID)
			}
			path := file
			if path == "" {
				if path, err = h.DefaultPath(); err != nil {
					return err
				}
			}
			if path, err = filepath.Abs(path); err != nil {
				return fmt.Errorf("--file: %w", err)
			}
			if undo {
				if dryRun {
					return errors.New("--undo and --dry-run contradict each other")
				}
				msg, err := harness.Undo(path, force)
				if err != nil {
					return err
				}
				fmt.Fprintf(env.Err, "toolgate: %s\n", msg)
				return nil
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
			p, err := h.PlanConnect(path, s)
			if err != nil {
				return err
			}
			if !p.Changed() {
				fmt.Fprintf(env.Err, "toolgate: %s already holds this entry; nothing to do\n", path)
				return nil
			}
			diff := p.Diff()
			if s.IsHTTP() {
				diff = redactBearer(diff)
			}
			fmt.Fprint(env.Out, diff)
			if dryRun {
				fmt.Fprintf(env.Err, "toolgate: dry run; %s not changed\n", path)
				return nil
			}
			if err := p.Apply(); err != nil {
				return err
			}
			if p.Existed {
				fmt.Fprintf(env.Err, "toolgate: updated %s (original kept in %s; undo with toolgate connect %s --undo --file %s)\n", path, path+harness.BackupSuffix, h.ID, path)
			} else {
				fmt.Fprintf(env.Err, "toolgate: created %s (undo with toolgate connect %s --undo --file %s)\n", path, h.ID, path)
			}
			return nil
		},
	}
	f.add(cmd.Flags())
	fl := cmd.Flags()
	fl.StringVar(&file, "file", "", "the config file to edit (default: the harness's own, see above)")
	fl.BoolVar(&dryRun, "dry-run", false, "print the change without writing")
	fl.BoolVar(&undo, "undo", false, "restore the file as it was before toolgate connect")
	fl.BoolVar(&force, "force", false, "with --undo: restore even if the file was edited since connect")
	return cmd
}

func defaultFilesHelp() string {
	var b strings.Builder
	for _, h := range harness.All() {
		if h.NoConnect {
			continue
		}
		fmt.Fprintf(&b, "  %-15s %s\n", h.ID, h.PathDoc)
	}
	return b.String()
}

// redactBearer hides execution tokens in a diff printed to the terminal.
func redactBearer(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if j := strings.Index(l, "Bearer "); j >= 0 {
			end := j + len("Bearer ")
			k := end
			for k < len(l) && !strings.ContainsRune("\"' ,}", rune(l[k])) {
				k++
			}
			lines[i] = l[:end] + "<token>" + l[k:]
		}
		if j := strings.Index(l, `"bearerToken": "`); j >= 0 {
			end := j + len(`"bearerToken": "`)
			k := strings.IndexByte(l[end:], '"')
			if k >= 0 {
				lines[i] = l[:end] + "<token>" + l[end+k:]
			}
		}
	}
	return strings.Join(lines, "\n")
}
