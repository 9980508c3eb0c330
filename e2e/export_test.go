package e2e

import (
	"bytes"
	"encoding/binary"
	"image/gif"
	"image/png"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/codegirl-games/agentbox/internal/testenv"
)

func requireFFmpeg(t *testing.T) {
	t.Helper()
	testenv.Require(t, testenv.Programs("ffmpeg", "ffprobe"))
}

// probe returns the frame count, width and height of a video by ffprobe.
func probe(t *testing.T, path string) (frames, w, h int) {
	t.Helper()
	out, err := exec.Command("ffprobe", "-v", "error", "-count_frames", "-select_streams", "v:0",
		"-show_entries", "stream=nb_read_frames,width,height", "-of", "default=nw=1", path).Output()
	if err != nil {
		t.Fatalf("ffprobe %s: %v", path, err)
	}
	for _, line := range strings.Fields(string(out)) {
		k, v, _ := strings.Cut(line, "=")
		n, _ := strconv.Atoi(v)
		switch k {
		case "nb_read_frames":
			frames = n
		case "width":
			w = n
		case "height":
			h = n
		}
	}
	return
}

// apngInfo reads an APNG's announced frame count, its fcTL chunks and size.
func apngInfo(t *testing.T, path string) (announced, fctl, w, h int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := png.Decode(bytes.NewReader(b)); err != nil {
		t.Fatalf("%s is not a valid PNG for a plain decoder: %v", path, err)
	}
	b = b[8:]
	for len(b) >= 12 {
		n := int(binary.BigEndian.Uint32(b))
		typ, data := string(b[4:8]), b[8:8+n]
		switch typ {
		case "IHDR":
			w, h = int(binary.BigEndian.Uint32(data)), int(binary.BigEndian.Uint32(data[4:]))
		case "acTL":
			announced = int(binary.BigEndian.Uint32(data))
		case "fcTL":
			fctl++
		}
		b = b[12+n:]
	}
	return
}

// TestExport exports a trace (written by the real trace writer) as GIF and
// APNG in pure Go and as MP4 and WebM through ffmpeg: one frame per
// observation at real timing, or duration × fps at a fixed rate, always at
// the screen's size.
func TestExport(t *testing.T) {
	const steps, w, h = 12, 320, 240
	dir := filepath.Join(t.TempDir(), "run")
	synthTrace(t, dir, steps, w, h, true)
	out := t.TempDir()
	const frames = steps + 1 // and the final screen
	// The synthetic run observes every 40 ms (each step 0.5 ms before its
	// decision, the final screen at its record): 12 × 40.5 ms, then 1 s on
	// the last frame.
	const spanMS = steps*40 + 0.5
	const realMS = spanMS + 1000

	t.Run("gif", func(t *testing.T) {
		p := filepath.Join(out, "run.gif")
		r := run0(t, "export", dir, "--video", p)
		if r.code != 0 || !strings.Contains(r.stdout, "13 frames, 320x240") {
			t.Fatalf("%s", r)
		}
		f, _ := os.Open(p)
		g, err := gif.DecodeAll(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		if len(g.Image) != frames || g.Config.Width != w || g.Config.Height != h {
			t.Errorf("gif: %d frames %dx%d, want %d %dx%d", len(g.Image), g.Config.Width, g.Config.Height, frames, w, h)
		}
		total := 0
		for _, d := range g.Delay {
			total += d * 10
		}
		if math.Abs(float64(total)-realMS) > 20 {
			t.Errorf("gif plays %d ms, want %.1f", total, realMS)
		}
	})
	t.Run("an existing file", func(t *testing.T) {
		p := filepath.Join(out, "kept.gif")
		if err := os.WriteFile(p, []byte("the user's"), 0o644); err != nil {
			t.Fatal(err)
		}
		r := cliMain(t, "export", dir, "--video", p)
		if r.code != 2 || !strings.Contains(r.stderr, p+" exists; add --force") {
			t.Errorf("export over an existing file: want exit 2 naming it and --force:\n%s", r)
		}
		if b, _ := os.ReadFile(p); string(b) != "the user's" {
			t.Errorf("the existing file was replaced")
		}
		if r := run0(t, "export", dir, "--video", p, "--force"); r.code != 0 || !strings.Contains(r.stdout, "13 frames") {
			t.Errorf("with --force (the control):\n%s", r)
		}
	})
	t.Run("gif at 10 fps, twice as fast", func(t *testing.T) {
		p := filepath.Join(out, "fps.gif")
		if r := run0(t, "export", dir, "--video", p, "--fps", "10", "--speed", "2"); r.code != 0 {
			t.Fatalf("%s", r)
		}
		f, _ := os.Open(p)
		g, err := gif.DecodeAll(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		want := int(math.Ceil((spanMS/2 + 1000) / 100)) // the run at 2×, 1 s hold, 100 ms a frame
		if len(g.Image) != want {
			t.Errorf("gif at 10 fps: %d frames, want %d", len(g.Image), want)
		}
	})
	t.Run("apng", func(t *testing.T) {
		p := filepath.Join(out, "run.apng")
		if r := run0(t, "export", dir, "--video", p); r.code != 0 {
			t.Fatalf("%s", r)
		}
		ann, fctl, gw, gh := apngInfo(t, p)
		if ann != frames || fctl != frames || gw != w || gh != h {
			t.Errorf("apng: acTL %d, fcTL %d, %dx%d; want %d frames at %dx%d", ann, fctl, gw, gh, frames, w, h)
		}
	})
	for _, ext := range []string{"mp4", "webm"} {
		t.Run(ext, func(t *testing.T) {
			requireFFmpeg(t)
			p := filepath.Join(out, "run."+ext)
			r := run0(t, "export", dir, "--video", p)
			if r.code != 0 || !strings.Contains(r.stdout, "by ffmpeg") {
				t.Fatalf("%s", r)
			}
			// ffmpeg's videos end with the last screen again, 1 ms before
			// the end, so that the last screen lasts its time (export/ffmpeg.go).
			n, gw, gh := probe(t, p)
			if n != frames+1 || gw != w || gh != h {
				t.Errorf("%s: %d frames %dx%d, want %d %dx%d", ext, n, gw, gh, frames+1, w, h)
			}
		})
	}
	t.Run("mp4 at 25 fps", func(t *testing.T) {
		requireFFmpeg(t)
		p := filepath.Join(out, "fps.mp4")
		if r := run0(t, "export", dir, "--video", p, "--fps", "25"); r.code != 0 {
			t.Fatalf("%s", r)
		}
		n, _, _ := probe(t, p)
		if want := int(math.Ceil(realMS/40)) + 1; n != want { // and the last again
			t.Errorf("mp4 at 25 fps: %d frames, want %d", n, want)
		}
	})
	t.Run("no ffmpeg", func(t *testing.T) {
		bin := testenv.Build(t, "./cmd/agentbox")
		cmd := exec.Command(bin, "export", dir, "--video", filepath.Join(out, "none.mp4"))
		cmd.Env = append(os.Environ(), "PATH="+t.TempDir()) // nothing on PATH
		b, err := cmd.CombinedOutput()
		ee, ok := err.(*exec.ExitError)
		if !ok || ee.ExitCode() != 2 || !strings.Contains(string(b), "ffmpeg is not installed") || !strings.Contains(string(b), ".gif") {
			t.Errorf("want exit 2 naming ffmpeg and the pure-Go formats: %v\n%s", err, b)
		}
		if _, err := os.Stat(filepath.Join(out, "none.mp4")); err == nil {
			t.Errorf("a video was written without ffmpeg")
		}
	})
	t.Run("bad input", func(t *testing.T) {
		for _, c := range []struct {
			args []string
			want string
		}{
			{[]string{"export", dir}, "needs --video"},
			{[]string{"export", dir, "--video", filepath.Join(out, "x.avi")}, `unknown video format ".avi"`},
			{[]string{"export", dir, "--video", filepath.Join(out, "x.gif"), "--fps", "-1"}, "--fps"},
			{[]string{"export", dir, "--video", filepath.Join(out, "x.gif"), "--speed", "0"}, "--speed"},
		} {
			r := cliMain(t, c.args...)
			if r.code != 2 || !strings.Contains(r.stderr, c.want) {
				t.Errorf("%v: want exit 2 and %q:\n%s", c.args, c.want, r)
			}
		}
	})
}

// TestExportMoverRun exports a real mover run to MP4: one frame per
// observation at the screen's size.
func TestExportMoverRun(t *testing.T) {
	testenv.Require(t, testenv.Image(testenv.RuntimeImage))
	requireFFmpeg(t)
	dir := recordMover(t, moverApp(t, ""))
	tr := openTrace(t, dir)
	p := filepath.Join(t.TempDir(), "mover.mp4")
	if r := run0(t, "export", dir, "--video", p); r.code != 0 {
		t.Fatalf("%s", r)
	}
	n, w, h := probe(t, p)
	// One frame per observation, and the last screen again (see TestExport).
	if want := len(tr.Steps) + 2; n != want || w != tr.Run.Env.Screen.Width || h != tr.Run.Env.Screen.Height {
		t.Errorf("mover.mp4: %d frames %dx%d, want %d at %dx%d", n, w, h, want, tr.Run.Env.Screen.Width, tr.Run.Env.Screen.Height)
	}
}
