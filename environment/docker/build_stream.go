package docker

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/moby/moby/api/types/jsonstream"

	"github.com/codegirl-games/agentbox/images"
	"github.com/codegirl-games/agentbox/internal/termsafe"
	"github.com/codegirl-games/agentbox/internal/textcut"
)

// buildTailLines is how many lines of build output a BuildError carries.
const buildTailLines = 20

// BuildError is a failed image build: the daemon's message, the step that
// failed and the last lines of the build's output.
type BuildError struct {
	Ref     string   // the tag being built
	Step    string   // e.g. "Step 4/7 : RUN set -eux; apt-get update; …"
	Message string   // the daemon's error
	Tail    []string // up to the last 20 lines of output
}

func (e *BuildError) Error() string {
	var b strings.Builder
	b.WriteString(e.Message)
	if e.Step != "" {
		fmt.Fprintf(&b, " (at %s)", e.Step)
	}
	if len(e.Tail) > 0 {
		fmt.Fprintf(&b, "\nlast %d lines of output:", len(e.Tail))
		for _, l := range e.Tail {
			b.WriteString("\n  | ")
			b.WriteString(l)
		}
	}
	return b.String()
}

// buildMessage is one message of the JSON stream of /build and
// /images/create.
type buildMessage struct {
	Stream      string            `json:"stream,omitempty"`
	Status      string            `json:"status,omitempty"`
	ID          string            `json:"id,omitempty"`
	Error       string            `json:"error,omitempty"`
	ErrorDetail *jsonstream.Error `json:"errorDetail,omitempty"`
	Aux         json.RawMessage   `json:"aux,omitempty"`
}

func (m *buildMessage) err() error {
	switch {
	case m.ErrorDetail != nil && m.ErrorDetail.Message != "":
		return errors.New(m.ErrorDetail.Message)
	case m.Error != "":
		return errors.New(m.Error)
	}
	return nil
}

// Compact progress for the build's output: the step lines, the commands
// of `set -x`, apt's summary lines, warnings and errors, and, at most every
// buildCounterEvery, how far apt's download and set-up have got. All output
// is kept for the error's tail.
const (
	buildStepWidth    = 110 // runes of a step line shown
	buildCommandWidth = 100 // runes of a "+ command" line shown
	buildCounterEvery = 5 * time.Second
)

var (
	buildStepRE    = regexp.MustCompile(`^Step \d+/\d+ : `)
	buildAptSumRE  = regexp.MustCompile(`^(\d+) upgraded, (\d+) newly installed`)
	buildAptGetRE  = regexp.MustCompile(`^Get:\d+ `)
	buildHexLineRE = regexp.MustCompile(`^ ---> [0-9a-f]{12,}$`)
	// The classic builder wraps a RUN's stderr in colour escapes.
	buildANSIRE = regexp.MustCompile(`\x1b\[[0-9;]*[A-Za-z]`)
)

// buildStreamDecoder turns the classic builder's JSON stream into compact
// progress lines, the image ID, or a *BuildError.
type buildStreamDecoder struct {
	out    io.Writer
	prefix string
	now    func() time.Time

	partial   [2]string // unfinished lines of stdout and stderr
	tail      []string
	step      string
	stepStart time.Time
	cached    bool
	id        string

	aptTotal, aptGot, aptSetup int
	aptLast                    time.Time
}

func newBuildStreamDecoder(out io.Writer, prefix string, now func() time.Time) *buildStreamDecoder {
	if out == nil {
		out = io.Discard
	}
	return &buildStreamDecoder{out: out, prefix: prefix, now: now}
}

// decode reads the stream to its end. It returns the built image's ID, a
// *BuildError for an {"error": …} message, or the read error.
func (d *buildStreamDecoder) decode(r io.Reader) (string, error) {
	dec := json.NewDecoder(r)
	for {
		var m buildMessage
		err := dec.Decode(&m)
		if err == io.EOF {
			break
		}
		if err != nil {
			d.flushPartial()
			return "", fmt.Errorf("read build output: %w", err)
		}
		if err := m.err(); err != nil {
			d.flushPartial()
			return "", &BuildError{Step: d.step, Message: err.Error(), Tail: append([]string(nil), d.tail...)}
		}
		if len(m.Aux) > 0 {
			var aux struct{ ID string }
			if json.Unmarshal(m.Aux, &aux) == nil && aux.ID != "" {
				d.id = aux.ID
			}
		}
		if m.Stream != "" {
			d.text(m.Stream)
		}
		if m.Status != "" && m.ID == "" {
			d.line(m.Status) // e.g. a pull the builder starts itself
		}
	}
	d.flushPartial()
	d.endStep()
	if d.id == "" {
		return "", &BuildError{Step: d.step, Message: "the build output ended without an image ID", Tail: d.tail}
	}
	return d.id, nil
}

// The classic builder sends a RUN's stderr wrapped in these, per write.
const (
	buildStderrStart = "\x1b[91m"
	buildStderrEnd   = "\x1b[0m"
)

// text splits stream text into lines; a line may span messages. Stdout and
// stderr are kept apart (stderr comes wrapped in colour escapes), so that
// `set -x` traces and a program's output do not splice into one line.
func (d *buildStreamDecoder) text(s string) {
	stderr := false
	for s != "" {
		marker := buildStderrStart
		if stderr {
			marker = buildStderrEnd
		}
		seg := s
		i := strings.Index(s, marker)
		if i >= 0 {
			seg, s = s[:i], s[i+len(marker):]
		} else {
			s = ""
		}
		d.segment(&d.partial[buildBoolIndex(stderr)], seg)
		if i >= 0 {
			stderr = !stderr
		}
	}
}

func buildBoolIndex(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (d *buildStreamDecoder) segment(partial *string, s string) {
	s = *partial + s
	for {
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			break
		}
		d.line(s[:i])
		s = s[i+1:]
	}
	*partial = s
}

func (d *buildStreamDecoder) flushPartial() {
	for i, p := range d.partial {
		if p != "" {
			d.line(p)
			d.partial[i] = ""
		}
	}
}

func (d *buildStreamDecoder) printf(format string, args ...any) {
	// Lines quote the build's output: shown, never obeyed by the terminal.
	fmt.Fprintf(d.out, "%s %s\n", d.prefix, termsafe.Line(fmt.Sprintf(format, args...)))
}

func (d *buildStreamDecoder) keep(l string) {
	if len(d.tail) == buildTailLines {
		copy(d.tail, d.tail[1:])
		d.tail = d.tail[:buildTailLines-1]
	}
	d.tail = append(d.tail, l)
}

func (d *buildStreamDecoder) line(l string) {
	l = buildANSIRE.ReplaceAllString(l, "")
	l = strings.TrimRight(l, "\r")
	if i := strings.LastIndexByte(l, '\r'); i >= 0 {
		l = l[i+1:] // progress redrawn in place: keep the last state
	}
	l = strings.TrimRight(l, " \t")
	switch {
	case l == "":
		return
	case buildStepRE.MatchString(l):
		d.endStep()
		d.step = buildTruncate(strings.Join(strings.Fields(l), " "), buildStepWidth)
		d.stepStart = d.now()
		d.cached = false
		d.aptTotal, d.aptGot, d.aptSetup = 0, 0, 0
		d.aptLast = d.stepStart
		d.keep(l)
		d.printf("%s", d.step)
		return
	case l == " ---> Using cache":
		d.cached = true
		return
	case strings.HasPrefix(l, " ---> Running in "), strings.HasPrefix(l, "Removing intermediate container "),
		buildHexLineRE.MatchString(l):
		return
	case strings.HasPrefix(l, "Successfully built "):
		if d.id == "" {
			d.id = strings.TrimPrefix(l, "Successfully built ")
		}
		d.endStep()
		return
	case strings.HasPrefix(l, "Successfully tagged "):
		return
	}

	// Output of a RUN step.
	d.keep(l)
	switch {
	case strings.HasPrefix(l, "+ "):
		d.printf("  %s", buildTruncate(l, buildCommandWidth))
	case strings.HasPrefix(l, "[Warning]"), strings.HasPrefix(l, "W: "), strings.HasPrefix(l, "E: "):
		d.printf("  %s", l)
	case buildAptSumRE.MatchString(l):
		m := buildAptSumRE.FindStringSubmatch(l)
		up, _ := strconv.Atoi(m[1])
		inst, _ := strconv.Atoi(m[2])
		d.aptTotal, d.aptGot, d.aptSetup = up+inst, 0, 0
		d.printf("  %s", l)
	case strings.HasPrefix(l, "Need to get "), strings.HasPrefix(l, "Fetched "), strings.HasPrefix(l, "After this operation"):
		d.printf("  %s", l)
	case buildAptGetRE.MatchString(l):
		d.aptGot++
		d.counter("downloaded", d.aptGot)
	case strings.HasPrefix(l, "Setting up "):
		d.aptSetup++
		d.counter("set up", d.aptSetup)
	}
}

// counter prints how far apt has got, at most every buildCounterEvery.
func (d *buildStreamDecoder) counter(what string, n int) {
	now := d.now()
	if now.Sub(d.aptLast) < buildCounterEvery {
		return
	}
	d.aptLast = now
	switch {
	case what == "downloaded":
		d.printf("  apt: %s %d files", what, n) // index files count too
	case d.aptTotal > 0:
		d.printf("  apt: %s %d/%d packages", what, n, d.aptTotal)
	default:
		d.printf("  apt: %s %d packages", what, n)
	}
}

// endStep closes the current step with how it went, when worth a line.
func (d *buildStreamDecoder) endStep() {
	if d.step == "" {
		return
	}
	switch el := d.now().Sub(d.stepStart); {
	case d.cached:
		d.printf("  (cached)")
	case el >= time.Second:
		d.printf("  done in %s", images.FormatDuration(el))
	}
	d.step, d.cached = "", false
}

func buildTruncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return textcut.Runes(s, n-1, "…")
}
