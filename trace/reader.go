package trace

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// Trace is a trace directory read back.
type Trace struct {
	Dir string
	Run Run
	// Records holds steps.jsonl in order.
	Records []Record
	// Steps pairs each step with its result (nil if it never came back).
	Steps []Step
	// Final is the last observation after the loop, if recorded.
	Final *Record
	// Incomplete is true when the writer never finalised the run (it was
	// killed); the records up to the kill are still here.
	Incomplete bool
	// TornTail is true when the last line of steps.jsonl was cut off
	// mid-write and was discarded.
	TornTail bool
	// Missing lists referenced screenshots that are not on disk (the
	// writer died before encoding them).
	Missing []string
	// Refused lists, with the reason, the referenced screenshots that are
	// not read because they are not plain files inside the trace: paths
	// that leave it, symbolic links, devices (see OpenFile).
	Refused []string

	unusable map[string]bool // Missing and Refused screenshots
}

// HasScreenshot reports whether a screenshot the trace references is on
// disk and may be read: neither missing nor refused.
func (t *Trace) HasScreenshot(rel string) bool {
	return rel != "" && !t.unusable[rel]
}

// Step is one decision with its outcome.
type Step struct {
	Record
	Result *Record
}

// MaxLine bounds one line of steps.jsonl.
const MaxLine = 64 << 20

// Open reads a trace directory. It fails only when the directory is not a
// trace; damage from a crash is reported in the Trace's fields.
func Open(dir string) (*Trace, error) {
	t := &Trace{Dir: dir, unusable: map[string]bool{}}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("trace: %s is not a trace directory: %w", dir, err)
	}
	defer root.Close()
	run, err := readRun(root, dir)
	if err != nil {
		return nil, err
	}
	t.Run = run
	t.Incomplete = t.Run.Status != StatusComplete

	f, err := openIn(root, StepsFile)
	if err != nil {
		return nil, fmt.Errorf("trace: %s: %w", dir, unprefixed(err))
	}
	defer f.Close()
	recs, torn, err := ReadRecords(f)
	if err != nil {
		return nil, fmt.Errorf("trace: %s: %w", filepath.Join(dir, StepsFile), err)
	}
	t.Records, t.TornTail = recs, torn
	if torn {
		t.Incomplete = true
	}
	index := map[int]int{}
	for i := range t.Records {
		r := t.Records[i]
		switch r.Type {
		case TypeStep:
			index[r.Step] = len(t.Steps)
			t.Steps = append(t.Steps, Step{Record: r})
		case TypeResult:
			if j, ok := index[r.Step]; ok {
				t.Steps[j].Result = &t.Records[i]
			}
		case TypeFinal:
			t.Final = &t.Records[i]
		}
	}
	seen := map[string]bool{}
	for _, r := range t.Records {
		if r.Observation == nil || r.Observation.Screenshot == "" || seen[r.Observation.Screenshot] {
			continue
		}
		shot := r.Observation.Screenshot
		seen[shot] = true
		_, err := checkIn(root, shot)
		switch {
		case err == nil:
			continue
		case errors.Is(err, ErrRefused):
			t.Refused = append(t.Refused, err.Error())
		default:
			t.Missing = append(t.Missing, shot)
		}
		t.unusable[shot] = true
	}
	return t, nil
}

// unprefixed drops the package's "trace: " from an error that is wrapped
// again.
func unprefixed(err error) error {
	if s, ok := strings.CutPrefix(err.Error(), "trace: "); ok {
		return &wrapped{s, err}
	}
	return err
}

type wrapped struct {
	msg string
	err error
}

func (w *wrapped) Error() string { return w.msg }
func (w *wrapped) Unwrap() error { return w.err }

// ReadRun reads and checks run.json alone: cheap enough to list many
// traces. The errors are those of Open.
func ReadRun(dir string) (Run, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return Run{}, fmt.Errorf("trace: %s is not a trace directory: %w", dir, err)
	}
	defer root.Close()
	return readRun(root, dir)
}

func readRun(root *os.Root, dir string) (Run, error) {
	var run Run
	f, err := openIn(root, RunFile)
	if err != nil {
		return run, fmt.Errorf("trace: %s is not a trace directory: %w", dir, unprefixed(err))
	}
	data, err := readAll(f, RunFile, MaxRunBytes)
	f.Close()
	if err != nil {
		return run, fmt.Errorf("trace: %s: %w", dir, unprefixed(err))
	}
	if err := json.Unmarshal(data, &run); err != nil {
		return run, fmt.Errorf("trace: %s: %w", filepath.Join(dir, RunFile), err)
	}
	if run.Format != Format {
		return run, fmt.Errorf("trace: %s: format %q is not %q", dir, run.Format, Format)
	}
	if run.Version > Version {
		return run, fmt.Errorf("trace: %s: version %d is newer than this agentbox reads (%d)", dir, run.Version, Version)
	}
	return run, nil
}

// ReadRecords reads JSON lines. A last line without its newline, or one that
// does not parse, is a torn tail: it is dropped and torn is true. A bad line
// anywhere else is an error.
func ReadRecords(r io.Reader) (recs []Record, torn bool, err error) {
	br := bufio.NewReaderSize(r, 1<<20)
	lineNo := 0
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > MaxLine {
			return recs, torn, fmt.Errorf("line %d is longer than %d bytes", lineNo+1, MaxLine)
		}
		if errors.Is(err, io.EOF) {
			if len(bytes.TrimSpace(line)) > 0 {
				torn = true // no newline: the write was cut off
			}
			return recs, torn, nil
		}
		if err != nil {
			return recs, torn, err
		}
		lineNo++
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var rec Record
		if err := json.Unmarshal(line, &rec); err != nil {
			// A complete but garbled line is only tolerated at the end.
			if _, perr := br.Peek(1); errors.Is(perr, io.EOF) {
				return recs, true, nil
			}
			return recs, torn, fmt.Errorf("line %d: %w", lineNo, err)
		}
		recs = append(recs, rec)
	}
}
