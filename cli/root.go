// Package cli implements the agentbox command line: one file per verb.
package cli

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/codegirl-games/agentbox/internal/suggest"
	"github.com/codegirl-games/agentbox/internal/termsafe"

	// Built-in agents register themselves (backends: backend.go).
	_ "github.com/codegirl-games/agentbox/agent/anthropic"
	_ "github.com/codegirl-games/agentbox/agent/demo"
	_ "github.com/codegirl-games/agentbox/agent/exec"
	_ "github.com/codegirl-games/agentbox/agent/idle"
	_ "github.com/codegirl-games/agentbox/agent/openai"

	"github.com/codegirl-games/agentbox/internal/fds"
	"github.com/codegirl-games/agentbox/internal/version"
)

// Exit codes shared by every command (see README: exit codes).
const (
	ExitSuccess     = 0
	ExitFailure     = 1
	ExitUsage       = 2
	ExitError       = 3
	ExitInterrupted = 130
)

// exitError carries an exit code out of a command.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// usageErrorf reports bad input: exit code 2.
func usageErrorf(format string, args ...any) error {
	return &exitError{code: ExitUsage, err: fmt.Errorf(format, args...)}
}

// failErr reports an infrastructure error: exit code 3.
func failErr(err error) error { return &exitError{code: ExitError, err: err} }

// silentExit ends with a code after the command printed its own report.
type silentExit int

func (s silentExit) Error() string { return fmt.Sprintf("exit %d", int(s)) }

// Main runs the command line and returns the process exit code.
func Main(args []string, stdout, stderr io.Writer) int {
	// Descriptors this process inherited beyond stdio reach nothing it
	// starts: not bubblewrap, the guest or the app (SECURITY.md).
	if err := fds.CloseOnExec(3); err != nil {
		fmt.Fprintf(stderr, "agentbox: warning: inherited descriptors stay inheritable: %v\n", err)
	}
	root := newRoot(stdout, stderr)
	root.SetArgs(args)
	cmd, err := root.ExecuteC()
	if err == nil {
		return ExitSuccess
	}
	var se silentExit
	if errors.As(err, &se) {
		return int(se)
	}
	// Errors carry text from outside (app output, guest messages, names
	// read from traces): shown, never obeyed by the terminal.
	fmt.Fprintf(stderr, "agentbox: %s\n", termsafe.Text(err.Error()))
	code := ExitUsage // errors cobra raises itself are about flags and arguments
	var ee *exitError
	if errors.As(err, &ee) {
		code = ee.code
	}
	if wantsJSON(cmd) {
		// --json promises one object on stdout whatever happens.
		_ = writeJSON(stdout, errorJSON{Error: err.Error(), ExitCode: code})
	}
	return code
}

// errorJSON is what a command given --json prints when it ends with an
// error before its own object: the message (also on stderr) and the exit
// code.
type errorJSON struct {
	Error    string `json:"error"`
	ExitCode int    `json:"exit_code"`
}

// wantsJSON says whether cmd was given --json.
func wantsJSON(cmd *cobra.Command) bool {
	if cmd == nil {
		return false
	}
	f := cmd.Flags().Lookup("json")
	return f != nil && f.Value.String() == "true"
}

func newRoot(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "agentbox",
		Short: "Run a GUI app in a disposable, isolated desktop and let an agent drive it",
		Long: `agentbox gives a decision-maker — a test script, a model, a person — its own
disposable Linux desktop with one graphical application in it: Xvfb and
Openbox in a hardened Docker container, or in a bubblewrap sandbox on the
host when there is no Docker (--backend docker, local, or auto: Docker when a
daemon answers, else local; ` + "`agentbox doctor`" + ` says what each needs). It can
only look at the screen, press keys, move and click the mouse, and read what
the program prints. Every run is recorded in a versioned trace directory.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version.Version,
	}
	root.SetVersionTemplate(versionText())
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usageErrorf("%v%s (see `%s --help`)", err, flagHint(c, err), c.CommandPath())
	})
	root.AddCommand(
		newRunCmd(),
		newEvalCmd(),
		newImageCmd(),
		newGCCmd(),
		newSandboxesCmd(),
		newDoctorCmd(),
		newVersionCmd(),
		newGuestCmd(),
		newBenchCmd(),
		newViewCmd(),
		newReplayCmd(),
		newResumeCmd(),
		newExportCmd(),
		newLsCmd(),
		newDashboardCmd(),
		newIndexCmd(),
		newServeCmd(),
		newMCPCmd(),
		newImportCmd(),
	)
	addNamespaceFlag(root)
	return root
}

// flagHint is " (did you mean --NAME?)" for an unknown flag close to one
// of the command's, as cobra suggests subcommands.
func flagHint(c *cobra.Command, err error) string {
	name, ok := strings.CutPrefix(err.Error(), "unknown flag: ")
	if !ok || !strings.HasPrefix(name, "--") {
		return ""
	}
	var names []string
	c.Flags().VisitAll(func(f *pflag.Flag) {
		if !f.Hidden {
			names = append(names, "--"+f.Name)
		}
	})
	return suggest.Hint(name, names)
}
