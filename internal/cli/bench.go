package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/internal/bench"
	"github.com/codegirl-games/agentbox/internal/testenv"
)

func newBenchCmd() *cobra.Command {
	var (
		o           bench.Options
		backendName string
		screens     string
		jsonOut     string
	)
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure cold start, step latency and a full run on the real stack",
		Long: `bench measures, with the mover demo in real sandboxes: cold start (create →
app window up → first screenshot), the observe+act step as the agent sees it
(one mouse move, then the next screenshot) at each --screens size, a full run
with its trace, and — for comparison — the seed-style step that ran
docker exec scrot, docker exec cat and docker exec xdotool per step.
It reports figures; it passes or fails nothing.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			b, err := environment.Lookup(backendName)
			if err != nil {
				return usageErrorf("--backend: %v", err)
			}
			o.Backend = b
			for _, s := range strings.Split(screens, ",") {
				sc, err := parseScreen(strings.TrimSpace(s))
				if err != nil {
					return err
				}
				o.Screens = append(o.Screens, sc)
			}
			if o.App == "" {
				o.App = filepath.Join("examples", "mover")
				if _, err := os.Stat(filepath.Join(o.App, "mover")); err != nil {
					o.App = filepath.Join(testenv.RepoRoot(), "examples", "mover")
				}
			}
			o.Progress = cmd.ErrOrStderr()
			rep, err := bench.Run(cmd.Context(), o)
			if err != nil {
				return failErr(err)
			}
			rep.Print(cmd.OutOrStdout(), o)
			if jsonOut != "" {
				data, _ := json.MarshalIndent(rep, "", "  ")
				if err := os.WriteFile(jsonOut, append(data, '\n'), 0o644); err != nil {
					return failErr(err)
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "figures written to %s\n", jsonOut)
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&backendName, "backend", "docker", "backend to measure")
	fl.StringVar(&o.Image, "image", "agentbox/test:bookworm", "image (the seed-style step needs scrot and xdotool: the test image)")
	fl.StringVar(&o.App, "app", "", "the mover app directory (default examples/mover)")
	fl.IntVar(&o.ColdRuns, "cold", 8, "cold starts to measure")
	fl.IntVar(&o.Samples, "samples", 300, "steps per latency measurement")
	fl.IntVar(&o.RunSteps, "steps", 200, "steps of the full run")
	fl.IntVar(&o.SeedSteps, "seed-steps", 20, "seed-style steps to measure (0 skips)")
	fl.StringVar(&screens, "screens", "640x480,1920x1080", "screen sizes for the step latency")
	fl.StringVar(&jsonOut, "json", "", "also write the figures as JSON to this file")
	return cmd
}
