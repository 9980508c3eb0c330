package grade

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/codegirl-games/agentbox/internal/plural"
	"github.com/codegirl-games/agentbox/internal/textcut"
	"github.com/codegirl-games/agentbox/trace"
)

// Bounds on what grading reads.
const (
	// MaxFileBytes bounds a collected or expected file read whole (text,
	// JSON, CSV, a spreadsheet's archive, a PNG).
	MaxFileBytes = 64 << 20
	// MaxUnzipBytes bounds what a spreadsheet's archive may expand to.
	MaxUnzipBytes = 64 << 20
	// MaxCells bounds a sheet's cells kept (a repeat of an empty cell or
	// row costs nothing).
	MaxCells = 4_000_000
	// MaxRows bounds a sheet's rows (CSV records; ODS and XLSX rows).
	MaxRows = 1_048_576
	// MaxPixels bounds an image's width × height, read from its header
	// before it is decoded.
	MaxPixels = 50_000_000
	// MaxCommandOutput bounds what a grader command may print.
	MaxCommandOutput = 1 << 20
)

// result is one check's verdict: held, or not with its class.
type result struct {
	ok     bool
	class  string // for !ok: trace.GradeIncorrect, GradeMalformed, GradeInfrastructure
	detail string
	score  float64 // a command's own; else 1 when ok
	hasOwn bool
}

func held(format string, args ...any) result {
	return result{ok: true, score: 1, detail: fmt.Sprintf(format, args...)}
}

func incorrect(format string, args ...any) result {
	return result{class: trace.GradeIncorrect, detail: fmt.Sprintf(format, args...)}
}

func malformed(format string, args ...any) result {
	return result{class: trace.GradeMalformed, detail: fmt.Sprintf(format, args...)}
}

func infrastructure(format string, args ...any) result {
	return result{class: trace.GradeInfrastructure, detail: fmt.Sprintf(format, args...)}
}

// Grade runs the checks over filesDir (the trace's files; it may be
// missing: nothing was collected) and returns the verdict. It implements
// session.Grader: it never fails, and a check that cannot judge says so
// as infrastructure.
func (s *Spec) Grade(ctx context.Context, filesDir, traceDir string) trace.Grade {
	start := time.Now()
	g := trace.Grade{Checks: make([]trace.GradeCheck, 0, len(s.Checks))}
	var total, got float64
	worst := trace.GradeVerified
	var firstBad string
	bad := 0
	for i, c := range s.Checks {
		t := time.Now()
		var r result
		if err := ctx.Err(); err != nil {
			r = infrastructure("grading was interrupted: %v", err)
		} else {
			r = s.run(ctx, c, filesDir, traceDir)
		}
		gc := trace.GradeCheck{
			Name: c.Name, Check: c.Kind, File: c.File, OK: r.ok,
			Detail: textcut.Fit(strings.ToValidUTF8(r.detail, "?"), 2000, "…"),
			MS:     ms(time.Since(t)),
		}
		if c.Weight != 1 {
			gc.Weight = c.Weight
		}
		if !r.ok {
			gc.Class = r.class
			if rank(r.class) > rank(worst) {
				worst = r.class
			}
			if bad == 0 {
				firstBad = c.Describe(i) + ": " + gc.Detail
			}
			bad++
		}
		score := r.score
		if !r.hasOwn && !r.ok {
			score = 0
		}
		total += c.Weight
		got += c.Weight * score
		g.Checks = append(g.Checks, gc)
	}
	g.Outcome = worst
	if total > 0 {
		g.Score = min(max(got/total, 0), 1)
	}
	switch {
	case bad == 0:
		g.Message = fmt.Sprintf("%s held", plural.Count(len(s.Checks), "check", "checks"))
	case bad == 1:
		g.Message = firstBad
	default:
		g.Message = fmt.Sprintf("%s (and %d more of %d did not hold)", firstBad, bad-1, len(s.Checks))
	}
	g.MS = ms(time.Since(start))
	return g
}

// rank orders the classes: infrastructure over malformed over incorrect.
func rank(class string) int {
	switch class {
	case trace.GradeIncorrect:
		return 1
	case trace.GradeMalformed:
		return 2
	case trace.GradeInfrastructure:
		return 3
	}
	return 0
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// run runs one check; a panic in a reader (a hostile file finding a bug)
// is malformed, never a crash of the host.
func (s *Spec) run(ctx context.Context, c *Check, filesDir, traceDir string) (r result) {
	defer func() {
		if p := recover(); p != nil {
			r = malformed("the file could not be read (%v)", p)
		}
	}()
	switch c.Kind {
	case KindCommand:
		return runCommand(ctx, c, filesDir, traceDir)
	case KindFileWritten, KindProcess:
		return checkActivity(c, traceDir)
	}
	data, res, ok := readCollected(filesDir, c.File)
	if !ok {
		return res
	}
	switch c.Kind {
	case KindExists:
		return held("collected (%s)", plural.Count(len(data), "byte", "bytes"))
	case KindText:
		return checkText(c, data)
	case KindJSON:
		return checkJSON(c, data)
	case KindTable:
		return checkTable(c, data)
	case KindImage:
		return checkImage(c, data)
	}
	return infrastructure("unknown check %q", c.Kind)
}

// readCollected reads the collected file p below filesDir, confined to
// it (no link leads out), a regular file of at most MaxFileBytes. A file
// that is not there fails as incorrect.
func readCollected(filesDir, p string) ([]byte, result, bool) {
	root, err := os.OpenRoot(filesDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, incorrect("%s was not collected (nothing was)", p), false
	}
	if err != nil {
		return nil, infrastructure("the collected files: %v", err), false
	}
	defer root.Close()
	f, err := root.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, incorrect("%s was not collected", p), false
	}
	if err != nil {
		return nil, malformed("%s: %v", p, err), false
	}
	defer f.Close()
	data, err := readBounded(f, p)
	if err != nil {
		return nil, malformed("%v", err), false
	}
	return data, result{}, true
}

// readBounded reads a regular file whole, refusing one over MaxFileBytes.
func readBounded(f *os.File, name string) ([]byte, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", name)
	}
	if fi.Size() > MaxFileBytes {
		return nil, fmt.Errorf("%s is %d bytes, more than the grader reads (%d)", name, fi.Size(), MaxFileBytes)
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if len(data) > MaxFileBytes {
		return nil, fmt.Errorf("%s is more than %d bytes, more than the grader reads", name, MaxFileBytes)
	}
	return data, nil
}

// readHost reads an expected file on the host.
func readHost(p string) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readBounded(f, p)
}
