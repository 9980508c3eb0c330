// Package export turns a trace's screenshots into a video: MP4 or WebM
// through ffmpeg when it is installed, an animated GIF or APNG in pure Go
// otherwise. Frames follow the run's real timing (one frame per observation,
// shown until the next) or a fixed frame rate.
package export

import (
	"context"
	"errors"
	"fmt"
	"image"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/codegirl-games/agentbox/internal/atomicfile"
	"github.com/codegirl-games/agentbox/observe"
	"github.com/codegirl-games/agentbox/trace"
)

// Formats.
const (
	GIF  = "gif"
	APNG = "apng"
	MP4  = "mp4"
	WebM = "webm"
)

// ErrNoFFmpeg says the format needs ffmpeg and there is none.
var ErrNoFFmpeg = errors.New("ffmpeg is not installed")

// FormatOf picks the format from a file name's extension.
func FormatOf(name string) (string, error) {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".gif":
		return GIF, nil
	case ".apng", ".png":
		return APNG, nil
	case ".mp4", ".m4v":
		return MP4, nil
	case ".webm":
		return WebM, nil
	}
	return "", fmt.Errorf("%s: unknown video format %q: use .mp4 or .webm (ffmpeg), .gif or .apng (no ffmpeg needed)", name, filepath.Ext(name))
}

// NeedsFFmpeg reports whether a format is encoded by ffmpeg.
func NeedsFFmpeg(format string) bool { return format == MP4 || format == WebM }

// Options tunes an export.
type Options struct {
	// FPS > 0 samples the run at a fixed frame rate; 0 keeps the real
	// timing: one frame per observation.
	FPS float64
	// Speed plays the run faster (2) or slower (0.5); default 1.
	Speed float64
	// Hold is how long the last frame stays (default 1s).
	Hold time.Duration
	// FFmpeg is the ffmpeg binary (default: found on PATH).
	FFmpeg string
	// Overwrite replaces an existing file; without it Write refuses one
	// (an error wrapping fs.ErrExist), also one that appears while the
	// video is encoded.
	Overwrite bool
}

// The defaults of Options, and of agentbox export's flags.
const (
	DefaultSpeed = 1.0
	DefaultHold  = time.Second
)

func (o *Options) defaults() {
	if o.Speed <= 0 {
		o.Speed = DefaultSpeed
	}
	if o.Hold <= 0 {
		o.Hold = DefaultHold
	}
}

// Frame is one video frame: a screenshot of the trace shown for Dur from
// Start.
type Frame struct {
	Path  string // absolute or relative to the working directory
	Step  int
	Start time.Duration
	Dur   time.Duration
}

// Stats describes a written video.
type Stats struct {
	Format        string
	Encoder       string // "ffmpeg" or "go"
	Frames        int
	Width, Height int
	Length        time.Duration // playing time
	Bytes         int64
	Took          time.Duration
}

// minFrame is the shortest frame: timestamps are kept in milliseconds.
const minFrame = time.Millisecond

// Frames lists the video's frames. With real timing there is one per
// observation (steps, then the final screen), each shown until the next
// observation; with a fixed rate the run is sampled every 1/FPS.
func Frames(tr *trace.Trace, opts Options) ([]Frame, error) {
	opts.defaults()
	type obs struct {
		path string
		step int
		t    float64 // ms
	}
	var list []obs
	add := func(r *trace.Record) {
		o := r.Observation
		if o == nil {
			return
		}
		t := r.TMS
		if r.Decision != nil {
			t -= r.Decision.LatencyMS // when the screen was observed
		}
		p := ""
		// Only screenshots that are plain files inside the trace (see
		// trace.OpenFile): a crafted path or a link is not read.
		if tr.HasScreenshot(o.Screenshot) {
			p = filepath.Join(tr.Dir, filepath.FromSlash(o.Screenshot))
		} else if len(list) > 0 {
			p = list[len(list)-1].path // keep showing the last screen we have
		}
		if p == "" {
			return
		}
		if len(list) > 0 && t < list[len(list)-1].t {
			t = list[len(list)-1].t
		}
		list = append(list, obs{p, r.Step, t})
	}
	for i := range tr.Steps {
		add(&tr.Steps[i].Record)
	}
	if tr.Final != nil {
		add(tr.Final)
	}
	if len(list) == 0 {
		return nil, fmt.Errorf("export: %s has no screenshots", tr.Dir)
	}
	scale := func(ms float64) time.Duration {
		return time.Duration(ms / opts.Speed * float64(time.Millisecond))
	}
	t0 := list[0].t
	if opts.FPS <= 0 {
		frames := make([]Frame, len(list))
		for i, o := range list {
			frames[i] = Frame{Path: o.path, Step: o.step, Start: scale(o.t - t0)}
			if i+1 < len(list) {
				frames[i].Dur = scale(list[i+1].t - o.t)
			} else {
				frames[i].Dur = opts.Hold
			}
		}
		// Whole milliseconds, without drift: each frame ends where the next
		// starts.
		return quantize(frames), nil
	}
	total := scale(list[len(list)-1].t-t0) + opts.Hold
	step := time.Duration(float64(time.Second) / opts.FPS)
	if step < minFrame {
		return nil, fmt.Errorf("export: %v frames per second is too many (at most 1000)", opts.FPS)
	}
	// Counted from the rate, not from step (whole nanoseconds): at 3 fps a
	// 2 s run is 6 frames, not 7.
	n := int(math.Ceil(total.Seconds()*opts.FPS - 1e-9))
	const maxFrames = 200_000
	if n > maxFrames {
		return nil, fmt.Errorf("export: %d frames at %v fps is too many (at most %d); lower --fps or raise --speed", n, opts.FPS, maxFrames)
	}
	frames := make([]Frame, 0, n)
	j := 0
	for k := 0; k < n; k++ {
		at := time.Duration(k) * step
		for j+1 < len(list) && scale(list[j+1].t-t0) <= at {
			j++
		}
		frames = append(frames, Frame{Path: list[j].path, Step: list[j].step, Start: at, Dur: step})
	}
	return quantize(frames), nil
}

// quantize rounds frame boundaries to whole milliseconds (at least one per
// frame), keeping the total.
func quantize(frames []Frame) []Frame {
	var end time.Duration
	for i := range frames {
		want := (frames[i].Start + frames[i].Dur).Round(time.Millisecond)
		frames[i].Start = end
		d := want - end
		if d < minFrame {
			d = minFrame
		}
		frames[i].Dur = d
		end += d
	}
	return frames
}

// Write exports the trace to out in the format of its extension.
func Write(ctx context.Context, tr *trace.Trace, out string, opts Options) (Stats, error) {
	opts.defaults()
	t0 := time.Now()
	format, err := FormatOf(out)
	if err != nil {
		return Stats{}, err
	}
	frames, err := Frames(tr, opts)
	if err != nil {
		return Stats{}, err
	}
	st := Stats{Format: format, Frames: len(frames)}
	for _, f := range frames {
		st.Length += f.Dur
	}
	w, h, err := frameSize(frames[0].Path)
	if err != nil {
		return st, err
	}
	st.Width, st.Height = w, h
	switch format {
	case GIF, APNG:
		st.Encoder = "go"
		err = writeAnimated(ctx, format, frames, out, w, h, opts.Overwrite)
	default:
		st.Encoder = "ffmpeg"
		st.Frames, err = writeFFmpeg(ctx, format, frames, out, opts.FFmpeg, w, h, opts.Overwrite)
	}
	if err != nil {
		return st, err
	}
	if fi, err := os.Stat(out); err == nil {
		st.Bytes = fi.Size()
	}
	st.Took = time.Since(t0)
	return st, nil
}

// create starts the video under a temporary name beside out; the file
// appears under out only when complete.
func create(out string, overwrite bool) (*atomicfile.File, error) {
	var opts []atomicfile.Option
	if !overwrite {
		opts = append(opts, atomicfile.NoReplace)
	}
	f, err := atomicfile.Create(out, 0o644, opts...)
	if err != nil {
		return nil, writeError(out, "", err)
	}
	return f, nil
}

// commit puts the finished video in place.
func commit(f *atomicfile.File, out string) error {
	tmp := f.Name()
	if err := f.Commit(); err != nil {
		return writeError(out, tmp, err)
	}
	return nil
}

// writeError is an error about writing out that names the user's path,
// never the temporary file it is written under first.
func writeError(out, tmp string, err error) error {
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("export: %s exists (nothing was written; use --force to replace it): %w", out, fs.ErrExist)
	}
	var pe *fs.PathError
	var le *os.LinkError
	switch {
	case errors.As(err, &pe):
		err = pe.Err
	case errors.As(err, &le):
		err = le.Err
	}
	msg := err.Error()
	if tmp != "" {
		msg = strings.ReplaceAll(msg, tmp, out)
	}
	return fmt.Errorf("export: cannot write %s: %s", out, msg)
}

func frameSize(path string) (int, int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, fmt.Errorf("export: %w", err)
	}
	defer f.Close()
	cfg, _, err := image.DecodeConfig(f)
	if err != nil {
		return 0, 0, fmt.Errorf("export: %s: %w", path, err)
	}
	if err := checkSize(path, cfg); err != nil {
		return 0, 0, err
	}
	return cfg.Width, cfg.Height, nil
}

// maxPixels bounds a frame: the largest screen agentbox makes. A PNG's
// header names its size before any pixel is decoded, so a crafted one
// cannot make the decoder allocate more.
const maxPixels = observe.MaxScreenPixels

func checkSize(path string, cfg image.Config) error {
	if cfg.Width <= 0 || cfg.Height <= 0 || int64(cfg.Width)*int64(cfg.Height) > maxPixels {
		return fmt.Errorf("export: %s: %dx%d is larger than any screen (at most %d pixels)", path, cfg.Width, cfg.Height, maxPixels)
	}
	return nil
}
