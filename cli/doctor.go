package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/internal/termsafe"
)

// doctorJSON is what doctor --json prints (README: Machine-readable
// output): each backend checked, and which one --backend auto takes.
type doctorJSON struct {
	Backends []doctorBackend `json:"backends"`
	// Auto is the backend --backend auto takes ("" when none can run),
	// and why.
	Auto    string `json:"auto,omitempty"`
	AutoWhy string `json:"auto_why,omitempty"`
	// Ready says the backend that was asked about (auto's, or --backend's)
	// has everything it needs: exit code 0.
	Ready    bool `json:"ready"`
	ExitCode int  `json:"exit_code"`
}

type doctorBackend struct {
	Name         string                   `json:"name"`
	Capabilities environment.Capabilities `json:"capabilities"`
	// NotApplied names a flag this backend does not take, so it was
	// checked without it.
	NotApplied string        `json:"not_applied,omitempty"`
	Checks     []doctorCheck `json:"checks"`
	Ready      bool          `json:"ready"`
}

type doctorCheck struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
	Fix    string `json:"fix,omitempty"`
}

func newDoctorCmd() *cobra.Command {
	var image, ociRuntime, only string
	var asJSON bool
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
			ctx, cancel := context.WithTimeout(cmd.Context(), 30*time.Second)
			defer cancel()
			choice := chooseBackend(cmd, environment.Auto)
			names := environment.Backends()
			if only != "" && only != environment.Auto {
				if _, err := environment.Lookup(only, choice.opts); err != nil {
					return usageErrorf("--backend: %v", err)
				}
				names = []string{only}
			}
			rep, err := doctor(ctx, choice, names, only, image, ociRuntime)
			if err != nil {
				return err
			}
			if asJSON {
				if err := writeJSON(cmd.OutOrStdout(), rep); err != nil {
					return failErr(err)
				}
			} else {
				rep.print(cmd.OutOrStdout(), only)
			}
			return silentExitOrNil(rep.ExitCode)
		},
	}
	cmd.Flags().StringVar(&image, "image", "", "image to check (default: the runtime image)")
	cmd.Flags().StringVar(&ociRuntime, "runtime", "", "OCI runtime to check")
	cmd.Flags().StringVar(&only, "backend", "", "check only this backend")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object instead of text")
	return cmd
}

// doctor checks the backends named, made as choice says, and finds auto's.
func doctor(ctx context.Context, choice backendChoice, names []string, only, image, ociRuntime string) (doctorJSON, error) {
	var rep doctorJSON
	needs := flagNeeds(image, ociRuntime)
	for _, name := range names {
		b, err := environment.Lookup(name, choice.opts)
		if err != nil {
			return rep, failErr(err)
		}
		db := doctorBackend{Name: name, Capabilities: environment.CapabilitiesOf(b), Checks: []doctorCheck{}, Ready: true}
		cfg := environment.Config{Image: image, Runtime: ociRuntime}
		if f, missing, lacks := unmet(b, needs); lacks {
			// run refuses the flag for this backend: nothing to check.
			db.NotApplied = fmt.Sprintf("%s does not apply: no %s", f.flag, missing)
			cfg = environment.Config{}
		}
		if c, ok := b.(environment.Checker); ok {
			for _, ch := range c.Check(ctx, cfg) {
				db.Checks = append(db.Checks, doctorCheck{Name: ch.Name, OK: ch.OK, Detail: ch.Detail, Fix: ch.Fix})
				db.Ready = db.Ready && ch.OK
			}
		}
		rep.Backends = append(rep.Backends, db)
	}
	target := only
	if only == "" || only == environment.Auto {
		if n, why := autoFor(choice, needs); n != "" {
			// As run would: auto means the first backend that honours
			// --image and --runtime.
			rep.Auto, rep.AutoWhy = n, why
		} else if b, note, err := environment.Resolve(ctx, environment.Auto, choice.auto, choice.opts); err != nil {
			rep.AutoWhy = err.Error()
		} else {
			// note is "local (docker: no daemon answers …)", or the name.
			why := strings.TrimPrefix(note, b.Name())
			rep.Auto, rep.AutoWhy = b.Name(), strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(why), "("), ")")
		}
		target = rep.Auto
	}
	rep.Ready = target != ""
	for _, b := range rep.Backends {
		if b.Name == target && !b.Ready {
			rep.Ready = false
		}
	}
	rep.ExitCode = ExitSuccess
	if !rep.Ready {
		rep.ExitCode = ExitError
	}
	return rep, nil
}

// print writes the report as text.
func (rep doctorJSON) print(out io.Writer, only string) {
	for _, b := range rep.Backends {
		fmt.Fprintf(out, "backend %s:\n", b.Name)
		fmt.Fprintf(out, "  capabilities: %s\n", b.Capabilities)
		if b.NotApplied != "" {
			fmt.Fprintf(out, "  (%s)\n", b.NotApplied)
		}
		if len(b.Checks) == 0 {
			fmt.Fprintln(out, "  (no checks)")
		}
		for _, ch := range b.Checks {
			mark := "ok  "
			if !ch.OK {
				mark = "FAIL"
			}
			fmt.Fprintf(out, "  %s %s: %s\n", mark, termsafe.Line(ch.Name), termsafe.Text(ch.Detail))
			if ch.Fix != "" {
				fmt.Fprintf(out, "       fix: %s\n", termsafe.Text(ch.Fix))
			}
		}
	}
	if only != "" && only != environment.Auto {
		return
	}
	switch {
	case rep.Auto == "":
		fmt.Fprintf(out, "\n--backend auto: no backend can run here: %s\n", termsafe.Text(rep.AutoWhy))
	case rep.AutoWhy != "":
		fmt.Fprintf(out, "\n--backend auto (the default) uses: %s (%s)\n", rep.Auto, termsafe.Text(rep.AutoWhy))
	default:
		fmt.Fprintf(out, "\n--backend auto (the default) uses: %s\n", rep.Auto)
	}
}
