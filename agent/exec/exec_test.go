package exec

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/agent"
	"github.com/codegirl-games/agentbox/observe"
)

// TestMain lets the test binary play an agent program (os/exec's
// helper-process pattern): AGENTBOX_FAKE_AGENT names the behaviour.
func TestMain(m *testing.M) {
	if mode := os.Getenv("AGENTBOX_FAKE_AGENT"); mode != "" {
		fakeAgent(mode)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func fakeAgent(mode string) {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 8<<20), 8<<20)
	out := bufio.NewWriter(os.Stdout)
	say := func(s string) { fmt.Fprintln(out, s); out.Flush() }
	for in.Scan() {
		var msg map[string]any
		json.Unmarshal(in.Bytes(), &msg)
		switch msg["type"] {
		case "start":
			fmt.Fprintf(os.Stderr, "started with task %v\n", msg["task"])
			continue
		case "error":
			if mode == "malformed-then-ok" {
				say(`{"action":"key","keys":"Return","message":"fixed it"}`)
			} else {
				say(`this is still not json`)
			}
			continue
		}
		switch mode {
		case "ok":
			shot, _ := msg["screenshot"].(string)
			if _, err := os.Stat(shot); err != nil && msg["screenshot_base64"] == nil {
				say(`{"action":"done","success":false,"message":"no screenshot"}`)
				continue
			}
			say(`{"action":"click","x":10,"y":20,"message":"clicking"}`)
		case "malformed-then-ok", "malformed":
			say(`I think I should press Enter`)
		case "offscreen":
			say(`{"action":"click","x":9999,"y":1}`)
		case "intervention":
			// Answers with what the observation says a person did.
			iv, _ := msg["intervention"].(map[string]any)
			acts, _ := iv["actions"].([]any)
			if len(acts) == 0 {
				say(`{"action":"done","message":"nobody acted"}`)
				continue
			}
			first, _ := acts[0].(map[string]any)
			b, _ := json.Marshal(map[string]any{"action": "done", "message": fmt.Sprintf("a person did %v %v (changed %v)", first["action"], first["text"], iv["changed"])})
			say(string(b))
		case "exit":
			os.Exit(3)
		case "slow":
			time.Sleep(time.Minute)
		}
	}
}

func newAgent(t *testing.T, mode string, opts agent.Options) *Agent {
	t.Helper()
	exe, _ := os.Executable()
	t.Setenv("AGENTBOX_FAKE_AGENT", mode)
	if opts == nil {
		opts = agent.Options{}
	}
	cmd, _ := json.Marshal([]string{exe, "-test.run=^$"})
	opts["command"] = string(cmd)
	a, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	a.stderr = io.Discard
	t.Cleanup(func() { a.Close() })
	if err := a.Start(t.Context(), agent.Task{Text: "t", Width: 640, Height: 480}); err != nil {
		t.Fatal(err)
	}
	return a
}

func obs() *observe.Observation {
	return &observe.Observation{Step: 1, Running: true, Screen: &observe.Frame{Width: 2, Height: 2, Pix: make([]byte, 16)}}
}

func TestExecAgent(t *testing.T) {
	tests := []struct {
		mode    string
		opts    agent.Options
		want    string // the action, or the error
		wantErr error
	}{
		{"ok", nil, "click 10,20", nil},
		{"ok", agent.Options{"screenshot": "base64"}, "click 10,20", nil},
		{"malformed-then-ok", nil, "key Return", nil},
		{"malformed", nil, "4 answers were not valid actions", agent.ErrMalformed},
		{"offscreen", agent.Options{"max_malformed": "0"}, "outside the 640x480 screen", agent.ErrMalformed},
		{"exit", nil, "the agent program exited (exit code 3) without answering step 1; its last stderr:\n  started with task t", nil},
		{"slow", agent.Options{"timeout": "200ms"}, "no answer within 200ms", nil},
	}
	for _, tt := range tests {
		t.Run(tt.mode, func(t *testing.T) {
			a := newAgent(t, tt.mode, tt.opts)
			d, err := a.Decide(t.Context(), obs())
			if err != nil {
				if !strings.Contains(err.Error(), tt.want) || (tt.wantErr != nil && !errors.Is(err, tt.wantErr)) {
					t.Fatalf("err = %v, want %q", err, tt.want)
				}
				return
			}
			if got := d.Action.String(); got != tt.want {
				t.Errorf("action = %q, want %q (message %q)", got, tt.want, d.Message)
			}
		})
	}
}

// TestExecAgentToldOfAPerson: the program's observation says what a
// person did while they had control (field intervention).
func TestExecAgentToldOfAPerson(t *testing.T) {
	a := newAgent(t, "intervention", nil)
	o := obs()
	o.Intervention = &observe.Intervention{Actions: []action.Action{{Kind: action.Type, Text: "héllo"}}, DurationMS: 10,
		ScreenChanged: true, Changed: &action.Rect{1, 2, 3, 4}}
	d, err := a.Decide(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	if want := "a person did type héllo (changed [1 2 3 4])"; d.Action.Message != want {
		t.Errorf("the program said %q, want %q", d.Action.Message, want)
	}
	if d, err := a.Decide(t.Context(), obs()); err != nil || d.Action.Message != "nobody acted" {
		t.Errorf("without an intervention: %q, %v", d.Action.Message, err)
	}
}

func TestNewRejects(t *testing.T) {
	for _, tt := range []struct {
		opts agent.Options
		want string
	}{
		{agent.Options{}, "no command"},
		{agent.Options{"command": "no-such-program-xyz"}, "no-such-program-xyz"},
		{agent.Options{"command": "[1,2]"}, "JSON array"},
		{agent.Options{"command": "true", "screenshot": "gif"}, "file, base64 or none"},
		{agent.Options{"command": "true", "api_key": "x"}, "unknown option"},
	} {
		if _, err := New(tt.opts); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("New(%v) = %v, want %q", tt.opts, err, tt.want)
		}
	}
}

func TestCloseEndsTheProgram(t *testing.T) {
	a := newAgent(t, "slow", nil)
	pid := a.cmd.Process.Pid
	start := time.Now()
	a.Close()
	if d := time.Since(start); d > 30*time.Second { // the program would answer after a minute
		t.Errorf("Close took %v", d)
	}
	select {
	case <-a.exited:
	default:
		t.Errorf("program %d still running after Close", pid)
	}
}

// script writes a shell script agent and makes an agent of it (not
// started).
func script(t *testing.T, body string, opts agent.Options) *Agent {
	t.Helper()
	p := filepath.Join(t.TempDir(), "agent.sh")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	if opts == nil {
		opts = agent.Options{}
	}
	opts["command"] = p
	a, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	a.stderr = io.Discard
	t.Cleanup(func() { a.Close() })
	return a
}

// TestCrashReported: a program that dies is reported with its exit status
// and the tail of its stderr, whether it died before reading an
// observation (the write fails) or after (no answer), and before reading
// the task.
func TestCrashReported(t *testing.T) {
	ctx := context.Background()
	task := agent.Task{Text: "t", Width: 640, Height: 480}
	t.Run("before reading an observation", func(t *testing.T) {
		a := script(t, "read start\necho 'loading weights' >&2\necho 'agent: cannot load model weights' >&2\nexit 4\n", nil)
		if err := a.Start(ctx, task); err != nil {
			t.Fatal(err)
		}
		<-a.exited // the observation's write fails: nobody reads
		_, err := a.Decide(ctx, obs())
		want := "exec agent: the agent program exited (exit code 4) before reading the observation of step 1; its last stderr:\n  loading weights\n  agent: cannot load model weights"
		if err == nil || err.Error() != want {
			t.Errorf("err:\n%v\nwant:\n%s", err, want)
		}
	})
	t.Run("without answering", func(t *testing.T) {
		a := script(t, "read start\nread obs\necho 'Traceback: KeyError' >&2\nkill -SEGV $$\n", nil)
		if err := a.Start(ctx, task); err != nil {
			t.Fatal(err)
		}
		_, err := a.Decide(ctx, obs())
		want := "exec agent: the agent program exited (killed by SIGSEGV) without answering step 1; its last stderr:\n  Traceback: KeyError"
		if err == nil || err.Error() != want {
			t.Errorf("err:\n%v\nwant:\n%s", err, want)
		}
	})
	t.Run("before reading the task", func(t *testing.T) {
		a := script(t, "exec 0<&-\nexit 2\n", nil)
		err := a.Start(ctx, task)
		if err == nil {
			// The start line fit in the pipe before the program was gone:
			// the first observation finds it gone (once it is: a loaded
			// machine may not have run it yet).
			<-a.exited
			_, err = a.Decide(ctx, obs())
		}
		if err == nil || !strings.Contains(err.Error(), "the agent program exited (exit code 2) before reading") ||
			!strings.HasSuffix(err.Error(), "; it wrote nothing to stderr") {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("stderr tail bounded", func(t *testing.T) {
		a := script(t, "read start\nfor i in $(seq 1 50); do echo \"line $i $(printf 'x%.0s' $(seq 1 400))\" >&2; done\nexit 1\n", nil)
		if err := a.Start(ctx, task); err != nil {
			t.Fatal(err)
		}
		<-a.exited
		_, err := a.Decide(ctx, obs())
		if err == nil || strings.Count(err.Error(), "\n  ") != stderrTailLines || !strings.Contains(err.Error(), "\n  line 50 ") ||
			strings.Contains(err.Error(), "line 40 ") || len(err.Error()) > 5000 {
			t.Errorf("err (%d bytes) = %.500q…", len(err.Error()), err)
		}
	})
}

// TestHungProgramStoppedAtOnce: a program that did not answer within the
// timeout gets no grace to exit on its own when the agent is closed: it is
// sent SIGTERM at once (its grace is set to an hour here, so a Close that
// waited for it would not return within the test's deadline).
func TestHungProgramStoppedAtOnce(t *testing.T) {
	a := script(t, "trap 'echo got TERM >&2; exit 0' TERM\nwhile :; do sleep 0.05; done\n", agent.Options{"timeout": "200ms"})
	a.grace = time.Hour
	var stderr strings.Builder
	var mu sync.Mutex
	a.stderr = writerFunc(func(p []byte) (int, error) { mu.Lock(); defer mu.Unlock(); return stderr.Write(p) })
	if err := a.Start(context.Background(), agent.Task{Text: "t", Width: 640, Height: 480}); err != nil {
		t.Fatal(err)
	}
	_, err := a.Decide(context.Background(), obs())
	if err == nil || !strings.Contains(err.Error(), "no answer within 200ms (step 1); the program is stopped") {
		t.Fatalf("err = %v", err)
	}
	closed := make(chan struct{})
	go func() { a.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(time.Minute):
		t.Fatal("Close waited for a hung program to exit by itself")
	}
	select {
	case <-a.exited:
	default:
		t.Error("the program is still running after Close")
	}
	<-a.stderrDone
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(stderr.String(), "got TERM") {
		t.Errorf("the program did not get SIGTERM: %q", stderr.String())
	}
}

// TestCloseBounded: a program that ignores its closed stdin and SIGTERM is
// killed; Close returns.
func TestCloseBounded(t *testing.T) {
	a := script(t, "trap '' TERM\nread start\nwhile :; do sleep 0.05; done\n", nil)
	if err := a.Start(context.Background(), agent.Task{Text: "t", Width: 640, Height: 480}); err != nil {
		t.Fatal(err)
	}
	closed := make(chan struct{})
	go func() { a.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(time.Minute):
		t.Fatal("Close did not return")
	}
	select {
	case <-a.exited:
	default:
		t.Error("the program is still running after Close")
	}
	if ws, ok := a.cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Errorf("ended %v, want SIGKILL", a.cmd.ProcessState)
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
