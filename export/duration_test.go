package export

import (
	"context"
	"fmt"
	"math"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/codegirl-games/agentbox/internal/testenv"
)

// probeDurations returns what ffprobe says a video lasts: the container's
// duration (what a player shows), the video stream's, and the end of its
// last frame — each where the file says it (an APNG has no container
// duration, WebM frames no duration of their own).
func probeDurations(t *testing.T, path string) map[string]time.Duration {
	t.Helper()
	probe := func(args ...string) []string {
		out, err := exec.Command("ffprobe", append([]string{"-v", "error", "-select_streams", "v:0", "-of", "csv=p=0"}, append(args, path)...)...).Output()
		if err != nil {
			t.Fatalf("ffprobe %s: %v", path, err)
		}
		return strings.Fields(string(out))
	}
	got := map[string]time.Duration{}
	for _, what := range []string{"format", "stream"} {
		if v := probe("-show_entries", what+"=duration"); len(v) == 1 && v[0] != "N/A" {
			got[what] = seconds(t, path, v[0])
		}
	}
	var end time.Duration
	for _, line := range probe("-show_entries", "packet=pts_time,duration_time") {
		pts, dur, _ := strings.Cut(line, ",")
		if dur == "N/A" {
			end = 0
			break
		}
		end = max(end, seconds(t, path, pts)+seconds(t, path, dur))
	}
	if end > 0 {
		got["last frame's end"] = end
	}
	if len(got) == 0 {
		t.Fatalf("ffprobe %s: no duration", path)
	}
	return got
}

func seconds(t *testing.T, path, s string) time.Duration {
	t.Helper()
	sec, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatalf("ffprobe %s: duration %q: %v", path, s, err)
	}
	return time.Duration(math.Round(sec*1e6)) * time.Microsecond
}

// TestVideoDuration: every format lasts what the trace's timing says, as
// ffprobe reads the file. The trace observes at 1000, 1000.4, 1250 and
// 2000 ms; with the 1 s hold on the last screen the run plays 2000 ms at
// real timing. MP4 and WebM once lasted only up to the last frame's start
// plus 1 ms (ffmpeg's concat demuxer ignores the last entry's duration):
// 1001 ms here.
func TestVideoDuration(t *testing.T) {
	testenv.Require(t, testenv.Programs("ffmpeg", "ffprobe"))
	times := []float64{1000, 1000.4, 1250, 2000}
	tr := traceWith(t, times)
	span := times[len(times)-1] - times[0] // ms between the first and the last screen
	timings := []struct {
		name string
		opts Options
		want time.Duration
	}{
		{"real timing", Options{}, ms(span + 1000)},
		{"twice as fast, 2.5 s hold", Options{Speed: 2, Hold: 2500 * time.Millisecond}, ms(span/2 + 2500)},
		// 4 fps: the 2 s of the run in frames of 250 ms.
		{"4 fps", Options{FPS: 4}, ms(math.Ceil((span+1000)/250) * 250)},
		{"3 fps", Options{FPS: 3}, ms(math.Ceil((span+1000)/(1000.0/3)) * 1000.0 / 3)},
	}
	formats := []struct {
		ext string
		// tolerance: GIF delays are centiseconds; the others keep
		// milliseconds (a 3 fps frame is 333.33 ms).
		tolerance time.Duration
	}{
		{"mp4", 2 * time.Millisecond},
		{"webm", 2 * time.Millisecond},
		{"gif", 10 * time.Millisecond},
		{"apng", 2 * time.Millisecond},
	}
	out := t.TempDir()
	for _, tm := range timings {
		for _, f := range formats {
			t.Run(tm.name+"/"+f.ext, func(t *testing.T) {
				p := filepath.Join(out, fmt.Sprintf("%s.%s", strings.ReplaceAll(tm.name, " ", "-"), f.ext))
				st, err := Write(context.Background(), tr, p, tm.opts)
				if err != nil {
					t.Fatal(err)
				}
				if d := st.Length - tm.want; d < -time.Millisecond || d > time.Millisecond {
					t.Errorf("export says %v, the trace's timing is %v", st.Length, tm.want)
				}
				for what, got := range probeDurations(t, p) {
					if d := got - tm.want; d < -f.tolerance || d > f.tolerance {
						t.Errorf("%s lasts %v by ffprobe (%s); the trace's timing is %v (export said %v)", filepath.Base(p), got, what, tm.want, st.Length)
					}
				}
			})
		}
	}
}

func ms(v float64) time.Duration { return time.Duration(math.Round(v * float64(time.Millisecond))) }
