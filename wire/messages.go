package wire

import (
	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/observe"
)

// Request methods (host → guest).
const (
	MethodHello      = "hello"      // HelloRequest → Hello
	MethodStart      = "start"      // StartRequest → StartResponse
	MethodWriteFile  = "write_file" // WriteFileRequest + payload → nothing
	MethodLaunch     = "launch"     // LaunchRequest → LaunchResponse
	MethodScreenshot = "screenshot" // ScreenshotRequest → ScreenshotResponse + payload
	MethodAct        = "act"        // ActRequest → action.Result
	MethodStop       = "stop"       // StopRequest → StopResponse
	MethodPing       = "ping"       // nothing → nothing, answered at once (not queued behind other requests)
	MethodA11yTree   = "a11y_tree"  // A11yTreeRequest → observe.Tree (a sandbox started with A11y)
	MethodCollect    = "collect"    // CollectRequest → CollectResponse: the files to collect below the home
	MethodReadFile   = "read_file"  // ReadFileRequest → ReadFileResponse + payload (a chunk of a file below the home)
	MethodClock      = "clock"      // ClockRequest → ClockResponse (an app launched with a virtual clock)
	MethodReset      = "reset"      // ResetRequest → ResetResponse: the sandbox back to its state before the first launch (a relaunch)
	MethodActivity   = "activity"   // ActivityRequest → ActivityResponse: what the trusted observer saw since the previous checkpoint (a sandbox started with Observe)
	MethodFloor      = "floor"      // FloorRequest → FloorResponse (+ payload: the screen's pixels, with Frame): a step's primitives timed alone (agentbox bench)
	MethodWatch      = "watch"      // WatchRequest → WatchResponse: screen events on or off (EventScreen)
	MethodStep       = "step"       // StepRequest → StepResponse + payload (the screenshot's): an act, the screen's settle and a screenshot in one round trip (protocol 7)
	MethodHoldApp    = "hold_app"   // HoldAppRequest → HoldAppResponse: the app's processes stopped or continued, the guest answering meanwhile (protocol 9)
	// MethodRelaunchFloor: RelaunchFloorRequest → RelaunchFloorResponse: the app killed and started again as a minimal program would, timed (agentbox bench; protocol 10)
	MethodRelaunchFloor = "relaunch_floor"
)

// Events (guest → host).
const (
	EventHello  = "hello"  // Hello
	EventOutput = "output" // OutputEvent + payload (the bytes)
	EventExit   = "exit"   // observe.Exit
	EventWindow = "window" // WindowEvent
	EventLog    = "log"    // LogEvent: the guest's own diagnostics
	EventReset  = "reset"  // nothing: the app is gone and the desktop reset; what follows is the next app's (sent before reset's answer)
	EventScreen = "screen" // nothing: the screen may have changed since the last screenshot (after a watch request; see WatchRequest)
)

// StartRequest asks the guest to bring up the desktop.
type StartRequest struct {
	Screen observe.Screen `json:"screen"`
	// NoWM skips the window manager.
	NoWM bool `json:"no_wm,omitempty"`
	// NoGLX starts the X server without GLX (an app that draws without
	// OpenGL).
	NoGLX bool `json:"no_glx,omitempty"`
	// Home is the writable home directory (on tmpfs) for the app.
	Home string `json:"home"`
	// AppDir is where staged files go.
	AppDir string `json:"app_dir"`
	// TimeoutMS bounds bringing up the display and window manager.
	TimeoutMS int `json:"timeout_ms"`
	// A11y starts the accessibility bus (a private D-Bus session bus and
	// AT-SPI's) and gives the app the environment to use it.
	A11y bool `json:"a11y,omitempty"`
	// Net, when set, is the sandbox's network (--allow-net, --forward).
	Net *NetSetup `json:"net,omitempty"`
	// Observe starts the trusted observer with the app: the guest records
	// the app's processes and the files it changes below the home and
	// /tmp, read at each checkpoint by the activity request.
	Observe bool `json:"observe,omitempty"`
}

// ActivityRequest is a checkpoint of the trusted observer: the events
// since the previous one, written files hashed now.
type ActivityRequest struct {
	// MaxEvents bounds the events answered (0: the guest's default); the
	// rest are counted in an overflow event.
	MaxEvents int `json:"max_events,omitempty"`
}

// ActivityResponse is what the observer saw since the previous
// checkpoint, in the order seen (file events at the end, one per path).
type ActivityResponse struct {
	Events []observe.ActivityEvent `json:"events"`
}

// NetSetup gives the sandbox its network: the guest listens on the
// sandbox's loopback at each port and relays every connection, byte for
// byte, to the unix socket of the same entry in Dir, which the backend
// mounted from the host, where agentbox's proxy and forwards answer. With
// ProxyPort, the app's HTTP_PROXY and HTTPS_PROXY name 127.0.0.1 there.
// With Channel (and no Dir), the connections go over this stream instead
// (a Tunnel), to the host's socket of that name.
type NetSetup struct {
	Dir       string      `json:"dir,omitempty"`
	Channel   bool        `json:"channel,omitempty"`
	Listen    []NetListen `json:"listen"`
	ProxyPort int         `json:"proxy_port,omitempty"`
}

// NetListen is one port of the sandbox's loopback and the socket behind it.
type NetListen struct {
	Port   int    `json:"port"`
	Socket string `json:"socket"` // a file name in NetSetup.Dir
}

// StartResponse reports the desktop that came up.
type StartResponse struct {
	Display string `json:"display"`
	WM      bool   `json:"wm"`  // a window manager is running
	SHM     bool   `json:"shm"` // MIT-SHM capture is in use
	// Damage: the server's DAMAGE reports spare the capture of an
	// unchanged screen (false: every screenshot captures it whole).
	Damage bool  `json:"damage,omitempty"`
	XvfbMS int64 `json:"xvfb_ms"` // display ready after
	WMMS   int64 `json:"wm_ms"`
	A11yMS int64 `json:"a11y_ms,omitempty"` // the accessibility bus ready after
}

// A11yTreeRequest asks for the accessibility tree, within limits (zero
// fields take observe.DefaultTreeLimits).
type A11yTreeRequest struct {
	Limits observe.TreeLimits `json:"limits"`
}

// WriteFileRequest stores one chunk of a staged file under the app
// directory; the payload holds the bytes. Path is slash-separated and local
// (validated again by the guest).
type WriteFileRequest struct {
	Path   string `json:"path"`
	Mode   uint32 `json:"mode"`
	Append bool   `json:"append,omitempty"`
	Dir    bool   `json:"dir,omitempty"`
	Link   string `json:"link,omitempty"` // a symlink to this relative target
	// Home writes below the app user's home instead of the app directory
	// (a task's inputs).
	Home bool `json:"home,omitempty"`
}

// CollectRequest asks which files below the home the patterns name
// (slash-separated, relative to the home; *, ?, […], **), within the
// limits. Nothing is read yet.
type CollectRequest struct {
	Patterns []string `json:"patterns"`
	MaxFiles int      `json:"max_files"`
	MaxBytes int64    `json:"max_bytes"`
}

// CollectResponse lists the files to collect (path order) and what was
// refused and why.
type CollectResponse struct {
	Files   []CollectFile    `json:"files"`
	Refused []CollectRefused `json:"refused,omitempty"`
}

// CollectFile is one regular file below the home.
type CollectFile struct {
	Path string `json:"path"`
	Size int64  `json:"size"`
}

// CollectRefused is a match left out.
type CollectRefused struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// ReadFileRequest asks for up to Len bytes of a file below the home from
// Offset (never through a link).
type ReadFileRequest struct {
	Path   string `json:"path"`
	Offset int64  `json:"offset"`
	Len    int    `json:"len"`
}

// ReadFileResponse accompanies the bytes; EOF says the file ends there.
type ReadFileResponse struct {
	EOF bool `json:"eof,omitempty"`
}

// LaunchRequest starts the app.
type LaunchRequest struct {
	// Command is a path relative to the app directory (a staged file) or,
	// with InImage, a program in the image's PATH.
	Command string   `json:"command"`
	InImage bool     `json:"in_image,omitempty"`
	Args    []string `json:"args,omitempty"`
	Env     []string `json:"env,omitempty"` // KEY=VALUE, added to the base environment
	// WindowTitle, if set, makes Launch wait until a window whose title
	// matches it (a glob, or /regex/) is mapped.
	WindowTitle string `json:"window_title,omitempty"`
	// WaitWindow waits for any window when WindowTitle is empty.
	WaitWindow bool `json:"wait_window,omitempty"`
	ReadyMS    int  `json:"ready_ms"` // deadline for the window
	// LogCap bounds the bytes of each output stream forwarded to the host;
	// beyond it the guest drains and counts.
	LogCap int64 `json:"log_cap"`
	// ClockNS, when set, starts the app on a virtual clock stopped at this
	// instant (Unix nanoseconds): libfaketime is preloaded into the app's
	// processes, and only MethodClock moves the time they read. The
	// guest refuses it for a program that cannot be faked (a static ELF,
	// a Go program).
	ClockNS int64 `json:"clock_ns,omitempty"`
	// Screenshot, when set, asks for the first screenshot with the
	// answer, taken as MethodScreenshot would once the window is up:
	// LaunchResponse.Screenshot, the frame in the payload. It saves the
	// round trip of a screenshot asked right after the launch.
	Screenshot *ScreenshotRequest `json:"screenshot,omitempty"`
	// ReadyOutput, with Screenshot, makes the screenshot wait until the
	// app has printed this text (the manifest's ready_output), within
	// ReadyMS: an app that says it is ready once it has drawn is shown
	// drawn. Not printed in time, the answer has no screenshot.
	ReadyOutput string `json:"ready_output,omitempty"`
}

// LaunchResponse reports the running app.
type LaunchResponse struct {
	PID     int             `json:"pid"`
	Window  *observe.Window `json:"window,omitempty"`
	ReadyUS int64           `json:"ready_us"`
	// ClockNS echoes LaunchRequest.ClockNS: the app runs on the virtual
	// clock (a host that asked for one and finds it zero refuses the run).
	ClockNS int64 `json:"clock_ns,omitempty"`
	// Screenshot answers LaunchRequest.Screenshot (nil when not asked).
	Screenshot *ScreenshotResponse `json:"screenshot,omitempty"`
}

// ClockRequest sets the app's virtual clock to an instant (Unix
// nanoseconds), never earlier than it is. The host moves it; the app's
// time stands still in between.
type ClockRequest struct {
	NowNS int64 `json:"now_ns"`
}

// ClockResponse reports the virtual clock after the request.
type ClockResponse struct {
	NowNS int64 `json:"now_ns"`
}

// ScreenshotRequest asks for the current screen.
type ScreenshotRequest struct {
	// IfNot names the hash the host already holds: if the screen is
	// unchanged, the guest answers Unchanged with no payload.
	IfNot uint64 `json:"if_not,omitempty"`
	// WithState asks for the cursor, windows and app state as well.
	WithState bool `json:"with_state,omitempty"`
}

// Pixel encodings of a screenshot payload.
const (
	EncodingBGRXS2 = "bgrx+s2" // 32-bit BGRX rows, s2-compressed
)

// ScreenshotResponse describes the payload.
type ScreenshotResponse struct {
	Width     int    `json:"w"`
	Height    int    `json:"h"`
	Hash      uint64 `json:"hash"`
	Unchanged bool   `json:"unchanged,omitempty"`
	Encoding  string `json:"enc,omitempty"`
	State     *State `json:"state,omitempty"`
}

// ActRequest asks the guest to perform one validated action.
type ActRequest struct {
	Action action.Action `json:"action"`
}

// StepRequest is an act request and the screenshot after it in one round
// trip: the guest performs Action exactly as an act request (the same
// validation, input and confirmation), then Settle if set (a wait until
// stable, performed as an act request would), then answers Screenshot as
// a screenshot request. The host asks for it when the step's observation
// follows its action at once (protocol 7).
type StepRequest struct {
	Action     action.Action     `json:"action"`
	Settle     *action.Action    `json:"settle,omitempty"`
	Screenshot ScreenshotRequest `json:"screenshot"`
}

// StepResponse answers a StepRequest. An action the guest refused or
// could not perform fails the whole request with the act request's
// error, and nothing after it was done. Shot is absent when the settle
// or the screenshot failed after the action was performed (Failed says
// why): the host looks again with requests of their own. The payload is
// the screenshot's.
type StepResponse struct {
	Result  action.Result       `json:"result"`
	Settled *action.Result      `json:"settled,omitempty"`
	Shot    *ScreenshotResponse `json:"shot,omitempty"`
	Failed  string              `json:"failed,omitempty"`
	// ObserveUS is what the settle and the screenshot took in the guest,
	// after the action.
	ObserveUS int64 `json:"observe_us,omitempty"`
}

// State is the desktop's state.
type State struct {
	Cursor  action.Point     `json:"cursor"`
	Windows []observe.Window `json:"windows"`
	Running bool             `json:"running"`
	Exit    *observe.Exit    `json:"exit,omitempty"`
}

// StopRequest ends the app and the desktop.
type StopRequest struct {
	GraceMS int `json:"grace_ms"` // SIGTERM → SIGKILL
}

// StopResponse reports what the stop found.
type StopResponse struct {
	Exit *observe.Exit `json:"exit,omitempty"`
}

// ResetRequest asks the guest to reset the sandbox in place for the next
// launch (a relaunch): every process but the guest's own desktop (the X
// server, the window manager, the accessibility bus) killed, the X
// server's state reset (other clients killed, root-window properties and
// selections cleared, keys and buttons released, the pointer home), and
// the writable directories restored to what they held after start.
type ResetRequest struct{}

// ResetResponse reports what the reset found and did.
type ResetResponse struct {
	Exit    *observe.Exit `json:"exit,omitempty"` // the app's, if it was still running
	Killed  int           `json:"killed"`         // processes killed
	Clients int           `json:"clients"`        // X clients killed
	Props   int           `json:"props"`          // root-window properties deleted
	Removed int           `json:"removed"`        // files and directories removed or restored
	// AppKept says the app directory was restaged from what the host
	// sent last (the guest's own copy, never what the app left there):
	// the host need not send the same app again.
	AppKept bool `json:"app_kept,omitempty"`
}

// RelaunchFloorRequest asks the guest to time the least a relaunch can
// cost in this sandbox, as a minimal program in it would do one: every
// process of the app killed (SIGKILL) and waited for until its windows
// are gone, the app's command started again as the last launch started
// it (the same program, arguments, directory and environment, its output
// dropped), waited for until the window manager lists its window, and one
// capture of the screen. Nothing agentbox adds to a relaunch is in it:
// no X server reset, no restore of the writable directories, no restage,
// no round trip to the host, no trace, no client. The sandbox must have
// launched an app before (the command to start again), and it is a
// sandboxed guest's only (the kill is reset's). The app started is not
// the session's app: its exit and output are nobody's; a reset ends it.
type RelaunchFloorRequest struct{}

// RelaunchFloorResponse holds the floor's parts, in microseconds.
type RelaunchFloorResponse struct {
	// KillUS: from SIGKILL to the app's processes ended and its windows
	// gone from the window manager's list.
	KillUS int64 `json:"kill_us"`
	// StartUS: from the start of the app's command to its window listed.
	StartUS int64 `json:"start_us"`
	// CaptureUS: one capture of the whole screen (MIT-SHM where in use).
	CaptureUS int64 `json:"capture_us"`
	// Killed is how many processes were killed.
	Killed int `json:"killed"`
}

// HoldAppRequest stops the running app's processes (SIGSTOP: its process
// group and every descendant of it) with Hold, or continues them
// (SIGCONT) without: a warm pool's app launched ahead is held while its
// sandbox waits for an episode, so that it takes no CPU from the
// episodes running, while the guest itself keeps answering (its pings,
// the hand-over). A hold of an app that is not running, or a second
// hold, does nothing but report.
type HoldAppRequest struct {
	Hold bool `json:"hold"`
}

// HoldAppResponse reports the app's processes as the request left them.
type HoldAppResponse struct {
	// Processes is how many processes were signalled (0: no app runs).
	Processes int `json:"processes"`
	// CPUMS is the CPU time (user and system) the app's processes have
	// used so far, in milliseconds: unchanged while held.
	CPUMS float64 `json:"cpu_ms"`
}

// FloorRequest asks the guest to time the primitives of a step alone, one
// at a time, Samples times each (at most MaxFloorSamples): one XTEST
// motion with a sync, one capture of the whole screen (MIT-SHM where it is
// in use), the check for damage of an unchanged screen (where DAMAGE is in
// use), the hash of a frame, its compression as a screenshot sends it
// (EncodingBGRXS2) and a PNG encode of it. With Frame, it times nothing
// and answers at once with the last frame it captured, compressed as a
// screenshot's payload: the host times the round trip of a frame's bytes
// over the channel.
//
// From is the index of the first sample: sample i moves the pointer to
// the i-th of a fixed sequence of points, so that one-sample requests
// with From 0, 1, 2, … move it as one request of many would (agentbox
// bench takes the floor one sample at a time, in turn with the step's).
// PNG, when set, is the number of PNG encodes to time (0: none); absent,
// min(Samples, 50) as before. With Unchanged, a sample is only what a
// step of an unchanged screen makes: the motion and the damage check
// where DAMAGE is in use, the motion, a capture and a hash where it is
// not (no compression).
type FloorRequest struct {
	Samples   int  `json:"samples"`
	Frame     bool `json:"frame,omitempty"`
	From      int  `json:"from,omitempty"`
	PNG       *int `json:"png,omitempty"`
	Unchanged bool `json:"unchanged,omitempty"`
}

// MaxFloorSamples bounds FloorRequest.Samples.
const MaxFloorSamples = 10_000

// FloorResponse holds the durations in microseconds, one per sample.
type FloorResponse struct {
	Width   int     `json:"w"`
	Height  int     `json:"h"`
	SHM     bool    `json:"shm"` // the captures went through MIT-SHM
	Motion  []int64 `json:"motion_us,omitempty"`
	Capture []int64 `json:"capture_us,omitempty"`
	// Damage is the check for damage of an unchanged screen (where DAMAGE
	// is in use): what a step costs in place of a capture and a hash when
	// nothing changed (protocol 6).
	Damage []int64 `json:"damage_us,omitempty"`
	Hash   []int64 `json:"hash_us,omitempty"`
	Encode []int64 `json:"encode_us,omitempty"`
	PNG    []int64 `json:"png_us,omitempty"`
}

// WatchRequest turns the guest's screen events on or off. While on, the
// guest sends EventScreen when the screen may have changed since the last
// screenshot it answered: when the server's DAMAGE reports a change, and
// after every action it performs (the pointer moves without damage). At
// most one event is outstanding: after one, the next waits until a
// screenshot request has been answered. A watcher looks (a screenshot) on
// each event, and also now and then, since an app may move the pointer
// itself (XWarpPointer), which neither damages nor is an action.
type WatchRequest struct {
	On bool `json:"on"`
}

// WatchResponse says whether screen events will be sent: not without
// DAMAGE, where the watcher has to poll.
type WatchResponse struct {
	Damage bool `json:"damage"`
}

// OutputEvent accompanies app output bytes.
type OutputEvent struct {
	Stream observe.Stream `json:"stream"`
	// Dropped, when set, says the stream hit its cap and how many bytes
	// were discarded since the previous event.
	Dropped int64 `json:"dropped,omitempty"`
}

// WindowEvent reports a window appearing, changing title or going away.
type WindowEvent struct {
	Kind   string         `json:"kind"` // "mapped", "title", "unmapped"
	Window observe.Window `json:"window"`
}

// LogEvent is a diagnostic line from the guest itself.
type LogEvent struct {
	Level string `json:"level"`
	Msg   string `json:"msg"`
}
