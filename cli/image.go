package cli

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/codegirl-games/agentbox/environment/docker"
	"github.com/codegirl-games/agentbox/images"
)

func newImageCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "image",
		Short: "Build and inspect the runtime image",
	}
	cmd.AddCommand(newImageBuildCmd())
	return cmd
}

func newImageBuildCmd() *cobra.Command {
	var (
		offlineMode                   string
		offline, test, force, noCache bool
		o                             docker.BuildOptions
	)
	cmd := &cobra.Command{
		Use:   "build",
		Short: "Build the runtime image (offline from debootstrap where no registry answers)",
		Long: `build makes agentbox/runtime:bookworm (Debian bookworm with Xvfb, Openbox,
fonts, Mesa software GL, SDL2 and GTK3) from image/Dockerfile. Where the
registry cannot be reached the base is made offline: a minimal debootstrap root
from the machine's Debian mirror, imported with docker import (needs root and
debootstrap). A second call with nothing changed returns at once.

--test builds agentbox/test:bookworm on top, adding xev, xcalc, xterm, xdotool
and scrot for the test suites and the seed-style benchmark.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			mode, err := docker.ParseOfflineMode(offlineMode)
			if err != nil {
				return usageErrorf("--offline-mode: %v", err)
			}
			if offline {
				mode = docker.OfflineAlways
			}
			o.Offline, o.Force, o.NoCache = mode, force, noCache
			o.Progress = cmd.ErrOrStderr()
			if test {
				o.Variant = images.VariantTest
			}
			ctx := cmd.Context()
			cli, err := docker.NewClient(ctx)
			if err != nil {
				return failErr(err)
			}
			defer cli.Close()
			t := time.Now()
			res, err := docker.BuildImage(ctx, cli, o)
			if err != nil {
				return failErr(err)
			}
			state := "built"
			if res.UpToDate {
				state = "up to date"
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s %s (%s, %d MiB) in %v\n", res.Ref, state, shortID(trimSHA(res.ID)), res.Size>>20, time.Since(t).Round(100*time.Millisecond))
			return nil
		},
	}
	fl := cmd.Flags()
	fl.BoolVar(&offline, "offline", false, "never contact a registry: make the base with debootstrap (same as --offline-mode always)")
	fl.StringVar(&offlineMode, "offline-mode", "auto", "auto (registry if it answers, else offline), always, never")
	fl.BoolVar(&test, "test", false, "build the test image (runtime + xev, xcalc, xterm, xdotool, scrot)")
	fl.BoolVar(&force, "force", false, "rebuild even when up to date")
	fl.BoolVar(&noCache, "no-cache", false, "build without the layer cache")
	fl.StringVar(&o.Tag, "tag", "", "image tag (default agentbox/runtime:bookworm or agentbox/test:bookworm)")
	fl.StringVar(&o.Base, "base", "", "base image (default debian:bookworm-slim, or the offline base)")
	fl.StringVar(&o.Mirror, "mirror", "", "Debian mirror for debootstrap (default: the host's apt sources)")
	return cmd
}

func trimSHA(id string) string {
	if len(id) > 7 && id[:7] == "sha256:" {
		return id[7:]
	}
	return id
}
