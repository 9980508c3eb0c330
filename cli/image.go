package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/codegirl-games/agentbox/environment/docker"
	"github.com/codegirl-games/agentbox/images"
	"github.com/codegirl-games/agentbox/internal/termsafe"
)

func newImageCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "image",
		Short: "Build, list and inspect agentbox's images",
		Long: `image builds agentbox's images (build), lists them with the X11 apps each
carries (ls), and describes one (inspect).`,
		// Without Args and RunE cobra prints the help for an unknown
		// subcommand and exits 0.
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return nil
			}
			var names []string
			for _, c := range cmd.Commands() {
				if c.IsAvailableCommand() {
					names = append(names, c.Name())
				}
			}
			hint := ""
			if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
				hint = fmt.Sprintf(" (did you mean %s?)", s[0])
			}
			return usageErrorf("image: unknown subcommand %q%s: want one of %s", args[0], hint, strings.Join(names, ", "))
		},
		RunE:                       func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
		SuggestionsMinimumDistance: 2,
	}
	cmd.AddCommand(newImageBuildCmd(), newImageLsCmd(), newImageInspectCmd())
	return cmd
}

func newImageLsCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List the images agentbox built: tags, sizes, status and the X11 apps each carries",
		Long: `ls lists the images agentbox built (labelled dev.agentbox.image): the offline
base, the runtime image, the test image and the office image, one line per tag, with the image's
ID, size, when it was made, whether it is current (built from this agentbox's
Dockerfile on its base as it is now) and the X11 apps it carries, which
` + "`agentbox run NAME`" + ` and a manifest's bare command find on its PATH.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			cli, err := docker.NewClient(ctx)
			if err != nil {
				return failErr(err)
			}
			defer cli.Close()
			list, err := docker.ListImages(ctx, cli)
			if err != nil {
				return failErr(err)
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), list)
			}
			if len(list) == 0 {
				fmt.Fprintf(cmd.OutOrStdout(), "no agentbox images here: `agentbox image build` makes %s\n", docker.RuntimeImageRef)
				return nil
			}
			writeImageLs(cmd.OutOrStdout(), list, time.Local)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON (one array of images) instead of a table")
	return cmd
}

func newImageInspectCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "inspect [IMAGE]",
		Short: "Describe an image: ID, size, base, build hash, status, the X11 apps it carries",
		Long: `inspect describes an image (default ` + docker.RuntimeImageRef + `): its ID, tags,
size, platform, when it was made, the base it was built on, agentbox's build
hash, whether it is current, and the X11 apps it carries. Any image can be
inspected; one not built by agentbox says so.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ref := docker.RuntimeImageRef
			if len(args) == 1 {
				ref = args[0]
			}
			ctx := cmd.Context()
			cli, err := docker.NewClient(ctx)
			if err != nil {
				return failErr(err)
			}
			defer cli.Close()
			info, err := docker.InspectImage(ctx, cli, ref)
			if errors.Is(err, docker.ErrNoImage) {
				return usageErrorf("%v (agentbox image ls lists agentbox's images)", err)
			}
			if err != nil {
				return failErr(err)
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), info)
			}
			writeImageInspect(cmd.OutOrStdout(), info, time.Local)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON (one object) instead of text")
	return cmd
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// appsText is an image's apps as a line.
func appsText(i docker.ImageInfo) string {
	switch {
	case i.Apps == nil && i.Status == docker.StatusOutdated:
		return "? (built before images listed their apps)"
	case i.Apps == nil:
		return "-"
	case len(i.Apps) == 0:
		return "none"
	}
	return strings.Join(i.Apps, " ")
}

func statusText(i docker.ImageInfo) string {
	if i.Status == docker.StatusOutdated {
		return i.Status + " (" + i.Why + ")"
	}
	return i.Status
}

func writeImageLs(w io.Writer, list []docker.ImageInfo, loc *time.Location) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "IMAGE\tROLE\tID\tSIZE\tCREATED\tSTATUS\tAPPS")
	var rebuild []string
	for _, i := range list {
		status := i.Status
		switch status {
		case docker.StatusOutdated:
			rebuild = append(rebuild, fmt.Sprintf("%s is outdated (%s): %s makes it anew", i.Ref, i.Why, docker.RebuildCommand(i)))
		case docker.StatusBase:
			status = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", termsafe.Line(i.Ref), termsafe.Line(i.Role), shortID(trimSHA(i.ID)),
			images.FormatBytes(i.Size), i.Created.In(loc).Format("2006-01-02 15:04"), status, termsafe.Line(appsText(i)))
	}
	tw.Flush()
	for _, r := range rebuild {
		fmt.Fprintln(w, termsafe.Line(r))
	}
}

func writeImageInspect(w io.Writer, i docker.ImageInfo, loc *time.Location) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(tw, "%s\t%s\n", k, termsafe.Line(v)) }
	row("image", i.Ref)
	row("id", i.ID)
	if len(i.Tags) > 0 {
		row("tags", strings.Join(i.Tags, " "))
	}
	role := i.Role
	if role == "" {
		role = "- (not built by agentbox)"
	}
	row("role", role)
	row("size", fmt.Sprintf("%s (%d bytes)", images.FormatBytes(i.Size), i.Size))
	if i.Platform != "" {
		row("platform", i.Platform)
	}
	if !i.Created.IsZero() {
		row("created", i.Created.In(loc).Format("2006-01-02 15:04:05 MST"))
	}
	if i.Base != "" {
		row("base", fmt.Sprintf("%s (%s)", i.Base, shortID(trimSHA(i.BaseID))))
	}
	if i.BuildHash != "" {
		row("build hash", i.BuildHash)
	}
	row("status", statusText(i))
	if i.Status == docker.StatusOutdated {
		row("rebuild", docker.RebuildCommand(i))
	}
	row("apps", appsText(i))
	tw.Flush()
}

func newImageBuildCmd() *cobra.Command {
	var (
		offlineMode                   string
		offline, test, force, noCache bool
		office                        bool
		o                             docker.BuildOptions
		guest                         bool
		g                             docker.GuestImageOptions
	)
	cmd := &cobra.Command{
		Use:   "build",
		Short: "Build the runtime image (offline from debootstrap where no registry answers)",
		Long: `build makes agentbox/runtime:bookworm (Debian bookworm with Xvfb, Openbox,
fonts, Mesa software GL, SDL2, GTK3 and xterm) from images/Dockerfile. Where the
registry cannot be reached the base is made offline: a minimal debootstrap root
from the machine's Debian mirror, imported with docker import (needs root and
debootstrap). A second call with nothing changed returns at once.

--test builds agentbox/test:bookworm on top, adding xev, xcalc, xterm, xdotool
and scrot for the test suites and the seed-style benchmark.

--office builds agentbox/office:bookworm on top of the runtime image instead:
LibreOffice (localc, lowriter, loimpress, soffice) with its GTK3 plugin and
accessibility on, Mousepad, GIMP, Chromium and the fonts office documents
name (Liberation, Carlito, Caladea, DejaVu), for tasks on real applications
(agentbox run localc --image agentbox/office:bookworm).

--guest then layers this agentbox binary (or --guest-binary) onto that image,
with agentbox-guest beside it when it is of the same build (as make builds
them), tagged IMAGE-guest-HASH by both binaries' hashes: the image the
kubernetes backend runs, since a cluster cannot mount the host's binary (its
Pods run agentbox-guest, which starts quicker, when the image has it). --from IMAGE layers it
onto any image instead (nothing else is built). --save FILE writes it as an
archive for a cluster without a registry (ctr -n k8s.io images import FILE,
kind load image-archive FILE); --push REPO tags it REPO:TAG-guest-HASH and
pushes it (then run with --image REPO:TAG).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			mode, err := docker.ParseOfflineMode(offlineMode)
			if err != nil {
				return usageErrorf("--offline-mode: %v", err)
			}
			if offline {
				mode = docker.OfflineAlways
			}
			o.Offline, o.Force, o.NoCache = mode, force, noCache
			o.Progress = cmd.ErrOrStderr()
			if test && office {
				return usageErrorf("--test and --office build two different images: give one")
			}
			switch {
			case test:
				o.Variant = images.VariantTest
			case office:
				o.Variant = images.VariantOffice
			}
			if !guest && (g.Base != "" || g.Save != "" || g.Push != "" || g.Binary != "") {
				return usageErrorf("--from, --save, --push and --guest-binary go with --guest")
			}
			if g.Base != "" && (test || office || o.Tag != "" || o.Base != "") {
				return usageErrorf("--from layers the guest onto an existing image: it does not go with --test, --office, --tag or --base")
			}
			ctx := cmd.Context()
			cli, err := docker.NewClient(ctx)
			if err != nil {
				return failErr(err)
			}
			defer cli.Close()
			if g.Base == "" {
				t := time.Now()
				res, err := docker.BuildImage(ctx, cli, o)
				if err != nil {
					return failErr(err)
				}
				state := "built"
				if res.UpToDate {
					state = "up to date"
				}
				fmt.Fprintln(cmd.OutOrStdout(), builtLine(res.Ref, state, shortID(trimSHA(res.ID)), res.Size, time.Since(t)))
				g.Base = res.Ref
			}
			if !guest {
				return nil
			}
			t := time.Now()
			g.Force, g.Progress = force, cmd.ErrOrStderr()
			res, err := docker.BuildGuestImage(ctx, cli, g)
			if err != nil {
				return failErr(err)
			}
			state := "built"
			if res.UpToDate {
				state = "up to date"
			}
			carries := "guest " + res.GuestID + ": agentbox and agentbox-guest"
			if res.Small == "" {
				carries = "guest " + res.GuestID + ": agentbox alone"
				fmt.Fprintf(cmd.ErrOrStderr(), "agentbox image build: the image carries agentbox alone, whose Pods start slower: %s\n", res.Why)
			}
			fmt.Fprintln(cmd.OutOrStdout(), builtLine(res.Ref, state, carries, res.Size, time.Since(t)))
			if res.Saved != "" {
				fmt.Fprintf(cmd.OutOrStdout(), "saved to %s\n", res.Saved)
			}
			if res.Pushed != "" {
				fmt.Fprintf(cmd.OutOrStdout(), "pushed %s\n", res.Pushed)
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.BoolVar(&offline, "offline", false, "never contact a registry: make the base with debootstrap (same as --offline-mode always)")
	fl.StringVar(&offlineMode, "offline-mode", "auto", "auto (registry if it answers, else offline), always, never")
	fl.BoolVar(&test, "test", false, "build the test image (runtime + xev, xcalc, xterm, xdotool, scrot)")
	fl.BoolVar(&office, "office", false, "build the office image (runtime + LibreOffice, Mousepad, GIMP, Chromium, fonts)")
	fl.BoolVar(&force, "force", false, "rebuild even when up to date")
	fl.BoolVar(&noCache, "no-cache", false, "build without the layer cache")
	fl.StringVar(&o.Tag, "tag", "", "image tag (default agentbox/runtime:bookworm, agentbox/test:bookworm or agentbox/office:bookworm)")
	fl.StringVar(&o.Base, "base", "", "base image (default debian:bookworm-slim, or the offline base)")
	fl.StringVar(&o.Mirror, "mirror", "", "Debian mirror for debootstrap (default: the host's apt sources)")
	fl.BoolVar(&guest, "guest", false, "also layer the agentbox binary onto the image (IMAGE-guest-HASH), for the kubernetes backend")
	fl.StringVar(&g.Base, "from", "", "with --guest: layer the guest onto this existing image instead of building one")
	fl.StringVar(&g.Binary, "guest-binary", "", "with --guest: the static agentbox binary to carry (default: this one)")
	fl.StringVar(&g.Save, "save", "", "with --guest: write the guest image to this file (docker save format) to load into a cluster")
	fl.StringVar(&g.Push, "push", "", "with --guest: push the guest image as REPO[:TAG]-guest-HASH to a registry")
	return cmd
}

func trimSHA(id string) string {
	if len(id) > 7 && id[:7] == "sha256:" {
		return id[7:]
	}
	return id
}

// builtLine is image build's last line: the image, its ID and its size in
// the format of the build's progress and of image ls (images.FormatBytes:
// 534.9MB), not a second one.
func builtLine(ref, state, id string, size int64, d time.Duration) string {
	return fmt.Sprintf("%s %s (%s, %s) in %s", ref, state, id, images.FormatBytes(size), images.FormatDuration(d))
}
