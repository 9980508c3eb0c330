package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/codegirl-games/agentbox/environment"
)

func newDoctorCmd() *cobra.Command {
	var image, ociRuntime string
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check what each backend needs and what is missing here, with the fix",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := cmd.OutOrStdout()
			ctx, cancel := context.WithTimeout(cmd.Context(), 30*time.Second)
			defer cancel()
			bad := 0
			for _, name := range environment.Backends() {
				b, err := environment.Lookup(name)
				if err != nil {
					return failErr(err)
				}
				fmt.Fprintf(out, "backend %s:\n", name)
				c, ok := b.(environment.Checker)
				if !ok {
					fmt.Fprintln(out, "  (no checks)")
					continue
				}
				for _, ch := range c.Check(ctx, environment.Config{Image: image, Runtime: ociRuntime}) {
					mark := "ok  "
					if !ch.OK {
						mark = "FAIL"
						bad++
					}
					fmt.Fprintf(out, "  %s %s: %s\n", mark, ch.Name, ch.Detail)
					if ch.Fix != "" {
						fmt.Fprintf(out, "       fix: %s\n", ch.Fix)
					}
				}
			}
			if bad > 0 {
				return silentExit(ExitError)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&image, "image", "", "image to check (default: the runtime image)")
	cmd.Flags().StringVar(&ociRuntime, "runtime", "", "OCI runtime to check")
	return cmd
}
