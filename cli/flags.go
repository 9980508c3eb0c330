package cli

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/docker/go-units"
	"github.com/spf13/pflag"

	"github.com/codegirl-games/agentbox/app"
	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/environment/docker"
	"github.com/codegirl-games/agentbox/observe"
	"github.com/codegirl-games/agentbox/serve"
	"github.com/codegirl-games/agentbox/session"
	"github.com/codegirl-games/agentbox/trace"
)

// sandboxFlags are the flags that choose, size and bound a sandbox and its
// run, the same in run, eval, replay and bench: one field, one parser and
// one rule each. A command registers the ones it takes; the wording and
// default differ only where the meaning does (eval's limits are per
// sandbox, replay's defaults are the recording's).
type sandboxFlags struct {
	cmd   string          // the command that registered them
	taken map[string]bool // the flags it took

	backend, image, ociRuntime, guestBinary string
	screen                                  string
	cpus                                    float64
	memory, tmpfs                           string
	pids                                    int
	noWM, noGLX                             bool
	a11y, a11yTree, marks                   bool
	observe                                 bool
	allowUnbounded                          bool

	timeout, startTimeout time.Duration
	maxSteps              int
	maxRate               float64
	freeze                bool

	// The app's launch: how long its window may take, the cap on its
	// logs, the settle before each screenshot.
	readyTimeout   time.Duration
	logCap, settle string

	// The policy gate (policy.go).
	policyFile, approve string

	out     string
	env     []string
	verbose bool

	// The sandbox's network (network.go).
	allowNet, forward, netResolve []string
	netMaxBytes                   string
	netMaxRate                    float64
}

// flagUse is one command's default and help for a flag.
type flagUse struct {
	def  any // of the field's type
	help string
}

// sandboxFlagUses lists, for each shared flag, the commands that take it
// with their default and help.
func sandboxFlagUses() map[string]map[string]flagUse {
	const run, eval, replay, bench, resume = "run", "eval", "replay", "bench", "resume"
	auto := flagUse{environment.Auto, backendUsage()}
	guest := flagUse{"", "static agentbox binary to run inside the sandbox (default: this one)"}
	verbose := flagUse{false, "print every step"}
	startTimeout := flagUse{session.DefaultStartTimeout, "deadline for creating the sandbox and launching the app"}
	cpus, memory, pids, tmpfs := environment.DefaultCPUs, sizeFlag(environment.DefaultMemoryMB<<20), environment.DefaultPIDs, sizeFlag(environment.DefaultTmpfsMB<<20)
	uses := map[string]map[string]flagUse{
		"backend": {run: auto, eval: auto,
			replay: {"", "sandbox backend (default: the recorded one)"},
			resume: {"", "sandbox backend (default: the recorded one)"},
			bench:  {environment.Auto, "backend to measure, or several side by side: docker,local"}},
		"image": {
			run:    {"", "runtime image (default " + docker.DefaultImage + "; any image with Xvfb works)"},
			eval:   {"", "runtime image for tasks that name none"},
			replay: {"", "runtime image (default: the recorded one)"},
			resume: {"", "runtime image (default: the recorded one)"},
			bench:  {docker.TestImageRef, "image (the seed-style step needs scrot and xdotool: the test image)"}},
		"runtime": {
			run:   {"", "OCI runtime registered with Docker, e.g. runsc (gVisor)"},
			eval:  {"", "OCI runtime registered with Docker, e.g. runsc"},
			bench: {"", "OCI runtime registered with Docker, e.g. crun (for every sandbox measured, the floors' included)"}},
		"screen": {
			run:  {observe.DefaultScreen.String(), "virtual screen WIDTHxHEIGHT[xDEPTH]"},
			eval: {observe.DefaultScreen.String(), "virtual screen of the tasks that name none (neither the task nor its script)"}},
		"cpus":   {run: {cpus, "CPU limit"}, eval: {cpus, "CPU limit per sandbox"}},
		"memory": {run: {memory, "memory limit (e.g. 512m, 2g)"}, eval: {memory, "memory limit per sandbox"}},
		"pids":   {run: {pids, "process limit"}, eval: {pids, "process limit per sandbox"}},
		"tmpfs":  {run: {tmpfs, "size of the writable /tmp (app files, home)"}, eval: {tmpfs, "writable /tmp per sandbox"}},
		"no-wm":  {run: {false, "start no window manager"}},
		"no-glx": {run: {false, "start the X server without GLX, for an app that draws without OpenGL (faster start; as the manifest's \"opengl\": false)"}},
		"allow-unbounded-limits": {run: {false, allowUnboundedUsage}, eval: {false, allowUnboundedUsage},
			replay: {false, allowUnboundedUsage}, resume: {false, allowUnboundedUsage}},
		"guest-binary": {run: guest, replay: guest, resume: guest, eval: {"", "static agentbox binary to run inside the sandboxes"}},
		"timeout": {
			run:    {session.DefaultTimeout, "deadline for the agent loop (outcome failure)"},
			eval:   {session.DefaultTimeout, "per-episode deadline for tasks that name none"},
			replay: {time.Duration(0), "deadline for the replay's loop (default: the recording's, at least its duration plus a minute)"},
			resume: {time.Duration(0), "deadline for the resumed run's loop (default: the recording's, plus the time its replayed steps took)"}},
		"start-timeout": {run: startTimeout, replay: startTimeout, resume: startTimeout,
			eval: {session.DefaultStartTimeout, "deadline for creating each sandbox and starting its app"}},
		"ready-timeout": {
			run:  {time.Duration(0), readyTimeoutUsage},
			eval: {time.Duration(0), "deadline for each app's window and ready_output (default: the manifest's ready_timeout, else " + app.DefaultReadyTimeout.String() + ")"}},
		"log-cap": {
			run:  {sizeFlag(trace.DefaultLogCap), "cap on each of stdout.log and stderr.log, and on the window events recorded"},
			eval: {sizeFlag(trace.DefaultLogCap), "cap on each of an episode's stdout.log and stderr.log, and on the window events recorded"}},
		"settle": {run: {"none", settleUsage}, eval: {"none", settleUsage}},
		"max-steps": {
			run:  {session.DefaultMaxSteps, "stop after this many agent steps (outcome failure)"},
			eval: {session.DefaultMaxSteps, "per-episode step limit for agent tasks that name none"}},
		"max-rate": {
			run:  {session.DefaultMaxRate, "at most this many actions per second (0: no bound); waits are recorded as throttled_ms"},
			eval: {session.DefaultMaxRate, "at most this many actions per second per episode (0: no bound)"}},
		"freeze-while-thinking": {
			run:  {false, "freeze the app's processes while the agent decides (the frozen time is recorded apart)"},
			eval: {false, "freeze each app while its agent decides"}},
		"out": {
			run:    {"", "trace directory (must be new or empty; default ./agentbox-runs/RUN-ID)"},
			eval:   {"", "output directory (must be new or empty; default ./agentbox-evals/RUN-ID)"},
			replay: {"", "trace directory of the replay (must be new or empty; default ./agentbox-runs/RUN-ID)"},
			resume: {"", "trace directory of the resumed run (must be new or empty; default ./agentbox-runs/RUN-ID)"}},
		"env": {
			run:    {[]string(nil), "extra app environment variable KEY=VALUE (repeatable)"},
			eval:   {[]string(nil), "extra app environment variable KEY=VALUE for every task (repeatable; over the task's env)"},
			replay: {[]string(nil), "app environment variable KEY=VALUE (repeatable; values are never recorded, so give them again)"},
			resume: {[]string(nil), "app environment variable KEY=VALUE (repeatable; values are never recorded, so give them again)"}},
		"verbose": {run: verbose, replay: verbose, resume: verbose, eval: {false, "print every step of every episode, under its task and episode"}},
		"a11y": {
			run:  {false, "start the sandbox's private accessibility bus (D-Bus + AT-SPI): the tree can be read and actions can name elements"},
			eval: {false, "start each sandbox's accessibility bus"}},
		"observe": {
			run:  {false, "record the app's processes (exec, exit) and the files it changes below /tmp in the trace, by the guest outside the app's reach (the trusted observer; docs/observer.md)"},
			eval: {false, "record each app's processes and changed files in its trace (the trusted observer)"}},
		"a11y-tree": {
			run:  {false, "read the accessibility tree at every step, for the agent and the trace (implies --a11y)"},
			eval: {false, "read the accessibility tree at every step (implies --a11y)"}},
		"policy": {
			run:  {"", "policy file of allow/ask/deny rules every action passes before it runs (docs/policy.md)"},
			eval: {"", "policy file of allow/ask/deny rules every episode's actions pass before they run (docs/policy.md)"}},
		"approve": {
			run:  {"", "who answers the policy's asks: tty (a prompt here), live (a card on the live page: needs --live), deny (every ask denied; the default without a terminal or under CI)"},
			eval: {"", "who answers the policy's asks: tty, live (a card on each episode's live page: needs --live) or deny (the default without a terminal or under CI)"}},
		"marks": {
			run:  {false, "draw numbered boxes on the interactive elements of the agent's screenshot; a model may click a mark (implies --a11y-tree)"},
			eval: {false, "draw numbered marks on the agents' screenshots (implies --a11y-tree)"}},
	}
	for name, u := range networkFlagUses() {
		uses[name] = map[string]flagUse{run: u, eval: u}
	}
	for name, u := range serveFlagUses() {
		uses[name]["serve"] = u
	}
	return uses
}

// serveFlagUses are serve's uses of the sandbox flags: its sandboxes'
// defaults, which are also the most a client may ask for.
func serveFlagUses() map[string]flagUse {
	return map[string]flagUse{
		"backend":                {environment.Auto, backendUsage() + "; several comma-separated, the first the default"},
		"image":                  {"", "runtime image (default " + docker.DefaultImage + ")"},
		"runtime":                {"", "OCI runtime registered with Docker, e.g. runsc (gVisor)"},
		"guest-binary":           {"", "static agentbox binary to run inside the sandboxes (default: this one)"},
		"screen":                 {observe.DefaultScreen.String(), "the screen of an environment that names none"},
		"cpus":                   {environment.DefaultCPUs, "CPU limit per sandbox (the default and the most a client may ask for)"},
		"memory":                 {sizeFlag(environment.DefaultMemoryMB << 20), "memory limit per sandbox (the default and the most)"},
		"pids":                   {environment.DefaultPIDs, "process limit per sandbox (the default and the most)"},
		"tmpfs":                  {sizeFlag(environment.DefaultTmpfsMB << 20), "writable /tmp per sandbox (the default and the most)"},
		"no-wm":                  {false, "start no window manager"},
		"observe":                {false, "record every environment's processes and changed files in its traces (the trusted observer)"},
		"allow-unbounded-limits": {false, allowUnboundedUsage},
		"timeout":                {serve.DefaultTimeout, "deadline of an episode (the default and the most a client may ask for)"},
		"start-timeout":          {session.DefaultStartTimeout, "deadline for creating a sandbox and starting its app"},
		"ready-timeout":          {time.Duration(0), "deadline for an app's window and ready_output (default: the manifest's ready_timeout, else " + app.DefaultReadyTimeout.String() + ")"},
		"log-cap":                {sizeFlag(trace.DefaultLogCap), "cap on each of an episode's stdout.log and stderr.log, and on the window events recorded"},
		"settle":                 {"none", "the settle of an environment whose create request names none: " + settleChoices},
		"max-steps":              {serve.DefaultMaxSteps, "steps per episode (the default and the most)"},
		"max-rate":               {session.DefaultMaxRate, "at most this many actions per second per environment (0: no bound)"},
	}
}

// register adds the flags cmd takes to fl.
func (f *sandboxFlags) register(fl *pflag.FlagSet, cmd string) {
	f.cmd, f.taken = cmd, map[string]bool{}
	fields := map[string]any{
		"backend": &f.backend, "image": &f.image, "runtime": &f.ociRuntime, "guest-binary": &f.guestBinary,
		"screen": &f.screen, "cpus": &f.cpus, "memory": &f.memory, "pids": &f.pids, "tmpfs": &f.tmpfs, "no-wm": &f.noWM, "no-glx": &f.noGLX,
		"timeout": &f.timeout, "start-timeout": &f.startTimeout, "max-steps": &f.maxSteps, "max-rate": &f.maxRate,
		"ready-timeout": &f.readyTimeout, "log-cap": &f.logCap, "settle": &f.settle,
		"freeze-while-thinking": &f.freeze, "out": &f.out, "env": &f.env, "verbose": &f.verbose,
		"a11y": &f.a11y, "a11y-tree": &f.a11yTree, "marks": &f.marks, "observe": &f.observe, "allow-unbounded-limits": &f.allowUnbounded,
		"allow-net": &f.allowNet, "forward": &f.forward, "net-resolve": &f.netResolve,
		"net-max-bytes": &f.netMaxBytes, "net-max-rate": &f.netMaxRate,
		"policy": &f.policyFile, "approve": &f.approve,
	}
	short := map[string]string{"verbose": "v"}
	for name, uses := range sandboxFlagUses() {
		u, ok := uses[cmd]
		if cmd == "mcp" { // run's flags, with mcp's own uses where they differ (mcp.go)
			run, runTakes := uses["run"]
			u, ok = mcpFlagUse(name, run, runTakes)
		}
		if !ok {
			continue
		}
		f.taken[name] = true
		switch p := fields[name].(type) {
		case *string:
			fl.StringVarP(p, name, short[name], u.def.(string), u.help)
		case *[]string:
			fl.StringArrayVarP(p, name, short[name], u.def.([]string), u.help)
		case *int:
			fl.IntVarP(p, name, short[name], u.def.(int), u.help)
		case *float64:
			fl.Float64VarP(p, name, short[name], u.def.(float64), u.help)
		case *bool:
			fl.BoolVarP(p, name, short[name], u.def.(bool), u.help)
		case *time.Duration:
			fl.DurationVarP(p, name, short[name], u.def.(time.Duration), u.help)
		default:
			panic(fmt.Sprintf("cli: flag --%s: no field of a known type (%T)", name, p))
		}
	}
	if f.taken["guest-binary"] {
		_ = fl.MarkHidden("guest-binary")
	}
}

// takes reports whether the command registered the flag.
func (f *sandboxFlags) takes(name string) bool { return f.taken[name] }

// minStartTimeout is the shortest --start-timeout: the fastest cold
// starts measured (create and launch of xterm, idle two-core machine) took
// 150 ms on the local backend and 360 ms on Docker, and a loaded machine
// takes seconds: 100 ms is certain to fail, and a deadline below a second
// leaves no room for a machine that is busy for a moment.
const minStartTimeout = time.Second

// check holds the run's bounds to their rules, as usage errors naming the
// flag. Replay's and resume's --timeout may be 0: the recording's.
func (f *sandboxFlags) check() error {
	switch {
	case f.takes("timeout") && (f.cmd == "replay" || f.cmd == "resume") && f.timeout < 0:
		return usageErrorf("--timeout must not be negative (0: the recording's), got %v", f.timeout)
	case f.takes("timeout") && f.cmd != "replay" && f.cmd != "resume" && f.timeout <= 0:
		return usageErrorf("--timeout must be positive, got %v", f.timeout)
	case f.takes("start-timeout") && f.startTimeout <= 0:
		return usageErrorf("--start-timeout must be positive, got %v", f.startTimeout)
	case f.takes("start-timeout") && f.startTimeout < minStartTimeout:
		return usageErrorf("--start-timeout %v is too short: creating a sandbox and starting the app take 0.15 to 0.7 s on an idle machine and seconds on a busy one; give at least %v", f.startTimeout, minStartTimeout)
	case f.takes("max-steps") && f.maxSteps <= 0:
		return usageErrorf("--max-steps must be positive, got %d", f.maxSteps)
	case f.takes("max-rate") && !(f.maxRate >= 0):
		return usageErrorf("--max-rate must not be negative, got %s", num(f.maxRate))
	case f.takes("ready-timeout") && f.readyTimeout < 0:
		return usageErrorf("--ready-timeout must not be negative, got %v", f.readyTimeout)
	}
	return nil
}

// launch is the app's launch the flags ask for: the log cap in bytes and
// the settle (zero values when the command takes neither).
func (f *sandboxFlags) launch() (logCap int64, settle session.Settle, err error) {
	if f.takes("log-cap") {
		if logCap, err = parseSize("--log-cap", f.logCap); err != nil {
			return 0, settle, err
		}
		if err := checkRange("--log-cap", float64(logCap), 1, maxLogCap, " bytes"); err != nil {
			return 0, settle, err
		}
	}
	if f.takes("settle") {
		if settle, err = session.ParseSettle(f.settle); err != nil {
			return 0, settle, usageErrorf("--settle: %v", err)
		}
	}
	return logCap, settle, nil
}

// config is the sandbox the flags ask for: image, OCI runtime, screen (the
// zero Screen when the command has no --screen), limits, window manager,
// guest binary; every value checked.
func (f *sandboxFlags) config() (environment.Config, error) {
	cfg := environment.Config{Image: f.image, Runtime: f.ociRuntime, NoWM: f.noWM, NoGLX: f.noGLX, GuestBinary: f.guestBinary,
		A11y: f.a11y || f.a11yTree || f.marks, Observe: f.observe}
	if f.takes("screen") {
		s, err := observe.ParseScreen(f.screen)
		if err != nil {
			return cfg, usageErrorf("--screen %v", err)
		}
		cfg.Screen = s
	}
	if f.takes("memory") {
		mem, err := parseSize("--memory", f.memory)
		if err != nil {
			return cfg, err
		}
		tmpfs, err := parseSize("--tmpfs", f.tmpfs)
		if err != nil {
			return cfg, err
		}
		cfg.Resources = environment.Resources{CPUs: f.cpus, MemoryMB: int(mem >> 20), PIDs: f.pids, TmpfsMB: int(tmpfs >> 20)}
		if err := checkResources(cfg.Resources, flagNames); err != nil {
			return cfg, err
		}
	}
	if f.takes("allow-net") {
		p, err := f.network()
		if err != nil {
			return cfg, err
		}
		cfg.Network = p
	}
	return cfg, nil
}

// sandboxOptions are the sandbox flags completed and checked.
type sandboxOptions struct {
	env    environment.Config // the sandbox (config)
	appEnv map[string]string  // --env (envVars)
	logCap int64              // --log-cap in bytes (launch)
	settle session.Settle     // --settle (launch)
	gate   gateOptions        // --policy, --approve (gate)
}

// validate completes and checks the sandbox flags the command took, in the
// one order every command (run, eval, replay, mcp, serve) checks them: the
// run's bounds (check), the app's launch (launch), the sandbox (config),
// --env (envVars). The same
// mistake is the same error from each; a command's own flags are checked
// before these, the backend after.
func (f *sandboxFlags) validate() (sandboxOptions, error) {
	var o sandboxOptions
	if err := f.check(); err != nil {
		return o, err
	}
	logCap, settle, err := f.launch()
	if err != nil {
		return o, err
	}
	env, err := f.config()
	if err != nil {
		return o, err
	}
	appEnv, err := f.envVars()
	if err != nil {
		return o, err
	}
	gate, err := f.gate()
	if err != nil {
		return o, err
	}
	return sandboxOptions{env: env, appEnv: appEnv, logCap: logCap, settle: settle, gate: gate}, nil
}

// envVars is --env, each variable held to the rule of a manifest's env
// (app.CheckEnv).
func (f *sandboxFlags) envVars() (map[string]string, error) {
	m, err := parseKV("--env", f.env)
	if err != nil {
		return nil, err
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if err := app.CheckEnv(k, m[k]); err != nil {
			return nil, usageErrorf("--env %s: %v", k, err)
		}
	}
	return m, nil
}

// settleChoices are --settle's values; the default of stable and its cap
// are session's.
var settleChoices = fmt.Sprintf("none, fixed:DURATION (wait that long), or stable[:DURATION] (until the screen is unchanged that long, default %v, at most %v: a settle that hit the cap is flagged in the trace and the report)",
	session.DefaultStable, session.StableCap)

// settleUsage is the help of --settle (run, eval).
var settleUsage = "before each screenshot after an action: " + settleChoices

// readyTimeoutUsage is the help of run's --ready-timeout.
var readyTimeoutUsage = "deadline for the app's window and ready_output (default: the manifest's ready_timeout, else " + app.DefaultReadyTimeout.String() + ")"

// sizeFlag is a size in bytes as a flag's default is written: in GiB or
// MiB where whole ("1g", "256m"), else in bytes.
func sizeFlag(b int64) string {
	switch {
	case b > 0 && b%(1<<30) == 0:
		return fmt.Sprintf("%dg", b>>30)
	case b > 0 && b%(1<<20) == 0:
		return fmt.Sprintf("%dm", b>>20)
	}
	return fmt.Sprint(b)
}

// parseSize reads a size in bytes with an optional binary unit (go-units'
// RAMInBytes: "512m", "2g", "64k", "1.5GiB") or a plain number of bytes.
func parseSize(flag, s string) (int64, error) {
	v, err := units.RAMInBytes(strings.TrimSpace(s))
	if err != nil || v <= 0 || v > 1<<50 {
		return 0, usageErrorf("%s %q: want a size like 512m or 2g", flag, s)
	}
	return v, nil
}
