package cli

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/codegirl-games/agentbox/importer/osworld"
	"github.com/codegirl-games/agentbox/internal/termsafe"
)

func newImportCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "import",
		Short: "Convert task files of other formats into an eval suite",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newImportOSWorldCmd())
	return cmd
}

func newImportOSWorldCmd() *cobra.Command {
	var files, out string
	var force bool
	cmd := &cobra.Command{
		Use:   "osworld DIR --files CACHE --out SUITE",
		Short: "Convert OSWorld-format task files into an eval suite",
		Long: `import osworld reads every OSWorld-format task file (*.json) under DIR and
writes an eval suite (SUITE, YAML) of the tasks it can express, each with
inputs, collect, before_collect and grade (docs/tasks.md), run in
agentbox/office:bookworm. Downloads and expected files are taken from the
cache directory CACHE, by file name or by the base name of their URL: there
is no network. Beside SUITE it writes SUITE's stem + ".d/" (each task's app
manifest, inputs and expected files) and SUITE's stem + ".import.yaml"
(every task, converted or not, with the reason, and counts per reason),
and prints the counts on stderr.

The suite names no agent: run it with one (eval --agent NAME).
Exit 0 when at least one task was converted, 1 when none was, 2 for bad
input (DIR missing, a file that is not JSON: named, with its line and
column).`,
		Example: `  agentbox import osworld ~/osworld/evaluation_examples/examples --files ~/osworld-cache --out osworld.yaml
  agentbox eval osworld.yaml --agent anthropic --image agentbox/office:bookworm`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			stderr := cmd.ErrOrStderr()
			if out == "" {
				return usageErrorf("--out SUITE is required (the suite file to write)")
			}
			if !strings.HasSuffix(out, ".yaml") && !strings.HasSuffix(out, ".yml") {
				return usageErrorf("--out %s: a suite is a .yaml file", out)
			}
			var cache osworld.Options
			if files != "" {
				if fi, err := os.Stat(files); err != nil || !fi.IsDir() {
					return usageErrorf("--files %s: not a directory", files)
				}
				cache.Cache = os.DirFS(files)
			}
			srcs, err := osworld.ReadDir(args[0])
			if err != nil {
				return usageErrorf("%v", err)
			}
			name := strings.TrimSuffix(filepath.Base(out), filepath.Ext(out))
			cache.Name, cache.Dir = sanitizeName(name), filepath.Base(osworld.SideDir(out))
			res, err := osworld.Convert(srcs, cache)
			if err != nil {
				return usageErrorf("%v", err)
			}
			err = res.Write(osworld.WriteOptions{Suite: out, Source: args[0], Cache: cache.Cache, Force: force})
			if errors.Is(err, osworld.ErrExists) {
				return usageErrorf("%v", err)
			}
			if err != nil {
				return failErr(fmt.Errorf("import: %w", err))
			}
			var b strings.Builder
			res.Summary(&b)
			fmt.Fprint(stderr, termsafe.Text(b.String()))
			fmt.Fprintf(stderr, "report: %s\n", termsafe.Line(osworld.ReportFile(out)))
			if len(res.Suite.Tasks) == 0 {
				return &exitError{code: ExitFailure, err: fmt.Errorf("no task of %s could be converted; no suite was written", args[0])}
			}
			fmt.Fprintf(stderr, "suite: %s (run it with: agentbox eval %s --agent NAME)\n", termsafe.Line(out), termsafe.Line(out))
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&files, "files", "", "the directory of downloaded files (task inputs and expected files), looked up by file name or URL base name")
	fl.StringVar(&out, "out", "", "the suite file to write (.yaml); its stem.d/ and stem.import.yaml go beside it")
	fl.BoolVar(&force, "force", false, "replace a suite, its stem.d/ and its report written before")
	return cmd
}
