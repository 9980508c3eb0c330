package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/codegirl-games/agentbox/app"
	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/internal/owner"
	"github.com/codegirl-games/agentbox/internal/plural"
	"github.com/codegirl-games/agentbox/internal/termsafe"
	"github.com/codegirl-games/agentbox/session"
)

// What run, replay and eval do around a session: arguments, the app, the
// run's name and directory, signals, leftovers.

// splitArgs splits a command's arguments at --: one NAME before it, the
// app's arguments after it (given says whether there was a --).
func splitArgs(verb, name string, cmd *cobra.Command, args []string) (appArgs []string, given bool, err error) {
	n := cmd.ArgsLenAtDash()
	switch {
	case n >= 0 && n != 1:
		return nil, false, usageErrorf("%s takes exactly one %s before --, got %d", verb, name, n)
	case n >= 0:
		return args[n:], true, nil
	case len(args) > 1:
		return nil, false, usageErrorf("%s takes one %s; put the app's arguments after --: %q", verb, name, args[1:])
	}
	return nil, false, nil
}

// loadApp loads the app run or replay starts, its files bounded by the
// sandbox's /tmp (three quarters of it: the app needs room to run).
func loadApp(target string, res environment.Resources, env map[string]string) (*app.Bundle, error) {
	b, err := app.Load(target, stageLimits(res))
	if err != nil {
		return nil, usageErrorf("%v", err)
	}
	if len(env) > 0 && b.Manifest.Env == nil {
		b.Manifest.Env = map[string]string{}
	}
	for k, v := range env {
		b.Manifest.Env[k] = v
	}
	return b, nil
}

// stageLimits bound what is staged into the sandbox's /tmp, the app's
// files and the task's inputs together: three quarters of it (the app
// needs room to run).
func stageLimits(res environment.Resources) app.Limits {
	tmpfs := int64(res.WithDefaults().TmpfsMB) << 20
	return app.Limits{MaxFiles: app.DefaultLimits.MaxFiles, MaxBytes: min(app.DefaultLimits.MaxBytes, tmpfs*3/4)}
}

// loadInputs checks and opens the task's inputs before anything starts
// (a usage error naming the input); the caller closes them.
func loadInputs(tf app.TaskFiles, b *app.Bundle, res environment.Resources) (*app.Inputs, error) {
	in, err := app.LoadInputs(tf, b, stageLimits(res))
	if err != nil {
		return nil, usageErrorf("%v", err)
	}
	return in, nil
}

// loadTarget is what run and mcp do before a sandbox exists: load the app,
// resolve the backend, and check the host's limits and the network (the
// flags' rules and the manifest's allow_net, which it adds to
// envCfg.Network) against that backend. The caller closes the bundle.
func loadTarget(ctx context.Context, target string, envCfg *environment.Config, env map[string]string, gate *gateOptions, choice backendChoice, image, ociRuntime string, allowUnbounded bool) (_ *app.Bundle, _ environment.Backend, note string, err error) {
	bundle, err := loadApp(target, envCfg.Resources, env)
	if err != nil {
		return nil, nil, "", err
	}
	defer func() {
		if err != nil {
			bundle.Close()
		}
	}()
	// The manifest's policy, when the command line names none, is read
	// with the app: before the backend, like --policy.
	if err := gate.complete(bundle, false); err != nil {
		return nil, nil, "", err
	}
	backend, note, err := resolveBackend(ctx, choice, image, ociRuntime)
	if err != nil {
		return nil, nil, "", err
	}
	if envCfg.Name != "" && !environment.CapabilitiesOf(backend).Named {
		return nil, nil, "", usageErrorf("--name: the %s backend has no named sandboxes (`agentbox doctor` lists what each backend can do); use --backend docker or local", backend.Name())
	}
	if err := checkHostLimits(ctx, backend, envCfg.Resources, flagNames, allowUnbounded); err != nil {
		return nil, nil, "", err
	}
	if envCfg.Network, err = withRules(envCfg.Network, target+"'s manifest", bundle.Manifest.AllowNet); err != nil {
		return nil, nil, "", err
	}
	if err := checkNetwork(backend, envCfg.Network); err != nil {
		return nil, nil, "", err
	}
	return bundle, backend, note, nil
}

// checkOut holds an output directory (run's, replay's, eval's --out) to
// its rule before anything starts: new, or an empty directory.
func checkOut(dir string) error {
	if dir == "" {
		return nil
	}
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return usageErrorf("--out %s: %v", dir, err)
	case !st.IsDir():
		return usageErrorf("--out %s is a file; give a new or empty directory", dir)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return usageErrorf("--out %s: %v", dir, err)
	}
	if len(entries) > 0 {
		return usageErrorf("--out %s exists and is not empty; choose a new directory (nothing was overwritten)", dir)
	}
	return nil
}

// runSetup is what run and replay set up before their session starts:
// the run's ID and trace directory.
type runSetup struct {
	ID  string
	Dir string // --out, else ./agentbox-runs/RUN-ID
}

// setUpRun names a run of bundle, chooses its trace directory, and starts
// catching signals (ctx ends on the first) after removing the sandboxes
// killed agentbox processes left behind. Call done when the run ends.
func setUpRun(stderr io.Writer, backend environment.Backend, bundle *app.Bundle, out string) (ctx context.Context, run runSetup, done func()) {
	run.ID = newRunID(bundle)
	run.Dir = out
	if run.Dir == "" {
		run.Dir = filepath.Join("agentbox-runs", run.ID)
	}
	ctx, done = watchRun(stderr, backend, environment.ReapOptions{RunID: run.ID})
	return ctx, run, done
}

// watchRun is a context that the first SIGINT or SIGTERM cancels (a second
// one removes the sandboxes reap names and exits 130), after removing the
// sandboxes killed agentbox processes left behind. Call stop at the end.
func watchRun(stderr io.Writer, backend environment.Backend, reap environment.ReapOptions) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancelCause(context.Background())
	stopSignals := handleSignals(cancel, stderr, backend, reap)
	reapLeftovers(ctx, backend, stderr)
	return ctx, func() {
		stopSignals()
		cancel(nil)
	}
}

// handleSignals turns the first SIGINT/SIGTERM into a graceful stop
// (the run ends as interrupted, the sandbox is removed) and a second one into
// a forced one (the sandbox is removed at once and agentbox exits 130).
func handleSignals(cancel context.CancelCauseFunc, stderr io.Writer, backend environment.Backend, reap environment.ReapOptions) (stop func()) {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case s := <-sigs:
			fmt.Fprintf(stderr, "\nagentbox: %v: stopping the run (press Ctrl-C again to force)\n", s)
			cancel(session.ErrInterrupted)
		case <-done:
			return
		}
		select {
		case <-sigs:
			fmt.Fprintf(stderr, "agentbox: forced stop: removing the sandboxes\n")
			if r, ok := backend.(environment.Reaper); ok {
				ctx, c := context.WithTimeout(context.Background(), 10*time.Second)
				_, _ = r.Reap(ctx, reap)
				c()
			}
			os.Exit(ExitInterrupted)
		case <-done:
		}
	}()
	return func() {
		signal.Stop(sigs)
		close(done)
	}
}

// reapLeftovers removes, before a command starts its own, the sandboxes
// and temporary directories a killed agentbox left behind, and says which
// (the directories in one line: a killed server may have left many).
func reapLeftovers(ctx context.Context, backend environment.Backend, stderr io.Writer) {
	if orphans, err := owner.Orphans(""); err == nil && len(orphans) > 0 {
		removed := 0
		for _, o := range orphans {
			if o.Remove() == nil {
				removed++
			}
		}
		if removed > 0 {
			fmt.Fprintf(stderr, "agentbox: removed %s left behind by agentbox processes that are gone (see agentbox gc)\n", plural.Count(removed, "temporary directory", "temporary directories"))
		}
	}
	r, ok := backend.(environment.Reaper)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	reaped, _ := r.Reap(ctx, environment.ReapOptions{})
	for _, x := range reaped {
		fmt.Fprintf(stderr, "agentbox: removed leftover sandbox %s of run %s (%s)\n", termsafe.Line(shortID(x.ID)), termsafe.Line(x.RunID), termsafe.Line(x.Reason))
	}
}

// bundleName is an app's name: an app directory (or its manifest) is
// named by its directory; the executable itself, and a program of the
// image, by their names.
func bundleName(b *app.Bundle) string {
	if b.Dir != "" && !b.InImage && !b.Executable {
		return filepath.Base(b.Dir)
	}
	return filepath.Base(b.Manifest.Command)
}

func newRunID(b *app.Bundle) string {
	var rnd [3]byte
	_, _ = rand.Read(rnd[:])
	name := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
			return r
		}
		return '-'
	}, bundleName(b))
	if len(name) > 24 {
		name = name[:24]
	}
	return fmt.Sprintf("%s-%s-%s", time.Now().Format("20060102-150405"), name, hex.EncodeToString(rnd[:]))
}
