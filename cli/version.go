package cli

import (
	"fmt"
	"runtime"

	"github.com/spf13/cobra"

	"github.com/codegirl-games/agentbox/internal/version"
	"github.com/codegirl-games/agentbox/trace"
	"github.com/codegirl-games/agentbox/wire"
)

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print agentbox's version, protocol and trace format",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintf(cmd.OutOrStdout(), "agentbox %s (%s, %s/%s)\nwire protocol %d, trace format %s v%d\n",
				version.Version, runtime.Version(), runtime.GOOS, runtime.GOARCH, wire.Protocol, trace.Format, trace.Version)
			return nil
		},
	}
}
