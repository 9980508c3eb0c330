package trace

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/codegirl-games/agentbox/internal/atomicfile"
)

// LockFile is held (flock, exclusive) by the process writing the trace,
// from Create to Finish, and holds its pid. The kernel lets go of the lock
// when that process dies, however it dies: a run.json that says running
// with nobody holding the lock is a run whose agentbox died.
const LockFile = "writer.lock"

// ReasonCrashed is the reason of a run whose agentbox process died (outcome
// error): set by MarkCrashed on a trace left running with nobody writing
// it (by agentbox serve on start, or by a resume's claim).
const ReasonCrashed = "crashed"

// Liveness says whether a trace is being written.
type Liveness string

// Livenesses.
const (
	Live     Liveness = "running"  // a live process holds the trace's lock
	Finished Liveness = "finished" // finalised by its writer
	Crashed  Liveness = "crashed"  // its writer died before finalising it
	Resuming Liveness = "resuming" // crashed, and an agentbox resume holds it
)

// ResumedFrom is where a resumed run continued another: the crashed
// trace (absolute) and the last step of it that had completed, which the
// resumed run replayed before its agent went on.
type ResumedFrom struct {
	Trace string `json:"trace"`
	ID    string `json:"id,omitempty"`
	Step  int    `json:"step"`
}

// lockWriter creates dir's writer.lock, takes it and writes the pid.
func lockWriter(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, LockFile), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("trace: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("trace: %s is being written by another process: %w", dir, err)
	}
	if err := writeLockOwner(f, "write"); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

func writeLockOwner(f *os.File, what string) error {
	if err := f.Truncate(0); err != nil {
		return fmt.Errorf("trace: %w", err)
	}
	if _, err := f.WriteAt([]byte(strconv.Itoa(os.Getpid())+" "+what+"\n"), 0); err != nil {
		return fmt.Errorf("trace: %w", err)
	}
	return nil
}

// lockHeld reports whether a process holds dir's writer lock, and what
// the lock file says of it ("PID write" or "PID resume").
func lockHeld(dir string) (held bool, owner string, err error) {
	f, err := os.Open(filepath.Join(dir, LockFile))
	if errors.Is(err, os.ErrNotExist) {
		return false, "", nil // a trace written before the lock, or finalised
	}
	if err != nil {
		return false, "", fmt.Errorf("trace: %w", err)
	}
	defer f.Close()
	buf := make([]byte, 64)
	n, _ := f.ReadAt(buf, 0)
	owner = strings.TrimSpace(string(buf[:n]))
	switch err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB); {
	case err == nil:
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		return false, owner, nil
	case errors.Is(err, syscall.EWOULDBLOCK):
		return true, owner, nil
	default:
		return false, owner, fmt.Errorf("trace: lock %s: %w", filepath.Join(dir, LockFile), err)
	}
}

// CheckLiveness tells whether the trace in dir is being written
// (running), was finalised (finished), or was left running by a writer
// that died (crashed: resumable, see ClaimCrashed); a crashed trace a
// resume holds is resuming. A trace finalised by MarkCrashed is crashed.
func CheckLiveness(dir string) (Liveness, error) {
	run, err := ReadRun(dir)
	if err != nil {
		return "", err
	}
	if run.Status == StatusComplete {
		if run.Reason == ReasonCrashed {
			if held, _, _ := lockHeld(dir); held {
				return Resuming, nil
			}
			return Crashed, nil
		}
		return Finished, nil
	}
	held, owner, err := lockHeld(dir)
	if err != nil {
		return "", err
	}
	switch {
	case held && strings.HasSuffix(owner, " resume"):
		return Resuming, nil
	case held:
		return Live, nil
	}
	return Crashed, nil
}

// MarkCrashed finalises a crashed trace: run.json says complete, outcome
// error, reason crashed, with a message saying how to continue it; the
// steps stay as they are. It refuses a trace that is running or finished.
func MarkCrashed(dir string) error {
	lv, err := CheckLiveness(dir)
	if err != nil {
		return err
	}
	if lv != Crashed {
		return fmt.Errorf("trace: %s is %s, not crashed", dir, lv)
	}
	f, err := os.OpenFile(filepath.Join(dir, LockFile), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return fmt.Errorf("trace: %w", err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return fmt.Errorf("trace: %s was taken by another process: %w", dir, err)
	}
	return markCrashed(dir, "")
}

// markCrashed rewrites run.json as crashed (the caller holds the lock).
func markCrashed(dir, resumedBy string) error {
	run, err := ReadRun(dir)
	if err != nil {
		return err
	}
	if run.Status == StatusComplete && run.Reason != ReasonCrashed {
		return fmt.Errorf("trace: %s was finalised meanwhile", dir)
	}
	if run.Status != StatusComplete {
		tr, err := Open(dir)
		if err != nil {
			return err
		}
		run.Steps = 0
		for _, st := range tr.Steps {
			run.Steps = max(run.Steps, st.Step)
		}
		run.Status, run.Outcome, run.Reason = StatusComplete, Error, ReasonCrashed
		run.Message = fmt.Sprintf("agentbox died during the run (after %d steps); agentbox resume %s continues it", LastCompleted(tr), dir)
		if run.Ended.IsZero() {
			run.Ended = lastTime(tr, run.Started)
		}
		run.DurationMS = ms(run.Ended.Sub(run.Started))
		run.ExitCode = run.Outcome.ExitCode()
	}
	if resumedBy != "" {
		run.ResumedBy = resumedBy
		run.Message = "agentbox died during the run; it was resumed as " + resumedBy
	}
	_ = os.Remove(filepath.Join(dir, ReserveFile)) // room for run.json
	_ = os.Remove(filepath.Join(dir, LiveFile))
	data, err := json.MarshalIndent(run, "", "  ")
	if err != nil {
		return fmt.Errorf("trace: encode run: %w", err)
	}
	return writeFileAtomic(filepath.Join(dir, RunFile), append(data, '\n'), true)
}

// lastTime is when the trace's last record was written (its start when it
// has none).
func lastTime(tr *Trace, started time.Time) time.Time {
	if n := len(tr.Records); n > 0 {
		return started.Add(time.Duration(tr.Records[n-1].TMS * float64(time.Millisecond)))
	}
	return started
}

// LastCompleted is the last step of tr whose result was recorded, with
// every step before it complete too: where a resume joins. Steps of the
// actor collect (after the episode) do not count.
func LastCompleted(tr *Trace) int {
	last := 0
	for _, st := range tr.Steps {
		if st.Actor == ActorCollect {
			break
		}
		if st.Result == nil {
			break
		}
		last = st.Step
	}
	return last
}

// Claim is a crashed trace taken by one resume: no other resume (and no
// MarkCrashed) can take it until Release.
type Claim struct {
	dir string
	f   *os.File
}

// ClaimCrashed takes a crashed trace for a resume: it fails when the
// trace is running, finished, being resumed, or was resumed already
// (run.json's resumed_by; force takes such a trace again).
func ClaimCrashed(dir string, force bool) (*Claim, error) {
	if run, err := ReadRun(dir); err != nil {
		return nil, err
	} else if run.Status == StatusComplete && run.Reason != ReasonCrashed {
		return nil, fmt.Errorf("%s finished (%s); there is nothing to resume", dir, run.Outcome)
	}
	f, err := os.OpenFile(filepath.Join(dir, LockFile), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("trace: %w", err)
	}
	fail := func(err error) (*Claim, error) {
		f.Close()
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		buf := make([]byte, 64)
		n, _ := f.ReadAt(buf, 0)
		owner := strings.TrimSpace(string(buf[:n]))
		if pid, what, ok := strings.Cut(owner, " "); ok && what == "resume" {
			return fail(fmt.Errorf("%s is being resumed by another agentbox (pid %s)", dir, pid))
		}
		return fail(fmt.Errorf("%s is still being written by a live agentbox (pid %s); it did not crash", dir, strings.Fields(owner + " ?")[0]))
	}
	run, err := ReadRun(dir)
	if err != nil {
		return fail(err)
	}
	switch {
	case run.Status == StatusComplete && run.Reason != ReasonCrashed:
		return fail(fmt.Errorf("%s finished (%s); there is nothing to resume", dir, run.Outcome))
	case run.ResumedBy != "" && !force:
		return fail(fmt.Errorf("%s was resumed already, as %s (--force resumes it again)", dir, run.ResumedBy))
	}
	if err := writeLockOwner(f, "resume"); err != nil {
		return fail(err)
	}
	return &Claim{dir: dir, f: f}, nil
}

// Release finalises the crashed trace (MarkCrashed's record, naming the
// resumed run's trace when resumedBy is not empty) and lets go of it.
func (c *Claim) Release(resumedBy string) error {
	if c == nil || c.f == nil {
		return nil
	}
	err := markCrashed(c.dir, resumedBy)
	_ = c.f.Truncate(0)
	c.f.Close()
	c.f = nil
	return err
}

// MarkCrashedUnder finalises, with MarkCrashed, the crashed traces in
// root and in its directories down to depth levels (agentbox serve's
// trace root on start: what a predecessor that died left running). It
// returns the traces it finalised; one it could not read or mark is an
// error in errs, and the others are still done.
func MarkCrashedUnder(root string, depth int) (marked []string, errs []error) {
	entries, err := os.ReadDir(root)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return nil, []error{fmt.Errorf("trace: %w", err)}
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		dir := filepath.Join(root, e.Name())
		run, err := ReadRun(dir)
		if err != nil {
			if depth > 1 {
				m, es := MarkCrashedUnder(dir, depth-1)
				marked, errs = append(marked, m...), append(errs, es...)
			}
			continue
		}
		if run.Status == StatusComplete {
			continue
		}
		if lv, err := CheckLiveness(dir); err != nil || lv != Crashed {
			continue
		}
		if err := MarkCrashed(dir); err != nil {
			errs = append(errs, err)
			continue
		}
		marked = append(marked, dir)
	}
	return marked, errs
}

// LiveFile holds, while a run is written, the read-only address of its
// view on the live page (run --live, eval --live, serve --live), for the
// dashboard's link; the writer removes it when the run is finalised (its
// token dies with the page).
const LiveFile = "live.url"

// WriteLive records a running trace's live page address (mode 0600: it
// carries a read-only token).
func WriteLive(dir, addr string) error {
	if _, err := liveURL(addr); err != nil {
		return err
	}
	if err := atomicfile.WriteFile(filepath.Join(dir, LiveFile), []byte(addr+"\n"), 0o600, atomicfile.NoSync); err != nil {
		return fmt.Errorf("trace: %w", err)
	}
	return nil
}

// ReadLive is the live page address a running trace recorded ("" when
// it has none): an http address on a loopback host, else an error.
func ReadLive(dir string) (string, error) {
	data, err := ReadFile(dir, LiveFile, 4096)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return liveURL(strings.TrimSpace(string(data)))
}

// liveURL checks a live page address: http, a loopback host.
func liveURL(addr string) (string, error) {
	u, err := url.Parse(addr)
	if err != nil || u.Scheme != "http" || u.User != nil {
		return "", fmt.Errorf("trace: %s: %q is not a live page's address", LiveFile, addr)
	}
	if ip := net.ParseIP(u.Hostname()); ip == nil || !ip.IsLoopback() {
		return "", fmt.Errorf("trace: %s: %q is not on a loopback address", LiveFile, addr)
	}
	return u.String(), nil
}
