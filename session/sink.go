package session

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/internal/lockrank"
	"github.com/codegirl-games/agentbox/internal/textcut"
	"github.com/codegirl-games/agentbox/observe"
	"github.com/codegirl-games/agentbox/trace"
)

// Bounds on what the agent is shown of the app's output per observation.
const (
	maxLineBytes    = 4096 // longer lines are cut with a marker
	maxPendingLines = 200  // older pending lines are dropped, counted
)

// sink receives the environment's events: it writes output to the trace
// logs, records window and exit events, and splits output into lines for
// the next observation.
type sink struct {
	tw    *trace.Writer
	start time.Time
	// listen, when set, is told every event as it happens (Config.Listener).
	listen func(Event)
	// secrets replaces the vault's values in what the app produces
	// (secrets.go); nil without a vault.
	secrets *redaction

	mu       lockrank.Mutex[sinkLock]
	partial  map[observe.Stream][]byte
	pending  []observe.LogLine
	skipped  int
	appExit  *observe.Exit
	exitedAt time.Time
	// readyText is the manifest's ready_output until a line (or unfinished
	// line) containing it arrives; then ready is closed and readyText nil.
	readyText []byte
	ready     chan struct{}
	exited    chan struct{} // closed when the app exits
	// tearingDown is set when the run is over and the sandbox is being
	// torn down: an exit from then on is agentbox's doing.
	tearingDown bool

	netMu      lockrank.Mutex[netLock]
	netPending []observe.NetEvent // for the next observation (network.go)
	netSkipped int
}

func newSink(tw *trace.Writer, start time.Time, readyText string) *sink {
	s := &sink{tw: tw, start: start, partial: map[observe.Stream][]byte{}, ready: make(chan struct{}), exited: make(chan struct{})}
	if readyText == "" {
		close(s.ready)
	} else {
		s.readyText = []byte(readyText)
	}
	return s
}

// errNotReady is returned by waitReady when the app exits before printing
// the ready text.
type errNotReady struct{ exit *observe.Exit }

func (e *errNotReady) Error() string { return "the app exited (" + e.exit.String() + ")" }

// waitReady returns once the app has printed the ready text, with an
// *errNotReady if it exits first, or with the context's error.
func (s *sink) waitReady(ctx context.Context) error {
	select {
	case <-s.ready:
		return nil
	case <-s.exited:
		select {
		case <-s.ready: // its last words were the ready line
			return nil
		default:
			return &errNotReady{s.exit()}
		}
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Output implements environment.Events.
func (s *sink) Output(stream observe.Stream, data []byte, dropped int64) {
	data = s.secrets.output(stream, data)
	if len(data) == 0 && dropped == 0 {
		return // held back: it may be the beginning of a secret
	}
	s.output(stream, data, dropped)
}

// output takes a chunk of output the vault's values are replaced in.
func (s *sink) output(stream observe.Stream, data []byte, dropped int64) {
	s.tw.Output(stream, data, dropped)
	s.tell(Event{Kind: EventOutput, Stream: stream, Text: string(data), Dropped: dropped})
	s.mu.Lock()
	defer s.mu.Unlock()
	buf := append(s.partial[stream], data...)
	for {
		i := bytes.IndexByte(buf, '\n')
		if i < 0 {
			break
		}
		s.addLine(stream, buf[:i])
		buf = buf[i+1:]
	}
	if len(buf) > maxLineBytes {
		s.addLine(stream, buf)
		buf = nil
	}
	// A prompt-like ready line may come without its newline.
	s.matchReady(buf)
	s.partial[stream] = append([]byte(nil), buf...)
}

// matchReady closes ready when b holds the ready text; s.mu is held.
func (s *sink) matchReady(b []byte) {
	if s.readyText != nil && bytes.Contains(b, s.readyText) {
		s.readyText = nil
		close(s.ready)
	}
}

func (s *sink) addLine(stream observe.Stream, b []byte) {
	s.matchReady(b)
	text := string(bytes.TrimRight(b, "\r"))
	text = textcut.Bytes(text, maxLineBytes, " …[line truncated]")
	s.pending = append(s.pending, observe.LogLine{Stream: stream, Text: text, T: time.Since(s.start)})
	if len(s.pending) > maxPendingLines {
		n := len(s.pending) - maxPendingLines
		s.skipped += n
		s.pending = append(s.pending[:0], s.pending[n:]...)
	}
}

// takeLines returns the lines since the previous call, flushing partial
// lines, with a marker if some were dropped.
func (s *sink) takeLines() []observe.LogLine {
	s.mu.Lock()
	defer s.mu.Unlock()
	for stream, buf := range s.partial {
		if len(buf) > 0 {
			s.addLine(stream, buf)
			s.partial[stream] = nil
		}
	}
	lines := s.pending
	if s.skipped > 0 {
		marker := observe.LogLine{Stream: observe.Stderr, Text: "[agentbox: " + strconv.Itoa(s.skipped) + " earlier lines not shown]", T: time.Since(s.start)}
		lines = append([]observe.LogLine{marker}, lines...)
		s.skipped = 0
	}
	s.pending = nil
	return lines
}

// teardown marks the start of the sandbox's teardown.
func (s *sink) teardown() {
	s.mu.Lock()
	s.tearingDown = true
	s.mu.Unlock()
}

// Exited implements environment.Events.
func (s *sink) Exited(e observe.Exit) {
	for stream, held := range s.secrets.flush() {
		s.output(stream, held, 0)
	}
	s.mu.Lock()
	if s.tearingDown && e.Stopped == "" {
		e.Stopped = observe.StoppedAtEnd
	}
	if s.appExit == nil {
		ex := e
		s.appExit = &ex
		s.exitedAt = time.Now()
		close(s.exited)
	}
	s.mu.Unlock()
	data := map[string]any{"code": e.Code, "signal": e.Signal, "oom_killed": e.OOM}
	if e.Stopped != "" {
		data["stopped"] = e.Stopped
	}
	s.tw.Record(trace.Record{Type: trace.TypeEvent, Event: "app_exited", Data: data})
	s.tell(Event{Kind: EventExit, Exit: &e})
}

// tell passes an event to the listener, if any.
func (s *sink) tell(e Event) {
	if s.listen != nil {
		e.T = time.Since(s.start)
		s.listen(e)
	}
}

// Window implements environment.Events.
func (s *sink) Window(kind string, w observe.Window) {
	w.Title = s.secrets.str(w.Title)
	s.tw.Record(trace.Record{Type: trace.TypeEvent, Event: "window_" + kind, Data: map[string]any{
		"id": w.ID, "title": w.Title, "x": w.X, "y": w.Y, "width": w.Width, "height": w.Height,
	}})
	s.tell(Event{Kind: EventWindow, Change: kind, Window: &w})
}

var _ environment.DropCounter = (*sink)(nil)

// Dropped implements environment.DropCounter.
func (s *sink) Dropped(kind string, n int64) {
	s.tw.EventsDropped(kind, n)
	s.tell(Event{Kind: EventDropped, Change: kind, Dropped: n})
}

func (s *sink) exit() *observe.Exit {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.appExit
}

// tail renders the app's last n lines of output (without consuming them)
// for an error message: "; the app printed: …".
func (s *sink) tail(n int) string {
	s.mu.Lock()
	lines := append([]observe.LogLine(nil), s.pending...)
	for stream, buf := range s.partial {
		if len(buf) > 0 {
			lines = append(lines, observe.LogLine{Stream: stream, Text: string(buf)})
		}
	}
	s.mu.Unlock()
	if len(lines) == 0 {
		return "; the app printed nothing"
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	var b strings.Builder
	b.WriteString("; the app's last output:")
	for _, l := range lines {
		fmt.Fprintf(&b, "\n  %s: %s", l.Stream, l.Text)
	}
	return b.String()
}
