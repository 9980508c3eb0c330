package export

import (
	"bytes"
	"context"
	"fmt"
	"github.com/codegirl-games/agentbox/internal/owner"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// FindFFmpeg returns the ffmpeg binary to use, or ErrNoFFmpeg.
func FindFFmpeg(path string) (string, error) {
	if path == "" {
		path = "ffmpeg"
	}
	p, err := exec.LookPath(path)
	if err != nil {
		return "", fmt.Errorf("%w (%s not found: apt-get install ffmpeg; .gif and .apng need no ffmpeg)", ErrNoFFmpeg, path)
	}
	return p, nil
}

// writeFFmpeg encodes the frames with ffmpeg: an ffconcat list gives each
// screenshot its exact duration (millisecond timestamps), and passthrough
// keeps one video frame per list entry. It returns the number of frames the
// video holds (see concatList).
func writeFFmpeg(ctx context.Context, format string, frames []Frame, out, bin string, w, h int, overwrite bool) (int, error) {
	ff, err := FindFFmpeg(bin)
	if err != nil {
		return 0, err
	}
	dir, err := owner.TempDir("export")
	if err != nil {
		return 0, fmt.Errorf("export: %w", err)
	}
	defer os.RemoveAll(dir)
	list, n, err := concatList(frames)
	if err != nil {
		return 0, err
	}
	listPath := filepath.Join(dir, "frames.ffconcat")
	if err := os.WriteFile(listPath, list, 0o644); err != nil {
		return 0, fmt.Errorf("export: %w", err)
	}
	// The output goes to a temporary name first: a failed encode leaves
	// nothing half-written under the user's name.
	tmp, err := create(out, overwrite)
	if err != nil {
		return 0, err
	}
	defer tmp.Abort()
	args := []string{"-hide_banner", "-nostdin", "-loglevel", "error", "-y",
		"-f", "concat", "-safe", "0", "-i", listPath, "-fps_mode", "passthrough", "-an"}
	if w%2 != 0 || h%2 != 0 {
		// 4:2:0 video needs even sizes: pad by one pixel.
		args = append(args, "-vf", "pad=ceil(iw/2)*2:ceil(ih/2)*2")
	}
	switch format {
	case MP4:
		// No B-frames: with them the decoding timestamps of a variable
		// frame rate run ahead of the frames, and the track's sample table
		// (what ffprobe reads as the stream's duration) came out shorter
		// than the video.
		args = append(args, "-c:v", "libx264", "-preset", "veryfast", "-crf", "20", "-bf", "0", "-pix_fmt", "yuv420p",
			"-video_track_timescale", "1000", "-movflags", "+faststart")
	case WebM:
		args = append(args, "-c:v", "libvpx-vp9", "-deadline", "realtime", "-cpu-used", "8", "-row-mt", "1",
			"-b:v", "0", "-crf", "32", "-pix_fmt", "yuv420p")
	default:
		return 0, fmt.Errorf("export: %s is not an ffmpeg format", format)
	}
	// The temporary name has no extension to choose the muxer by: -f does.
	// -y: ffmpeg overwrites the empty temporary file.
	args = append(args, "-f", format, tmp.Name())
	cmd := exec.CommandContext(ctx, ff, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		// ffmpeg names the file it wrote: the temporary one.
		said := strings.ReplaceAll(strings.TrimSpace(lastLines(stderr.String(), 5)), tmp.Name(), out)
		return 0, fmt.Errorf("export: ffmpeg could not write %s: %w: %s", out, err, said)
	}
	if err := commit(tmp, out); err != nil {
		return 0, err
	}
	return n, nil
}

// concatList writes the ffconcat list of the frames and says how many video
// frames it makes. Each image is a one-frame stream at 1000 fps, so a frame
// lasts until the next entry starts (the sum of the durations before it) —
// and nothing follows the last entry: ffmpeg's concat demuxer ignores the
// last entry's duration, and the video ended 1 ms after the last frame
// began (a 2.159 s run exported as 1.16 s). So the last screen is listed
// twice, the second time 1 ms before the end: the video lasts exactly the
// frames' total, with one frame more than the list.
func concatList(frames []Frame) ([]byte, int, error) {
	var list bytes.Buffer
	list.WriteString("ffconcat version 1.0\n")
	entry := func(f Frame, d time.Duration) error {
		abs, err := filepath.Abs(f.Path)
		if err != nil {
			return fmt.Errorf("export: %w", err)
		}
		fmt.Fprintf(&list, "file '%s'\noption framerate 1000\nduration %.3f\n", strings.ReplaceAll(abs, "'", `'\''`), d.Seconds())
		return nil
	}
	last := len(frames) - 1
	for i, f := range frames {
		d := f.Dur
		if i == last && d > minFrame {
			d -= minFrame
		}
		if err := entry(f, d); err != nil {
			return nil, 0, err
		}
	}
	if frames[last].Dur <= minFrame {
		return list.Bytes(), len(frames), nil
	}
	if err := entry(frames[last], minFrame); err != nil {
		return nil, 0, err
	}
	return list.Bytes(), len(frames) + 1, nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
