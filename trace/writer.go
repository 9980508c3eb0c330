package trace

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/codegirl-games/agentbox/internal/atomicfile"
	"github.com/codegirl-games/agentbox/internal/lockrank"
	"github.com/codegirl-games/agentbox/observe"
)

// Options tunes a Writer.
type Options struct {
	// LogCap bounds each of stdout.log and stderr.log (default 8 MiB).
	LogCap int64
	// Encoders is the number of background PNG encoders (default: CPUs).
	Encoders int
	// Queue bounds frames waiting for encoding; when full, Screenshot
	// blocks, so encoding keeps up instead of memory growing (default 16).
	Queue int
	// Indexer, when set, is told of the run and of each record after they
	// are written, in the order they are written (the store's index).
	Indexer Indexer

	// noSync leaves out the fdatasync after each step and result record
	// (the benchmark's "before").
	noSync bool
}

// Indexer is told what a Writer wrote, right after it is written and in
// the same order (its calls are made under the Writer's lock). It must
// not block, take a lock of the Writer's callers, or call the Writer: a
// slow or failing index must never slow or fail a run (package store's
// Indexer queues and drops, and `agentbox index` catches up).
type Indexer interface {
	// TraceCreated: dir's run.json was written with status running.
	TraceCreated(dir string, run Run)
	// TraceRecorded: rec was written as line n (from 0) of steps.jsonl.
	TraceRecorded(dir string, n int, rec Record)
	// TraceFinished: run.json was written with status complete.
	TraceFinished(dir string, run Run)
}

// DefaultLogCap bounds each log file.
const DefaultLogCap = 8 << 20

// Writer records one run. Its methods are safe for concurrent use.
//
// Its locks come after every lock of its callers (session's order, in
// session/lockorder.go): sendMu, then mu, then shotMu, and nothing of a
// caller's is taken under them (Update's function included).
type Writer struct {
	dir   string
	start time.Time
	opts  Options

	mu      lockrank.Mutex[writerLock]
	run     Run
	steps   *os.File
	actions *os.File
	logs    map[observe.Stream]*logFile
	network *os.File // network.jsonl, once the first connection is recorded
	netSize int64
	err     error // first write error; later writes are skipped
	closed  bool
	lines   int      // records written to steps.jsonl
	lock    *os.File // writer.lock, held until Finish

	// Screenshots: one file per distinct frame.
	shots  map[uint64]string
	names  map[string]bool
	sendMu lockrank.RWMutex[sendLock] // held for reading while queueing; Finish closes jobs under it
	jobs   chan pngJob
	// queued and written count the screenshots sent to the encoder and
	// those it has finished (under shotMu); encoded is signalled at each.
	queued, written int64
	encoded         *sync.Cond
	wg              sync.WaitGroup
	shotErr         error
	// What steps.jsonl and actions.jsonl hold (mu): where a failed
	// write is cut back to.
	stepsSize, actionsSize int64
	lost                   []LostFile // screenshots not written (shotMu)
	shotMu                 lockrank.Mutex[shotLock]
	nShots                 int
	finished               bool
}

// The Writer's lock ranks: after every caller's, leaves but for their
// own order.
type (
	sendLock   struct{}
	writerLock struct{}
	shotLock   struct{}
)

func (sendLock) Rank() lockrank.Rank   { return lockrank.Leaf - 3 }
func (writerLock) Rank() lockrank.Rank { return lockrank.Leaf - 2 }
func (shotLock) Rank() lockrank.Rank   { return lockrank.Leaf - 1 }
func (sendLock) String() string        { return "trace.Writer.sendMu" }
func (writerLock) String() string      { return "trace.Writer.mu" }
func (shotLock) String() string        { return "trace.Writer.shotMu" }

type pngJob struct {
	frame *observe.Frame
	path  string
}

type logFile struct {
	f       *os.File
	written int64
	dropped int64
	cap     int64
	marked  bool
}

// Create makes the trace directory (which must not exist, or be empty) and
// writes run.json with status "running".
func Create(dir string, run Run, opts Options) (*Writer, error) {
	if opts.LogCap <= 0 {
		opts.LogCap = DefaultLogCap
	}
	if opts.Encoders <= 0 {
		opts.Encoders = runtime.GOMAXPROCS(0)
	}
	if opts.Queue <= 0 {
		opts.Queue = 16
	}
	if err := ensureEmptyDir(dir); err != nil {
		return nil, err
	}
	lock, err := lockWriter(dir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(dir, ScreenshotsDir), 0o755); err != nil {
		lock.Close()
		return nil, fmt.Errorf("trace: %w", err)
	}
	w := &Writer{
		dir:   dir,
		start: time.Now(),
		opts:  opts,
		run:   run,
		logs:  map[observe.Stream]*logFile{},
		shots: map[uint64]string{},
		names: map[string]bool{},
		jobs:  make(chan pngJob, opts.Queue),
		lock:  lock,
	}
	w.encoded = sync.NewCond(&w.shotMu)
	w.run.Format, w.run.Version, w.run.Status = Format, Version, StatusRunning
	if w.run.Started.IsZero() {
		w.run.Started = w.start
	}
	open := func(name string) (*os.File, error) {
		return os.OpenFile(filepath.Join(dir, name), os.O_CREATE|os.O_WRONLY|os.O_APPEND|os.O_EXCL, 0o644)
	}
	if w.steps, err = open(StepsFile); err != nil {
		w.closeFiles()
		w.unlock()
		return nil, fmt.Errorf("trace: %w", err)
	}
	if w.actions, err = open(ActionsFile); err != nil {
		w.steps.Close()
		return nil, fmt.Errorf("trace: %w", err)
	}
	for stream, name := range map[observe.Stream]string{observe.Stdout: StdoutFile, observe.Stderr: StderrFile} {
		f, err := open(name)
		if err != nil {
			w.closeFiles()
			w.unlock()
			return nil, fmt.Errorf("trace: %w", err)
		}
		w.logs[stream] = &logFile{f: f, cap: opts.LogCap}
	}
	if err := w.writeRun(); err != nil {
		w.closeFiles()
		w.unlock()
		return nil, err
	}
	// Space for run.json's last version: a disk that fills up while the
	// run is written still gets its outcome (Finish gives it up). Without
	// it (the disk is full already) the run goes on.
	_ = os.WriteFile(filepath.Join(dir, ReserveFile), make([]byte, ReserveBytes), 0o600)
	if opts.Indexer != nil {
		opts.Indexer.TraceCreated(dir, w.run)
	}
	for i := 0; i < opts.Encoders; i++ {
		w.wg.Add(1)
		go w.encoder()
	}
	return w, nil
}

func ensureEmptyDir(dir string) error {
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return os.MkdirAll(dir, 0o755)
	case err != nil:
		return fmt.Errorf("trace: %w", err)
	case len(entries) > 0:
		return fmt.Errorf("trace: %s exists and is not empty; choose a new directory (nothing was overwritten)", dir)
	}
	return nil
}

// Dir is the trace directory.
func (w *Writer) Dir() string { return w.dir }

// Since is the time since the writer was created, in milliseconds: the t_ms
// of records.
func (w *Writer) Since() float64 { return ms(time.Since(w.start)) }

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// Update changes run.json's in-memory state (for example, environment info
// once known) and rewrites it.
func (w *Writer) Update(f func(r *Run)) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	f(&w.run)
	return w.writeRunLocked()
}

func (w *Writer) writeRun() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.writeRunLocked()
}

func (w *Writer) writeRunLocked() error {
	data, err := json.MarshalIndent(w.run, "", "  ")
	if err != nil {
		return fmt.Errorf("trace: encode run: %w", err)
	}
	return writeFileAtomic(filepath.Join(w.dir, RunFile), append(data, '\n'), w.finished)
}

// writeFileAtomic replaces path with data; with sync it waits for the data
// and the name to reach the disk.
func writeFileAtomic(path string, data []byte, sync bool) error {
	var opts []atomicfile.Option
	if !sync {
		opts = append(opts, atomicfile.NoSync)
	}
	if err := atomicfile.WriteFile(path, data, 0o644, opts...); err != nil {
		return fmt.Errorf("trace: %w", err)
	}
	return nil
}

// Screenshot queues a frame for encoding and returns its path relative to
// the trace. A frame equal to an earlier one (same hash) is not written
// again; its first file is reused.
func (w *Writer) Screenshot(step int, f *observe.Frame) string {
	if f == nil {
		return ""
	}
	w.sendMu.RLock()
	defer w.sendMu.RUnlock()
	w.mu.Lock()
	if p, ok := w.shots[f.Hash]; ok {
		w.mu.Unlock()
		return p
	}
	if w.closed {
		w.mu.Unlock()
		return ""
	}
	rel := filepath.ToSlash(filepath.Join(ScreenshotsDir, fmt.Sprintf("%06d.png", step)))
	for n := 1; w.names[rel]; n++ {
		rel = filepath.ToSlash(filepath.Join(ScreenshotsDir, fmt.Sprintf("%06d-%d.png", step, n)))
	}
	w.shots[f.Hash] = rel
	w.names[rel] = true
	w.nShots++
	w.mu.Unlock()
	w.queue(pngJob{frame: f, path: filepath.Join(w.dir, filepath.FromSlash(rel))})
	return rel
}

// queue sends a screenshot to the encoder.
func (w *Writer) queue(j pngJob) {
	w.shotMu.Lock()
	w.queued++
	w.shotMu.Unlock()
	w.jobs <- j
}

// Flush waits until every screenshot queued before it was called has
// been written (or has failed): a reader of the trace then finds them.
func (w *Writer) Flush() {
	w.shotMu.Lock()
	defer w.shotMu.Unlock()
	want := w.queued
	for w.written < want {
		w.encoded.Wait()
	}
}

func (w *Writer) encoder() {
	defer w.wg.Done()
	for j := range w.jobs {
		w.encode(j)
	}
}

func (w *Writer) encode(j pngJob) {
	defer func() {
		w.shotMu.Lock()
		w.written++
		w.encoded.Broadcast()
		w.shotMu.Unlock()
	}()
	err := func() error {
		data, err := j.frame.PNG()
		if err != nil {
			return err
		}
		return writeFileAtomic(j.path, data, false)
	}()
	if err != nil {
		w.shotMu.Lock()
		if w.shotErr == nil {
			w.shotErr = fmt.Errorf("trace: screenshot %s: %w", filepath.Base(j.path), err)
		}
		if rel, rerr := filepath.Rel(w.dir, j.path); rerr == nil {
			w.lost = append(w.lost, LostFile{Path: filepath.ToSlash(rel), Error: err.Error()})
		}
		w.shotMu.Unlock()
	}
}

// Marked queues the agent's marked copy of a step's screenshot for
// encoding, as screenshots/NNNNNN-marks.png, and returns its path.
func (w *Writer) Marked(step int, f *observe.Frame) string {
	if f == nil {
		return ""
	}
	w.sendMu.RLock()
	defer w.sendMu.RUnlock()
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return ""
	}
	rel := filepath.ToSlash(filepath.Join(ScreenshotsDir, fmt.Sprintf("%06d-marks.png", step)))
	for n := 1; w.names[rel]; n++ {
		rel = filepath.ToSlash(filepath.Join(ScreenshotsDir, fmt.Sprintf("%06d-marks-%d.png", step, n)))
	}
	w.names[rel] = true
	w.mu.Unlock()
	w.queue(pngJob{frame: f, path: filepath.Join(w.dir, filepath.FromSlash(rel))})
	return rel
}

// Tree writes a step's accessibility tree as a11y/NNNNNN.json and returns
// its path relative to the trace.
func (w *Writer) Tree(step int, t *observe.Tree) (string, error) {
	data, err := json.Marshal(t)
	if err != nil {
		return "", fmt.Errorf("trace: tree: %w", err)
	}
	if err := os.MkdirAll(filepath.Join(w.dir, A11yDir), 0o755); err != nil {
		return "", fmt.Errorf("trace: %w", err)
	}
	w.mu.Lock()
	rel := filepath.ToSlash(filepath.Join(A11yDir, fmt.Sprintf("%06d.json", step)))
	for n := 1; w.names[rel]; n++ {
		rel = filepath.ToSlash(filepath.Join(A11yDir, fmt.Sprintf("%06d-%d.json", step, n)))
	}
	w.names[rel] = true
	w.mu.Unlock()
	// Synced like the step's intent it belongs to: a model agent's
	// exchanges are its history, which a resume rebuilds from them.
	if err := writeFileAtomic(filepath.Join(w.dir, filepath.FromSlash(rel)), data, !w.opts.noSync); err != nil {
		return "", err
	}
	return rel, nil
}

// Attach writes a file the agent produced for a step into exchanges/
// (synced, as the step's intent is) and returns its path relative to the
// trace.
func (w *Writer) Attach(step int, name string, data []byte) (string, error) {
	safe := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' || r == '_' {
			return r
		}
		return '_'
	}, name)
	rel := filepath.ToSlash(filepath.Join(ExchangesDir, fmt.Sprintf("%06d-%s", step, safe)))
	if err := os.MkdirAll(filepath.Join(w.dir, ExchangesDir), 0o755); err != nil {
		return "", fmt.Errorf("trace: %w", err)
	}
	// Synced like the step's intent it belongs to: a model agent's
	// exchanges are its history, which a resume rebuilds from them.
	if err := writeFileAtomic(filepath.Join(w.dir, filepath.FromSlash(rel)), data, !w.opts.noSync); err != nil {
		return "", err
	}
	return rel, nil
}

// FrameHash formats a frame hash for records.
func FrameHash(h uint64) string { return strconv.FormatUint(h, 16) }

// Record appends one line to steps.jsonl (and, for a step with a valid
// action, to actions.jsonl) with a single write each.
func (w *Writer) Record(r Record) error {
	if r.TMS == 0 {
		r.TMS = w.Since()
	}
	line, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("trace: encode record: %w", err)
	}
	var aline []byte
	if r.Type == TypeStep && r.Action != nil && r.Invalid == "" {
		aline, err = json.Marshal(ActionRecord{Step: r.Step, TMS: r.TMS, Actor: r.Actor, Action: *r.Action})
		if err != nil {
			return fmt.Errorf("trace: encode action: %w", err)
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return w.err
	}
	if w.closed {
		return errors.New("trace: writer is closed")
	}
	// A write cut short (a full disk) is taken back, both files to
	// where they were: no torn line, no step without its action line.
	if _, err := w.steps.Write(append(line, '\n')); err != nil {
		_ = w.steps.Truncate(w.stepsSize)
		w.err = fmt.Errorf("trace: write %s: %w", StepsFile, err)
		return w.err
	}
	if aline != nil {
		if _, err := w.actions.Write(append(aline, '\n')); err != nil {
			_ = w.steps.Truncate(w.stepsSize)
			_ = w.actions.Truncate(w.actionsSize)
			w.err = fmt.Errorf("trace: write %s: %w", ActionsFile, err)
			return w.err
		}
		w.actionsSize += int64(len(aline) + 1)
	}
	w.stepsSize += int64(len(line) + 1)
	if (r.Type == TypeStep || r.Type == TypeResult) && !w.opts.noSync {
		// The step's intent (before its action runs) and its result are
		// on disk before the loop goes on: what a resume replays.
		if err := fdatasync(w.steps); err != nil {
			w.err = fmt.Errorf("trace: sync %s: %w", StepsFile, err)
			return w.err
		}
	}
	if r.Type == TypeStep && r.Step > w.run.Steps {
		w.run.Steps = r.Step
	}
	if w.opts.Indexer != nil {
		w.opts.Indexer.TraceRecorded(w.dir, w.lines, r)
	}
	w.lines++
	return nil
}

// Output appends app output to stdout.log or stderr.log, up to the cap;
// beyond it bytes are counted, not written. dropped adds bytes the guest
// already discarded.
func (w *Writer) Output(stream observe.Stream, data []byte, dropped int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	lf := w.logs[stream]
	if lf == nil || w.closed {
		return
	}
	lf.dropped += dropped
	room := lf.cap - lf.written
	if room < 0 {
		room = 0
	}
	n := int64(len(data))
	if n > room {
		lf.dropped += n - room
		data = data[:room]
	}
	if len(data) > 0 {
		if _, err := lf.f.Write(data); err == nil {
			lf.written += int64(len(data))
		}
	}
}

// maxNetLimits bounds the limit events run.json lists.
const maxNetLimits = 10

// Network records one connection of the sandbox's network: a line of
// network.jsonl (made with the first) and the totals in run.json's
// network (which must have been set, with the policy, in the Run given to
// Create; without it the connection is still written). network.jsonl is
// bounded by the log cap; beyond it events are counted, not written.
func (w *Writer) Network(ev observe.NetEvent) {
	line, err := json.Marshal(struct {
		TMS float64 `json:"t_ms"`
		observe.NetEvent
	}{w.Since(), ev})
	if err != nil {
		return
	}
	line = append(line, '\n')
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed || w.err != nil {
		return
	}
	if w.run.Network == nil {
		w.run.Network = &NetworkInfo{}
	}
	n := w.run.Network
	switch {
	case ev.Kind == "limit":
		if len(n.Limits) < maxNetLimits {
			n.Limits = append(n.Limits, ev.Reason)
		}
	case ev.Allowed:
		n.Allowed++
	default:
		n.Denied++
	}
	n.BytesUp += ev.BytesUp
	n.BytesDown += ev.BytesDown
	if w.netSize+int64(len(line)) > w.opts.LogCap {
		n.Dropped++
		return
	}
	if w.network == nil {
		f, err := os.OpenFile(filepath.Join(w.dir, NetworkFile), os.O_CREATE|os.O_WRONLY|os.O_APPEND|os.O_EXCL, 0o644)
		if err != nil {
			w.err = fmt.Errorf("trace: %w", err)
			return
		}
		w.network = f
	}
	if _, err := w.network.Write(line); err != nil {
		w.err = fmt.Errorf("trace: write %s: %w", NetworkFile, err)
		return
	}
	w.netSize += int64(len(line))
}

// EventsDropped counts n events of a kind the host discarded beyond their
// bound. The first time for a kind it also records an "events_dropped"
// event, so a reader of steps.jsonl sees where the record stops being
// complete; the totals go to run.json.
func (w *Writer) EventsDropped(kind string, n int64) {
	w.mu.Lock()
	first := w.run.Logs.EventsDropped[kind] == 0
	if w.run.Logs.EventsDropped == nil {
		w.run.Logs.EventsDropped = map[string]int64{}
	}
	w.run.Logs.EventsDropped[kind] += n
	w.mu.Unlock()
	if first {
		w.Record(Record{Type: TypeEvent, Event: "events_dropped", Data: map[string]any{
			"kind": kind, "note": "further " + kind + " events are counted in run.json (logs.events_dropped), not recorded",
		}})
	}
}

// Finish waits for the screenshots, writes the truncation markers, syncs
// everything and rewrites run.json with status "complete". The update
// function fills in the outcome. Finish is idempotent.
func (w *Writer) Finish(update func(r *Run)) error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return nil
	}
	w.closed = true
	w.mu.Unlock()

	w.sendMu.Lock()
	close(w.jobs)
	w.sendMu.Unlock()
	w.wg.Wait()

	// The reserve makes room for what follows on a full disk; the live
	// page's address goes with the page.
	_ = os.Remove(filepath.Join(w.dir, ReserveFile))
	_ = os.Remove(filepath.Join(w.dir, LiveFile))

	w.mu.Lock()
	defer w.mu.Unlock()
	var errs []error
	for stream, lf := range w.logs {
		if lf.dropped > 0 && !lf.marked {
			fmt.Fprintf(lf.f, "\n[agentbox: %s truncated at %d bytes; %d more bytes were dropped]\n", stream, lf.written, lf.dropped)
			lf.marked = true
		}
		switch stream {
		case observe.Stdout:
			w.run.Logs.StdoutBytes, w.run.Logs.StdoutDropped = lf.written, lf.dropped
		case observe.Stderr:
			w.run.Logs.StderrBytes, w.run.Logs.StderrDropped = lf.written, lf.dropped
		}
	}
	w.shotMu.Lock()
	if w.shotErr != nil {
		errs = append(errs, w.shotErr)
	}
	w.run.Lost = append(w.run.Lost, w.lost...)
	w.shotMu.Unlock()
	w.run.Screenshots = w.nShots
	for _, f := range w.files() {
		if err := f.Sync(); err != nil {
			errs = append(errs, fmt.Errorf("trace: sync %s: %w", filepath.Base(f.Name()), err))
		}
	}
	w.closeFiles()
	if update != nil {
		update(&w.run)
	}
	w.run.Status = StatusComplete
	if w.run.Ended.IsZero() {
		w.run.Ended = time.Now()
	}
	w.run.DurationMS = ms(w.run.Ended.Sub(w.run.Started))
	w.run.ExitCode = w.run.Outcome.ExitCode()
	w.finished = true
	if err := w.writeRunLocked(); err != nil {
		errs = append(errs, err)
	} else if w.opts.Indexer != nil {
		w.opts.Indexer.TraceFinished(w.dir, w.run)
	}
	if w.err != nil {
		errs = append(errs, w.err)
	}
	_ = atomicfile.SyncDir(filepath.Join(w.dir, ScreenshotsDir))
	w.unlock()
	return errors.Join(errs...)
}

// Err is the first write that failed (steps.jsonl, actions.jsonl, a
// screenshot), nil while every one succeeded: the session ends the run
// with an environment error at its next step.
func (w *Writer) Err() error {
	w.mu.Lock()
	err := w.err
	w.mu.Unlock()
	if err != nil {
		return err
	}
	w.shotMu.Lock()
	defer w.shotMu.Unlock()
	return w.shotErr
}

// Run returns a copy of the current run record.
func (w *Writer) Run() Run {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.run
}

func (w *Writer) files() []*os.File {
	fs := []*os.File{w.steps, w.actions}
	if w.network != nil {
		fs = append(fs, w.network)
	}
	for _, lf := range w.logs {
		fs = append(fs, lf.f)
	}
	return fs
}

func (w *Writer) closeFiles() {
	for _, f := range w.files() {
		if f != nil {
			f.Close()
		}
	}
}

// unlock removes writer.lock and lets go of it: the trace is finalised.
func (w *Writer) unlock() {
	if w.lock == nil {
		return
	}
	_ = os.Remove(filepath.Join(w.dir, LockFile))
	w.lock.Close()
	w.lock = nil
}

// fdatasync flushes f's data (and the size that grew with it), not its
// times.
func fdatasync(f *os.File) error {
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}
