package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/codegirl-games/agentbox/bench"
	"github.com/codegirl-games/agentbox/bench/plot"
)

func newBenchPlotCmd() *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "plot FIGURES.json",
		Short: "Draw how the step's cost grows with the screen and with environments at once, from bench --json",
		Long: `plot reads the figures agentbox bench --json wrote (one backend's or several
side by side) and draws a PNG of two panels: the step's p50 and p95
against the screen's size (each --screens size, screen unchanged and
full frame) and against the number of environments stepping at once
(--concurrency). A panel the bench skipped says so.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return usageErrorf("-o: name the PNG to write")
			}
			runs, err := readBenchFigures(args[0])
			if err != nil {
				return usageErrorf("%v", err)
			}
			var buf bytes.Buffer
			if err := plot.Plot(&buf, runs); err != nil {
				return failErr(err)
			}
			if err := os.WriteFile(out, buf.Bytes(), 0o644); err != nil {
				return failErr(err)
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "plot written to %s\n", out)
			return nil
		},
	}
	cmd.Flags().StringVarP(&out, "output", "o", "", "the PNG to write")
	return cmd
}

// readBenchFigures reads what bench --json wrote: a list of backends'
// runs, or one report.
func readBenchFigures(path string) ([]plot.Run, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	data = bytes.TrimSpace(data)
	if bytes.HasPrefix(data, []byte("[")) {
		var runs []benchRun
		if err := json.Unmarshal(data, &runs); err != nil {
			return nil, fmt.Errorf("%s: not the figures of agentbox bench --json: %v", path, err)
		}
		var out []plot.Run
		for i, r := range runs {
			if r.Report == nil {
				return nil, fmt.Errorf("%s: run %d has no Report", path, i+1)
			}
			out = append(out, plot.Run{Backend: r.Backend, Report: r.Report})
		}
		if len(out) == 0 {
			return nil, fmt.Errorf("%s: no runs", path)
		}
		return out, nil
	}
	var rep bench.Report
	if err := json.Unmarshal(data, &rep); err != nil {
		return nil, fmt.Errorf("%s: not the figures of agentbox bench --json: %v", path, err)
	}
	if rep.Machine.CPUs == 0 {
		return nil, fmt.Errorf("%s: not the figures of agentbox bench --json (no Machine)", path)
	}
	return []plot.Run{{Backend: "this backend", Report: &rep}}, nil
}
