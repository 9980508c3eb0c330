package observe

import (
	"bytes"
	"image"
	"strconv"
	"sync"
	"time"

	"github.com/codegirl-games/agentbox/action"
)

// Frame is one screenshot: RGBA pixels, row-major, stride 4×Width.
type Frame struct {
	Width, Height int
	Pix           []byte
	// Hash identifies the pixels; equal hashes mean equal frames.
	Hash uint64

	once sync.Once
	png  []byte
	err  error
}

// Image returns the frame as an image sharing its pixels. Callers must not
// modify it.
func (f *Frame) Image() *image.RGBA {
	return &image.RGBA{Pix: f.Pix, Stride: 4 * f.Width, Rect: image.Rect(0, 0, f.Width, f.Height)}
}

// At returns the colour at (x, y) as r, g, b.
func (f *Frame) At(x, y int) (r, g, b uint8) {
	i := 4 * (y*f.Width + x)
	return f.Pix[i], f.Pix[i+1], f.Pix[i+2]
}

// Centroid returns the mean position of the pixels whose colour match
// accepts, and how many there are (0, 0, 0 when none does).
func (f *Frame) Centroid(match func(r, g, b uint8) bool) (x, y float64, n int) {
	var sx, sy float64
	for py := 0; py < f.Height; py++ {
		row := f.Pix[4*py*f.Width : 4*(py+1)*f.Width]
		for px := 0; px < f.Width; px++ {
			if match(row[4*px], row[4*px+1], row[4*px+2]) {
				sx += float64(px)
				sy += float64(py)
				n++
			}
		}
	}
	if n == 0 {
		return 0, 0, 0
	}
	return sx / float64(n), sy / float64(n), n
}

// PNG encodes the frame once (fast compression) and caches the bytes; every
// consumer — the trace, a model adapter — shares one encoding.
func (f *Frame) PNG() ([]byte, error) {
	f.once.Do(func() {
		var b bytes.Buffer
		b.Grow(len(f.Pix) / 32)
		f.err = encodePNG(&b, f) // png.go
		f.png = b.Bytes()
	})
	return f.png, f.err
}

// Window is a top-level window on the screen.
type Window struct {
	ID      uint32 `json:"id"`
	Title   string `json:"title"`
	X       int    `json:"x"`
	Y       int    `json:"y"`
	Width   int    `json:"width"`
	Height  int    `json:"height"`
	Focused bool   `json:"focused,omitempty"`
}

// Stream names one of the app's output streams.
type Stream string

// Output streams.
const (
	Stdout Stream = "stdout"
	Stderr Stream = "stderr"
)

// LogLine is one line the app printed. T is the time since the run began.
type LogLine struct {
	Stream Stream        `json:"stream"`
	Text   string        `json:"text"`
	T      time.Duration `json:"t_ns"`
}

// Exit describes how the app ended.
type Exit struct {
	Code   int    `json:"code"`
	Signal string `json:"signal,omitempty"`
	OOM    bool   `json:"oom_killed,omitempty"`
	// Stopped is set when the app did not end by itself: the sandbox was
	// being stopped from outside and took the app down with it, or
	// agentbox stopped it when the run was over (StoppedAtEnd). It names
	// why, e.g. "the guest received SIGTERM" (a guest that is not its
	// sandbox's init; as the init, which it is on agentbox's backends, the
	// guest ignores signals and is stopped with SIGKILL).
	Stopped string `json:"stopped,omitempty"`
}

// StoppedAtEnd is the Stopped of an app that was still running when the
// run ended and that agentbox's teardown stopped: not the app's exit.
const StoppedAtEnd = "stopped by agentbox at the end of the run"

// String says how the app ended, in the words every message uses: "exit
// code 3", "killed by signal SIGSEGV", "killed by the OOM killer (signal
// SIGKILL)"; a nil Exit is "exit status unknown".
//
// An exit someone else caused says so first: "stopped by agentbox at the
// end of the run (exit code 0)".
func (e *Exit) String() string {
	var how string
	switch {
	case e == nil:
		return "exit status unknown"
	case e.OOM && e.Signal != "":
		how = "killed by the OOM killer (signal " + e.Signal + ")"
	case e.OOM:
		how = "killed by the OOM killer"
	case e.Signal != "":
		how = "killed by signal " + e.Signal
	default:
		how = "exit code " + strconv.Itoa(e.Code)
	}
	if e.Stopped != "" {
		return e.Stopped + " (" + how + ")"
	}
	return how
}

// Crashed reports whether the app died of a signal or exited non-zero.
func (e *Exit) Crashed() bool { return e != nil && (e.Signal != "" || e.Code != 0) }

// Observation is everything the decision-maker may know before one decision.
type Observation struct {
	Step    int           // 1 for the first decision
	Elapsed time.Duration // since the app was launched
	Task    string
	Screen  *Frame
	// ScreenshotRef names the screenshot's file in the trace (relative to
	// it), for agents that record what they sent.
	ScreenshotRef string
	// View is what the agent asked to see with its last screenshot action
	// (a region, scaled down), with exact coordinate mapping; nil when it
	// asked for nothing special: Screen is the whole screen.
	View    *View
	Cursor  action.Point
	Windows []Window
	// Output holds the app's lines printed since the previous observation.
	Output []LogLine
	// Network holds the connections the app made or tried through the
	// sandbox's network (--allow-net, --forward) since the previous
	// observation: a denied one says so, and why.
	Network []NetEvent
	// Activity is what the trusted observer (--observe) saw the app do
	// since the previous observation: processes and files.
	Activity []ActivityEvent
	// Running is false once the app has exited; Exit then says how.
	Running bool
	Exit    *Exit
	// Last is the result of the previous action (nil before the first).
	Last *action.Result
	// Tree is the accessibility tree, read after the screenshot, when the
	// run or the agent asked for it (nil otherwise).
	Tree *Tree
	// Marks number the interactive elements of the tree on the screenshot
	// shown to the agent (Screen is then the marked copy; the trace keeps
	// the raw one). Nil unless the run asked for marks.
	Marks []Mark
	// Intervention says a person took control at the live page since the
	// previous observation and handed it back: what they did and what
	// changed on the screen. Nil when nobody did.
	Intervention *Intervention
	// Secrets names the secrets of the run's vault (--vault), which a
	// type_secret action types; never their values. Nil without a vault.
	Secrets []string
}
