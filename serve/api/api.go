// Package api holds the types of agentbox serve's API, version 1: the
// JSON bodies of its HTTP routes, the messages of its WebSocket and its
// error codes. The server (package serve) and the Go client (package
// client) share them; serve/openapi.json describes the same shapes for
// everyone else, its schemas generated from these types and their doc
// comments (go generate ./serve/), so a comment here is also the
// document's description.
package api

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/app"
	"github.com/codegirl-games/agentbox/observe"
)

// Version is the API's version, the first element of every path.
const Version = "v1"

// Error codes: stable names a client may switch on. Each goes with one
// HTTP status (Status).
const (
	CodeUnauthorized         = "unauthorized"           // 401: no token, or not one the server knows
	CodeBadHost              = "bad_host"               // 403: the Host header names no host the server answers to
	CodeCrossOrigin          = "cross_origin"           // 403: a browser request from another origin
	CodeNotFound             = "not_found"              // 404: no such route, environment or upload (for this token)
	CodeMethodNotAllowed     = "method_not_allowed"     // 405
	CodeUnsupportedMedia     = "unsupported_media_type" // 415: a body of the wrong Content-Type
	CodeTooLarge             = "too_large"              // 413: a body above its limit
	CodeInvalidJSON          = "invalid_json"           // 400: malformed JSON, unknown fields, trailing data
	CodeInvalidRequest       = "invalid_request"        // 422: a value out of range, a missing field
	CodeInvalidAction        = "invalid_action"         // 400: not an action of the vocabulary (docs/actions.md)
	CodeUnknownApp           = "unknown_app"            // 422: no app of that name is registered
	CodeInvalidUpload        = "invalid_upload"         // 422: the uploaded app fails the staging checks
	CodeTooManyEnvironments  = "too_many_environments"  // 429: the token's environments are all in use
	CodeTooManyUploads       = "too_many_uploads"       // 429: the token's uploads are all in use, or the server receives all it does at once
	CodeTooManyConnections   = "too_many_connections"   // 429: the environment has all the WebSockets and event streams it may, or (a WebSocket observe) the token's image slot stayed taken 30 s
	CodeBusy                 = "busy"                   // 409: the environment is starting or being reset
	CodeEpisodeEnded         = "episode_ended"          // 409: the episode has ended; reset or close
	CodeAppStart             = "app_start"              // 422: the app did not start (see End and Trace)
	CodeEnvironment          = "environment"            // 503: the sandbox failed
	CodeShuttingDown         = "shutting_down"          // 503: the server is stopping
	CodeInternal             = "internal"               // 500
	CodeUnsupportedOperation = "unsupported_operation"  // 400: a WebSocket op the server does not know
	CodeForkDiverged         = "fork_diverged"          // 422: a fork's replayed screen did not match its parent's (Step names the first that differed)
	CodeSandboxInUse         = "sandbox_in_use"         // 409: the named sandbox (CreateRequest.Name) is held by another run or environment
)

// Codes lists every error code, in the order serve/openapi.json's Error
// schema gives them; a test holds it to the constants above and to the
// document (serve/contract_test.go).
var Codes = []string{CodeUnauthorized, CodeBadHost, CodeCrossOrigin, CodeNotFound, CodeMethodNotAllowed,
	CodeUnsupportedMedia, CodeTooLarge, CodeInvalidJSON, CodeInvalidRequest, CodeInvalidAction, CodeUnknownApp,
	CodeInvalidUpload, CodeTooManyEnvironments, CodeTooManyUploads, CodeBusy, CodeEpisodeEnded, CodeAppStart,
	CodeEnvironment, CodeShuttingDown, CodeInternal, CodeUnsupportedOperation, CodeTooManyConnections, CodeForkDiverged, CodeSandboxInUse}

// Status is the HTTP status of an error code.
func Status(code string) int {
	switch code {
	case CodeUnauthorized:
		return 401
	case CodeBadHost, CodeCrossOrigin:
		return 403
	case CodeNotFound:
		return 404
	case CodeMethodNotAllowed:
		return 405
	case CodeUnsupportedMedia:
		return 415
	case CodeTooLarge:
		return 413
	case CodeInvalidJSON, CodeInvalidAction, CodeUnsupportedOperation:
		return 400
	case CodeInvalidRequest, CodeUnknownApp, CodeInvalidUpload, CodeAppStart, CodeForkDiverged:
		return 422
	case CodeTooManyEnvironments, CodeTooManyUploads, CodeTooManyConnections:
		return 429
	case CodeBusy, CodeEpisodeEnded, CodeSandboxInUse:
		return 409
	case CodeEnvironment, CodeShuttingDown:
		return 503
	}
	return 500
}

// Error is every error the API returns: over HTTP as the body
// {"error": Error} with the code's status, over the WebSocket in the
// answer to the request that failed.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Status  int    `json:"status"`
	// End is how the episode ended (episode_ended, app_start, environment).
	End *End `json:"end,omitempty"`
	// Trace is the trace directory of an episode that failed to start,
	// or of the fork that diverged (fork_diverged).
	Trace string `json:"trace,omitempty"`
	// Step is the first step whose replayed screen differed from the
	// parent's (fork_diverged); the parent's step count + 1 when only
	// the screen after the last step did.
	Step int `json:"step,omitempty"`
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s (%d %s): %s", e.Code, e.Status, statusText(e.Status), e.Message)
}

func statusText(s int) string {
	switch s {
	case 400:
		return "Bad Request"
	case 401:
		return "Unauthorized"
	case 403:
		return "Forbidden"
	case 404:
		return "Not Found"
	case 405:
		return "Method Not Allowed"
	case 409:
		return "Conflict"
	case 413:
		return "Content Too Large"
	case 415:
		return "Unsupported Media Type"
	case 422:
		return "Unprocessable Content"
	case 429:
		return "Too Many Requests"
	case 503:
		return "Service Unavailable"
	}
	return "Error"
}

// ErrorBody is the body of an HTTP error.
type ErrorBody struct {
	Error Error `json:"error"`
}

// End is how an episode ended.
type End struct {
	Outcome string `json:"outcome"` // success, failure, error, interrupted
	// Reason names why: done, gave_up, check_failed, max_steps, timeout,
	// app_exited, app_start, no_window, environment, signal, closed,
	// lease_expired, …
	Reason  string `json:"reason"`
	Message string `json:"message"`
	// Terminated: it ended of itself (done, a failed check, the app
	// exited); otherwise it was cut short (steps, deadline, closed) or
	// failed — gymnasium's terminated as against truncated.
	Terminated bool `json:"terminated"`
	// Grade is the private grader's verdict over the episode's collected
	// files (docs/tasks.md), when the environment has a grade; it comes
	// once the episode's session is closed and its files graded (the
	// environment's description, a close), not with the step that ends it.
	Grade *Grade `json:"grade,omitempty"`
}

// Grade is the private grader's verdict (run.json's grade).
type Grade struct {
	Outcome string       `json:"outcome"` // verified, incorrect, malformed, infrastructure
	Score   float64      `json:"score"`   // the weighted fraction of checks that held, in [0, 1]
	Message string       `json:"message,omitempty"`
	Checks  []GradeCheck `json:"checks,omitempty"`
	MS      float64      `json:"ms"` // how long grading took
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

// Limits bound an environment's sandbox; zero fields take the server's.
type Limits struct {
	CPUs     float64 `json:"cpus,omitempty"`
	MemoryMB int     `json:"memory_mb,omitempty"`
	PIDs     int     `json:"pids,omitempty"`
	TmpfsMB  int     `json:"tmpfs_mb,omitempty"`
}

// Server is GET /v1/server: what this server offers.
type Server struct {
	Agentbox string   `json:"agentbox"`
	API      string   `json:"api"`
	Backends []string `json:"backends"` // the first is the default
	Apps     []string `json:"apps"`     // registered with --app
	// MaxEnvironments is how many live environments a token may hold.
	MaxEnvironments int `json:"max_environments"`
	// LeaseMS is how long an environment lives without a request or a
	// connection of its client.
	LeaseMS int64 `json:"lease_ms"`
	// MaxScreen is the largest screen an environment may have.
	MaxScreen observe.Screen `json:"max_screen"`
	// Limits are the most an environment may ask for, and its default.
	Limits         Limits `json:"limits"`
	MaxUploadBytes int64  `json:"max_upload_bytes"`
	MaxUploadFiles int    `json:"max_upload_files"`
	MaxSteps       int    `json:"max_steps"`
	MaxTimeoutMS   int64  `json:"max_timeout_ms"`
	// Pool is the warm pool, when the server keeps one (serve --pool).
	Pool *Pool `json:"pool,omitempty"`
	// Capabilities are what the server can do beyond the basics.
	Capabilities Capabilities `json:"capabilities"`
}

// Capabilities are what a server can do beyond the basics.
type Capabilities struct {
	// Fork is how POST /v1/envs/{id}/fork makes its environments:
	// replay (the parent's episode replayed into fresh sandboxes and
	// checked against its screen) or snapshot (a copy of the running
	// sandbox, on backends that can).
	Fork string `json:"fork"`
}

// ForkModes are how a server forks (Capabilities.Fork,
// ForkResponse.Fork): environment.ForkReplay and ForkSnapshot.
var ForkModes = []string{"replay", "snapshot"}

// ForkRequest is the body of POST /v1/envs/{id}/fork.
type ForkRequest struct {
	// Count is how many forks to make: at least 1, and no more than the
	// token may still hold (Server.MaxEnvironments).
	Count int `json:"count"`
}

// ForkResponse is the forks made, each in its parent's state at the
// step it was forked at, each independent of the others from then on.
type ForkResponse struct {
	Environments []Environment `json:"environments"`
	// Fork is how they were made (replay or snapshot).
	Fork string `json:"fork"`
	// ReadyMS is how long until all of them were ready.
	ReadyMS float64 `json:"ready_ms"`
}

// ForkedFrom is a fork's parent: its environment, the run ID and trace
// of its episode, and the step it was forked at (the fork's first
// observation is of step Step+1).
type ForkedFrom struct {
	Env   string `json:"env"`
	RunID string `json:"run_id"`
	Trace string `json:"trace,omitempty"`
	Step  int    `json:"step"`
}

// Pool is the server's warm pool: sandboxes created ahead, display and
// window manager up, each serving one episode.
type Pool struct {
	Size     int `json:"size"`     // idle sandboxes kept per key (backend, image, screen, limits, …)
	Max      int `json:"max"`      // the most sandboxes held, idle or being created, over all keys
	Keys     int `json:"keys"`     // keys kept warm
	Idle     int `json:"idle"`     // ready to be claimed
	Creating int `json:"creating"` // being created
	// Warm counts episodes that started in a pooled sandbox.
	Warm int64 `json:"warm"`
	// Cold counts episodes that found their key empty and created a
	// sandbox.
	Cold int64 `json:"cold"`
	// Launched counts the warm episodes whose app was launched ahead
	// (serve --pool-launch): they started with it running.
	Launched int64 `json:"launched"`
	// Replaced counts pooled sandboxes that died while idle and were
	// replaced.
	Replaced int64 `json:"replaced"`
	Failed   int64 `json:"failed"` // creates that failed
	// HitRate is warm / (warm + cold): the share of episodes that started
	// in a pooled sandbox.
	HitRate float64 `json:"hit_rate"`
	// RefillP50MS is the median time from a claim to the create that made
	// it up (each key is kept at its size, or more while claims come
	// faster than creates make them up); RefillP95MS its 95th percentile.
	RefillP50MS float64 `json:"refill_p50_ms"`
	RefillP95MS float64 `json:"refill_p95_ms"`
	CreateP50MS float64 `json:"create_p50_ms"` // the median time of one pooled sandbox's create
	// Released is how many sandboxes whose episode ended inside a loop of
	// resets wait, their apps stopped, for the loop to pause to be
	// removed; Deferred counts the removals ever deferred so.
	Released int   `json:"released"`
	Deferred int64 `json:"deferred"`
}

// CreateRequest is POST /v1/envs: a new environment and its first
// episode. Exactly one of App and Upload names the app.
type CreateRequest struct {
	App     string          `json:"app,omitempty"`    // a name registered with --app
	Upload  string          `json:"upload,omitempty"` // an upload's ID
	Backend string          `json:"backend,omitempty"`
	Screen  *observe.Screen `json:"screen,omitempty"`
	Limits  *Limits         `json:"limits,omitempty"`
	Task    string          `json:"task,omitempty"`
	// MaxSteps and TimeoutMS bound each episode (default and most: the
	// server's).
	MaxSteps  int   `json:"max_steps,omitempty"`
	TimeoutMS int64 `json:"timeout_ms,omitempty"`
	// Settle is how the screen settles before each observation after an
	// action: none, fixed:DURATION or stable[:DURATION] ("fixed:200ms",
	// "stable:150ms"); absent, the server's (agentbox serve --settle,
	// default none).
	Settle string `json:"settle,omitempty"`
	// Clock is the app's clock: wall (the default) or virtual — the
	// app's time starts at 2025-01-01T00:00:00Z and moves only with the
	// steps (a wait by its length, any other action by ClockStepMS), so
	// it stands still while the agent thinks and a replay draws the same
	// frames. Dynamically linked apps only (libfaketime): a static
	// executable or a Go program is refused, and so is a backend without
	// the virtual_clock capability.
	Clock string `json:"clock,omitempty"`
	// ClockStepMS is how far a virtual clock moves per action other than
	// a wait (default 100; at most 3600000); only with clock virtual.
	ClockStepMS int64 `json:"clock_step_ms,omitempty"`
	// Inputs are files placed below the sandbox's home before the app
	// starts: from is upload:ID (an upload of this token, whole) or
	// upload:ID/PATH (a file or directory in it), to is ~/PATH
	// (docs/tasks.md).
	Inputs []app.Input `json:"inputs,omitempty"`
	// Collect lists paths or globs below the home (~/…; *, ?, […], **)
	// copied out when an episode ends, whatever its outcome: the
	// environment's files, and GET /v1/envs/{id}/files/{path}.
	Collect []string `json:"collect,omitempty"`
	// CollectLimits bound collection (default 100 files, 64 MiB).
	CollectLimits *app.CollectLimits `json:"collect_limits,omitempty"`
	// BeforeCollect are the steps run after an episode ends, before its
	// files are collected (recorded as steps of the actor collect):
	// actions ({action: key, keys: ctrl+s}), waits ({wait_for: window |
	// stable | changed, title, timeout_ms, stable_ms}) and checks ({expect:
	// window | running | exited, title, code}); a wait or check that does
	// not hold fails the episode (docs/tasks.md).
	BeforeCollect []map[string]any `json:"before_collect,omitempty"`
	// Grade is the private grader of each episode's collected files: a
	// list of checks (docs/tasks.md) but command and expected, which
	// would run or read on the server's host. Its verdict comes with the
	// episode's end (end.grade), and the end's step's reward is its score.
	Grade []map[string]any `json:"grade,omitempty"`
	// ResetMode is how the environment's resets start the next episode:
	// fresh (default: a new sandbox, from the pool when there is one) or
	// relaunch (the same sandbox reset in place: the app and everything
	// it started killed, the home and /tmp restored to their staged
	// state, the display's state reset, the app launched again). A reset
	// request's mode replaces it. relaunch needs a backend that can
	// (GET /v1/server: capabilities.relaunch).
	ResetMode string `json:"reset_mode,omitempty"`
	// Policy gates every action of the environment's episodes before it
	// runs: a policy file's text, YAML or JSON (docs/policy.md); its
	// errors name the line. Its asks come as approval events and are answered with POST
	// /v1/envs/{id}/approvals/{approval}; one nobody answers is denied
	// after its timeout.
	Policy string `json:"policy,omitempty"`
	// Name makes the environment's sandboxes named ones (agentbox run
	// --name, README "Named sandboxes"): the app user's home is the
	// name's, kept from the last run or environment of that name and kept
	// for the next, and each episode's sandbox finds it as the last one
	// left it. Such an environment's episodes never come from the warm
	// pool (a warm sandbox has its own home), it holds the name from its
	// create to its close (a second create of the name, or an agentbox run
	// --name of it, is refused with sandbox_in_use until then), a reset
	// closes the ended episode's sandbox before the next one starts, and
	// it is neither relaunched (reset_mode relaunch is refused: the home
	// is not the sandbox's to restore) nor forked. Names: 1–63 of a-z 0-9
	// . _ -, starting with a letter or digit; the backend must have the
	// capability named, and a name keeps its first backend.
	Name string `json:"name,omitempty"`
}

// ApprovalAnswer answers a policy's ask (POST
// /v1/envs/{id}/approvals/{approval}).
type ApprovalAnswer struct {
	// Allow lets the action run; false denies it.
	Allow bool `json:"allow"`
	// Always grants the ask's rule for the rest of the episode (ignored
	// for a sensitive rule, which is asked every time).
	Always bool `json:"always,omitempty"`
}

// Reset modes (CreateRequest.ResetMode, ResetRequest.Mode).
const (
	ResetFresh    = "fresh"    // a new sandbox for each episode
	ResetRelaunch = "relaunch" // the same sandbox, reset in place
)

// ResetModes lists the reset modes (the document's enum).
var ResetModes = []string{ResetFresh, ResetRelaunch}

// File is a file collected from the sandbox when an episode ended: its
// path below the home, size and SHA-256 (hex).
type File struct {
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// RefusedFile is a match of a collect pattern that was not collected, and
// why (a link, a device, over the limits, the sandbox had ended).
type RefusedFile struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// Environment states.
const (
	StateStarting = "starting" // the episode's sandbox and app are starting
	StateRunning  = "running"  // steps may be taken
	StateEnded    = "ended"    // the episode ended; reset for another, or close
	StateClosed   = "closed"
)

// States lists every environment state (the document's
// Environment.state enum).
var States = []string{StateStarting, StateRunning, StateEnded, StateClosed}

// Environment describes one environment.
type Environment struct {
	ID      string         `json:"id"`
	App     string         `json:"app"`
	Backend string         `json:"backend"`
	Screen  observe.Screen `json:"screen"`
	Limits  Limits         `json:"limits"`
	Task    string         `json:"task,omitempty"`
	State   string         `json:"state"`
	// Episode counts the episodes from 1; each has its own run ID and
	// trace directory.
	Episode int    `json:"episode"`
	RunID   string `json:"run_id"`
	Trace   string `json:"trace"`
	Steps   int    `json:"steps"`
	// ResetMode is how a reset starts the next episode (fresh or
	// relaunch); Relaunched says the running episode's sandbox is its
	// previous episode's, reset in place.
	ResetMode  string `json:"reset_mode"`
	Relaunched bool   `json:"relaunched,omitempty"`
	// ForkedFrom names the environment and step this one was forked
	// from (POST /v1/envs/{id}/fork); absent otherwise.
	ForkedFrom *ForkedFrom `json:"forked_from,omitempty"`
	// End is how the latest episode ended, once it has.
	End *End `json:"end,omitempty"`
	// Files are the files collected when the latest episode ended (its
	// collect), FilesRefused what was left out and why.
	Files        []File        `json:"files,omitempty"`
	FilesRefused []RefusedFile `json:"files_refused,omitempty"`
	Created      time.Time     `json:"created"`
	// Connections counts the client's open WebSockets and event streams:
	// while there is one, the lease does not run out.
	Connections int `json:"connections"`
	// LeaseExpires is when the environment is closed unless its client
	// makes a request (absent while a connection is open).
	LeaseExpires *time.Time `json:"lease_expires,omitempty"`
}

// Upload is an app directory uploaded as a tar (POST /v1/uploads).
type Upload struct {
	ID      string    `json:"id"`
	Command string    `json:"command"`
	Files   int       `json:"files"`
	Bytes   int64     `json:"bytes"`
	Created time.Time `json:"created"`
	// InUse counts the environments created from it.
	InUse int `json:"in_use"`
}

// Image formats an observation may carry.
const (
	ImageNone = "none" // the state alone
	ImagePNG  = "png"  // the screenshot as PNG
	ImageRGBA = "rgba" // raw pixels: height rows of width×4 bytes (R, G, B, 255)
)

// Images lists every image format (the document's Frame.format and
// WSRequest.image enums).
var Images = []string{ImageNone, ImagePNG, ImageRGBA}

// Frame is the screenshot of an observation.
type Frame struct {
	Width  int    `json:"width"`
	Height int    `json:"height"`
	Hash   string `json:"hash"` // equal hashes, equal pixels
	// Format is the image's format (png, rgba), or none.
	Format string `json:"format"`
	// Unchanged: the hash is the one the client said it has (known), so
	// no image is sent.
	Unchanged bool `json:"unchanged,omitempty"`
	// Data is the image over HTTP (base64 in JSON). Over the WebSocket it
	// is absent and Bytes says how many bytes follow the JSON header.
	Data  []byte `json:"data,omitempty"`
	Bytes int    `json:"bytes,omitempty"` // over the WebSocket: the image's bytes after the JSON
}

// Observation is the desktop before the next step.
type Observation struct {
	Env       string  `json:"env"`
	Episode   int     `json:"episode"`
	Step      int     `json:"step"` // the step it is the observation of
	ElapsedMS float64 `json:"elapsed_ms"`
	Running   bool    `json:"running"` // the app is running
	// Exit is how the app ended, once it has.
	Exit    *observe.Exit     `json:"exit,omitempty"`
	Cursor  action.Point      `json:"cursor"`
	Windows []observe.Window  `json:"windows"`
	Output  []observe.LogLine `json:"output"` // the app's lines since the last observation
	// Last is the previous action's result.
	Last *action.Result `json:"last,omitempty"`
	// Screenshot is the screenshot's path in the episode's trace.
	Screenshot string `json:"screenshot"`
	Frame      Frame  `json:"frame"`
	// Ended is set when the episode ended at this observation.
	Ended *End `json:"ended,omitempty"`
}

// StepResponse is what an action did (POST /v1/envs/{id}/act).
type StepResponse struct {
	Env     string        `json:"env"`
	Episode int           `json:"episode"`
	Step    int           `json:"step"`
	Result  action.Result `json:"result"`
	// Invalid: the action failed validation and was not run (Result says
	// why); the episode goes on.
	Invalid bool `json:"invalid,omitempty"`
	// Ended is set when this step ended the episode.
	Ended *End `json:"ended,omitempty"`
	// Files are the files collected when this step ended the episode
	// (the environment's collect).
	Files []File `json:"files,omitempty"`
	// Observation is the next observation, when asked for (observe=…);
	// after a done, the last one.
	Observation *Observation `json:"observation,omitempty"`
}

// ResetRequest is the optional body of POST /v1/envs/{id}/reset.
type ResetRequest struct {
	// Task replaces the environment's task from this episode on.
	Task *string `json:"task,omitempty"`
	// Mode is how the next episode starts (fresh or relaunch, see
	// CreateRequest.ResetMode); it stays the environment's mode from then
	// on. Default: the environment's.
	Mode string `json:"mode,omitempty"`
}

// ResetResponse is the new episode and, when asked, its first observation.
type ResetResponse struct {
	Environment Environment  `json:"environment"`
	Observation *Observation `json:"observation,omitempty"`
}

// Event is one thing that happened in an environment: the events stream
// (Server-Sent Events, GET /v1/envs/{id}/events) sends each as
// "id: SEQ", "event: KIND", "data: JSON".
type Event struct {
	Seq     int64  `json:"seq"`
	Kind    string `json:"kind"` // what happened (session.EventKinds)
	Episode int    `json:"episode"`
	TNS     int64  `json:"t_ns"` // since the episode started

	Stream  string          `json:"stream,omitempty"`
	Text    string          `json:"text,omitempty"`
	Dropped int64           `json:"dropped,omitempty"`
	Change  string          `json:"change,omitempty"`
	Window  *observe.Window `json:"window,omitempty"`
	Exit    *observe.Exit   `json:"exit,omitempty"`
	Step    int             `json:"step,omitempty"`
	Actor   string          `json:"actor,omitempty"`
	Action  *action.Action  `json:"action,omitempty"`
	Invalid string          `json:"invalid,omitempty"`
	Result  *action.Result  `json:"result,omitempty"`
	End     *End            `json:"end,omitempty"`
	RunID   string          `json:"run_id,omitempty"` // episode: its run ID
	Trace   string          `json:"trace,omitempty"`  // episode: its trace directory
	By      string          `json:"by,omitempty"`     // takeover, hand_back: who took control
	Reason  string          `json:"reason,omitempty"` // hand_back: why control was handed back
	Steps   int             `json:"steps,omitempty"`  // hand_back: how many steps the person took
	// Approval is a policy's ask (kind approval); Answer, once it is
	// answered: "allowed" or "denied" (By who, Reason why for an answer no
	// person gave: "no answer in time", "--approve deny").
	Approval *Approval `json:"approval,omitempty"`
	Answer   string    `json:"answer,omitempty"`
}

// WebSocket operations (GET /v1/envs/{id}/ws): one request, one answer,
// in order.
const (
	OpStep    = "step"    // act, then observe: one round trip per step
	OpAct     = "act"     // act alone
	OpObserve = "observe" // observe alone
	OpReset   = "reset"   // a new episode (and its first observation with image)
	OpInfo    = "info"    // the environment
)

// Ops lists every WebSocket operation (the document's WSRequest.op enum).
var Ops = []string{OpStep, OpAct, OpObserve, OpReset, OpInfo}

// Request is a WebSocket request (a text message).
type Request struct {
	ID     int64           `json:"id"`
	Op     string          `json:"op"`
	Action json.RawMessage `json:"action,omitempty"` // step, act
	// Image is the observation's image: none, png, rgba (step, observe,
	// reset; default none).
	Image string `json:"image,omitempty"`
	// Known is the hash of the frame the client has: an unchanged screen
	// is then sent without its image.
	Known string  `json:"known,omitempty"`
	Task  *string `json:"task,omitempty"` // reset
	Mode  string  `json:"mode,omitempty"` // reset: fresh or relaunch (ResetRequest.Mode)
}

// Response is a WebSocket answer: a text message holding it, or, when an
// image comes with it, a binary message of a 4-byte big-endian length,
// the JSON and then the image's bytes (Frame.Bytes of them).
type Response struct {
	ID          int64         `json:"id"`
	Step        *StepResponse `json:"step,omitempty"`
	Observation *Observation  `json:"observation,omitempty"`
	Environment *Environment  `json:"environment,omitempty"`
	Error       *Error        `json:"error,omitempty"`
}

// MaxMessage bounds a WebSocket request: an action and its envelope.
const MaxMessage = action.MaxJSON + 64<<10

// DefaultTokenFile is where agentbox serve writes the token it generates
// when given none, and where clients look for it:
// $XDG_RUNTIME_DIR/agentbox/serve.token, else
// ~/.config/agentbox/serve.token.
func DefaultTokenFile() string {
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		return filepath.Join(d, "agentbox", "serve.token")
	}
	if d, err := os.UserConfigDir(); err == nil {
		return filepath.Join(d, "agentbox", "serve.token")
	}
	return filepath.Join(os.TempDir(), "agentbox-serve.token")
}

// Approval is a policy's ask: may the step's action run? The gate waits
// for an answer (POST /v1/envs/{id}/approvals/{approval}) until the ask's
// timeout, then denies it.
type Approval struct {
	// ID names the ask within its episode.
	ID     string        `json:"id"`
	Step   int           `json:"step"`
	Actor  string        `json:"actor"`
	Action action.Action `json:"action"`
	// Rule names the policy's rule that asks; Sensitive says it is asked
	// every time (an answer always is taken as a plain yes).
	Rule      string `json:"rule"`
	Sensitive bool   `json:"sensitive,omitempty"`
	// Element describes the element the action acts on, when known.
	Element string `json:"element,omitempty"`
}
