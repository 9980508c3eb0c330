// Package e2e drives the real agentbox binary against real Docker, the real
// runtime image and real apps, the way a user does from a terminal.
package e2e

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/codegirl-games/agentbox/agent/openai/openaitest"
	"github.com/codegirl-games/agentbox/cli"
	"github.com/codegirl-games/agentbox/environment/envtest/probeout"
	"github.com/codegirl-games/agentbox/internal/lockrank"
	"github.com/codegirl-games/agentbox/internal/testenv"
	"github.com/codegirl-games/agentbox/trace"
)

func TestMain(m *testing.M) {
	// Every agentbox these tests start checks session's lock order
	// (session/lockorder.go): a lock taken out of it panics the run.
	os.Setenv(lockrank.EnvVar, "1")
	// Runs go into an index of the tests' own, not the user's.
	index, err := os.MkdirTemp("", "agentbox-e2e-index-")
	if err == nil {
		os.Setenv("AGENTBOX_INDEX", filepath.Join(index, "index.db"))
	}
	code := m.Run()
	testenv.CleanupBuilds()
	if index != "" {
		os.RemoveAll(index)
	}
	os.Exit(code)
}

// result is one finished agentbox invocation.
type result struct {
	code           int
	stdout, stderr string
	dir            string // the trace directory (--out)
}

func (r result) String() string {
	return "exit " + itoa(r.code) + "\nstdout:\n" + r.stdout + "\nstderr:\n" + r.stderr
}

func itoa(n int) string { return strconv.Itoa(n) }

// agentbox runs the CLI to completion with a trace directory of its own.
func agentbox(t *testing.T, args ...string) result {
	t.Helper()
	bin := testenv.Build(t, "./cmd/agentbox")
	dir := filepath.Join(t.TempDir(), "trace")
	if args[0] == "run" {
		args = append(args[:2:2], append([]string{"--out", dir}, args[2:]...)...)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	err := cmd.Run()
	r := result{stdout: so.String(), stderr: se.String(), dir: dir}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("agentbox %v: %v", args, err)
	}
	return r
}

// cliMain runs the CLI in this process, as cmd/agentbox does
// (cli.Main), with a trace directory of its own like agentbox. It is for
// what is rejected before anything starts — flags, manifests, scripts,
// suites, traces given as input — so those tables need no binary and run
// under -short too; everything else runs the real binary.
func cliMain(t *testing.T, args ...string) result {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "trace")
	if args[0] == "run" {
		args = append(args[:2:2], append([]string{"--out", dir}, args[2:]...)...)
	}
	var so, se bytes.Buffer
	code := cli.Main(args, &so, &se)
	return result{code: code, stdout: so.String(), stderr: se.String(), dir: dir}
}

// stubApp is an app directory whose command is a shell script named
// mover: enough for everything checked before a sandbox starts, without
// building the mover.
func stubApp(t *testing.T, manifest string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "mover"), []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if manifest == "" {
		manifest = `{"command": "mover", "window_title": "mover"}`
	}
	if err := os.WriteFile(filepath.Join(dir, "agentbox.json"), []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// moverApp builds the mover demo into a fresh app directory with a manifest.
func moverApp(t *testing.T, manifest string) string {
	t.Helper()
	return moverAppTB(t, manifest)
}

// moverAppTB is moverApp for a benchmark too.
func moverAppTB(t testing.TB, manifest string) string {
	t.Helper()
	bin := testenv.Build(t, "./examples/mover")
	dir := t.TempDir()
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "mover"), data, 0o755); err != nil {
		t.Fatal(err)
	}
	if manifest == "" {
		manifest = `{"command": "mover", "window_title": "mover", "ready_output": "mover: ready", "ready_timeout": "20s"}`
	}
	if err := os.WriteFile(filepath.Join(dir, "agentbox.json"), []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func openTrace(t *testing.T, dir string) *trace.Trace {
	t.Helper()
	tr, err := trace.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// assertNoContainers fails if any container of the run is left; a runID
// ending in "*" matches every run with that prefix (an eval's episodes).
func assertNoContainers(t *testing.T, runID string) {
	t.Helper()
	cli, err := client.New(client.FromEnv)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	prefix, isPrefix := strings.CutSuffix(runID, "*")
	f := make(client.Filters).Add("label", "dev.agentbox.tool=agentbox")
	if runID != "" && !isPrefix {
		f.Add("label", "dev.agentbox.run="+runID)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		list, err := cli.ContainerList(t.Context(), client.ContainerListOptions{All: true, Filters: f})
		if err != nil {
			t.Fatal(err)
		}
		if isPrefix {
			kept := list.Items[:0]
			for _, c := range list.Items {
				if strings.HasPrefix(c.Labels["dev.agentbox.run"], prefix) {
					kept = append(kept, c)
				}
			}
			list.Items = kept
		}
		if len(list.Items) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d container(s) of run %q left behind: %s", len(list.Items), runID, list.Items[0].ID[:12])
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// readPNG decodes a PNG file (a trace's screenshot, a replay's diff).
func readPNG(t *testing.T, path string) image.Image {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return img
}

// centroid is the mean x and the number of the green square's pixels in a
// screenshot, computed here from the PNG, not by the demo agent's code it
// checks.
func centroid(t *testing.T, path string) (float64, int) {
	t.Helper()
	return openaitest.GreenX(readPNG(t, path))
}

func TestMoverDemo(t *testing.T) {
	testenv.Require(t, testenv.Image(testenv.RuntimeImage))
	app := moverApp(t, "")
	r := agentbox(t, "run", app, "--task", "Move the character right.", "--agent", "demo")
	if r.code != 0 {
		t.Fatalf("want exit 0:\n%s", r)
	}
	if !strings.Contains(r.stdout, "trace: "+r.dir) {
		t.Errorf("stdout does not say where the trace is:\n%s", r.stdout)
	}
	tr := openTrace(t, r.dir)
	if tr.Incomplete || tr.Run.Outcome != trace.Success || len(tr.Missing) > 0 {
		t.Fatalf("trace: incomplete=%v outcome=%s missing=%v", tr.Incomplete, tr.Run.Outcome, tr.Missing)
	}
	// The manifest's ready_output held the loop until the first frame was
	// drawn, so the demo agent saw the square at once: four steps.
	if len(tr.Steps) != 4 {
		t.Fatalf("%d steps, want 4 (key_down, wait, key_up, done)", len(tr.Steps))
	}
	if _, ok := tr.Run.Timings["ready_output"]; !ok || !strings.Contains(r.stderr, `the app printed "mover: ready"`) {
		t.Errorf("no wait for ready_output: timings %v\n%s", tr.Run.Timings, r.stderr)
	}
	// Computed by the test from the PNGs: before holding Right, and after
	// the one-second wait.
	before, n0 := centroid(t, filepath.Join(r.dir, tr.Steps[0].Observation.Screenshot))
	after, n1 := centroid(t, filepath.Join(r.dir, tr.Steps[2].Observation.Screenshot))
	if n0 == 0 || n1 == 0 {
		t.Fatalf("no green square in the screenshots (%d, %d pixels)", n0, n1)
	}
	if after-before < 100 {
		t.Errorf("centroid moved %.1f px (%.1f → %.1f), want ≥ 100", after-before, before, after)
	}
	t.Logf("centroid %.1f → %.1f (+%.1f px); timings %v", before, after, after-before, tr.Run.Timings)
	for _, f := range []string{trace.StdoutFile, trace.StderrFile, trace.ActionsFile} {
		if _, err := os.Stat(filepath.Join(r.dir, f)); err != nil {
			t.Error(err)
		}
	}
	stdout, _ := os.ReadFile(filepath.Join(r.dir, trace.StdoutFile))
	if !strings.Contains(string(stdout), "mover: key Right down") {
		t.Errorf("stdout.log lacks the app's key report:\n%s", stdout)
	}
	// README's usage sample is this run's output, but for the run's ID,
	// its paths and its numbers: the same lines, in the same order. Lines
	// about leftovers of other agentbox processes the run removed first
	// depend on what ran before on the machine (the other e2e shard kills
	// agentbox processes on purpose), and are not the sample's.
	shape := func(text string) []string {
		text = regexp.MustCompile(`(?m)^agentbox: removed (leftover sandbox|\d+ temporary director).*\n`).ReplaceAllString(text, "")
		text = strings.ReplaceAll(text, r.dir, "TRACE")
		text = strings.ReplaceAll(text, "agentbox-runs/RUN", "TRACE")
		text = strings.ReplaceAll(text, app, "APP")
		text = strings.ReplaceAll(text, "examples/mover", "APP")
		text = regexp.MustCompile(`\d+(\.\d+)?`).ReplaceAllString(text, "N")
		return strings.Split(strings.TrimSpace(text), "\n")
	}
	runID := regexp.MustCompile(`\d{8}-\d{6}-[a-z0-9.]+-[0-9a-f]{6}`)
	readme, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	sample := string(readme)
	sample = sample[strings.Index(sample, "## Usage"):]
	sample = sample[strings.Index(sample, "```\nagentbox: ")+4:] // the block of output after the commands
	sample = sample[:strings.Index(sample, "```")]
	got, want := shape(runID.ReplaceAllString(r.stderr+r.stdout, "RUN")), shape(runID.ReplaceAllString(sample, "RUN"))
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("README.md's usage sample does not have the run's lines:\nrun:\n%s\nsample:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	assertNoContainers(t, tr.Run.ID)
}

func TestMoverBrokenInput(t *testing.T) {
	testenv.Require(t, testenv.Image(testenv.RuntimeImage))
	r := agentbox(t, "run", moverApp(t, ""), "--agent", "demo", "--agent-opt", "key=Left")
	if r.code != 1 {
		t.Fatalf("want exit 1:\n%s", r)
	}
	tr := openTrace(t, r.dir)
	if tr.Run.Outcome != trace.Failure || tr.Incomplete {
		t.Errorf("outcome %s, incomplete %v", tr.Run.Outcome, tr.Incomplete)
	}
	assertNoContainers(t, tr.Run.ID)
}

func TestPosture(t *testing.T) {
	testenv.Require(t, testenv.Image(testenv.RuntimeImage))
	probe := testenv.Build(t, "./environment/envtest/probe")
	dir := t.TempDir()
	data, _ := os.ReadFile(probe)
	os.WriteFile(filepath.Join(dir, "probe"), data, 0o755)
	os.WriteFile(filepath.Join(dir, "agentbox.json"), []byte(`{"command":"probe","args":["posture","","stay"],"wait_for_window":false}`), 0o644)
	t.Setenv("AGENTBOX_TEST_SECRET", "do-not-leak")
	r := agentbox(t, "run", dir, "--agent", "idle", "--agent-opt", "ms=300", "--tmpfs", "128m")
	if r.code != 0 {
		t.Fatalf("want exit 0:\n%s", r)
	}
	out, _ := os.ReadFile(filepath.Join(r.dir, trace.StdoutFile))
	var p probeout.Posture
	if found, err := probeout.Find(string(out), probeout.KindPosture, &p); !found || err != nil {
		t.Fatalf("no posture in stdout.log (%v): %q", err, out)
	}
	rofs := syscall.EROFS.Error()
	checks := []struct {
		what string
		ok   bool
		got  any
	}{
		{"uid is not 0", p.UID != 0, p.UID},
		{"CapEff is 0", p.CapEff == "0000000000000000", p.CapEff},
		{"NoNewPrivs is 1", p.NoNewPrivs == "1", p.NoNewPrivs},
		{"seccomp filter on", p.Seccomp == "2", p.Seccomp},
		{"only lo", len(p.Interfaces) == 1 && p.Interfaces[0] == "lo", p.Interfaces},
		{"root read-only", p.Writes["/"] == rofs, p.Writes["/"]},
		{"/usr read-only", p.Writes["/usr"] == rofs, p.Writes["/usr"]},
		{"tmpfs writable", p.Writes["/tmp"] == "", p.Writes["/tmp"]},
		{"home writable", p.Home != "" && p.Writes[p.Home] == "", p.Writes},
		{"tmpfs capped at 128 MiB", p.TmpBytes == 128<<20, p.TmpBytes},
		{"shm capped", p.ShmBytes > 0 && p.ShmBytes <= 64<<20, p.ShmBytes},
		{"app runs from tmpfs", p.ExeOnTmp, p.ExeOnTmp},
		{"host env not visible", !slices.Contains(p.EnvKeys, "AGENTBOX_TEST_SECRET"), p.EnvKeys},
	}
	for _, c := range checks {
		if !c.ok {
			t.Errorf("%s: got %v", c.what, c.got)
		}
	}
	assertNoContainers(t, openTrace(t, r.dir).Run.ID)
}

func TestCleanupOnAppFailures(t *testing.T) {
	testenv.Require(t, testenv.Image(testenv.RuntimeImage))
	tests := []struct {
		name     string
		manifest string
		code     int
		reason   string
	}{
		// -no-window: the app exits before any window exists. With a
		// window, -crash-after 1ms still maps it first (the timer is only
		// read once the window is open), and a fast start sees it up and
		// ends the run as app_exited (fresh-clone CI, stop 37).
		{"crash at start", `{"command":"mover","args":["-no-window","-crash-after","1ms"],"window_title":"mover","ready_timeout":"20s"}`, 3, trace.ReasonAppStart},
		{"never opens its window", `{"command":"mover","args":["-no-window"],"window_title":"mover","ready_timeout":"2s"}`, 3, trace.ReasonNoWindow},
		{"crash mid-run", `{"command":"mover","args":["-crash-after","1500ms"],"window_title":"mover","ready_timeout":"20s"}`, 1, trace.ReasonAppExited},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := agentbox(t, "run", moverApp(t, tt.manifest), "--agent", "idle", "--agent-opt", "ms=4000")
			if r.code != tt.code {
				t.Fatalf("want exit %d:\n%s", tt.code, r)
			}
			tr := openTrace(t, r.dir)
			if tr.Run.Reason != tt.reason || tr.Incomplete {
				t.Errorf("reason %q (%s), incomplete %v", tr.Run.Reason, tr.Run.Message, tr.Incomplete)
			}
			if tt.reason == trace.ReasonAppExited && (tr.Run.AppExit == nil || tr.Run.AppExit.Code != 3) {
				t.Errorf("app exit = %+v, want code 3", tr.Run.AppExit)
			}
			assertNoContainers(t, tr.Run.ID)
		})
	}
}

func TestSIGINT(t *testing.T) {
	testenv.Require(t, testenv.Image(testenv.RuntimeImage))
	bin := testenv.Build(t, "./cmd/agentbox")
	dir := filepath.Join(t.TempDir(), "trace")
	run := startBackground(t, bin, "run", moverApp(t, ""), "--out", dir, "--agent", "idle", "--agent-opt", "ms=60000")
	run.waitForSteps(t, dir)
	run.cmd.Process.Signal(os.Interrupt)
	if code := run.wait(t, 30*time.Second, "of SIGINT"); code != 130 {
		t.Errorf("exit %d, want 130\n%s", code, run.stderr.String())
	}
	tr := openTrace(t, dir)
	if tr.Run.Outcome != trace.Interrupted || tr.Incomplete {
		t.Errorf("outcome %s, incomplete %v", tr.Run.Outcome, tr.Incomplete)
	}
	assertNoContainers(t, tr.Run.ID)
}

// TestStagingRejects: an app that reaches outside its directory is a usage
// error before anything starts (in-process; --backend docker names a
// backend without asking a daemon, so the table needs none).
func TestStagingRejects(t *testing.T) {
	trav := t.TempDir()
	os.WriteFile(filepath.Join(trav, "agentbox.json"), []byte(`{"command":"../../bin/sh"}`), 0o644)
	link := stubApp(t, "")
	os.Symlink("/etc/passwd", filepath.Join(link, "passwd"))
	// Each link looks local on its own; t resolves to the app directory's
	// parent once s is followed (issue 12).
	chain := stubApp(t, "")
	os.Symlink(".", filepath.Join(chain, "s"))
	os.Symlink("s/..", filepath.Join(chain, "t"))
	os.Symlink("t/..", filepath.Join(chain, "u"))
	tests := []struct {
		name, dir, want string
	}{
		{"manifest with ../", trav, "leaves the app directory"},
		{"symlink to /etc/passwd", link, "passwd"},
		{"symlink chain s -> ., t -> s/..", chain, "/t: symbolic link to s/.. leaves the app directory (through s -> .)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := cliMain(t, "run", tt.dir, "--backend", "docker", "--agent", "demo")
			if r.code != 2 || !strings.Contains(r.stderr, tt.want) {
				t.Fatalf("want exit 2 naming %q:\n%s", tt.want, r)
			}
			if _, err := os.Stat(r.dir); err == nil {
				t.Errorf("a trace was started for a rejected app")
			}
		})
	}
}

// TestGC starts labelled containers whose owner is dead and one whose owner
// is alive (this test), and checks that gc removes exactly the dead one.
func TestGC(t *testing.T) {
	testenv.Require(t, testenv.Image(testenv.RuntimeImage))
	cli, err := client.New(client.FromEnv)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	host, _ := os.Hostname()
	mk := func(run, pid string) string {
		cr, err := cli.ContainerCreate(t.Context(), client.ContainerCreateOptions{
			Config: &container.Config{
				Image: testenv.RuntimeImage, Cmd: []string{"sleep", "600"},
				Labels: map[string]string{
					"dev.agentbox.tool": "agentbox", "dev.agentbox.run": run,
					"dev.agentbox.owner.pid": pid, "dev.agentbox.owner.host": host,
				},
			},
			HostConfig: &container.HostConfig{NetworkMode: "none"},
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			cli.ContainerRemove(context.Background(), cr.ID, client.ContainerRemoveOptions{Force: true})
		})
		if _, err := cli.ContainerStart(t.Context(), cr.ID, client.ContainerStartOptions{}); err != nil {
			t.Fatal(err)
		}
		return cr.ID
	}
	liveRun := "gc-live-" + itoa(os.Getpid())
	mk(liveRun, itoa(os.Getpid()))
	exists := func(run string) bool {
		list, err := cli.ContainerList(t.Context(), client.ContainerListOptions{All: true,
			Filters: make(client.Filters).Add("label", "dev.agentbox.run="+run)})
		if err != nil {
			t.Fatal(err)
		}
		return len(list.Items) > 0
	}

	// Every agentbox command removes a dead owner's sandboxes as it
	// starts, so another agentbox on this machine (the other e2e shard)
	// may remove the dead container before this test's gc looks: then
	// the container is gone without gc's word, and the test makes
	// another. A gc that leaves it in place, or says nothing of it while
	// it was there, fails.
	for try := 1; ; try++ {
		deadRun := fmt.Sprintf("gc-dead-%d-%d", os.Getpid(), try)
		mk(deadRun, "999999999")
		r := agentbox(t, "gc", "--dry-run")
		listed := r.code == 0 && strings.Contains(r.stdout, "would remove") && strings.Contains(r.stdout, deadRun)
		if !listed && (r.code != 0 || exists(deadRun)) {
			t.Fatalf("gc --dry-run:\n%s", r)
		}
		if listed {
			r = agentbox(t, "gc")
			if r.code != 0 || strings.Contains(r.stdout, liveRun) {
				t.Fatalf("gc:\n%s", r)
			}
			listed = strings.Contains(r.stdout, deadRun)
			if !listed && exists(deadRun) {
				t.Fatalf("gc left the dead owner's container:\n%s", r)
			}
		}
		assertNoContainers(t, deadRun)
		if listed {
			break
		}
		if try == 5 {
			t.Fatalf("another agentbox removed the dead owner's container before this test's gc, 5 times")
		}
		t.Logf("try %d: another agentbox removed the dead owner's container first", try)
	}
	list, _ := cli.ContainerList(t.Context(), client.ContainerListOptions{All: true,
		Filters: make(client.Filters).Add("label", "dev.agentbox.run="+liveRun)})
	if len(list.Items) != 1 {
		t.Errorf("gc removed the container of a live owner")
	}
}

// TestSIGKILL: a killed agentbox leaves nothing running for long: the
// guest sees its stdin close and exits, and the container removes itself;
// what would remain is gc's.
func TestSIGKILL(t *testing.T) {
	testenv.Require(t, testenv.Image(testenv.RuntimeImage))
	bin := testenv.Build(t, "./cmd/agentbox")
	dir := filepath.Join(t.TempDir(), "trace")
	run := startBackground(t, bin, "run", moverApp(t, ""), "--out", dir, "--agent", "idle", "--agent-opt", "ms=60000")
	run.waitForSteps(t, dir)
	run.kill()
	tr := openTrace(t, dir)
	if !tr.Incomplete {
		t.Error("a killed run's trace is not marked incomplete")
	}
	if len(tr.Steps) == 0 {
		t.Error("the killed run's first step is not readable")
	}
	r := agentbox(t, "gc")
	if r.code != 0 {
		t.Fatalf("gc: %s", r)
	}
	assertNoContainers(t, tr.Run.ID)
}
