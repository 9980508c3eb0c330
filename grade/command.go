package grade

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/codegirl-games/agentbox/internal/textcut"
	"github.com/codegirl-games/agentbox/trace"
)

// boundedBuffer keeps at most limit bytes and says whether more came.
type boundedBuffer struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	limit int
	over  bool
	full  func() // called once when it is over its limit
}

func (b *boundedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if room := b.limit - b.buf.Len(); len(p) > room {
		b.buf.Write(p[:max(room, 0)])
		if !b.over && b.full != nil {
			b.full()
		}
		b.over = true
		return len(p), nil
	}
	b.buf.Write(p)
	return len(p), nil
}

// commandAnswer is what a grader command prints.
type commandAnswer struct {
	Outcome string   `json:"outcome"`
	Score   *float64 `json:"score"`
	Message string   `json:"message"`
}

// runCommand runs a command check: its program on the host, in the
// spec's directory, with AGENTBOX_FILES and AGENTBOX_TRACE, killed with
// its process group at its timeout; it judges by the JSON object it
// prints. Anything else — it could not start, it exited non-zero or by a
// signal, it timed out, it printed too much or not that object — is
// infrastructure, naming the cause.
func runCommand(ctx context.Context, c *Check, filesDir, traceDir string) result {
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.Command[0], c.Command[1:]...)
	cmd.Dir = c.Dir
	cmd.Env = append(os.Environ(), "AGENTBOX_FILES="+filesDir, "AGENTBOX_TRACE="+traceDir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		if cmd.Process == nil {
			return nil
		}
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	// Its children may hold the pipes open after it is killed: Wait gives
	// up on them after this.
	cmd.WaitDelay = 2 * time.Second
	stdout := &boundedBuffer{limit: MaxCommandOutput, full: cancel}
	stderr := &boundedBuffer{limit: 64 << 10}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	err := cmd.Run()
	if cmd.Process != nil {
		// Whatever it left running in its group goes with it.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	name := c.Command[0]
	errText := func() string {
		s := strings.TrimSpace(strings.ToValidUTF8(stderr.buf.String(), "?"))
		if s == "" {
			return ""
		}
		return ": " + textcut.Runes(s, 300, "…")
	}
	switch {
	case stdout.over:
		return infrastructure("the grader command %s printed more than %d bytes and was killed", name, MaxCommandOutput)
	case ctx.Err() == context.DeadlineExceeded:
		return infrastructure("the grader command %s timed out after %v and was killed", name, c.Timeout)
	case ctx.Err() != nil:
		return infrastructure("the grader command %s was interrupted: %v", name, ctx.Err())
	case err != nil:
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return infrastructure("the grader command %s crashed (%v)%s", name, ee.ProcessState, errText())
		}
		if errors.Is(err, exec.ErrWaitDelay) {
			return infrastructure("the grader command %s left processes holding its output open", name)
		}
		return infrastructure("the grader command %s could not run: %v", name, err)
	}
	out := bytes.TrimSpace(stdout.buf.Bytes())
	garbage := func(why string) result {
		return infrastructure("the grader command %s printed %s, not one JSON object {\"outcome\", \"score\", \"message\"}: %s%s",
			name, why, quote(strings.ToValidUTF8(string(out), "?")), errText())
	}
	if len(out) == 0 {
		return garbage("nothing")
	}
	dec := json.NewDecoder(bytes.NewReader(out))
	dec.DisallowUnknownFields()
	var a commandAnswer
	if err := dec.Decode(&a); err != nil {
		return garbage(fmt.Sprintf("something else (%v)", err))
	}
	if dec.More() {
		return garbage("more than one value")
	}
	switch a.Outcome {
	case trace.GradeVerified, trace.GradeIncorrect, trace.GradeMalformed, trace.GradeInfrastructure:
	default:
		return garbage(fmt.Sprintf("the outcome %q (want verified, incorrect, malformed or infrastructure)", a.Outcome))
	}
	score := 0.0
	switch {
	case a.Score != nil:
		score = *a.Score
		if !(score >= 0 && score <= 1) {
			return garbage(fmt.Sprintf("the score %v (want 0 to 1)", score))
		}
	case a.Outcome == trace.GradeVerified:
		score = 1
	}
	msg := a.Message
	if msg == "" {
		msg = a.Outcome
	}
	r := result{ok: a.Outcome == trace.GradeVerified, score: score, hasOwn: true, detail: msg}
	if !r.ok {
		r.class = a.Outcome
	}
	return r
}
