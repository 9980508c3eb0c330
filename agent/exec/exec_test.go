package exec

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/agent"
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
		case "exit":
			os.Exit(3)
		case "slow":
			time.Sleep(5 * time.Second)
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

func obs() *action.Observation {
	return &action.Observation{Step: 1, Running: true, Screen: &action.Frame{Width: 2, Height: 2, Pix: make([]byte, 16)}}
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
		{"exit", nil, "ended without answering", nil},
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
	if d := time.Since(start); d > 6*time.Second {
		t.Errorf("Close took %v", d)
	}
	select {
	case <-a.exited:
	default:
		t.Errorf("program %d still running after Close", pid)
	}
}
