package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/codegirl-games/agentbox/export"
	"github.com/codegirl-games/agentbox/internal/plural"
	"github.com/codegirl-games/agentbox/internal/termsafe"
)

type exportFlags struct {
	video  string
	fps    float64
	speed  float64
	hold   time.Duration
	ffmpeg string
	force  bool
}

func newExportCmd() *cobra.Command {
	var f exportFlags
	cmd := &cobra.Command{
		Use:   "export RUN --video FILE",
		Short: "Export a run's screenshots as a video (MP4/WebM with ffmpeg, GIF/APNG without)",
		Long: `Export writes the run's screens as a video. The format follows FILE's
extension: .mp4 and .webm are encoded by ffmpeg (it must be installed);
.gif and .apng (or .png) are written in pure Go.

By default the video keeps the real timing: one frame per observation, shown
until the next one, the last for --hold. --fps samples the run at a fixed
frame rate instead; --speed plays it faster or slower.

FILE must not exist (--force replaces it); the video is written under a
temporary name beside it and appears under FILE only when complete.`,
		Example: `  agentbox export RUN --video run.mp4
  agentbox export RUN --video run.gif --speed 2
  agentbox export RUN --video run.webm --fps 30`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runExport(cmd, f, args[0])
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.video, "video", "", "the video file to write: .mp4, .webm (ffmpeg), .gif, .apng")
	fl.Float64Var(&f.fps, "fps", 0, "fixed frame rate (default: real timing, one frame per observation)")
	fl.Float64Var(&f.speed, "speed", export.DefaultSpeed, "playback speed (2 is twice as fast)")
	fl.DurationVar(&f.hold, "hold", export.DefaultHold, "how long the last frame stays")
	fl.StringVar(&f.ffmpeg, "ffmpeg", "", "the ffmpeg binary (default: ffmpeg on PATH)")
	fl.BoolVar(&f.force, "force", false, "replace FILE if it exists")
	return cmd
}

func runExport(cmd *cobra.Command, f exportFlags, dir string) error {
	if f.video == "" {
		return usageErrorf("export needs --video FILE (.mp4, .webm, .gif or .apng)")
	}
	format, err := export.FormatOf(f.video)
	if err != nil {
		return usageErrorf("--video %v", err)
	}
	if f.fps < 0 || f.fps > 1000 {
		return usageErrorf("--fps %v: want 0 (real timing) up to 1000", f.fps)
	}
	if f.speed <= 0 || f.speed > 1000 {
		return usageErrorf("--speed %v: want a positive factor", f.speed)
	}
	if f.hold <= 0 {
		return usageErrorf("--hold must be positive")
	}
	if export.NeedsFFmpeg(format) {
		if _, err := export.FindFFmpeg(f.ffmpeg); err != nil {
			return usageErrorf("--video %s: %v", f.video, err)
		}
	}
	if st, err := os.Lstat(f.video); err == nil && st.IsDir() {
		return usageErrorf("--video %s is a directory", f.video)
	} else if err == nil && !f.force {
		return usageErrorf("--video %s exists; add --force to replace it (nothing was written)", f.video)
	}
	tr, err := openTrace(dir)
	if err != nil {
		return err
	}
	if tr.Incomplete {
		fmt.Fprintf(cmd.ErrOrStderr(), "agentbox: %s is an incomplete trace; exporting the screens it has\n", termsafe.Line(dir))
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	st, err := export.Write(ctx, tr, f.video, export.Options{FPS: f.fps, Speed: f.speed, Hold: f.hold, FFmpeg: f.ffmpeg, Overwrite: f.force})
	switch {
	case errors.Is(err, context.Canceled):
		return silentExit(ExitInterrupted)
	case errors.Is(err, fs.ErrExist):
		// It appeared while the video was encoded.
		return usageErrorf("%v", err)
	case err != nil:
		return failErr(err)
	}
	timing := "real timing"
	if f.fps > 0 {
		timing = fmt.Sprintf("%g fps", f.fps)
	}
	fmt.Fprintf(cmd.OutOrStdout(), "video: %s (%s by %s, %s, %dx%d, %v at %s, %s in %v)\n",
		termsafe.Line(f.video), st.Format, st.Encoder, plural.S(st.Frames, "frame"), st.Width, st.Height, st.Length.Round(time.Millisecond), timing,
		humanBytes(st.Bytes), st.Took.Round(time.Millisecond))
	return nil
}
