package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/codegirl-games/agentbox/internal/testenv"
	"github.com/codegirl-games/agentbox/observe"
	"github.com/codegirl-games/agentbox/trace"
)

// What the built-in agents report, through the real CLI.

// shellAgent writes an exec agent script into a fresh directory.
func shellAgent(t *testing.T, body string) (path, dir string) {
	t.Helper()
	dir = t.TempDir()
	path = filepath.Join(dir, "agent.sh")
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return path, dir
}

// TestExecAgentCrash: an agent program that crashes is reported with its
// exit status and the tail of its stderr (escaped for the terminal), not
// as a broken pipe.
func TestExecAgentCrash(t *testing.T) {
	testenv.Require(t, testenv.Image(testenv.RuntimeImage))
	agentSh, _ := shellAgent(t, "read start\necho 'loading weights from /models/x' >&2\nprintf 'fatal: \\033[2Jcannot load model weights\\n' >&2\nexit 4\n")
	r := agentbox(t, "run", moverApp(t, ""), "--agent", "exec", "--", agentSh)
	if r.code != 3 {
		t.Fatalf("want exit 3:\n%s", r)
	}
	for _, want := range []string{
		"error: agent: exec agent: the agent program exited (exit code 4) ",
		"its last stderr:\n  loading weights from /models/x\n  fatal: \\x1b[2Jcannot load model weights",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, r)
		}
	}
	if strings.Contains(r.stdout+r.stderr, "broken pipe") || strings.Contains(r.stdout+r.stderr, "\x1b[2J") {
		t.Errorf("a broken pipe, or the program's escape sequence reached the terminal:\n%q", r.stdout)
	}
	tr := openTrace(t, r.dir)
	if tr.Run.Reason != trace.ReasonAgent || !strings.Contains(tr.Run.Message, "exit code 4") || !strings.Contains(tr.Run.Message, "cannot load model weights") {
		t.Errorf("run.json: %s: %q", tr.Run.Reason, tr.Run.Message)
	}
	assertNoContainers(t, tr.Run.ID)
}

// TestExecAgentHang: an agent program that never answers is stopped when
// its timeout passes, within the run: it got SIGTERM before run.json was
// finalised (so the duration the run reports includes stopping it), and it
// is gone when agentbox exits.
func TestExecAgentHang(t *testing.T) {
	testenv.Require(t, testenv.Image(testenv.RuntimeImage))
	agentSh, dir := shellAgent(t, "echo $$ > \"$0.pid\"\ntrap 'date +%s%N > \"$0.term\"; exit 0' TERM\nwhile :; do sleep 0.1; done\n")
	r := agentbox(t, "run", moverApp(t, ""), "--agent", "exec", "--agent-opt", "timeout=2s", "--", agentSh)
	if r.code != 3 || !strings.Contains(r.stdout, "exec agent: no answer within 2s (step 1); the program is stopped") {
		t.Fatalf("want exit 3 naming the timeout:\n%s", r)
	}
	tr := openTrace(t, r.dir)
	if _, ok := tr.Run.Timings["agent_close"]; !ok {
		t.Errorf("timings %v lack agent_close", tr.Run.Timings)
	}
	data, err := os.ReadFile(filepath.Join(dir, "agent.sh.term"))
	if err != nil {
		t.Fatalf("the program was not sent SIGTERM: %v", err)
	}
	termNS, _ := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
	if ended := tr.Run.Ended.UnixNano(); termNS == 0 || termNS > ended {
		t.Errorf("SIGTERM at %d ns, run.json ended at %d ns: the stop is outside the reported run", termNS, ended)
	}
	pidData, _ := os.ReadFile(filepath.Join(dir, "agent.sh.pid"))
	if pid, err := strconv.Atoi(strings.TrimSpace(string(pidData))); err != nil || syscall.Kill(pid, 0) == nil {
		t.Errorf("the agent program (pid %q) is still running after agentbox exited", pidData)
	}
	if m := regexp.MustCompile(`0 steps in ([0-9.]+m?s)`).FindStringSubmatch(r.stdout); m == nil {
		t.Errorf("no duration in the report:\n%s", r.stdout)
	} else {
		t.Logf("reported %s; run.json %v ms, of which agent_close %v ms, teardown %v ms", m[1], tr.Run.DurationMS, tr.Run.Timings["agent_close"], tr.Run.Timings["teardown"])
	}
	assertNoContainers(t, tr.Run.ID)
}

// TestAgentOptionsChecked: every built-in agent's options are checked
// before anything starts: out of range is a usage error (exit 2) naming
// the option and its range, and no trace is made.
func TestAgentOptionsChecked(t *testing.T) {
	t.Setenv("ANTHROPIC_API_KEY", "sk-ant-test")
	t.Setenv("OPENAI_API_KEY", "sk-test")
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--agent", "idle", "--agent-opt", "ms=150000"}, `option ms: want 0–120000 (one wait), got "150000"`},
		{[]string{"--agent", "demo", "--agent-opt", "key=Rigth"}, "option key: want one key name"},
		{[]string{"--agent", "demo", "--agent-opt", "hold_ms=70000"}, "option hold_ms: want 0–60000"},
		{[]string{"--agent", "exec", "--agent-opt", "max_malformed=101", "--", "true"}, "option max_malformed: 0–100"},
		{[]string{"--agent", "exec", "--agent-opt", "timeout=0s", "--", "true"}, "option timeout"},
		{[]string{"--agent", "anthropic", "--agent-opt", "max_retries=99"}, "option max_retries: want 0–20"},
		{[]string{"--agent", "openai", "--agent-opt", "wait_ms=999999"}, "option wait_ms"},
		{[]string{"--agent", "openai-chat", "--agent-opt", "model=m", "--agent-opt", "max_width=5"}, "option max_width: want 64–10000"},
	} {
		r := agentbox(t, append([]string{"run", moverApp(t, "")}, tt.args...)...)
		if r.code != 2 || !strings.Contains(r.stderr, tt.want) {
			t.Errorf("%v: want exit 2 naming %q:\n%s", tt.args, tt.want, r)
		}
		if _, err := os.Stat(r.dir); !os.IsNotExist(err) {
			t.Errorf("%v: a trace was made", tt.args)
		}
	}
}

// TestTeardownStopReported: the mover, still running when the demo agent
// is done, is stopped by the teardown: run.json and the report say so,
// and the report counts lines of output and events apart.
func TestTeardownStopReported(t *testing.T) {
	testenv.Require(t, testenv.Image(testenv.RuntimeImage))
	r := agentbox(t, "run", moverApp(t, ""), "--agent", "demo")
	if r.code != 0 {
		t.Fatalf("want exit 0:\n%s", r)
	}
	tr := openTrace(t, r.dir)
	if e := tr.Run.AppExit; e == nil || e.Stopped != observe.StoppedAtEnd {
		t.Errorf("run.json app_exit %+v, want stopped %q", e, observe.StoppedAtEnd)
	}
	if v := run0(t, "view", r.dir); v.code != 0 {
		t.Fatalf("view: %s", v)
	}
	html, err := os.ReadFile(filepath.Join(r.dir, "report.html"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?s)<script id="data" type="application/json">(.*?)</script>`).FindSubmatch(html)
	if m == nil {
		t.Fatal("no data in the report")
	}
	var p struct {
		Run struct {
			AppExit string `json:"app_exit"`
		} `json:"run"`
		Steps []struct {
			Sum string `json:"sum"`
			Out []struct{ K, X string }
		} `json:"steps"`
	}
	if err := json.Unmarshal(m[1], &p); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(p.Run.AppExit, observe.StoppedAtEnd+" (") {
		t.Errorf("the report's app exit says %q", p.Run.AppExit)
	}
	sumRe := regexp.MustCompile(`^(1 line of output|[02-9]\d* lines of output|1\d+ lines of output)?(, )?(1 event|\d{2,} events|[02-9] events)?$`)
	for i, s := range p.Steps {
		lines, events := 0, 0
		for _, l := range s.Out {
			if l.K == "v" {
				events++
			} else {
				lines++
			}
		}
		if !sumRe.MatchString(s.Sum) || (lines > 0) != strings.Contains(s.Sum, "output") || (events > 0) != strings.Contains(s.Sum, "event") {
			t.Errorf("step index %d: summary %q for %d lines and %d events", i, s.Sum, lines, events)
		}
	}
	assertNoContainers(t, tr.Run.ID)
}
