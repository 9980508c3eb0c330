package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/client"
	"github.com/codegirl-games/agentbox/internal/testenv"
	"github.com/codegirl-games/agentbox/serve/api"
)

// pythonWithPytest is the first of $AGENTBOX_PYTHON, python3 in PATH and
// /usr/bin/python3 that imports pytest: Debian's python3-pytest installs
// for /usr/bin/python3, which another python3 earlier in PATH (pyenv, a
// virtual environment) does not see.
func pythonWithPytest(ctx context.Context) (string, error) {
	var tried []string
	for _, p := range []string{os.Getenv("AGENTBOX_PYTHON"), "python3", "/usr/bin/python3"} {
		if p == "" {
			continue
		}
		path, err := exec.LookPath(p)
		if err != nil {
			tried = append(tried, fmt.Sprintf("%s: %v", p, err))
			continue
		}
		out, err := exec.CommandContext(ctx, path, "-c", "import pytest").CombinedOutput()
		if err != nil {
			tried = append(tried, fmt.Sprintf("%s: %v: %s", path, err, strings.TrimSpace(string(out))))
			continue
		}
		return path, nil
	}
	return "", errors.New(strings.Join(tried, "; "))
}

// TestPythonClient runs the Python client's tests (python/tests, with
// pytest) against the real binary serving the mover on Docker, and the
// example that plays it (examples/python/play_mover.py, run by one of
// them). Afterwards the server stops cleanly, every episode's trace is
// finalised and no sandbox is left.
func TestPythonClient(t *testing.T) {
	var py string
	testenv.Require(t, testenv.Image(testenv.RuntimeImage), testenv.Programs("python3"),
		testenv.Probe("pytest for a python3 (apt-get install python3-pytest python3-numpy python3-pip)", func(ctx context.Context) (err error) {
			py, err = pythonWithPytest(ctx)
			return err
		}))
	bin := testenv.Build(t, "./cmd/agentbox")
	out := t.TempDir()
	app := moverApp(t, "")
	s := startServe(t, "--backend", "docker", "--app", "mover="+app, "--out", out, "--max-envs", "8")

	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Minute)
	defer cancel()
	root := testenv.RepoRoot()
	cmd := exec.CommandContext(ctx, py, "-m", "pytest", "-v", "-p", "no:cacheprovider", filepath.Join(root, "python", "tests"))
	cmd.Dir = root
	cmd.Env = append(os.Environ(),
		"AGENTBOX_TEST_URL="+s.url, "AGENTBOX_TEST_TOKEN="+s.token, "AGENTBOX_TEST_OUT="+out,
		"AGENTBOX_BIN="+bin, "AGENTBOX_TEST_APP="+app, "AGENTBOX_TEST_BACKEND=docker",
		"PYTHONDONTWRITEBYTECODE=1")
	t0 := time.Now()
	output, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s -m pytest python/tests: %v\n%s\nthe server said:\n%s", py, err, output, s.log())
	}
	lines := strings.Split(strings.TrimSpace(string(output)), "\n")
	t.Logf("%s -m pytest python/tests (%v): %s", py, time.Since(t0).Round(time.Second), lines[len(lines)-1])
	if testing.Verbose() {
		t.Logf("\n%s", output)
	}

	if code := s.stop(t); code != 0 {
		t.Errorf("exit %d after SIGTERM:\n%s", code, s.log())
	}
	entries, err := os.ReadDir(out)
	if err != nil {
		t.Fatal(err)
	}
	episodes := 0
	for _, e := range entries {
		if _, err := os.Stat(filepath.Join(out, e.Name(), "run.json")); err != nil {
			continue
		}
		tr := openTrace(t, filepath.Join(out, e.Name()))
		episodes++
		if tr.Incomplete {
			t.Errorf("the trace %s is incomplete", e.Name())
		}
		assertNoContainers(t, tr.Run.ID)
	}
	if episodes < 20 {
		t.Errorf("%d episodes' traces under --out; the tests play more", episodes)
	}
}

// TestPythonStepFigures measures the step from Python (python/benchmarks/
// step.py: a mouse move and the next observation, as an array with NumPy)
// over each transport beside the Go client's, against the same server in
// the same run: rounds of 50 samples each, Python's and Go's in turn, so a
// busy moment weighs on both. It logs the figures; it asserts only that
// every step answered where the pointer was sent (no timing thresholds).
//
//	go test -count=1 -run TestPythonStepFigures -v ./e2e/
func TestPythonStepFigures(t *testing.T) {
	if os.Getenv("AGENTBOX_FIGURES") == "" {
		// Figures, not a verdict: run on purpose, not on every make test.
		t.Skip("a measurement: AGENTBOX_FIGURES=1 go test -run TestPythonStepFigures -v ./e2e/")
	}
	var py string
	testenv.Require(t, testenv.Image(testenv.RuntimeImage), testenv.Slow("a measurement"),
		testenv.Probe("pytest for a python3 (apt-get install python3-pytest python3-numpy)", func(ctx context.Context) (err error) {
			py, err = pythonWithPytest(ctx)
			return err
		}))
	s := startServe(t, "--backend", "docker", "--app", "mover="+moverApp(t, ""), "--out", t.TempDir(), "--max-envs", "12", "--max-rate", "0")
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Minute)
	defer cancel()

	c, err := client.New(s.url, s.token)
	if err != nil {
		t.Fatal(err)
	}
	goVariants := []string{"websocket", "http", "websocket-full", "http-full"}
	goEnvs := map[string]*client.Env{}
	for _, v := range goVariants {
		env, err := c.Create(ctx, api.CreateRequest{App: "mover"})
		if err != nil {
			t.Fatal(err)
		}
		defer env.Close(context.WithoutCancel(ctx))
		if strings.HasPrefix(v, "http") {
			env.Transport = client.HTTP
		}
		env.AlwaysImage = strings.HasSuffix(v, "-full")
		if _, _, err := env.Reset(ctx); err != nil {
			t.Fatal(err)
		}
		goEnvs[v] = env
	}

	cmd := exec.CommandContext(ctx, py, filepath.Join(testenv.RepoRoot(), "python", "benchmarks", "step.py"), "--serve")
	cmd.Env = append(os.Environ(), "AGENTBOX_URL="+s.url, "AGENTBOX_TOKEN="+s.token, "PYTHONDONTWRITEBYTECODE=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer stdin.Close()
	lines := bufio.NewScanner(stdout)
	lines.Buffer(make([]byte, 1<<20), 16<<20)
	next := func() []byte {
		t.Helper()
		if !lines.Scan() {
			t.Fatalf("python/benchmarks/step.py said nothing more: %v\n%s", lines.Err(), stderr.String())
		}
		return lines.Bytes()
	}
	var ready struct {
		Ready       bool   `json:"ready"`
		Observation string `json:"observation"`
	}
	if err := json.Unmarshal(next(), &ready); err != nil || !ready.Ready {
		t.Fatalf("step.py: %v\n%s", err, stderr.String())
	}

	const rounds, per = 10, 50
	pyD := map[string][]time.Duration{}
	goD := map[string][]time.Duration{}
	i := 0
	for range rounds {
		fmt.Fprintf(stdin, "%d\n", per)
		var got map[string][]int64
		if err := json.Unmarshal(next(), &got); err != nil {
			t.Fatalf("step.py's answer: %v", err)
		}
		for v, ns := range got {
			for _, n := range ns {
				pyD[v] = append(pyD[v], time.Duration(n))
			}
		}
		for range per {
			x, y := 10+(i*37)%620, 10+(i*53)%460
			i++
			for _, v := range goVariants {
				t0 := time.Now()
				obs, _, _, _, _, err := goEnvs[v].Step(ctx, action.Action{Kind: action.MouseMove, X: &x, Y: &y})
				d := time.Since(t0)
				if err != nil || obs.Screen == nil || obs.Cursor != (action.Point{X: x, Y: y}) {
					t.Fatalf("Go %s: %v (cursor %+v, want %d,%d)", v, err, obs, x, y)
				}
				goD[v] = append(goD[v], d)
			}
		}
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("step.py: %v\n%s", err, stderr.String())
	}
	pct := func(ds []time.Duration, p float64) string {
		s := slices.Clone(ds)
		slices.Sort(s)
		return fmt.Sprintf("%.2f ms", float64(s[min(len(s)-1, int(p*float64(len(s))))])/1e6)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "the step, p50 / p95, %d samples each (Python's observation: %s; load average %s):\n", rounds*per, ready.Observation, loadAverage())
	for _, v := range []string{"websocket", "http", "http-json", "websocket-full", "http-full", "http-json-full"} {
		goCol := "—"
		gv := v
		if v == "http" || v == "http-full" {
			gv = "" // the Go client's HTTP answers are JSON: its row is http-json's
		}
		if v == "http-json" || v == "http-json-full" {
			gv = strings.Replace(v, "http-json", "http", 1)
		}
		if ds := goD[gv]; gv != "" && len(ds) > 0 {
			goCol = pct(ds, 0.5) + " / " + pct(ds, 0.95)
		}
		fmt.Fprintf(&b, "  %-16s Python %s / %s   Go %s\n", v, pct(pyD[v], 0.5), pct(pyD[v], 0.95), goCol)
	}
	t.Log(b.String())
}

// loadAverage is /proc/loadavg's first three fields.
func loadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
