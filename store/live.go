package store

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/codegirl-games/agentbox/trace"
)

// QueueLen bounds the Indexer's queue: beyond it, records are dropped
// (the run is then caught up by Index) rather than the run waiting.
const QueueLen = 4096

// Indexer writes traces into the store as they are written: a
// trace.Indexer whose calls only queue (they never block or fail the
// run); one goroutine writes the queue in batches, one transaction per
// batch, in the order the trace was written. A run whose records were
// dropped (the queue full, the store failing) keeps no stamp in the
// store, so the next Index reads its trace again.
type Indexer struct {
	s    *Store
	warn func(error)
	q    chan op
	done chan struct{}

	// attempts counts the transactions write has ended, committed or
	// not (TestIndexerNeverBlocks).
	attempts atomic.Int64

	mu      sync.Mutex // leaf: taken under trace.Writer's lock
	lossy   map[string]bool
	closed  bool
	warned  bool
	dropped bool // the queue was full

	// The writer goroutine's: dir → the run's id and its steps' lines.
	ids   map[string]int64
	steps map[string]map[int]int
}

type opKind int

const (
	opCreated opKind = iota
	opRecord
	opFinished
	opEval
	opFlush
)

type op struct {
	kind opKind
	dir  string
	run  trace.Run
	line int
	rec  rec
	done chan struct{}
}

// NewIndexer starts an Indexer over s. warn is told (once) when the
// store cannot be written; the run goes on.
func NewIndexer(s *Store, warn func(error)) *Indexer {
	if warn == nil {
		warn = func(error) {}
	}
	ix := &Indexer{s: s, warn: warn, q: make(chan op, QueueLen), done: make(chan struct{}),
		lossy: map[string]bool{}, ids: map[string]int64{}, steps: map[string]map[int]int{}}
	go ix.loop()
	return ix
}

// send queues o, or marks its run as lossy when the queue is full or
// the Indexer closed.
func (ix *Indexer) send(o op) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if ix.closed {
		ix.lossy[o.dir] = true
		return
	}
	select {
	case ix.q <- o:
	default:
		ix.lossy[o.dir] = true
		ix.dropped = true
	}
}

// ErrBehind is the warning of an Indexer whose queue was full.
var ErrBehind = errors.New("store: the index fell behind the run and dropped records")

// warnOnce passes the first problem to warn.
func (ix *Indexer) warnOnce(err error) {
	ix.mu.Lock()
	first := !ix.warned
	ix.warned = true
	ix.mu.Unlock()
	if first {
		ix.warn(err)
	}
}

func (ix *Indexer) behind() bool {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	return ix.dropped
}

func (ix *Indexer) isLossy(dir string) bool {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	return ix.lossy[dir]
}

func (ix *Indexer) setLossy(dir string) {
	ix.mu.Lock()
	ix.lossy[dir] = true
	ix.mu.Unlock()
}

// TraceCreated implements trace.Indexer.
func (ix *Indexer) TraceCreated(dir string, run trace.Run) {
	ix.send(op{kind: opCreated, dir: dir, run: copyRun(run)})
}

// TraceRecorded implements trace.Indexer.
func (ix *Indexer) TraceRecorded(dir string, n int, r trace.Record) {
	ix.send(op{kind: opRecord, dir: dir, line: n, rec: summarize(r)})
}

// TraceFinished implements trace.Indexer.
func (ix *Indexer) TraceFinished(dir string, run trace.Run) {
	ix.send(op{kind: opFinished, dir: dir, run: copyRun(run)})
}

// Eval queues an eval directory (its summary.json written) for indexing.
func (ix *Indexer) Eval(dir string) {
	ix.send(op{kind: opEval, dir: dir})
}

// copyRun keeps what the store reads of a run (no maps or slices the
// Writer may change later).
func copyRun(r trace.Run) trace.Run {
	return trace.Run{ID: r.ID, Status: r.Status, Outcome: r.Outcome, Reason: r.Reason, Message: r.Message, Task: r.Task,
		Agent: trace.AgentInfo{Name: r.Agent.Name, Options: map[string]string{"file": r.Agent.Options["file"], "source": r.Agent.Options["source"]}},
		App:   trace.AppInfo{Target: r.App.Target, Command: r.App.Command}, Env: trace.EnvInfo{Backend: r.Env.Backend},
		Started: r.Started, DurationMS: r.DurationMS, Steps: r.Steps, Grade: r.Grade}
}

// Flush waits until what was queued before it is written, or ctx ends.
func (ix *Indexer) Flush(ctx context.Context) error {
	o := op{kind: opFlush, done: make(chan struct{})}
	for sent := false; !sent; {
		ix.mu.Lock()
		if ix.closed {
			ix.mu.Unlock()
			return errors.New("store: indexer closed")
		}
		select {
		case ix.q <- o:
			sent = true
		default:
		}
		ix.mu.Unlock()
		if !sent {
			select {
			case <-time.After(time.Millisecond):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	select {
	case <-o.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close writes what is queued, waiting at most timeout (what is left is
// for the next Index), and stops the Indexer. The Store stays open.
func (ix *Indexer) Close(timeout time.Duration) {
	ix.mu.Lock()
	if ix.closed {
		ix.mu.Unlock()
		return
	}
	ix.closed = true
	close(ix.q)
	ix.mu.Unlock()
	select {
	case <-ix.done:
	case <-time.After(timeout):
	}
}

func (ix *Indexer) loop() {
	defer close(ix.done)
	var ops []op
	for o := range ix.q {
		ops = append(ops[:0], o)
	drain:
		for len(ops) < 512 {
			select {
			case o, ok := <-ix.q:
				if !ok {
					break drain
				}
				ops = append(ops, o)
			default:
				break drain
			}
		}
		ix.write(ops)
		if ix.behind() {
			ix.warnOnce(ErrBehind)
		}
	}
}

// write writes a batch in one transaction; on failure every run in it is
// lossy, and the first failure is a warning.
func (ix *Indexer) write(ops []op) {
	ctx := context.Background()
	var flushes []chan struct{}
	defer func() {
		for _, c := range flushes {
			close(c)
		}
	}()
	var failed []string
	defer ix.attempts.Add(1)
	err := ix.s.tx(ctx, func(tx *wtx) error {
		for _, o := range ops {
			if o.kind == opFlush {
				flushes = append(flushes, o.done)
				continue
			}
			if err := ix.apply(ctx, tx, o); err != nil {
				if errors.Is(err, errSkip) {
					failed = append(failed, o.dir)
					continue
				}
				return err
			}
		}
		return nil
	})
	for _, d := range failed {
		ix.setLossy(d)
	}
	if err != nil {
		clear(ix.ids) // rows of the rolled-back batch are not there
		clear(ix.steps)
		for _, o := range ops {
			if o.dir != "" {
				ix.setLossy(o.dir)
			}
		}
		ix.warnOnce(err)
	}
}

func (ix *Indexer) apply(ctx context.Context, tx *wtx, o op) error {
	dir, err := filepath.Abs(o.dir)
	if err != nil {
		return &skipError{err}
	}
	switch o.kind {
	case opCreated:
		id, err := upsertRun(ctx, tx, dir, o.run)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, "DELETE FROM steps WHERE run = ?", id); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, "DELETE FROM events WHERE run = ?", id); err != nil {
			return err
		}
		ix.ids[dir] = id
		ix.steps[dir] = map[int]int{}
	case opRecord:
		id, ok := ix.ids[dir]
		if !ok {
			return &skipError{errors.New("run not indexed")}
		}
		return recordTx(ctx, tx, id, o.line, o.rec, ix.steps[dir])
	case opFinished:
		id, err := upsertRun(ctx, tx, dir, o.run)
		if err != nil {
			return err
		}
		delete(ix.ids, dir)
		delete(ix.steps, dir)
		if ix.isLossy(o.dir) {
			return nil // no stamp: Index reads it again
		}
		fi, err := os.Stat(filepath.Join(dir, trace.RunFile))
		if err != nil {
			return &skipError{err}
		}
		_, err = tx.ExecContext(ctx, "UPDATE runs SET run_mtime_ns = ?, run_size = ? WHERE id = ?", fi.ModTime().UnixNano(), fi.Size(), id)
		return err
	case opEval:
		return indexEvalTx(ctx, tx, dir)
	}
	return nil
}
