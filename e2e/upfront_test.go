package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/environment/local"
	"github.com/codegirl-games/agentbox/internal/testenv"
	"github.com/codegirl-games/agentbox/trace"
)

// autoNote is what --backend auto says when it takes a backend: only when
// a sandbox is about to start.
const autoNote = "--backend auto: using"

// TestRefusedBeforeAnythingStarts: what is certain to fail is a usage
// error (exit 2) before a trace or a sandbox exists, and before --backend
// auto says which backend it took: an --out that is not empty, more CPUs
// than the machine has (asked of the backend), a process limit below what
// the desktop needs, a start deadline no sandbox meets, an environment
// name a manifest could not have; in eval, before the first episode.
func TestRefusedBeforeAnythingStarts(t *testing.T) {
	testenv.Require(t, testenv.Docker())
	app := stubApp(t, "")
	full := t.TempDir()
	if err := os.WriteFile(filepath.Join(full, "x"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tooMany := strconv.Itoa(min(2*runtime.NumCPU()+1, 1024))
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	busy := taken.Addr().String()
	suite := filepath.Join(t.TempDir(), "suite.yaml")
	if err := os.WriteFile(suite, []byte("tasks:\n  - {name: t, target: "+app+", agent: idle, episodes: 2}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"run", app, "--agent", "idle", "--out", full}, "--out " + full + " exists and is not empty"},
		{[]string{"run", app, "--agent", "idle", "--cpus", tooMany}, "--cpus is " + tooMany + ": this machine has"},
		{[]string{"run", app, "--agent", "idle", "--backend", "local", "--cpus", tooMany}, "--cpus is " + tooMany + ": this machine has"},
		{[]string{"run", app, "--agent", "idle", "--pids", "5"}, "--pids is 5: too few: the desktop alone"},
		{[]string{"run", app, "--agent", "idle", "--start-timeout", "100ms"}, "--start-timeout 100ms is too short"},
		{[]string{"run", app, "--agent", "idle", "--env", "BAD-NAME=1"}, `"BAD-NAME" is not a valid variable name`},
		{[]string{"eval", suite, "--cpus", tooMany}, "--cpus is " + tooMany + ": this machine has"},
		{[]string{"eval", suite, "--pids", "5"}, "--pids is 5: too few"},
		{[]string{"eval", suite, "--env", "1X=y"}, `"1X" is not a valid variable name`},
		// The live page listens on loopback only, and a busy port is the
		// user's to change.
		{[]string{"run", app, "--agent", "idle", "--live=0.0.0.0:0"}, "--live: live: 0.0.0.0:0 is not a loopback address"},
		{[]string{"run", app, "--agent", "idle", "--live=" + busy}, "--live: live: listen on " + busy},
		{[]string{"eval", suite, "--live=0.0.0.0:0"}, "the live page listens on loopback only"},
	} {
		r := cliMain(t, c.args...)
		if r.code != 2 || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%v: want exit 2 and %q:\n%s", c.args, c.want, r)
		}
		if strings.Contains(r.stderr, autoNote) {
			t.Errorf("%v: the backend note came before the usage error:\n%s", c.args, r.stderr)
		}
		if _, err := os.Stat(r.dir); err == nil {
			t.Errorf("%v: a trace was started", c.args)
		}
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(suite), "agentbox-evals")); err == nil {
		t.Errorf("eval made an output directory before refusing")
	}
	// The local backend without a cgroup of its own bounds memory per
	// process: below what the Go runtime needs, nothing starts.
	l, err := (&local.Backend{}).HostLimits(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if l.MinMemoryMB > 0 {
		r := cliMain(t, "run", app, "--agent", "idle", "--backend", "local", "--tmpfs", "1m", "--memory", "70m", "--allow-unbounded-limits")
		if r.code != 2 || !strings.Contains(r.stderr, "--memory is 70 MiB: without cgroups of its own") {
			t.Errorf("local --memory 70m: want exit 2 saying why:\n%s", r)
		}
	}
}

// TestLimitsAtTheirFloor: the floors are not above what works: at
// --pids 40 (environment.MinPIDs) a one-process app starts on each
// backend, and on the local backend bounded by rlimits, so it does at the
// memory floor. Here --backend auto says which backend it took (the
// control of the note's absence above).
func TestLimitsAtTheirFloor(t *testing.T) {
	testenv.Require(t, testenv.Image(testenv.RuntimeImage))
	floor := strconv.Itoa(environment.MinPIDs)
	r := agentbox(t, "run", "xterm", "--agent", "idle", "--agent-opt", "ms=300", "--pids", floor)
	if r.code != 0 || !strings.Contains(r.stderr, autoNote+" docker") {
		t.Errorf("docker at --pids %s: want exit 0 and the backend note:\n%s", floor, r)
	}
	requireLocal(t)
	args := []string{"run", "xterm", "--agent", "idle", "--agent-opt", "ms=300", "--backend", "local", "--pids", floor}
	l, err := (&local.Backend{}).HostLimits(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if l.MinMemoryMB > 0 {
		args = append(args, "--tmpfs", "1m", "--memory", strconv.Itoa(l.MinMemoryMB)+"m", "--allow-unbounded-limits")
	}
	if r := agentbox(t, args...); r.code != 0 {
		t.Errorf("local at its floors %v: want exit 0:\n%s", args, r)
	}
}

// TestJSONOutput: --json prints one JSON object on stdout, messages stay on
// stderr; a command that fails before it has its object prints the error
// as one; --version is version.
func TestJSONOutput(t *testing.T) {
	testenv.Require(t, testenv.Image(testenv.RuntimeImage))
	one := func(t *testing.T, what, stdout string, v any) {
		t.Helper()
		dec := json.NewDecoder(strings.NewReader(stdout))
		if err := dec.Decode(v); err != nil {
			t.Fatalf("%s: stdout is not a JSON object: %v\n%s", what, err, stdout)
		}
		if dec.More() {
			t.Errorf("%s: more than one JSON value on stdout:\n%s", what, stdout)
		}
	}
	t.Run("run", func(t *testing.T) {
		r := agentbox(t, "run", "xterm", "--agent", "idle", "--agent-opt", "ms=200", "--json")
		var got struct {
			ID, Outcome, Trace, Backend string
			ExitCode                    int `json:"exit_code"`
			Steps                       int
		}
		one(t, "run --json", r.stdout, &got)
		if r.code != 0 || got.Outcome != "success" || got.ExitCode != 0 || got.Steps != 2 || got.Trace != r.dir || got.Backend != "docker" {
			t.Errorf("run --json: %+v\n%s", got, r)
		}
		if !strings.Contains(r.stderr, "agentbox: run "+got.ID) {
			t.Errorf("the messages are not on stderr:\n%s", r.stderr)
		}
	})
	t.Run("a usage error", func(t *testing.T) {
		r := cliMain(t, "run", "xterm", "--agent", "idle", "--pids", "5", "--json")
		var got struct {
			Error    string
			ExitCode int `json:"exit_code"`
		}
		one(t, "run --json, refused", r.stdout, &got)
		if r.code != 2 || got.ExitCode != 2 || !strings.Contains(got.Error, "--pids is 5") || !strings.Contains(r.stderr, "--pids is 5") {
			t.Errorf("%+v\n%s", got, r)
		}
	})
	t.Run("version", func(t *testing.T) {
		r := cliMain(t, "version", "--json")
		var got struct {
			Version      string
			TraceFormat  string `json:"trace_format"`
			TraceVersion int    `json:"trace_version"`
			WireProtocol int    `json:"wire_protocol"`
		}
		one(t, "version --json", r.stdout, &got)
		if r.code != 0 || got.Version == "" || got.TraceFormat != trace.Format || got.TraceVersion != trace.Version || got.WireProtocol == 0 {
			t.Errorf("%+v\n%s", got, r)
		}
		v := cliMain(t, "--version")
		if plain := cliMain(t, "version"); v.code != 0 || v.stdout != plain.stdout || !strings.HasPrefix(v.stdout, "agentbox ") {
			t.Errorf("--version %q, version %q", v.stdout, plain.stdout)
		}
	})
	t.Run("doctor", func(t *testing.T) {
		r := agentbox(t, "doctor", "--json")
		var got struct {
			Backends []struct {
				Name   string
				Ready  bool
				Checks []struct {
					Name string
					OK   bool
				}
			}
			Auto     string
			Ready    bool
			ExitCode int `json:"exit_code"`
		}
		one(t, "doctor --json", r.stdout, &got)
		var names []string
		for _, b := range got.Backends {
			names = append(names, b.Name)
		}
		// Every built-in backend is checked; docker's checks pass here and
		// auto takes it (kubernetes needs a cluster: not ready, exit 0 all
		// the same, since auto does not take it).
		if r.code != got.ExitCode || fmt.Sprint(names) != "[docker kubernetes local]" || got.Auto != "docker" || !got.Ready || len(got.Backends[0].Checks) == 0 || !got.Backends[0].Ready {
			t.Errorf("doctor --json: %+v\n%s", got, r)
		}
	})
	t.Run("eval", func(t *testing.T) {
		// An app that prints its environment, then opens a window.
		dir := t.TempDir()
		app := filepath.Join(dir, "app")
		os.MkdirAll(app, 0o755)
		os.WriteFile(filepath.Join(app, "agentbox.json"), []byte(`{"command":"sh","args":["-c","echo FROM_FLAG=$FROM_FLAG FROM_TASK=$FROM_TASK; exec xterm"]}`), 0o644)
		suite := filepath.Join(dir, "suite.yaml")
		os.WriteFile(suite, []byte("name: j\ntasks:\n  - {name: env, target: app, agent: idle, options: {ms: \"200\"}, env: {FROM_TASK: task, FROM_FLAG: task}}\n"), 0o644)
		out := filepath.Join(dir, "out")
		r := run0(t, "eval", suite, "--out", out, "--json", "-v", "--env", "FROM_FLAG=flag", "--screen", "800x600", "--settle", "stable:100ms")
		var got struct {
			Suite       string
			Out         string
			SummaryFile string `json:"summary_file"`
			ExitCode    int    `json:"exit_code"`
			Episodes    []struct{ Category, Trace string }
		}
		one(t, "eval --json", r.stdout, &got)
		if r.code != 0 || got.ExitCode != 0 || got.Out != out || got.SummaryFile != filepath.Join(out, "summary.json") || len(got.Episodes) != 1 || got.Episodes[0].Category != "passed" {
			t.Fatalf("eval --json: %+v\n%s", got, r)
		}
		if !strings.Contains(r.stderr, "env #1: step 1: wait 200ms") {
			t.Errorf("-v: no steps under the episode's name on stderr:\n%s", r.stderr)
		}
		tr := openTrace(t, filepath.Join(out, got.Episodes[0].Trace))
		if tr.Run.Env.Screen.Width != 800 || tr.Run.Settings.Settle != "stable:100ms" {
			t.Errorf("episode ran at %v with settle %q; want 800x600 and stable:100ms", tr.Run.Env.Screen, tr.Run.Settings.Settle)
		}
		log, _ := os.ReadFile(filepath.Join(out, got.Episodes[0].Trace, trace.StdoutFile))
		if !strings.Contains(string(log), "FROM_FLAG=flag FROM_TASK=task") {
			t.Errorf("the app printed %q; want --env over the task's env, and the task's own", log)
		}
	})
}
