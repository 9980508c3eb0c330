package cli

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/codegirl-games/agentbox/guest"
)

// newGuestCmd is `agentbox guest`: the guest's own command line
// (guest.Command), which cmd/agentbox-guest runs as well, so a backend
// starts either binary with the same arguments.
func newGuestCmd() *cobra.Command {
	return &cobra.Command{
		Use:                "guest",
		Short:              "Run as the in-sandbox supervisor (started by backends, not by people)",
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if code := guest.Command(args, os.Stdin, os.Stdout, os.Stderr); code != 0 {
				return silentExit(code)
			}
			return nil
		},
	}
}
