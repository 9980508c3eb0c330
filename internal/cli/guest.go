package cli

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/codegirl-games/agentbox/guest"
)

func newGuestCmd() *cobra.Command {
	var opts guest.Options
	cmd := &cobra.Command{
		Use:    "guest",
		Short:  "Run as the in-sandbox supervisor (started by backends, not by people)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			code := guest.Main(os.Stdin, os.Stdout, os.Stderr, opts)
			if code != 0 {
				return silentExit(code)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&opts.Sandboxed, "sandboxed", false, "kill every leftover process in the sandbox's PID namespace when stopping")
	return cmd
}
