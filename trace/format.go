// Package trace writes and reads agentbox's run record: a versioned
// directory a person can read with a text editor and a program can replay.
//
//	run.json          what ran and how it ended (rewritten via temp + rename)
//	steps.jsonl       one record per line: step, result, event, final
//	actions.jsonl     the actions alone, with their times
//	screenshots/      NNNNNN.png, one per distinct frame
//	stdout.log        the app's output, capped, with a truncation marker
//	stderr.log
//	writer.lock       held (flock) by the writing process, with its pid
//
// Durability: every record is written with one write(2) before the action it
// describes runs (a step record is the step's intent; its result record
// follows once the action ran), and step and result records reach the disk
// (fdatasync) before Record returns, so a killed agentbox, or a machine
// that lost power, leaves every completed step on disk; run.json says
// "running" until the run is finalised, and readers report such a trace as
// incomplete. A torn last line is discarded by the reader. Screenshots are
// encoded in the background and appear under their final name only when
// complete (temp + rename).
package trace

import (
	"time"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/observe"
)

// Format identifies a trace directory; Version is its schema version.
//
// Version changes only when a reader of the previous version would
// misread a new trace. Fields are added without a new version when their
// absence reads as it did before (the field's comment says from when it
// is there, as "absent in traces written before …"), so every trace of a
// version stays readable by every agentbox that reads that version.
const (
	Format  = "agentbox-trace"
	Version = 1
)

// File names inside a trace directory.
const (
	RunFile        = "run.json"
	ExchangesDir   = "exchanges"
	StepsFile      = "steps.jsonl"
	ActionsFile    = "actions.jsonl"
	ScreenshotsDir = "screenshots"
	A11yDir        = "a11y"
	StdoutFile     = "stdout.log"
	StderrFile     = "stderr.log"
	// NetworkFile holds one observe.NetEvent per line (with its t_ms), when
	// the sandbox had a network (--allow-net, --forward).
	NetworkFile = "network.jsonl"
)

// Status of a run record.
const (
	StatusRunning  = "running"  // being written, or the writer died
	StatusComplete = "complete" // finalised
)

// Outcome is how a run ended; each maps to an exit code.
type Outcome string

// Outcomes.
const (
	Success     Outcome = "success"     // exit 0
	Failure     Outcome = "failure"     // exit 1: the agent gave up or a check failed
	Error       Outcome = "error"       // exit 3: infrastructure failed
	Interrupted Outcome = "interrupted" // exit 130
)

// ExitCode maps an outcome to the process exit code.
func (o Outcome) ExitCode() int {
	switch o {
	case Success:
		return 0
	case Failure:
		return 1
	case Interrupted:
		return 130
	}
	return 3
}

// Reasons refine an outcome.
const (
	ReasonDone         = "done"             // the agent finished
	ReasonGaveUp       = "gave_up"          // the agent finished unsuccessfully
	ReasonCheckFailed  = "check_failed"     // a check did not hold
	ReasonActionFailed = "action_failed"    // a script's action failed (and the step was not optional)
	ReasonMaxSteps     = "max_steps"        // the step limit was reached
	ReasonTimeout      = "timeout"          // the run's deadline passed
	ReasonAppExited    = "app_exited"       // the app exited during the run
	ReasonAppStart     = "app_start"        // the app could not be started
	ReasonNoWindow     = "no_window"        // the app's window never appeared
	ReasonAgent        = "agent_error"      // the agent failed
	ReasonMalformed    = "malformed_answer" // the agent kept answering with invalid actions
	ReasonEnvironment  = "environment"      // the sandbox, image or guest failed
	ReasonSignal       = "signal"           // SIGINT/SIGTERM
	ReasonDiverged     = "diverged"         // a replay's screen differed from the recording
	// A controller of agentbox serve ended the episode: it closed or reset
	// the environment before the episode ended (outcome interrupted).
	ReasonClosed = "closed"
	// Nobody used the environment for its lease: the server closed it
	// (outcome interrupted).
	ReasonLeaseExpired = "lease_expired"
)

// Run is run.json.
type Run struct {
	Format   string `json:"format"`
	Version  int    `json:"version"`
	ID       string `json:"id"`
	Status   string `json:"status"`
	Agentbox string `json:"agentbox_version"`

	Outcome  Outcome `json:"outcome,omitempty"`
	Reason   string  `json:"reason,omitempty"`
	Message  string  `json:"message,omitempty"`
	ExitCode int     `json:"exit_code"`

	Task  string    `json:"task,omitempty"`
	Agent AgentInfo `json:"agent"`
	App   AppInfo   `json:"app"`
	Env   EnvInfo   `json:"environment"`

	Started    time.Time `json:"started"`
	Ended      time.Time `json:"ended,omitzero"`
	DurationMS float64   `json:"duration_ms,omitempty"`
	Steps      int       `json:"steps"`
	// Timings holds named durations in milliseconds: create, launch,
	// first_screenshot, cold_start, teardown, ….
	Timings map[string]float64 `json:"timings_ms,omitempty"`

	// Settings are the run's own settings that are not part of the app or
	// the environment (absent in traces written before they were recorded).
	Settings *Settings `json:"settings,omitempty"`

	AppExit *observe.Exit `json:"app_exit,omitempty"`
	Logs    LogInfo       `json:"logs"`
	// Network is the sandbox's network and what went through it; absent
	// when it had none.
	Network *NetworkInfo `json:"network,omitempty"`
	// Screenshots counts files written; Frames counts observations.
	Screenshots int `json:"screenshots"`

	// Inputs are the task's files placed into the sandbox before the app
	// started; Files those collected when the episode ended (under
	// FilesDir), and FilesRefused what collection left out and why; Grade
	// the private grader's verdict over them (docs/tasks.md). Absent in
	// traces written before tasks had them, and in runs without them.
	Inputs       []FileInfo    `json:"inputs,omitempty"`
	Files        []FileInfo    `json:"files,omitempty"`
	FilesRefused []RefusedFile `json:"files_refused,omitempty"`
	Grade        *Grade        `json:"grade,omitempty"`

	// ResumedFrom is the crashed run this one continued (agentbox
	// resume): its steps up to ResumedFrom.Step were replayed, the agent
	// went on from there. ResumedBy, in a crashed run's run.json, is the
	// trace that resumed it. Both absent otherwise, and in traces
	// written before resume existed.
	ResumedFrom *ResumedFrom `json:"resumed_from,omitempty"`
	ResumedBy   string       `json:"resumed_by,omitempty"`
	// Lost lists the files the trace refers to that could not be written
	// (a full disk: a step's screenshot), so that their absence is
	// recorded, never silent; the run ended with an environment error at
	// its next step.
	Lost []LostFile `json:"lost,omitempty"`
	// ForkedFrom names the episode this one was forked from (agentbox
	// serve's fork): its first steps replay the parent's up to Step, and
	// its own steps follow. Absent in runs that were not forked.
	ForkedFrom *ForkOrigin `json:"forked_from,omitempty"`
}

// ForkOrigin is the parent of a forked episode: its run ID and trace
// directory, the environment of agentbox serve that ran it, and the
// step it was forked at (the fork replayed steps 1 to Step).
type ForkOrigin struct {
	Run   string `json:"run"`
	Trace string `json:"trace,omitempty"`
	Env   string `json:"env,omitempty"`
	Step  int    `json:"step"`
}

// LostFile is a file of the trace that could not be written, and why.
type LostFile struct {
	Path  string `json:"path"` // relative to the trace
	Error string `json:"error"`
}

// ReserveFile is the space a trace keeps while it is written
// (ReserveBytes), given up when the run is finalised so that run.json
// can be written on a full disk.
const ReserveFile = ".reserve"

// ReserveBytes is the size of ReserveFile.
const ReserveBytes = 64 << 10

// FilesDir holds a trace's collected files, by their path below the
// sandbox's home.
const FilesDir = "files"

// FileInfo is one file put into or taken out of the sandbox. Path is
// below the sandbox's home ("Documents/sales.ods"), slash-separated.
type FileInfo struct {
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// RefusedFile is a match of a collect pattern that was not collected.
type RefusedFile struct {
	Path   string `json:"path"`
	Reason string `json:"reason"` // a link, a device, over the file or byte limit, …
}

// Grade outcome classes (docs/tasks.md).
const (
	GradeVerified       = "verified"       // every check held
	GradeIncorrect      = "incorrect"      // a check did not hold
	GradeMalformed      = "malformed"      // a file could not be read as what its check says
	GradeInfrastructure = "infrastructure" // the grader could not judge (never incorrect)
)

// Grade is the private grader's verdict over an episode's collected files.
type Grade struct {
	Outcome string       `json:"outcome"` // a Grade… class
	Score   float64      `json:"score"`   // in [0, 1]
	Message string       `json:"message,omitempty"`
	Checks  []GradeCheck `json:"checks,omitempty"`
	// MS is how long grading took.
	MS float64 `json:"ms"`
}

// GradeCheck is one check's result.
type GradeCheck struct {
	Name   string  `json:"name,omitempty"`
	Check  string  `json:"check"` // exists, text, json, table, image, command
	File   string  `json:"file,omitempty"`
	OK     bool    `json:"ok"`
	Class  string  `json:"class,omitempty"` // for a check that did not hold: incorrect, malformed or infrastructure
	Detail string  `json:"detail,omitempty"`
	Weight float64 `json:"weight,omitempty"`
	MS     float64 `json:"ms"`
}

// AgentInfo names the decision-maker.
type AgentInfo struct {
	Name    string            `json:"name"`
	Options map[string]string `json:"options,omitempty"`
}

// AppInfo says what ran.
type AppInfo struct {
	// Target is TARGET as it was given; TargetPath its absolute path
	// (empty for a program of the image, whose Target is its name), so a
	// replay finds it from any directory. TargetPath is absent in traces
	// written before it was recorded (agentbox f2e3deb and older).
	Target      string   `json:"target"`
	TargetPath  string   `json:"target_path,omitempty"`
	Command     string   `json:"command"`
	Args        []string `json:"args,omitempty"`
	InImage     bool     `json:"in_image,omitempty"`
	WindowTitle string   `json:"window_title,omitempty"`
	Files       int      `json:"files"`
	Bytes       int64    `json:"bytes"`
	PID         int      `json:"pid,omitempty"`
	// EnvKeys names the variables added to the app's environment (the
	// values are not recorded: they may be secrets).
	EnvKeys []string `json:"env_keys,omitempty"`
	// Digest is the SHA-256 over the sorted "sha256  path" lines of
	// FileHashes: one value that says whether two runs staged the same app.
	Digest     string            `json:"digest,omitempty"`
	FileHashes map[string]string `json:"file_hashes,omitempty"`
	// LaunchedAhead is set when a warm pool launches apps ahead (serve,
	// eval and bench --pool-launch): whether this episode's app was, and
	// for how long it had run idle when the episode began; absent
	// otherwise.
	LaunchedAhead *LaunchedAhead `json:"launched_ahead,omitempty"`
}

// LaunchedAhead is an app launched in a pooled sandbox before its episode
// began. With Launched, Started is when its launch began, ReadyMS how
// long the launch took (to its window and ready output), and IdleMS how
// long the app then ran idle, with no input, until the episode took the
// sandbox over: a "fresh" episode of an app launched ahead starts with
// an app that has run that long. Without, Reason says why the pool did
// not hand this episode a sandbox with its app running (none was idle,
// or the episode's launch differs: a virtual clock, other task inputs),
// and the episode launched the app itself. HeldMS is how much of IdleMS
// the app's processes were stopped (a pool holds an app launched ahead
// once its window is up, where the environment can, and lets it go at
// the hand-over): an app held all along ran only its launch, to its
// window and ready output, before the episode.
type LaunchedAhead struct {
	Launched bool      `json:"launched"`
	Started  time.Time `json:"started,omitzero"`
	ReadyMS  float64   `json:"ready_ms,omitempty"`
	IdleMS   float64   `json:"idle_ms,omitempty"`
	HeldMS   float64   `json:"held_ms,omitempty"`
	Reason   string    `json:"reason,omitempty"`
}

// EnvInfo says where it ran.
type EnvInfo struct {
	Backend string `json:"backend"`
	ID      string `json:"id,omitempty"`
	Image   string `json:"image,omitempty"`
	ImageID string `json:"image_id,omitempty"`
	Runtime string `json:"runtime,omitempty"`
	// Sandbox is the named sandbox whose home the run had (run --name);
	// absent for a sandbox of its own.
	Sandbox string           `json:"sandbox,omitempty"`
	Screen  observe.Screen   `json:"screen"`
	Display string           `json:"display,omitempty"`
	WM      bool             `json:"wm"`
	SHM     bool             `json:"shm"`
	Damage  bool             `json:"damage,omitempty"` // DAMAGE spared capturing an unchanged screen
	Limits  map[string]any   `json:"limits,omitempty"`
	Timings map[string]int64 `json:"timings_ms,omitempty"`
	// Extra holds backend-specific facts (which limits apply, …).
	Extra map[string]string `json:"extra,omitempty"`
}

// Settings are what a replay needs to run the loop the same way.
type Settings struct {
	// Settle is the settle-before-screenshot mode as given to --settle:
	// "none", "fixed:200ms", "stable:150ms".
	Settle         string  `json:"settle,omitempty"`
	MaxSteps       int     `json:"max_steps,omitempty"`
	TimeoutMS      float64 `json:"timeout_ms,omitempty"`
	ReadyTimeoutMS float64 `json:"ready_timeout_ms,omitempty"`
	LogCap         int64   `json:"log_cap,omitempty"`
	NoWM           bool    `json:"no_wm,omitempty"`
	// NoGLX: the X server ran without GLX (the app's manifest said
	// "opengl": false).
	NoGLX bool `json:"no_glx,omitempty"`
	// A11y: the sandbox had its accessibility bus; Tree: the tree was read
	// at every step; Marks: the agent's screenshots were marked.
	A11y  bool `json:"a11y,omitempty"`
	Tree  bool `json:"tree,omitempty"`
	Marks bool `json:"marks,omitempty"`
	// Observe: the trusted observer recorded the app's processes and
	// files (--observe); each observation's activity holds them.
	Observe bool `json:"observe,omitempty"`
	// FreezeWhileThinking and MaxRate are --freeze-while-thinking and
	// --max-rate (0: no bound). Absent in traces written before they were
	// recorded (agentbox f2e3deb and older), which ran with the default
	// (1000 actions a second) unless the command line said otherwise.
	FreezeWhileThinking bool     `json:"freeze_while_thinking"`
	MaxRate             *float64 `json:"max_rate,omitempty"`
	// Clock is the app's virtual clock (--clock virtual); absent: the
	// wall clock.
	Clock *ClockSettings `json:"clock,omitempty"`
}

// ClockSettings record a virtual clock: where it started (RFC 3339, UTC)
// and how far it moved at each step that was not a wait. Each step's
// observation records the virtual time it was taken at, and each result
// how far the clock moved for that action (a replay moves it the same).
type ClockSettings struct {
	Mode   string  `json:"mode"` // "virtual"
	Start  string  `json:"start"`
	StepMS float64 `json:"step_ms"`
}

// LogInfo accounts for the app's output.
type LogInfo struct {
	StdoutBytes   int64 `json:"stdout_bytes"`
	StderrBytes   int64 `json:"stderr_bytes"`
	StdoutDropped int64 `json:"stdout_dropped,omitempty"`
	StderrDropped int64 `json:"stderr_dropped,omitempty"`
	// EventsDropped counts events the host discarded beyond their bound,
	// by kind ("window", "log", "exit"); steps.jsonl has an
	// "events_dropped" event where each kind's dropping began.
	EventsDropped map[string]int64 `json:"events_dropped,omitempty"`
}

// NetworkInfo is the sandbox's network policy and a summary of
// network.jsonl.
type NetworkInfo struct {
	Allow       []string          `json:"allow,omitempty"`
	Forward     []string          `json:"forward,omitempty"`
	Resolve     map[string]string `json:"resolve,omitempty"`
	MaxBytes    int64             `json:"max_bytes"`
	MaxConnRate float64           `json:"max_conn_rate"`
	// Allowed and Denied count connections (and plain requests); the
	// bytes are those of every connection, both ways.
	Allowed   int   `json:"allowed"`
	Denied    int   `json:"denied"`
	BytesUp   int64 `json:"bytes_up"`
	BytesDown int64 `json:"bytes_down"`
	// Limits are the limit events (a limit that bit), the first few.
	Limits []string `json:"limits,omitempty"`
	// Dropped counts events not written to network.jsonl once it reached
	// the log cap (they are counted above).
	Dropped int64 `json:"dropped,omitempty"`
}

// Record types in steps.jsonl.
const (
	TypeStep   = "step"   // an observation, a decision and an action (before it runs)
	TypeResult = "result" // what the action did
	TypeEvent  = "event"  // something happened outside the loop: window, exit
	TypeFinal  = "final"  // the last observation, after the loop
)

// Observation is the recorded part of what the agent saw.
type Observation struct {
	Screenshot string            `json:"screenshot"` // path relative to the trace
	FrameHash  string            `json:"frame_hash"`
	Width      int               `json:"width"`
	Height     int               `json:"height"`
	Cursor     action.Point      `json:"cursor"`
	Windows    []observe.Window  `json:"windows,omitempty"`
	Running    bool              `json:"running"`
	Output     []observe.LogLine `json:"output,omitempty"`
	// Network is what the agent was shown of the sandbox's connections
	// since the previous observation (network.jsonl has every one).
	Network []observe.NetEvent `json:"network,omitempty"`
	// Activity is what the trusted observer (--observe) recorded since the
	// previous observation: processes run and ended, files changed below
	// the sandbox's writable directories (coalesced per path, written
	// files hashed at this checkpoint), and overflow and unseen events
	// wherever something was left out. Absent without --observe.
	Activity []observe.ActivityEvent `json:"activity,omitempty"`
	// View is the region and size the agent was shown, when it asked for
	// one with a screenshot action.
	View *ViewInfo `json:"view,omitempty"`
	// SettleMS is how long the runtime waited for the screen to settle
	// before taking this screenshot.
	SettleMS float64 `json:"settle_ms,omitempty"`
	// SettleCapped says a stable settle gave up at its cap (2 s) with the
	// screen still changing: the screenshot may show it mid-change.
	// Absent (false) in traces written before it was recorded.
	SettleCapped bool `json:"settle_capped,omitempty"`
	// Tree is the accessibility tree read with this observation, when the
	// run or the agent asked for it.
	Tree *TreeInfo `json:"tree,omitempty"`
	// Marks are the numbered boxes drawn on the agent's copy of the
	// screenshot, MarkedScreenshot (Screenshot stays the raw screen).
	Marks            []observe.Mark `json:"marks,omitempty"`
	MarkedScreenshot string         `json:"marked_screenshot,omitempty"`
	// Intervention is what the controller was told of a person's control
	// since its previous observation (the live page's takeover); absent
	// when nobody took control, and in traces written before it was
	// recorded.
	Intervention *observe.Intervention `json:"intervention,omitempty"`
	// Clock is the app's virtual time when the screenshot was taken (RFC
	// 3339, UTC); absent on the wall clock.
	Clock string `json:"clock,omitempty"`
	// Masked are the areas painted over before the screenshot left the
	// session (password fields, card numbers, the vault's values, the
	// policy's mask rules); absent when none was.
	Masked []MaskedArea `json:"masked,omitempty"`
	// MaskMS is what masking the screenshot took in a governed run: the
	// tree read for it, the areas found, the frame painted; absent when
	// the run masks nothing.
	MaskMS float64 `json:"mask_ms,omitempty"`
}

// MaskedArea is one painted area of a screenshot: where, and why (never
// what it showed).
type MaskedArea struct {
	Rect action.Rect `json:"rect"`
	Why  string      `json:"why"`
	Rule string      `json:"rule,omitempty"`
}

// TreeInfo points to an accessibility tree in the trace
// (a11y/NNNNNN.json, an observe.Tree) and says what it holds.
type TreeInfo struct {
	File      string   `json:"file,omitempty"`
	Elements  int      `json:"elements"`
	Apps      int      `json:"apps"`
	ElapsedMS float64  `json:"elapsed_ms"`
	Cut       []string `json:"cut,omitempty"`
	Note      string   `json:"note,omitempty"`
	// Error says why no tree was read.
	Error string `json:"error,omitempty"`
}

// ViewInfo describes a view of the screen.
type ViewInfo struct {
	Region action.Rect `json:"region"`
	Width  int         `json:"width"`
	Height int         `json:"height"`
}

// Decision is the recorded part of how the agent decided.
type Decision struct {
	LatencyMS float64        `json:"latency_ms"`
	Message   string         `json:"message,omitempty"`
	Meta      map[string]any `json:"meta,omitempty"` // model, usage, …
	// Files lists files the agent attached (raw exchanges), by name, as
	// paths relative to the trace.
	Files map[string]string `json:"files,omitempty"`
	// FrozenMS is how long the app's processes were frozen while the
	// agent decided (--freeze-while-thinking).
	FrozenMS float64 `json:"frozen_ms,omitempty"`
	// QueueMS is the part of LatencyMS the decision's model requests
	// waited for a turn in a queue shared with other episodes (eval
	// --model-concurrency), ModelMS the rest; both absent when it did
	// not wait.
	QueueMS float64 `json:"queue_ms,omitempty"`
	ModelMS float64 `json:"model_ms,omitempty"`
}

// Actors: who chose a step's action. A trace written before actors were
// recorded has none; readers take that as ActorAgent.
const (
	ActorAgent  = "agent"  // an agent inside agentbox's loop (run, eval, bench)
	ActorScript = "script" // a play-test script
	ActorRemote = "remote" // a client of agentbox serve's API
	ActorMCP    = "mcp"    // an MCP client
	ActorHuman  = "human"  // a person at the live page
	// ActorCollect: a task's before_collect steps, run after the episode
	// ended and before its files were collected (docs/tasks.md).
	ActorCollect = "collect"
)

// Events of the live page's takeover in steps.jsonl (TypeEvent), with
// their times: a person took control (data: by), handed it back (data:
// by, reason, steps, duration_ms), and an action another controller had
// decided before the takeover and that was not performed (data: actor,
// action).
const (
	EventTakeover   = "takeover"
	EventHandBack   = "hand_back"
	EventNotApplied = "action_not_applied"
)

// Record is one line of steps.jsonl.
type Record struct {
	Type string  `json:"type"`
	Step int     `json:"step,omitempty"`
	TMS  float64 `json:"t_ms"` // since the run started
	// Actor says who chose a step's action (ActorAgent, …; absent in
	// traces written before it was recorded).
	Actor string `json:"actor,omitempty"`

	Observation *Observation   `json:"observation,omitempty"`
	Decision    *Decision      `json:"decision,omitempty"`
	Action      *action.Action `json:"action,omitempty"`
	// Invalid holds the validation error of an action that was not run.
	Invalid string `json:"invalid,omitempty"`

	// Policy is what the policy gate decided about a step's action (a
	// run with --policy).
	Policy *PolicyDecision `json:"policy,omitempty"`

	Result     *action.Result `json:"result,omitempty"`
	DurationMS float64        `json:"duration_ms,omitempty"`
	// ThrottledMS is how long the action waited for the rate limit.
	ThrottledMS float64 `json:"throttled_ms,omitempty"`
	// ClockAdvanceMS is how far the action moved the app's virtual clock
	// (Settings.Clock).
	ClockAdvanceMS float64 `json:"clock_advance_ms,omitempty"`

	Event string         `json:"event,omitempty"` // window_mapped, app_exited, …
	Data  map[string]any `json:"data,omitempty"`
}

// ActionRecord is one line of actions.jsonl.
type ActionRecord struct {
	Step   int           `json:"step"`
	TMS    float64       `json:"t_ms"`
	Actor  string        `json:"actor,omitempty"`
	Action action.Action `json:"action"`
}

// PolicyDecision is what the policy gate decided about a step's action,
// recorded with the step before the action runs (or is refused).
type PolicyDecision struct {
	// Rule names the rule that decided ("default": none matched).
	Rule string `json:"rule"`
	// Decision is the rule's: allow, ask or deny.
	Decision  string `json:"decision"`
	Sensitive bool   `json:"sensitive,omitempty"`
	// Element describes the element the rule's target matched.
	Element string `json:"element,omitempty"`
	// Allowed says whether the action ran.
	Allowed bool `json:"allowed"`
	// Ask is the ask's ID within the episode, for an ask that was put;
	// By says who answered it ("tty", "deny", "api", "live", "grant" for
	// a rule answered always earlier), Note why for an answer no person
	// gave, WaitMS how long it waited (not counted against the deadline).
	Ask    string  `json:"ask,omitempty"`
	By     string  `json:"by,omitempty"`
	Note   string  `json:"note,omitempty"`
	WaitMS float64 `json:"wait_ms,omitempty"`
	// GateMS is the gate's own time (the tree read, the rules); TreeMS
	// the tree read's part of it.
	GateMS float64 `json:"gate_ms"`
	TreeMS float64 `json:"tree_ms,omitempty"`
}
