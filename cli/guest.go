package cli

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/codegirl-games/agentbox/guest"
	"github.com/codegirl-games/agentbox/observe"
)

func newGuestCmd() *cobra.Command {
	var (
		opts    guest.Options
		execApp bool
		display string
	)
	cmd := &cobra.Command{
		Use:    "guest",
		Short:  "Run as the in-sandbox supervisor (started by backends, not by people)",
		Hidden: true,
		Args: func(cmd *cobra.Command, args []string) error {
			if !execApp && len(args) > 0 {
				return usageErrorf("guest takes no arguments")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if execApp {
				return failErr(guest.ExecApp(args))
			}
			if display != "" {
				s, err := observe.ParseScreen(display)
				if err != nil {
					return usageErrorf("--display %v", err)
				}
				opts.Display = &s
			}
			code := guest.Main(os.Stdin, os.Stdout, os.Stderr, opts)
			if code != 0 {
				return silentExit(code)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&execApp, "exec-app", false, "launch the app (the arguments after --) with the sandbox's OOM policy")
	cmd.Flags().BoolVar(&opts.AwaitHost, "await-host", false, "say hello only after reading the host's go-ahead byte (a sandbox attached to after it starts)")
	cmd.Flags().BoolVar(&opts.Sandboxed, "sandboxed", false, "kill every leftover process in the sandbox's PID namespace when stopping")
	cmd.Flags().StringVar(&display, "display", "", "bring up the display (WIDTHxHEIGHTxDEPTH) as soon as the guest runs, before the host's start asks for it")
	cmd.Flags().BoolVar(&opts.DisplayWM, "wm", false, "with --display: start the window manager too")
	return cmd
}
