package eval

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/codegirl-games/agentbox/internal/plural"
	"github.com/codegirl-games/agentbox/internal/termsafe"
)

// progress reports episodes as they finish: a live status line on a
// terminal, plain lines otherwise.
type progress struct {
	w        io.Writer
	terminal bool
	total    int
	parallel int
	start    time.Time

	mu                             sync.Mutex
	running, done                  int
	passed, failed, errored, other int
	ticker                         *time.Ticker
	quit                           chan struct{}
	stopped                        bool
}

func newProgress(w io.Writer, terminal bool, total, parallel int) *progress {
	p := &progress{w: w, terminal: terminal, total: total, parallel: parallel, start: time.Now(), quit: make(chan struct{})}
	if terminal {
		p.ticker = time.NewTicker(250 * time.Millisecond)
		go func() {
			for {
				select {
				case <-p.ticker.C:
					p.mu.Lock()
					p.line()
					p.mu.Unlock()
				case <-p.quit:
					return
				}
			}
		}()
	} else {
		fmt.Fprintf(w, "eval: %s, %d at a time\n", plural.S(total, "episode"), parallel)
	}
	return p
}

// line redraws the status line; the caller holds mu.
func (p *progress) line() {
	if p.stopped {
		return
	}
	fmt.Fprintf(p.w, "\r\x1b[K%d/%d done · %d running · %d passed · %d failed · %d errored · %s",
		p.done, p.total, p.running, p.passed, p.failed, p.errored, p.eta())
}

func (p *progress) eta() string {
	if p.done == 0 {
		return "ETA …"
	}
	per := time.Since(p.start) / time.Duration(p.done)
	left := per * time.Duration(p.total-p.done)
	return "ETA " + left.Round(time.Second).String()
}

func (p *progress) started() {
	p.mu.Lock()
	p.running++
	p.mu.Unlock()
}

func (p *progress) finished(ep *Episode) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.running--
	p.done++
	switch ep.Category {
	case Passed:
		p.passed++
	case Failed:
		p.failed++
	case Malformed, Infrastructure:
		p.errored++
	default:
		p.other++
	}
	if p.terminal {
		if ep.Category != Passed {
			// The message is the run's: it may quote the app or the agent.
			fmt.Fprintf(p.w, "\r\x1b[K%s #%d %s: %s\n", termsafe.Line(ep.Task), ep.N, ep.Category, termsafe.Line(ep.Message))
		}
		p.line()
		return
	}
	fmt.Fprintf(p.w, "[%d/%d] %s #%d: %s", p.done, p.total, termsafe.Line(ep.Task), ep.N, ep.Category)
	if ep.Category != Passed {
		fmt.Fprintf(p.w, " (%s: %s)", termsafe.Line(ep.Reason), termsafe.Line(ep.Message))
	}
	fmt.Fprintf(p.w, " in %s, %s — %s\n", seconds(ep.DurationMS), plural.S(ep.Steps, "step"), p.eta())
}

func (p *progress) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return
	}
	if p.terminal {
		p.line()
		fmt.Fprintln(p.w)
		p.ticker.Stop()
		close(p.quit)
	}
	p.stopped = true
}

// notes is where an episode's agent tells what it waits for (a model
// request retried): each line under the episode's name, above the live
// status line on a terminal.
func (p *progress) notes(ep *Episode) io.Writer {
	return newNoteWriter(func(line string) {
		p.mu.Lock()
		defer p.mu.Unlock()
		line = strings.TrimPrefix(line, "agentbox: ")
		if p.terminal && !p.stopped {
			fmt.Fprintf(p.w, "\r\x1b[K%s #%d: %s\n", termsafe.Line(ep.Task), ep.N, termsafe.Line(line))
			p.line()
			return
		}
		fmt.Fprintf(p.w, "%s #%d: %s\n", termsafe.Line(ep.Task), ep.N, termsafe.Line(line))
	})
}

// noteWriter calls its function once per line written, whole lines only:
// a line written in parts (a verbose step: the action, its message, the
// newline) waits for its end.
type noteWriter struct {
	mu   sync.Mutex
	f    func(string)
	part []byte
}

// maxNoteLine bounds the part of a line kept waiting for its end.
const maxNoteLine = 64 << 10

func newNoteWriter(f func(string)) *noteWriter { return &noteWriter{f: f} }

func (w *noteWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.part = append(w.part, b...)
	for {
		i := bytes.IndexByte(w.part, '\n')
		if i < 0 {
			break
		}
		w.f(string(w.part[:i]))
		w.part = w.part[i+1:]
	}
	if len(w.part) > maxNoteLine { // a line without its end: shown in parts
		w.f(string(w.part))
		w.part = nil
	}
	return len(b), nil
}
