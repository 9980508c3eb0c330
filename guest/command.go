package guest

import (
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/codegirl-games/agentbox/internal/termsafe"
	"github.com/codegirl-games/agentbox/observe"
)

// Exit codes of Command, as the agentbox command line's.
const (
	exitUsage = 2
	exitError = 3
)

// Command runs `agentbox guest ARGS` (args without "guest"): the command
// line both binaries that can be the guest accept — agentbox itself
// (cli) and the small agentbox-guest (cmd/agentbox-guest) — parsed the
// same way, so a backend starts either with the same arguments. It
// returns the process exit code: the guest's, 2 for bad arguments, 3 when
// the app launcher (--exec-app) cannot exec.
func Command(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	var (
		opts    Options
		execApp bool
		display string
	)
	fs := flag.NewFlagSet("agentbox guest", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: agentbox guest [flags]\n\nRun as the in-sandbox supervisor (started by backends, not by people).\n\nFlags:\n")
		fs.PrintDefaults()
	}
	fs.BoolVar(&execApp, "exec-app", false, "launch the app (the arguments after --) with the sandbox's OOM policy")
	fs.BoolVar(&opts.AwaitHost, "await-host", false, "say hello only after reading the host's go-ahead byte (a sandbox attached to after it starts)")
	fs.BoolVar(&opts.Sandboxed, "sandboxed", false, "kill every leftover process in the sandbox's PID namespace when stopping")
	fs.StringVar(&display, "display", "", "bring up the display (WIDTHxHEIGHTxDEPTH) as soon as the guest runs, before the host's start asks for it")
	fs.BoolVar(&opts.DisplayWM, "wm", false, "with --display: start the window manager too")
	fs.BoolVar(&opts.DisplayNoGLX, "no-glx", false, "with --display: start the X server without GLX")
	fs.StringVar(&opts.CPUProfile, "cpuprofile", "", "for developers: write a CPU profile from start to stop to this file in the home (the host's AGENTBOX_GUEST_CPUPROFILE)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return exitUsage // the flag package said why
	}
	usage := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "agentbox: %s\n", termsafe.Text(fmt.Sprintf(format, a...)))
		return exitUsage
	}
	if execApp {
		if err := ExecApp(fs.Args()); err != nil {
			fmt.Fprintf(stderr, "agentbox: %s\n", termsafe.Text(err.Error()))
			return exitError
		}
		return 0
	}
	if fs.NArg() > 0 {
		return usage("guest takes no arguments")
	}
	if display != "" {
		s, err := observe.ParseScreen(display)
		if err != nil {
			return usage("--display %v", err)
		}
		opts.Display = &s
	}
	return Main(stdin, stdout, stderr, opts)
}
