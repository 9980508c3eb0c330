package script

import (
	"fmt"
	"path"
	"strings"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/internal/collectfs"
	"github.com/codegirl-games/agentbox/internal/plural"
	"github.com/codegirl-games/agentbox/observe"
)

// world is what a check looks at.
type world struct {
	obs   *observe.Observation
	ref   *observe.Frame // the reference screenshot (since, or the previous one)
	lines []observe.LogLine
	net   []observe.NetEvent      // the sandbox's connections so far
	act   []observe.ActivityEvent // what the trusted observer recorded so far
}

// Verdict is the outcome of one check.
type Verdict struct {
	OK       bool   `json:"ok"`
	Expected string `json:"expected"`
	Seen     string `json:"seen"`
}

// Evaluate checks c against the world.
func (c *Check) evaluate(w world) Verdict {
	f := w.obs.Screen
	switch c.Kind {
	case CheckPixel:
		r, g, b := f.At(c.X, c.Y)
		ok := near(r, c.Color[0], c.Tolerance) && near(g, c.Color[1], c.Tolerance) && near(b, c.Color[2], c.Tolerance)
		return Verdict{ok, fmt.Sprintf("pixel (%d,%d) is %s ± %d", c.X, c.Y, c.ColorText, c.Tolerance), fmt.Sprintf("#%02x%02x%02x", r, g, b)}
	case CheckMoved:
		exp := fmt.Sprintf("the %s centroid moved%s%s since %s", c.ColorText, bound(" dx", c.MinDX), bound(" dy", c.MinDY), c.sinceName())
		if w.ref == nil {
			return Verdict{false, exp, "no earlier screenshot to compare with"}
		}
		x0, y0, n0 := centroid(w.ref, c.Color, c.Tolerance)
		x1, y1, n1 := centroid(f, c.Color, c.Tolerance)
		switch {
		case n0 == 0:
			return Verdict{false, exp, fmt.Sprintf("no %s pixels in the earlier screenshot", c.ColorText)}
		case n1 == 0:
			return Verdict{false, exp, fmt.Sprintf("no %s pixels on the screen now", c.ColorText)}
		}
		dx, dy := x1-x0, y1-y0
		ok := meets(dx, c.MinDX) && meets(dy, c.MinDY)
		return Verdict{ok, exp, fmt.Sprintf("moved dx %+.1f, dy %+.1f (from (%.1f,%.1f) to (%.1f,%.1f))", dx, dy, x0, y0, x1, y1)}
	case CheckChanged, CheckUnchanged:
		r := c.region(f)
		if w.ref == nil {
			return Verdict{false, c.Kind + " since " + c.sinceName(), "no earlier screenshot to compare with"}
		}
		n := differing(w.ref, f, r, c.Tolerance)
		if c.Kind == CheckChanged {
			return Verdict{n >= c.MinPixels, fmt.Sprintf("at least %s of %v changed since %s", plural.S(c.MinPixels, "pixel"), r, c.sinceName()), fmt.Sprintf("%d changed", n)}
		}
		return Verdict{n <= c.MaxPixels, fmt.Sprintf("at most %s of %v changed since %s", plural.S(c.MaxPixels, "pixel"), r, c.sinceName()), fmt.Sprintf("%d changed", n)}
	case CheckImage:
		r := *c.Region
		total := r.Dx() * r.Dy()
		diff := 0
		for y := 0; y < r.Dy(); y++ {
			for x := 0; x < r.Dx(); x++ {
				i := c.Image.PixOffset(x, y)
				fr, fg, fb := f.At(r[0]+x, r[1]+y)
				p := c.Image.Pix[i : i+3]
				if !near(fr, p[0], c.Tolerance) || !near(fg, p[1], c.Tolerance) || !near(fb, p[2], c.Tolerance) {
					diff++
				}
			}
		}
		frac := float64(diff) / float64(total)
		return Verdict{frac <= c.MaxDiff, fmt.Sprintf("%v matches %s (at most %.2f%% of pixels differ by more than %d)", r, c.File, 100*c.MaxDiff, c.Tolerance),
			fmt.Sprintf("%d of %d pixels differ (%.2f%%)", diff, total, 100*frac)}
	case CheckWindow:
		var titles []string
		for _, win := range w.obs.Windows {
			titles = append(titles, fmt.Sprintf("%q", win.Title))
			if c.match(win.Title) {
				return Verdict{true, fmt.Sprintf("a window titled %s", c.Title), fmt.Sprintf("%q", win.Title)}
			}
		}
		return Verdict{false, fmt.Sprintf("a window titled %s", c.Title), "windows: [" + strings.Join(titles, ", ") + "]"}
	case CheckLog:
		exp := "the app printed "
		if c.Regex != nil {
			exp += "a line matching /" + c.Regex.String() + "/"
		} else {
			exp += fmt.Sprintf("%q", c.Contains)
		}
		if c.Stream != "" {
			exp += " on " + c.Stream
		}
		n := 0
		for _, l := range w.lines {
			if c.Stream != "" && string(l.Stream) != c.Stream {
				continue
			}
			n++
			if c.Regex != nil && c.Regex.MatchString(l.Text) || c.Regex == nil && strings.Contains(l.Text, c.Contains) {
				return Verdict{true, exp, fmt.Sprintf("%s: %q", l.Stream, l.Text)}
			}
		}
		seen := fmt.Sprintf("%d lines, none matching", n)
		if n > 0 {
			last := w.lines[len(w.lines)-1]
			seen += fmt.Sprintf("; the last: %q", last.Text)
		}
		return Verdict{false, exp, seen}
	case CheckRunning:
		return Verdict{w.obs.Running, "the app is running", describeState(w.obs)}
	case CheckElement:
		return c.element(w.obs.Tree)
	case CheckExited:
		exp := "the app has exited"
		if c.Code != nil {
			exp += fmt.Sprintf(" with code %d", *c.Code)
		}
		ok := !w.obs.Running && w.obs.Exit != nil && (c.Code == nil || (w.obs.Exit.Signal == "" && w.obs.Exit.Code == *c.Code))
		return Verdict{ok, exp, describeState(w.obs)}
	case CheckNetwork:
		verb := "allowed"
		if c.NetDenied {
			verb = "denied"
		}
		exp := fmt.Sprintf("a connection to %s %s", c.NetDest, verb)
		n := 0
		for _, e := range w.net {
			if e.Kind == "limit" {
				continue
			}
			n++
			if e.Allowed != c.NetDenied && destMatches(c.NetDest, e.Dest) {
				return Verdict{true, exp, e.String()}
			}
		}
		seen := fmt.Sprintf("%d connections, none matching", n)
		if n > 0 {
			seen += "; the last: " + w.net[len(w.net)-1].String()
		}
		return Verdict{false, exp, seen}
	case CheckFileWritten:
		return c.fileWritten(w.act)
	case CheckProcess:
		return c.process(w.act)
	}
	return Verdict{false, c.Kind, "unknown check"}
}

// fileWritten looks for a written file below the home matching Path.
func (c *Check) fileWritten(act []observe.ActivityEvent) Verdict {
	exp := "a file matching " + c.Path + " written"
	pat := strings.TrimPrefix(c.Path, "~/")
	f := observe.FindWritten(act, func(rel string) bool { return collectfs.Matches(pat, rel) })
	if f.Event != nil {
		return Verdict{true, exp, f.Event.String()}
	}
	return Verdict{false, exp, f.Seen(act, "files written")}
}

// process looks for a process whose command line matches Argv (and, with
// Exit, its exit with that code).
func (c *Check) process(act []observe.ActivityEvent) Verdict {
	exp := "a process " + c.Argv
	if c.Exit != nil {
		exp += fmt.Sprintf(" exited with code %d", *c.Exit)
	} else {
		exp += " ran"
	}
	f := observe.FindProcess(act, c.argvMatch, c.Exit)
	if f.Event != nil {
		return Verdict{true, exp, f.Event.String()}
	}
	return Verdict{false, exp, f.Seen(act, "processes")}
}

// destMatches matches a glob against "host:port", or against the host
// alone when the glob names no port.
func destMatches(glob, dest string) bool {
	if ok, _ := path.Match(glob, dest); ok {
		return true
	}
	host := dest
	if i := strings.LastIndexByte(dest, ':'); i >= 0 {
		host = strings.Trim(dest[:i], "[]")
	}
	ok, _ := path.Match(glob, host)
	return ok
}

func describeState(o *observe.Observation) string {
	switch {
	case o.Running:
		return "it is running"
	case o.Exit == nil:
		return "it is not running"
	}
	return "it exited (" + o.Exit.String() + ")"
}

func (c *Check) sinceName() string {
	if c.Since == "" {
		return "the previous screenshot"
	}
	return fmt.Sprintf("screenshot %q", c.Since)
}

func (c *Check) region(f *observe.Frame) action.Rect {
	if c.Region != nil {
		return *c.Region
	}
	return action.Rect{0, 0, f.Width, f.Height}
}

func near(a, b uint8, tol int) bool {
	d := int(a) - int(b)
	return d <= tol && -d <= tol
}

func bound(name string, v *int) string {
	if v == nil {
		return ""
	}
	if *v < 0 {
		return fmt.Sprintf("%s ≤ %d", name, *v)
	}
	return fmt.Sprintf("%s ≥ %d", name, *v)
}

func meets(d float64, min *int) bool {
	switch {
	case min == nil:
		return true
	case *min < 0:
		return d <= float64(*min)
	}
	return d >= float64(*min)
}

// centroid of the pixels within tol of col.
func centroid(f *observe.Frame, col [3]uint8, tol int) (float64, float64, int) {
	return f.Centroid(func(r, g, b uint8) bool {
		return near(r, col[0], tol) && near(g, col[1], tol) && near(b, col[2], tol)
	})
}

// differing counts pixels of r that differ by more than tol in any channel.
func differing(a, b *observe.Frame, r action.Rect, tol int) int {
	if a.Width != b.Width || a.Height != b.Height {
		return r.Dx() * r.Dy()
	}
	n := 0
	for y := r[1]; y < r[3]; y++ {
		for x := r[0]; x < r[2]; x++ {
			i := 4 * (y*a.Width + x)
			if !near(a.Pix[i], b.Pix[i], tol) || !near(a.Pix[i+1], b.Pix[i+1], tol) || !near(a.Pix[i+2], b.Pix[i+2], tol) {
				n++
			}
		}
	}
	return n
}

// unsure returns the cuts of the tree an element check's verdict v rests
// on that another read may not have (Tree.Transient): for a check that
// failed, what was not read may hold; for absent, what was not read may
// be the element. Nothing when the verdict is sure.
func (c *Check) unsure(t *observe.Tree, v Verdict) []string {
	if c.Kind != CheckElement || t == nil || v.OK && !c.Absent {
		return nil
	}
	return t.Transient()
}

// withCut adds to what a check saw that the read was cut, unless it says
// so already (a selector that matched nothing names the cuts).
func withCut(seen string, cuts []string) string {
	if strings.Contains(seen, "; the read was cut: ") {
		return seen
	}
	return seen + "; the read was cut: " + strings.Join(cuts, "; ")
}

// element checks the element the target picks in the tree.
func (c *Check) element(t *observe.Tree) Verdict {
	exp := "an element " + c.Target.String()
	switch {
	case c.Absent:
		exp = "no element " + c.Target.String()
	case c.Name != nil || c.Text != nil || len(c.States) > 0:
		var what []string
		if c.Name != nil {
			what = append(what, fmt.Sprintf("named %q", *c.Name))
		}
		if c.Text != nil {
			what = append(what, fmt.Sprintf("with text %q", *c.Text))
		}
		if len(c.States) > 0 {
			what = append(what, "with states "+strings.Join(c.States, ", "))
		}
		exp += " " + strings.Join(what, ", ")
	}
	if t == nil {
		return Verdict{false, exp, "no accessibility tree with this observation (the sandbox needs its accessibility bus: --a11y)"}
	}
	all, err := t.FindAll(*c.Target)
	if err != nil {
		return Verdict{false, exp, err.Error()}
	}
	if c.Target.Index != nil {
		if *c.Target.Index < len(all) {
			all = all[*c.Target.Index : *c.Target.Index+1]
		} else {
			all = nil
		}
	}
	if c.Absent {
		if len(all) == 0 {
			return Verdict{true, exp, "none"}
		}
		return Verdict{false, exp, fmt.Sprintf("%d: %s", len(all), t.Elements[all[0]].Describe())}
	}
	if c.Name == nil && c.Text == nil && len(c.States) == 0 {
		if len(all) > 0 {
			return Verdict{true, exp, t.Elements[all[0]].Describe()}
		}
		_, err := t.Find(*c.Target)
		return Verdict{false, exp, err.Error()}
	}
	e, err := t.Find(*c.Target)
	if err != nil {
		return Verdict{false, exp, err.Error()}
	}
	seen := e.Describe()
	ok := true
	if c.Name != nil && !c.nameMatch(e.Name) {
		ok = false
	}
	if c.Text != nil {
		seen += fmt.Sprintf(" text %q", e.Text)
		if !c.textMatch(e.Text) {
			ok = false
		}
	}
	if len(c.States) > 0 {
		seen += " states [" + strings.Join(e.States, " ") + "]"
		for _, st := range c.States {
			want := !strings.HasPrefix(st, "!")
			if e.Has(strings.TrimPrefix(st, "!")) != want {
				ok = false
			}
		}
	}
	return Verdict{ok, exp, seen}
}
