package cli

import (
	"fmt"
	"runtime"

	"github.com/spf13/cobra"

	"github.com/codegirl-games/agentbox/internal/version"
	"github.com/codegirl-games/agentbox/trace"
	"github.com/codegirl-games/agentbox/wire"
)

// versionJSON is what version --json prints (README: Machine-readable
// output).
type versionJSON struct {
	Version      string `json:"version"`
	Go           string `json:"go"`
	OS           string `json:"os"`
	Arch         string `json:"arch"`
	WireProtocol int    `json:"wire_protocol"`
	TraceFormat  string `json:"trace_format"`
	TraceVersion int    `json:"trace_version"`
}

func versionInfo() versionJSON {
	return versionJSON{Version: version.Version, Go: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH,
		WireProtocol: int(wire.Protocol), TraceFormat: trace.Format, TraceVersion: trace.Version}
}

// versionText is what version and --version print.
func versionText() string {
	v := versionInfo()
	return fmt.Sprintf("agentbox %s (%s, %s/%s)\nwire protocol %d, trace format %s v%d\n",
		v.Version, v.Go, v.OS, v.Arch, v.WireProtocol, v.TraceFormat, v.TraceVersion)
}

func newVersionCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print agentbox's version, protocol and trace format (also agentbox --version)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), versionInfo())
			}
			fmt.Fprint(cmd.OutOrStdout(), versionText())
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object")
	return cmd
}
