// Package exec is the agent in any language: a program that speaks JSON
// lines on stdin/stdout. agentbox starts it, sends it the task and then one
// observation per step, and reads one action per observation:
//
//	→ {"type":"start","protocol":1,"task":"…","screen":{"width":640,"height":480},"max_steps":100}
//	→ {"type":"observation","step":1,"screenshot":"/tmp/…/000001.png","cursor":{"x":320,"y":240},…}
//	← {"action":"key_down","key":"Right","message":"holding Right"}
//	→ {"type":"error","step":1,"error":"…"}   (after an answer that was not a valid action)
//
// The program's stderr is passed through to agentbox's, prefixed. It never
// runs inside the sandbox: it runs on the host, with the host's network
// and keys, like every agent.
package exec

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/agent"
	"github.com/codegirl-games/agentbox/agent/llm"
	"github.com/codegirl-games/agentbox/internal/owner"
	"github.com/codegirl-games/agentbox/internal/pipes"
	"github.com/codegirl-games/agentbox/internal/termsafe"
	"github.com/codegirl-games/agentbox/internal/textcut"
	"github.com/codegirl-games/agentbox/observe"
)

// Protocol is the version of the JSON-lines protocol.
const Protocol = 1

func init() {
	agent.Register("exec", func(opts agent.Options) (agent.Agent, error) { return New(opts) })
}

// Agent runs an external decision-maker.
type Agent struct {
	argv         []string
	shots        string // file, base64, none
	timeout      time.Duration
	maxMalformed int
	stderr       io.Writer

	cmd    *osexec.Cmd
	exited chan struct{} // closed when the program has exited
	stdin  io.WriteCloser
	lines  chan lineOrErr
	quit   chan struct{} // closed by Close: stop delivering lines
	tmp    string
	limits action.Limits
	closed sync.Once

	// grace is how long Close waits for the program to exit on its own
	// after its stdin is closed; a program that stopped answering gets
	// none (hung).
	grace time.Duration
	hung  bool

	// resumed is the last step of a crashed run this one resumes (0:
	// not a resume).
	resumed int

	errMu      sync.Mutex
	errTail    []string      // the program's last stderr lines
	stderrDone chan struct{} // closed when its stderr is drained
}

// Bounds on stopping the program: after its stdin is closed it has
// closeGrace to exit by itself, then termGrace after SIGTERM, then killWait
// after SIGKILL (a process stuck in the kernel is left to its parent).
const (
	closeGrace = time.Second
	termGrace  = 2 * time.Second
	killWait   = 2 * time.Second
)

// stderrTail bounds what an error message quotes of the program's stderr.
const (
	stderrTailLines = 10
	stderrLineRunes = 300
)

type lineOrErr struct {
	line []byte
	err  error
}

// New makes an exec agent. Options: command (the program and its
// arguments, as a JSON array or space-separated words; set from
// `--agent exec -- CMD ARGS…`), screenshot (file — a PNG path, the
// default; base64; none), timeout (per decision, default 120s),
// max_malformed (answers that are not valid actions told back before the
// run ends, default 3).
func New(opts agent.Options) (*Agent, error) {
	if err := agent.CheckOptions(opts, "command", "screenshot", "timeout", "max_malformed"); err != nil {
		return nil, err
	}
	a := &Agent{shots: "file", timeout: 120 * time.Second, maxMalformed: 3, stderr: os.Stderr, grace: closeGrace}
	cmd := strings.TrimSpace(opts["command"])
	switch {
	case cmd == "":
		return nil, errors.New("no command: use --agent exec -- PROGRAM ARGS…, or --agent-opt command=…")
	case strings.HasPrefix(cmd, "["):
		if err := json.Unmarshal([]byte(cmd), &a.argv); err != nil || len(a.argv) == 0 {
			return nil, fmt.Errorf("option command: a JSON array of strings, got %s", cmd)
		}
	default:
		a.argv = strings.Fields(cmd)
	}
	if v, ok := opts["screenshot"]; ok {
		if v != "file" && v != "base64" && v != "none" {
			return nil, fmt.Errorf("option screenshot: file, base64 or none, got %q", v)
		}
		a.shots = v
	}
	if v, ok := opts["timeout"]; ok {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("option timeout: a duration like 30s, got %q", v)
		}
		a.timeout = d
	}
	if v, ok := opts["max_malformed"]; ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > 100 {
			return nil, fmt.Errorf("option max_malformed: 0–100, got %q", v)
		}
		a.maxMalformed = n
	}
	if _, err := osexec.LookPath(a.argv[0]); err != nil {
		return nil, fmt.Errorf("command %q: %w", a.argv[0], err)
	}
	return a, nil
}

// Start implements agent.Starter: it starts the program and sends the task.
func (a *Agent) Start(ctx context.Context, task agent.Task) error {
	a.limits = action.DefaultLimits(task.Width, task.Height)
	if a.shots == "file" {
		dir, err := owner.TempDir("exec")
		if err != nil {
			return err
		}
		a.tmp = dir
	}
	cmd := osexec.Command(a.argv[0], a.argv[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if a.resumed > 0 {
		cmd.Env = append(os.Environ(), ResumedEnv+"="+strconv.Itoa(a.resumed))
	}
	// Plain pipes, not Cmd's: Wait must not close what is still being read.
	r, w, err := pipes.Open(3)
	if err != nil {
		return err
	}
	inR, outR, errR := r[0], r[1], r[2]
	inW, outW, errW := w[0], w[1], w[2]
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	err = cmd.Start()
	pipes.Close(inR, outW, errW) // the child has its copies
	if err != nil {
		pipes.Close(inW, outR, errR)
		return fmt.Errorf("start %s: %w", a.argv[0], err)
	}
	a.cmd, a.stdin, a.exited = cmd, inW, make(chan struct{})
	go func() { cmd.Wait(); close(a.exited) }()
	a.lines, a.quit, a.stderrDone = make(chan lineOrErr, 1), make(chan struct{}), make(chan struct{})
	go a.read(outR)
	go a.passStderr(errR)
	start := map[string]any{
		"type": "start", "protocol": Protocol, "task": task.Text,
		"screen": map[string]int{"width": task.Width, "height": task.Height}, "max_steps": task.MaxSteps,
	}
	if a.resumed > 0 {
		start["resumed_after_step"] = a.resumed
	}
	return a.send(start, "before reading the task")
}

// ResumedEnv is set in the program's environment, to the last step of
// the crashed run it continues, when the run is a resume (agentbox
// resume); the start message says it too, as resumed_after_step, and the
// program's first observation is the step after it.
const ResumedEnv = "AGENTBOX_RESUMED_AFTER_STEP"

// Resume tells the program, when it starts, that the run resumes a
// crashed one whose steps up to step were replayed.
func (a *Agent) Resume(step int) { a.resumed = step }

// maxLine bounds one line from the program.
const maxLine = 4 << 20

func (a *Agent) read(r io.ReadCloser) {
	defer r.Close()
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := readLine(br)
		select {
		case a.lines <- lineOrErr{line: line, err: err}:
		case <-a.quit:
			return
		}
		if err != nil {
			close(a.lines)
			return
		}
	}
}

func readLine(br *bufio.Reader) ([]byte, error) {
	var buf []byte
	for {
		part, isPrefix, err := br.ReadLine()
		if err != nil {
			return nil, err
		}
		buf = append(buf, part...)
		if len(buf) > maxLine {
			return nil, fmt.Errorf("a line longer than %d bytes", maxLine)
		}
		if !isPrefix {
			return buf, nil
		}
	}
}

func (a *Agent) passStderr(r io.ReadCloser) {
	defer close(a.stderrDone)
	defer r.Close()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 64<<10)
	for sc.Scan() {
		line := sc.Text()
		fmt.Fprintf(a.stderr, "agent %s: %s\n", termsafe.Line(filepath.Base(a.argv[0])), termsafe.Line(line))
		line = textcut.Runes(line, stderrLineRunes, "…")
		a.errMu.Lock()
		a.errTail = append(a.errTail, line)
		if len(a.errTail) > stderrTailLines {
			a.errTail = a.errTail[1:]
		}
		a.errMu.Unlock()
	}
	io.Copy(io.Discard, r)
}

// send writes one message; when the program no longer reads, the error
// says why (it exited, with what status and last words).
func (a *Agent) send(v any, when string) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if _, err := a.stdin.Write(append(data, '\n')); err != nil {
		return a.gone(when, err)
	}
	return nil
}

// gone describes a program that stopped reading or answering: whether
// and how it exited (waiting a moment for it), and the tail of its
// stderr. The text is the program's: it is escaped where it is printed.
func (a *Agent) gone(when string, cause error) error {
	t := time.NewTimer(time.Second)
	defer t.Stop()
	what := "stopped reading its stdin"
	if errors.Is(cause, io.EOF) {
		what = "closed its stdout"
	}
	select {
	case <-a.exited:
		what = "exited (" + exitStatus(a.cmd.ProcessState) + ")"
		select { // its last words, unless a child keeps the pipe open
		case <-a.stderrDone:
		case <-t.C:
		}
	case <-t.C:
		if errors.Is(cause, io.EOF) {
			what += " and is still running"
		}
	}
	msg := fmt.Sprintf("exec agent: the agent program %s %s", what, when)
	a.errMu.Lock()
	tail := append([]string(nil), a.errTail...)
	a.errMu.Unlock()
	if len(tail) == 0 {
		msg += "; it wrote nothing to stderr"
	} else {
		msg += "; its last stderr:\n  " + strings.Join(tail, "\n  ")
	}
	if !errors.Is(cause, io.EOF) && !errors.Is(cause, syscall.EPIPE) {
		return fmt.Errorf("%s (%w)", msg, cause)
	}
	return llm.Wrap(msg, cause) // the cause (EOF, EPIPE) adds nothing to read
}

// exitStatus words a process's end: "exit code 4", "killed by SIGSEGV".
func exitStatus(ps *os.ProcessState) string {
	if ps == nil {
		return "status unknown"
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return "killed by " + signalName(ws.Signal())
	}
	return fmt.Sprintf("exit code %d", ps.ExitCode())
}

// signalName is "SIGSEGV" for SIGSEGV (Go's String says "segmentation fault").
func signalName(s syscall.Signal) string {
	if n := unix.SignalName(s); n != "" {
		return n
	}
	return s.String()
}

// observation is what the program receives each step.
type observation struct {
	Type      string             `json:"type"`
	Step      int                `json:"step"`
	ElapsedMS int64              `json:"elapsed_ms"`
	Task      string             `json:"task"`
	Shot      string             `json:"screenshot,omitempty"`
	ShotB64   string             `json:"screenshot_base64,omitempty"`
	Width     int                `json:"width"`
	Height    int                `json:"height"`
	Cursor    action.Point       `json:"cursor"`
	Windows   []observe.Window   `json:"windows"`
	Output    []observe.LogLine  `json:"output"`
	Network   []observe.NetEvent `json:"network,omitempty"`
	Running   bool               `json:"running"`
	Exit      *observe.Exit      `json:"exit,omitempty"`
	Last      *action.Result     `json:"last,omitempty"`
	// Tree and Marks, when the run reads the accessibility tree (--a11y-tree,
	// --marks, or the program's accessibility_tree action).
	Tree  *observe.Tree  `json:"accessibility_tree,omitempty"`
	Marks []observe.Mark `json:"marks,omitempty"`
	// Intervention says a person took control at the live page since the
	// previous observation (what they did, where the screen changed).
	Intervention *observe.Intervention `json:"intervention,omitempty"`
	// Secrets names the secrets type_secret can type (--vault); never
	// their values.
	Secrets []string `json:"secrets,omitempty"`
}

// Decide implements agent.Agent.
func (a *Agent) Decide(ctx context.Context, obs *observe.Observation) (agent.Decision, error) {
	if a.cmd == nil {
		return agent.Decision{}, errors.New("exec agent: not started")
	}
	o := observation{
		Type: "observation", Step: obs.Step, ElapsedMS: obs.Elapsed.Milliseconds(), Task: obs.Task,
		Width: obs.Screen.Width, Height: obs.Screen.Height, Cursor: obs.Cursor, Windows: obs.Windows,
		Output: obs.Output, Network: obs.Network, Running: obs.Running, Exit: obs.Exit, Last: obs.Last,
		Tree: obs.Tree, Marks: obs.Marks, Intervention: obs.Intervention, Secrets: obs.Secrets,
	}
	if o.Windows == nil {
		o.Windows = []observe.Window{}
	}
	if o.Output == nil {
		o.Output = []observe.LogLine{}
	}
	switch a.shots {
	case "file", "base64":
		png, err := obs.Screen.PNG()
		if err != nil {
			return agent.Decision{}, err
		}
		if a.shots == "file" {
			p := filepath.Join(a.tmp, fmt.Sprintf("%06d.png", obs.Step))
			if err := os.WriteFile(p, png, 0o600); err != nil {
				return agent.Decision{}, err
			}
			o.Shot = p
		} else {
			o.ShotB64 = base64.StdEncoding.EncodeToString(png)
		}
	}
	if err := a.send(o, fmt.Sprintf("before reading the observation of step %d", obs.Step)); err != nil {
		return agent.Decision{}, err
	}
	var answers []string
	for attempt := 0; ; attempt++ {
		line, err := a.next(ctx, obs.Step)
		if err != nil {
			return agent.Decision{}, err
		}
		d, perr := a.parse(line)
		if perr == nil {
			if attempt > 0 {
				d.Meta = map[string]any{"attempts": attempt + 1, "rejected": answers}
			}
			return d, nil
		}
		answers = append(answers, shorten(string(line)))
		if attempt >= a.maxMalformed {
			return agent.Decision{}, fmt.Errorf("exec agent: %w: %d answers were not valid actions; the last: %s (%v)", agent.ErrMalformed, attempt+1, shorten(string(line)), perr)
		}
		if err := a.send(map[string]any{"type": "error", "step": obs.Step, "error": perr.Error()}, fmt.Sprintf("before reading why its answer to step %d was refused", obs.Step)); err != nil {
			return agent.Decision{}, err
		}
	}
}

func (a *Agent) next(ctx context.Context, step int) ([]byte, error) {
	t := time.NewTimer(a.timeout)
	defer t.Stop()
	select {
	case l, ok := <-a.lines:
		if !ok || l.err != nil {
			err := l.err
			if !ok || err == nil {
				err = io.EOF
			}
			return nil, a.gone(fmt.Sprintf("without answering step %d", step), err)
		}
		return l.line, nil
	case <-t.C:
		// It will be stopped without the grace a working program gets.
		a.hung = true
		return nil, fmt.Errorf("exec agent: no answer within %v (step %d); the program is stopped", a.timeout, step)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// parse reads one answer: an action object, optionally with a "message"
// (for kinds other than done, where message is the action's own field).
func (a *Agent) parse(line []byte) (agent.Decision, error) {
	line = bytes.TrimSpace(line)
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(line, &raw); err != nil || raw == nil {
		return agent.Decision{}, fmt.Errorf("not a JSON object: write one action per line, e.g. {\"action\":\"key\",\"keys\":\"Return\"}")
	}
	var msg string
	var kind string
	_ = json.Unmarshal(raw["action"], &kind)
	if m, ok := raw["message"]; ok && kind != string(action.Done) {
		_ = json.Unmarshal(m, &msg)
		delete(raw, "message")
	}
	act, err := action.FromMap(raw)
	if err != nil {
		return agent.Decision{}, err
	}
	if err := action.Validate(act, a.limits); err != nil {
		return agent.Decision{}, err
	}
	if act.Kind == action.Done && msg == "" {
		msg = act.Message
	}
	return agent.Decision{Action: act, Message: msg}, nil
}

func shorten(s string) string {
	return textcut.Bytes(s, 200, "…")
}

// Close implements agent.Closer: it closes the program's stdin, gives a
// program that was answering closeGrace to exit, then ends its process
// group: SIGTERM, termGrace, SIGKILL. It is bounded and safe to call
// more than once.
func (a *Agent) Close() error {
	a.closed.Do(func() {
		if a.quit != nil {
			close(a.quit)
		}
		if a.cmd != nil {
			a.stdin.Close()
			a.stop()
		}
		if a.tmp != "" {
			os.RemoveAll(a.tmp)
		}
	})
	return nil
}

// stop waits for the program as Close says.
func (a *Agent) stop() {
	pgid := -a.cmd.Process.Pid
	wait := func(d time.Duration) bool {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-a.exited:
			return true
		case <-t.C:
			return false
		}
	}
	if !a.hung && wait(a.grace) {
		return
	}
	syscall.Kill(pgid, syscall.SIGTERM)
	if wait(termGrace) {
		return
	}
	syscall.Kill(pgid, syscall.SIGKILL)
	wait(killWait)
}
