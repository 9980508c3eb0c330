package eval

import (
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"github.com/codegirl-games/agentbox/internal/atomicfile"
	"github.com/codegirl-games/agentbox/trace"
)

// Files written into Options.Out.
const (
	SummaryFile = "summary.json"
	JUnitFile   = "junit.xml"
)

// SummaryFormat and SummaryVersion identify summary.json.
const (
	SummaryFormat  = "agentbox-eval"
	SummaryVersion = 1
)

// maxSummaryBytes bounds summary.json when it is read.
const maxSummaryBytes = 64 << 20

// ErrNotEval says a directory holds no summary.json: it is not an eval's.
var ErrNotEval = errors.New("not an eval directory")

// ReadSummary reads the summary.json of an eval's directory, as input: a
// plain file inside dir (trace.ReadFile's rules), of a format and version
// this agentbox reads. Episodes' trace paths are as written, to be held
// to the same rules by whoever opens them.
func ReadSummary(dir string) (*Summary, error) {
	data, err := trace.ReadFile(dir, SummaryFile, maxSummaryBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("eval: %s: %w (no %s)", dir, ErrNotEval, SummaryFile)
	}
	if err != nil {
		return nil, fmt.Errorf("eval: %s: %w", dir, err)
	}
	var s Summary
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("eval: %s: %w", filepath.Join(dir, SummaryFile), err)
	}
	switch {
	case s.Format != SummaryFormat:
		return nil, fmt.Errorf("eval: %s: format %q is not %q", filepath.Join(dir, SummaryFile), s.Format, SummaryFormat)
	case s.Version > SummaryVersion:
		return nil, fmt.Errorf("eval: %s: version %d is newer than this agentbox reads (%d)", filepath.Join(dir, SummaryFile), s.Version, SummaryVersion)
	}
	return &s, nil
}

func (s *Summary) write(dir string) error {
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	if err := writeAtomic(filepath.Join(dir, SummaryFile), append(data, '\n')); err != nil {
		return err
	}
	x, err := s.JUnit()
	if err != nil {
		return err
	}
	return writeAtomic(filepath.Join(dir, JUnitFile), x)
}

func writeAtomic(path string, data []byte) error {
	if err := atomicfile.WriteFile(path, data, 0o644); err != nil {
		return fmt.Errorf("eval: write %s: %w", path, err)
	}
	return nil
}

// JUnit XML, the schema CI systems (Jenkins, GitLab, GitHub reporters) read.
type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Errors   int          `xml:"errors,attr"`
	Skipped  int          `xml:"skipped,attr"`
	Time     string       `xml:"time,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name      string      `xml:"name,attr"`
	Tests     int         `xml:"tests,attr"`
	Failures  int         `xml:"failures,attr"`
	Errors    int         `xml:"errors,attr"`
	Skipped   int         `xml:"skipped,attr"`
	Time      string      `xml:"time,attr"`
	Timestamp string      `xml:"timestamp,attr"`
	Cases     []junitCase `xml:"testcase"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Time      string        `xml:"time,attr"`
	Failure   *junitProblem `xml:"failure,omitempty"`
	Error     *junitProblem `xml:"error,omitempty"`
	Skipped   *junitProblem `xml:"skipped,omitempty"`
	SystemOut string        `xml:"system-out,omitempty"`
}

type junitProblem struct {
	Message string `xml:"message,attr,omitempty"`
	Type    string `xml:"type,attr,omitempty"`
	Text    string `xml:",chardata"`
}

func secs(ms float64) string { return fmt.Sprintf("%.3f", ms/1000) }

// JUnit renders the summary as JUnit XML: a testsuite per task, a testcase
// per episode; task failures are <failure>, malformed agents and
// infrastructure are <error>, interrupted and never-run episodes <skipped>.
func (s *Summary) JUnit() ([]byte, error) {
	root := junitSuites{Name: s.Suite, Time: secs(s.DurationMS)}
	for _, t := range s.Tasks {
		js := junitSuite{Name: t.Name, Timestamp: s.Started.UTC().Format("2006-01-02T15:04:05")}
		var ms float64
		for _, ep := range s.Episodes {
			if ep.Task != t.Name {
				continue
			}
			c := junitCase{
				Name:      fmt.Sprintf("%s #%d", ep.Task, ep.N),
				Classname: s.Suite + "." + ep.Task,
				Time:      secs(ep.DurationMS),
			}
			if ep.Trace != "" && ep.Category != Skipped {
				c.SystemOut = fmt.Sprintf("outcome: %s (%s)\nsteps: %d\ntrace: %s\n", ep.Outcome, ep.Reason, ep.Steps, ep.Trace)
				if ep.Grade != "" && ep.Score != nil {
					c.SystemOut += fmt.Sprintf("grade: %s (score %.3g)\n", ep.Grade, *ep.Score)
				}
			}
			p := &junitProblem{Message: ep.Message, Type: ep.Reason, Text: ep.Message}
			switch ep.Category {
			case Failed:
				c.Failure = p
				js.Failures++
			case Malformed, Infrastructure:
				p.Type = ep.Category + "/" + ep.Reason
				c.Error = p
				js.Errors++
			case Interrupted, Skipped:
				c.Skipped = &junitProblem{Message: ep.Category}
				js.Skipped++
			}
			ms += ep.DurationMS
			js.Tests++
			js.Cases = append(js.Cases, c)
		}
		js.Time = secs(ms)
		root.Tests += js.Tests
		root.Failures += js.Failures
		root.Errors += js.Errors
		root.Skipped += js.Skipped
		root.Suites = append(root.Suites, js)
	}
	out, err := xml.MarshalIndent(root, "", "  ")
	if err != nil {
		return nil, err
	}
	return append([]byte(xml.Header), append(out, '\n')...), nil
}
