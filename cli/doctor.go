package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/internal/termsafe"
)

func newDoctorCmd() *cobra.Command {
	var image, ociRuntime, only string
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check what each backend needs and what is missing here, with the fix",
		Long: `doctor checks every backend (or only --backend NAME): what it needs, what
is missing on this machine and how to fix it, and says which backend
--backend auto (the default of run, eval and bench) would use.

Exit code 0 when that backend (or the one named) has everything it needs,
3 otherwise.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := cmd.OutOrStdout()
			ctx, cancel := context.WithTimeout(cmd.Context(), 30*time.Second)
			defer cancel()
			names := environment.Backends()
			if only != "" && only != environment.Auto {
				if _, err := environment.Lookup(only); err != nil {
					return usageErrorf("--backend: %v", err)
				}
				names = []string{only}
			}
			needs := flagNeeds(image, ociRuntime)
			failed := map[string]int{}
			for _, name := range names {
				b, err := environment.Lookup(name)
				if err != nil {
					return failErr(err)
				}
				fmt.Fprintf(out, "backend %s:\n", name)
				fmt.Fprintf(out, "  capabilities: %s\n", environment.CapabilitiesOf(b))
				cfg := environment.Config{Image: image, Runtime: ociRuntime}
				if f, missing, lacks := unmet(b, needs); lacks {
					// run refuses the flag for this backend: nothing to check.
					fmt.Fprintf(out, "  (%s does not apply: no %s)\n", f.flag, missing)
					cfg = environment.Config{}
				}
				c, ok := b.(environment.Checker)
				if !ok {
					fmt.Fprintln(out, "  (no checks)")
					continue
				}
				for _, ch := range c.Check(ctx, cfg) {
					mark := "ok  "
					if !ch.OK {
						mark = "FAIL"
						failed[name]++
					}
					fmt.Fprintf(out, "  %s %s: %s\n", mark, termsafe.Line(ch.Name), termsafe.Text(ch.Detail))
					if ch.Fix != "" {
						fmt.Fprintf(out, "       fix: %s\n", termsafe.Text(ch.Fix))
					}
				}
			}
			target := only
			if n, why := autoFor(needs); (only == "" || only == environment.Auto) && n != "" {
				// As run would: auto means the first backend that honours
				// --image and --runtime.
				target = n
				fmt.Fprintf(out, "\n--backend auto (the default) uses: %s (%s)\n", n, why)
			} else if only == "" || only == environment.Auto {
				b, note, err := environment.Resolve(ctx, environment.Auto)
				if err != nil {
					fmt.Fprintf(out, "\n--backend auto: no backend can run here: %s\n", termsafe.Text(err.Error()))
					return silentExit(ExitError)
				}
				target = b.Name()
				fmt.Fprintf(out, "\n--backend auto (the default) uses: %s\n", termsafe.Text(note))
			}
			if failed[target] > 0 {
				return silentExit(ExitError)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&image, "image", "", "image to check (default: the runtime image)")
	cmd.Flags().StringVar(&ociRuntime, "runtime", "", "OCI runtime to check")
	cmd.Flags().StringVar(&only, "backend", "", "check only this backend")
	return cmd
}
