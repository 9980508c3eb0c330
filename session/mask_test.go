package session

import (
	"context"
	"image/png"
	"os"
	"path/filepath"
	"testing"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/agent"
	"github.com/codegirl-games/agentbox/internal/vault"
	"github.com/codegirl-games/agentbox/mask"
	"github.com/codegirl-games/agentbox/observe"
	"github.com/codegirl-games/agentbox/policy"
	"github.com/codegirl-games/agentbox/trace"
)

// painted reports whether (x, y) of f is the mask's colour.
func painted(f *observe.Frame, x, y int) bool {
	i := 4 * (y*f.Width + x)
	return [4]byte(f.Pix[i:i+4]) == mask.Colour
}

// TestMaskedScreens: with a policy's mask rules, every frame handed out —
// the agent's, the trace's screenshot, a watcher's Peek — shows the
// square (matched by its selector) and the region painted over, and the
// trace says what was painted and why; the tree is read once a step, for
// the mask and the step's own tree together.
func TestMaskedScreens(t *testing.T) {
	p, err := policy.Parse("p.yaml", []byte("mask:\n  - name: the square\n    target: {role: push button, name: square}\n  - name: corner\n    region: [0, 0, 32, 16]\n"))
	if err != nil {
		t.Fatal(err)
	}
	b := &treeBackend{}
	ag := &scripted{steps: []agent.Decision{
		{Action: action.Action{Kind: action.Wait, MS: 1}},
		{Action: action.Action{Kind: action.Done}},
	}}
	res, tr := runFake(t, &b.fakeBackend, ag, func(c *Config) { c.Backend = b; c.Policy = p; c.Tree = true })
	if res.Outcome != trace.Success {
		t.Fatalf("result %+v", res)
	}
	for i, obs := range ag.seen {
		f := obs.Screen
		if !painted(f, 0, 0) || !painted(f, 31, 15) || painted(f, 32, 16) {
			t.Errorf("observation %d: the region is not painted exactly", i+1)
		}
		// The fake draws the square at x 40..80, y 220..260 (it never moves here).
		if !painted(f, 60, 240) || painted(f, 300, 300) {
			t.Errorf("observation %d: the square is not painted (or more is)", i+1)
		}
	}
	steps := 0
	for _, r := range tr.Records {
		if r.Observation == nil {
			continue
		}
		steps++
		m := r.Observation.Masked
		if len(m) != 2 || m[0].Rule != "corner" || m[1].Rule != "the square" || m[1].Why != string(mask.WhyRule) {
			t.Errorf("step %d: masked %+v", r.Step, m)
		}
		f, err := os.Open(filepath.Join(tr.Dir, r.Observation.Screenshot))
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		if cr, cg, cb, _ := img.At(60, 240).RGBA(); cr>>8 != uint32(mask.Colour[0]) || cg>>8 != uint32(mask.Colour[1]) || cb>>8 != uint32(mask.Colour[2]) {
			t.Errorf("step %d: the trace's screenshot shows %v under the mask", r.Step, img.At(60, 240))
		}
	}
	if b.reads != steps {
		t.Errorf("%d tree reads for %d observations: want one each", b.reads, steps)
	}
}

// TestMaskedPeek: a watcher's frame is painted too, with the last areas
// while they are fresh.
func TestMaskedPeek(t *testing.T) {
	v, err := vault.New(map[string]string{"PIN": "square"}) // the fake's button is named "square"
	if err != nil {
		t.Fatal(err)
	}
	b := &treeBackend{}
	s, _ := openFake(t, b, func(c *Config) { c.Backend = b; c.Vault = v; c.Env.A11y = true })
	t.Cleanup(func() { s.Close(context.Background(), End{Outcome: trace.Success, Reason: trace.ReasonDone}) })
	f, _, err := s.Peek(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if !painted(f, 60, 240) {
		t.Error("a watcher sees an element showing a vault value")
	}
	reads := b.reads
	if _, _, err := s.Peek(t.Context()); err != nil {
		t.Fatal(err)
	}
	if b.reads != reads {
		t.Errorf("a second look within %v read the tree again", peekMaskAge)
	}
	obs, err := s.Observe(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if !painted(obs.Screen, 60, 240) || obs.Screen.Hash == 0 {
		t.Error("the controller sees an element showing a vault value")
	}
}

// TestNoMaskUngoverned: a run without a vault or a policy paints nothing
// and reads no tree for it.
func TestNoMaskUngoverned(t *testing.T) {
	b := &treeBackend{}
	ag := &scripted{steps: []agent.Decision{{Action: action.Action{Kind: action.Done}}}}
	runFake(t, &b.fakeBackend, ag, func(c *Config) { c.Backend = b; c.Env.A11y = true })
	if b.reads != 0 || painted(ag.seen[0].Screen, 60, 240) {
		t.Errorf("ungoverned run: %d tree reads, square painted %v", b.reads, painted(ag.seen[0].Screen, 60, 240))
	}
}
