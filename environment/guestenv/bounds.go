package guestenv

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/klauspost/compress/s2"

	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/internal/textcut"
	"github.com/codegirl-games/agentbox/observe"
	"github.com/codegirl-games/agentbox/wire"
)

// What the host accepts from the guest. Whoever writes the guest's stdout —
// the guest, or anything that got hold of it — the host bounds every frame
// before it allocates for it, and every kind of event before it records it.
//
// Two rules. What the real guest can never send (a frame larger than its
// kind allows, a screenshot larger than the screen, an unknown stream,
// event or window kind, a request) is a protocol error: the stream ends
// and the run ends as an environment error. What the real guest may send
// in any amount because the app decides it (output, window events, log
// lines, long titles, many windows) is capped: beyond the cap it is
// dropped and counted, as app output always was.
const (
	// maxEventHeader bounds the JSON header of an event (a window event
	// with a 4 KiB title is below 32 KiB even with every byte escaped).
	maxEventHeader = 256 << 10
	// maxOutputChunk bounds the payload of one output event; the guest
	// sends at most 32 KiB at a time.
	maxOutputChunk = 64 << 10
	// maxDropped bounds the dropped-bytes count of one output event (the
	// guest reports at least once a second).
	maxDropped = 1 << 50
	// MaxTitle bounds a window title as the host keeps it; the guest reads
	// at most 4096 bytes of a title.
	MaxTitle = 4096
	// MaxWindows bounds the windows of one desktop state.
	MaxWindows = 256
	// MaxText bounds any other string from the guest: error messages,
	// exit signals, log lines, the display name, the guest's version.
	MaxText = 4096
	// windowEventCost is what one window event costs the window budget
	// besides its title: about the size of its record in steps.jsonl.
	windowEventCost = 128
	// logBudget bounds the bytes of log events passed on.
	logBudget = 1 << 20
	// defaultLogCap is the output and window budget until Launch says
	// otherwise (trace.DefaultLogCap).
	defaultLogCap = 8 << 20
)

// Kinds of events dropped beyond their budget, as passed to
// environment.DropCounter.
const (
	DroppedWindow = "window"
	DroppedLog    = "log"
	DroppedExit   = "exit"
)

// budgets counts what the guest sent against its caps. Only the read loop
// touches the counters; logCap is set by Launch.
type budgets struct {
	logCap atomic.Int64
	output [2]int64 // stdout, stderr
	window int64
	log    int64
	exited bool
}

func (b *budgets) cap() int64 {
	if n := b.logCap.Load(); n > 0 {
		return n
	}
	return defaultLogCap
}

// check is the connection's wire.Limit: it looks at every frame's header
// before the payload is read.
func (c *Client) check(h *wire.Header, payload int) error {
	switch h.Type {
	case wire.Request:
		return errors.New("the guest sent a request; the host serves none")
	case wire.Event:
		return c.checkEvent(h, payload)
	}
	// A response to a pending call of h.Method (wire checked that).
	if h.Error != nil {
		h.Error.Message = clip(h.Error.Message, MaxText)
		if payload > 0 {
			return fmt.Errorf("an error response carries a %d-byte payload", payload)
		}
		return nil
	}
	if h.Method == wire.MethodReadFile {
		// A chunk of a collected file: at most what Collect asks for.
		if payload > chunk {
			return fmt.Errorf("a read_file response carries %d bytes, more than the %d asked for", payload, chunk)
		}
		return nil
	}
	if h.Method == wire.MethodFloor {
		// A frame's round trip: at most the screen's pixels, compressed.
		var sw, sh int
		if sc := c.screen.Load(); sc != nil {
			sw, sh = sc.Width, sc.Height
		}
		if payload > s2.MaxEncodedLen(4*sw*sh) {
			return fmt.Errorf("a floor response carries %d bytes, more than the %d×%d screen's pixels", payload, sw, sh)
		}
		return nil
	}
	if h.Method == wire.MethodLaunch && payload > 0 { // the first screenshot, asked with the launch
		var l wire.LaunchResponse
		if err := json.Unmarshal(h.Body, &l); err != nil {
			return fmt.Errorf("bad body: %w", err)
		}
		if l.Screenshot == nil {
			return fmt.Errorf("a launch response without a screenshot carries a %d-byte payload", payload)
		}
		return c.checkShot(l.Screenshot, payload)
	}
	if h.Method == wire.MethodStep {
		// An action's answer with the screenshot after it.
		r := new(wire.StepResponse)
		if err := wire.UnmarshalStep(h.Body, r); err != nil { // json.Unmarshal's result, without its reflection
			return fmt.Errorf("bad body: %w", err)
		}
		h.Value = r // the call's answer: decoded once
		if r.Shot == nil {
			if payload > 0 {
				return fmt.Errorf("a step's answer without a screenshot carries a %d-byte payload", payload)
			}
			return nil
		}
		return c.checkShotPayload(h, r.Shot, payload)
	}
	if h.Method != wire.MethodScreenshot {
		if payload > 0 {
			return fmt.Errorf("the response carries a %d-byte payload; only screenshots (a launch's too) and file chunks have one", payload)
		}
		return nil
	}
	r := new(wire.ScreenshotResponse)
	if err := json.Unmarshal(h.Body, r); err != nil {
		return fmt.Errorf("bad body: %w", err)
	}
	h.Value = r // the call's answer: decoded once
	return c.checkShotPayload(h, r, payload)
}

// checkShotPayload is checkShot, and a frame within its bounds is read
// into the client's reused payload buffer (payloadSlot): the caller gives
// it back once the frame is decoded.
func (c *Client) checkShotPayload(h *wire.Header, r *wire.ScreenshotResponse, payload int) error {
	if err := c.checkShot(r, payload); err != nil {
		return err
	}
	if payload > 0 {
		h.PayloadBuf = c.payloads.take()
	}
	return nil
}

// payloadSlot holds one buffer for screenshots' payloads: taken by the
// read loop for a frame's payload (the slot is then empty, and a frame
// read meanwhile gets a new allocation), given back by the caller once it
// decoded the frame and dropped the payload. A buffer is thus read into
// by one frame at a time and never while anything still reads it; one
// whose caller gave up (a cancelled call) is left to the collector.
type payloadSlot struct {
	mu  sync.Mutex
	buf []byte
}

// maxKeptPayload bounds the payload buffer kept between frames: a
// 3840×2160 desktop compresses well below it.
const maxKeptPayload = 16 << 20

func (s *payloadSlot) take() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.buf
	s.buf = nil
	return b
}

// put gives p back for the next frame's payload; the caller no longer
// reads it.
func (s *payloadSlot) put(p []byte) {
	if cap(p) == 0 || cap(p) > maxKeptPayload {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if cap(p) > cap(s.buf) {
		s.buf = p[:0]
	}
}

// checkShot bounds a screenshot by the configured screen before anything
// is allocated for its pixels.
func (c *Client) checkShot(r *wire.ScreenshotResponse, payload int) error {
	if r.Unchanged {
		if payload > 0 {
			return fmt.Errorf("an unchanged screenshot carries a %d-byte payload", payload)
		}
		return nil
	}
	if r.Encoding != wire.EncodingBGRXS2 {
		return fmt.Errorf("unknown pixel encoding %q", clip(r.Encoding, 64))
	}
	var sw, sh int
	if sc := c.screen.Load(); sc != nil {
		sw, sh = sc.Width, sc.Height
	}
	if r.Width <= 0 || r.Height <= 0 || r.Width > sw || r.Height > sh {
		return fmt.Errorf("a %d×%d screenshot does not fit the %d×%d screen", r.Width, r.Height, sw, sh)
	}
	if max := s2.MaxEncodedLen(4 * r.Width * r.Height); max < 0 || payload > max {
		return fmt.Errorf("a %d×%d screenshot with a %d-byte payload (at most %d)", r.Width, r.Height, payload, max)
	}
	return nil
}

func (c *Client) checkEvent(h *wire.Header, payload int) error {
	if len(h.Body) > maxEventHeader {
		return fmt.Errorf("the event's body is %d bytes (at most %d)", len(h.Body), maxEventHeader)
	}
	if h.Method != wire.EventOutput && h.Method != wire.NetData && payload > 0 {
		return fmt.Errorf("the event carries a %d-byte payload; only output has one (and net.data)", payload)
	}
	switch h.Method {
	case wire.NetOpen, wire.NetData, wire.NetAck, wire.NetEOF, wire.NetReset:
		if c.tunnel.Load() == nil {
			return fmt.Errorf("a %s event without the network over the stream", h.Method)
		}
		if payload > wire.NetChunk {
			return fmt.Errorf("%d bytes of a connection in one event (at most %d)", payload, wire.NetChunk)
		}
	case wire.EventHello:
		if c.handshaken.Load() {
			return errors.New("a second hello")
		}
	case wire.EventOutput:
		if payload > maxOutputChunk {
			return fmt.Errorf("%d bytes of output in one event (at most %d)", payload, maxOutputChunk)
		}
		var e wire.OutputEvent
		if err := json.Unmarshal(h.Body, &e); err != nil {
			return fmt.Errorf("bad body: %w", err)
		}
		if streamIndex(e.Stream) < 0 {
			return fmt.Errorf("unknown output stream %q", clip(string(e.Stream), 64))
		}
		if e.Dropped < 0 || e.Dropped > maxDropped {
			return fmt.Errorf("%d dropped bytes", e.Dropped)
		}
	case wire.EventWindow:
		var e wire.WindowEvent
		if err := json.Unmarshal(h.Body, &e); err != nil {
			return fmt.Errorf("bad body: %w", err)
		}
		switch e.Kind {
		case "mapped", "title", "unmapped":
		default:
			return fmt.Errorf("unknown window event %q", clip(e.Kind, 64))
		}
	case wire.EventExit, wire.EventLog, wire.EventReset, wire.EventScreen:
	default:
		return fmt.Errorf("unknown event %q", clip(h.Method, 64))
	}
	return nil
}

func streamIndex(s observe.Stream) int {
	switch s {
	case observe.Stdout:
		return 0
	case observe.Stderr:
		return 1
	}
	return -1
}

// handle passes an event that passed check on, within its budget.
func (c *Client) handle(m *wire.Message) {
	if m.Type != wire.Event {
		return
	}
	if wire.IsNet(m.Method) {
		if t := c.tunnel.Load(); t != nil {
			t.Handle(m.Method, m.Body, m.Payload) // bounded by each connection's window
		}
		return
	}
	b := &c.budgets
	switch m.Method {
	case wire.EventOutput:
		var e wire.OutputEvent
		if json.Unmarshal(m.Body, &e) != nil {
			return
		}
		i := streamIndex(e.Stream)
		data, dropped := m.Payload, e.Dropped
		if room := b.cap() - b.output[i]; int64(len(data)) > room {
			room = max(room, 0)
			dropped += int64(len(data)) - room
			data = data[:room]
		}
		b.output[i] += int64(len(data))
		if c.events != nil && (len(data) > 0 || dropped > 0) {
			c.events.Output(e.Stream, data, dropped)
		}
	case wire.EventScreen:
		c.screenChanged()
	case wire.EventReset:
		// The app is gone and the sandbox reset (a relaunch): the next
		// app's output, windows and exit have their budgets afresh.
		b.output = [2]int64{}
		b.window = 0
		b.exited = false
	case wire.EventExit:
		var e observe.Exit
		if json.Unmarshal(m.Body, &e) != nil {
			return
		}
		if b.exited {
			c.dropped(DroppedExit)
			return
		}
		b.exited = true
		if c.events != nil {
			c.events.Exited(clipExit(e))
		}
	case wire.EventWindow:
		var e wire.WindowEvent
		if json.Unmarshal(m.Body, &e) != nil {
			return
		}
		w := clipWindow(e.Window)
		cost := int64(len(w.Title)) + windowEventCost
		if b.window+cost > b.cap() {
			c.dropped(DroppedWindow)
			return
		}
		b.window += cost
		if c.events != nil {
			c.events.Window(e.Kind, w)
		}
	case wire.EventLog:
		var e wire.LogEvent
		if json.Unmarshal(m.Body, &e) != nil {
			return
		}
		line := clip(e.Level, 16) + ": " + clip(e.Msg, MaxText)
		if b.log+int64(len(line)) > logBudget {
			c.dropped(DroppedLog)
			return
		}
		b.log += int64(len(line))
		if c.logf != nil {
			c.logf(line)
		}
	}
}

func (c *Client) dropped(kind string) {
	if d, ok := c.events.(environment.DropCounter); ok {
		d.Dropped(kind, 1)
	}
}

// clip cuts s to at most n bytes in all (at a character boundary),
// marking the cut; a cut string loses its invalid UTF-8.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(textcut.Fit(s, n, "…[cut]"), "")
}

func clipWindow(w observe.Window) observe.Window {
	w.Title = clip(w.Title, MaxTitle)
	return w
}

// clipWindows keeps the first MaxWindows windows, titles clipped.
func clipWindows(ws []observe.Window) []observe.Window {
	if len(ws) > MaxWindows {
		ws = ws[:MaxWindows]
	}
	for i := range ws {
		ws[i] = clipWindow(ws[i])
	}
	return ws
}

func clipExit(e observe.Exit) observe.Exit {
	e.Signal = clip(e.Signal, 64)
	e.Stopped = clip(e.Stopped, MaxText)
	return e
}

func clipExitPtr(e *observe.Exit) *observe.Exit {
	if e == nil {
		return nil
	}
	c := clipExit(*e)
	return &c
}

// Bounds of a tree as the host keeps it (the guest's reader keeps to them
// already; a tree from anything else is brought to them).
const (
	maxTreeStates = 64
	maxStateName  = 64
	maxTreeCuts   = 32
)

// clipTree brings a tree from the guest within bounds: at most maxNodes
// elements, each naming an earlier element (or none) as its parent, with
// depths that follow from the parents, names and texts clipped, bounds
// well formed; cut lines and the note clipped. Elements beyond a bound are
// dropped and the drop is said in Cut.
func clipTree(t *observe.Tree, maxNodes int) *observe.Tree {
	if t == nil {
		return &observe.Tree{Elements: []observe.Element{}}
	}
	if len(t.Elements) > maxNodes {
		t.Cut = append(t.Cut, fmt.Sprintf("host: %d elements beyond the limit of %d were dropped", len(t.Elements)-maxNodes, maxNodes))
		t.Elements = t.Elements[:maxNodes]
	}
	if t.Elements == nil {
		t.Elements = []observe.Element{}
	}
	for i := range t.Elements {
		e := &t.Elements[i]
		if e.Parent < -1 || e.Parent >= i {
			e.Parent = -1
		}
		if e.Parent < 0 {
			e.Depth = 0
		} else {
			e.Depth = t.Elements[e.Parent].Depth + 1
		}
		e.ID = clip(e.ID, 256)
		e.Role = clip(e.Role, 128)
		e.Name = clip(e.Name, observe.MaxElementText)
		e.Text = clip(e.Text, observe.MaxElementText)
		if len(e.States) > maxTreeStates {
			e.States = e.States[:maxTreeStates]
		}
		for j, s := range e.States {
			e.States[j] = clip(s, maxStateName)
		}
		if e.Bounds != nil {
			b := *e.Bounds
			const lim = 1 << 20
			if b[2] < b[0] || b[3] < b[1] || b[0] < -lim || b[1] < -lim || b[2] > lim || b[3] > lim {
				e.Bounds = nil
			}
		}
		if e.Value != nil && (math.IsNaN(*e.Value) || math.IsInf(*e.Value, 0)) {
			e.Value = nil
		}
	}
	if len(t.Cut) > maxTreeCuts {
		t.Cut = t.Cut[:maxTreeCuts]
	}
	for i, c := range t.Cut {
		t.Cut[i] = clip(c, MaxText)
	}
	t.Note = clip(t.Note, MaxText)
	t.Apps = max(0, min(t.Apps, len(t.Elements)))
	t.Hidden = max(0, t.Hidden)
	return t
}

// Bounds of the observer's checkpoints: the events asked for (the guest
// adds at most a few overflow events), and each event's text.
const (
	maxActivity     = 1000
	maxActivityText = 4096
	maxActivityArgs = 64
)

// clipActivity bounds a checkpoint's events: their number (the rest
// counted in an overflow event), arguments, paths and reasons.
func clipActivity(evs []observe.ActivityEvent) []observe.ActivityEvent {
	const slack = 8 // the guest's own overflow events
	if n := len(evs) - (maxActivity + slack); n > 0 {
		evs = append(evs[:maxActivity+slack:maxActivity+slack], observe.ActivityEvent{Time: time.Now(), Kind: observe.ActOverflow, N: int64(n),
			Reason: "the guest sent more events than the host accepts"})
	}
	for i := range evs {
		e := &evs[i]
		if !slices.Contains(observe.ActivityKinds, e.Kind) {
			e.Kind, e.Reason = observe.ActOverflow, "an event of unknown kind "+clip(e.Kind, 32)
		}
		if len(e.Argv) > maxActivityArgs {
			e.Argv, e.Cut = e.Argv[:maxActivityArgs], true
		}
		total := 0
		for j, a := range e.Argv {
			e.Argv[j] = clip(a, maxActivityText)
			total += len(e.Argv[j])
			if total > maxActivityText {
				e.Argv, e.Cut = e.Argv[:j+1], true
				break
			}
		}
		e.Path, e.From, e.Reason, e.NotHashed = clip(e.Path, maxActivityText), clip(e.From, maxActivityText), clip(e.Reason, 256), clip(e.NotHashed, 256)
		e.SHA256 = clip(e.SHA256, 64)
		e.Exit = clipExitPtr(e.Exit)
		var ops []string
		for _, op := range e.Ops {
			if slices.Contains(observe.FileOps, op) {
				ops = append(ops, op)
			}
		}
		e.Ops = ops
	}
	return evs
}
