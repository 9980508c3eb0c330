package serve

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/klauspost/compress/s2"

	"github.com/codegirl-games/agentbox/environment/guestenv/guestenvtest"
	"github.com/codegirl-games/agentbox/observe"
	"github.com/codegirl-games/agentbox/serve/api"
	"github.com/codegirl-games/agentbox/trace"
	"github.com/codegirl-games/agentbox/wire"
)

// countingGuests makes scripted guests and counts them; diverge, when
// set, says whether the nth sandbox (from 1) shows another screen (all
// white) after its first screenshot.
type countingGuests struct {
	made    atomic.Int32
	diverge func(n int) bool
	onAct   func()
}

func (c *countingGuests) guest() *guestenvtest.Guest {
	n := int(c.made.Add(1))
	g := &guestenvtest.Guest{}
	if c.onAct != nil {
		g.OnAct = func(*guestenvtest.Writer) { c.onAct() }
	}
	if c.diverge != nil && c.diverge(n) {
		g.OnScreenshot = func(w *guestenvtest.Writer, m *wire.Message, shot int) bool {
			if shot < 2 {
				return false
			}
			width, height := observe.DefaultScreen.Width, observe.DefaultScreen.Height
			resp, _ := guestenvtest.Blank(width, height)
			resp.Hash = 2
			pix := bytes.Repeat([]byte{0xff}, 4*width*height)
			w.Reply(m.ID, m.Method, resp, s2.Encode(nil, pix))
			return true
		}
	}
	return g
}

// closed counts the sandboxes removed.
func closedSandboxes(h *harness) int {
	_, n := h.backend.GuestErrors()
	return n
}

// waitClosed waits until want sandboxes have been removed.
func waitClosed(t *testing.T, h *harness, want int) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for closedSandboxes(h) < want && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := closedSandboxes(h); n != want {
		t.Fatalf("%d sandboxes removed, want %d", n, want)
	}
}

func (h *harness) act(id, body string) {
	h.t.Helper()
	if a := h.do(req{method: "POST", path: "/v1/envs/" + id + "/act", body: []byte(body)}); a.status != 200 {
		h.t.Fatalf("act %s: %d %s", body, a.status, a.body)
	}
}

// TestFork: a fork of a running episode replays its steps into new
// environments, each naming its parent (the API and run.json), each
// independent of the others.
func TestFork(t *testing.T) {
	var g countingGuests
	h := newHarness(t, g.guest, nil)
	var info api.Server
	h.do(req{method: "GET", path: "/v1/server"}).decode(t, &info)
	if info.Capabilities.Fork != "replay" {
		t.Fatalf("capabilities: %+v", info.Capabilities)
	}
	e := h.create(testToken, `, "task": "move"`)
	for _, a := range []string{`{"action":"key","keys":"Right"}`, `{"action":"click","x":10,"y":10}`, `{"action":"wait","ms":5}`} {
		h.act(e.ID, a)
	}
	a := h.do(req{method: "POST", path: "/v1/envs/" + e.ID + "/fork", body: []byte(`{"count": 2}`)})
	if a.status != 201 {
		t.Fatalf("fork: %d %s", a.status, a.body)
	}
	var fr api.ForkResponse
	a.decode(t, &fr)
	if len(fr.Environments) != 2 || fr.Fork != "replay" || fr.ReadyMS <= 0 {
		t.Fatalf("fork: %+v", fr)
	}
	for _, f := range fr.Environments {
		ff := f.ForkedFrom
		if ff == nil || ff.Env != e.ID || ff.RunID != e.RunID || ff.Step != 3 || ff.Trace != e.Trace {
			t.Fatalf("fork %s: forked_from %+v", f.ID, ff)
		}
		if f.State != api.StateRunning || f.Steps != 3 || f.Task != "move" || f.ID == e.ID || f.Trace == e.Trace {
			t.Fatalf("fork: %+v", f)
		}
	}
	// Independent: a step in one fork is not another's, nor the parent's.
	one, two := fr.Environments[0], fr.Environments[1]
	h.act(one.ID, `{"action":"key","keys":"Left"}`)
	var got1, got2, parent api.Environment
	h.do(req{method: "GET", path: "/v1/envs/" + one.ID}).decode(t, &got1)
	h.do(req{method: "GET", path: "/v1/envs/" + two.ID}).decode(t, &got2)
	h.do(req{method: "GET", path: "/v1/envs/" + e.ID}).decode(t, &parent)
	if got1.Steps != 4 || got2.Steps != 3 || parent.Steps != 3 {
		t.Fatalf("steps after one fork's step: %d, %d, parent %d", got1.Steps, got2.Steps, parent.Steps)
	}
	for _, id := range []string{one.ID, two.ID, e.ID} {
		h.do(req{method: "DELETE", path: "/v1/envs/" + id})
	}
	// The fork's trace names its parent and holds the replayed steps.
	tr, err := trace.Open(one.Trace)
	if err != nil {
		t.Fatal(err)
	}
	if f := tr.Run.ForkedFrom; f == nil || f.Run != e.RunID || f.Env != e.ID || f.Step != 3 {
		t.Fatalf("run.json forked_from: %+v", tr.Run.ForkedFrom)
	}
	if len(tr.Steps) != 4 || tr.Steps[0].Action.Keys != "Right" || tr.Steps[3].Action.Keys != "Left" || !strings.Contains(tr.Steps[0].Decision.Message, "fork") {
		t.Fatalf("the fork's steps: %+v", tr.Steps)
	}
	if ptr, _ := trace.Open(e.Trace); ptr == nil || ptr.Run.ForkedFrom != nil {
		t.Fatal("the parent's run.json names a parent")
	}
	waitClosed(t, h, 3)
}

// TestForkDiverged: a fork whose screen differs from its parent's is an
// error naming the first step that differed, and no fork is kept.
func TestForkDiverged(t *testing.T) {
	g := countingGuests{diverge: func(n int) bool { return n == 3 }} // the second fork
	h := newHarness(t, g.guest, nil)
	e := h.create(testToken, "")
	h.act(e.ID, `{"action":"key","keys":"Right"}`)
	h.act(e.ID, `{"action":"key","keys":"Right"}`)
	a := h.do(req{method: "POST", path: "/v1/envs/" + e.ID + "/fork", body: []byte(`{"count": 2}`)})
	var eb api.ErrorBody
	a.decode(t, &eb)
	if a.status != 422 || eb.Error.Code != api.CodeForkDiverged || eb.Error.Step != 2 || !strings.Contains(eb.Error.Message, "step 2") {
		t.Fatalf("a diverging fork: %d %s", a.status, a.body)
	}
	waitClosed(t, h, 2) // both forks, the one that matched too
	var list []api.Environment
	h.do(req{method: "GET", path: "/v1/envs"}).decode(t, &list)
	if len(list) != 1 || list[0].ID != e.ID || list[0].State != api.StateRunning {
		t.Fatalf("environments after a failed fork: %+v", list)
	}
	h.act(e.ID, `{"action":"key","keys":"Left"}`) // the parent goes on
}

// TestForkRefused: bad counts, an unknown environment, an ended episode;
// each its status, nothing created.
func TestForkRefused(t *testing.T) {
	var g countingGuests
	h := newHarness(t, g.guest, nil) // 3 environments per token
	e := h.create(testToken, "")
	other := h.create(otherToken, "")
	for _, c := range []struct {
		id, body string
		status   int
		code     string
		invalid  bool
	}{
		{e.ID, `{"count": 0}`, 422, api.CodeInvalidRequest, true},
		{e.ID, `{"count": -2}`, 422, api.CodeInvalidRequest, true},
		{e.ID, `{"count": 4}`, 422, api.CodeInvalidRequest, false},
		{e.ID, `{"count": 3}`, 429, api.CodeTooManyEnvironments, false},
		{e.ID, `{"count": "two"}`, 400, api.CodeInvalidJSON, true},
		{e.ID, `{"count": 1, "at": 2}`, 400, api.CodeInvalidJSON, true},
		{"env-nothere", `{"count": 1}`, 404, api.CodeNotFound, false},
		{other.ID, `{"count": 1}`, 404, api.CodeNotFound, false}, // another token's
	} {
		a := h.do(req{method: "POST", path: "/v1/envs/" + c.id + "/fork", body: []byte(c.body), invalid: c.invalid})
		if a.status != c.status || a.errorCode() != c.code {
			t.Errorf("fork %s %s: %d %s; want %d %s", c.id, c.body, a.status, a.body, c.status, c.code)
		}
	}
	h.do(req{method: "POST", path: "/v1/envs/" + e.ID + "/act", body: []byte(`{"action":"done"}`)})
	a := h.do(req{method: "POST", path: "/v1/envs/" + e.ID + "/fork", body: []byte(`{"count": 1}`)})
	if a.status != 409 || a.errorCode() != api.CodeEpisodeEnded {
		t.Errorf("fork of an ended episode: %d %s", a.status, a.body)
	}
	if n := g.made.Load(); n != 2 {
		t.Fatalf("%d sandboxes made, want the 2 environments' only", n)
	}
	var list []api.Environment
	h.do(req{method: "GET", path: "/v1/envs"}).decode(t, &list)
	if len(list) != 1 {
		t.Fatalf("environments after refused forks: %+v", list)
	}
}

// TestForkScreensAtRest: the parent's app draws a step's picture 200 ms
// after the step (a loaded machine), the forks' apps at once. The fork
// point's screen is the parent's drawn one, not the one a look 50 ms
// after another found unchanged: the fork matches. (With the still-for-
// one-look rule the fork point took the undrawn screen, and the fork was
// refused as diverged.)
func TestForkScreensAtRest(t *testing.T) {
	const lag = 200 * time.Millisecond
	var made atomic.Int32
	white := func(w *guestenvtest.Writer, m *wire.Message) {
		width, height := observe.DefaultScreen.Width, observe.DefaultScreen.Height
		resp, _ := guestenvtest.Blank(width, height)
		resp.Hash = 2
		w.Reply(m.ID, m.Method, resp, s2.Encode(nil, bytes.Repeat([]byte{0xff}, 4*width*height)))
	}
	guest := func() *guestenvtest.Guest {
		parent := made.Add(1) == 1
		var acted atomic.Int64 // unix ns of the last act; 0: none yet
		return &guestenvtest.Guest{
			OnAct: func(*guestenvtest.Writer) { acted.Store(time.Now().UnixNano()) },
			OnScreenshot: func(w *guestenvtest.Writer, m *wire.Message, _ int) bool {
				at := acted.Load()
				if at == 0 || parent && time.Since(time.Unix(0, at)) < lag {
					return false // the screen before the step's picture
				}
				white(w, m)
				return true
			},
		}
	}
	h := newHarness(t, guest, nil)
	e := h.create(testToken, "")
	h.act(e.ID, `{"action":"key","keys":"Right"}`)
	a := h.do(req{method: "POST", path: "/v1/envs/" + e.ID + "/fork", body: []byte(`{"count": 1}`)})
	if a.status != 201 {
		t.Fatalf("fork of a parent that draws %v after its step: %d %s", lag, a.status, a.body)
	}
}

// TestForkWaitsForStep: a fork asked for while an action is in flight
// waits for it (the parent's step lock) and forks after it.
func TestForkWaitsForStep(t *testing.T) {
	entered := make(chan struct{}, 1)
	release := make(chan struct{})
	var once sync.Once
	g := countingGuests{onAct: func() {
		once.Do(func() {
			entered <- struct{}{}
			<-release
		})
	}}
	h := newHarness(t, g.guest, nil)
	e := h.create(testToken, "")
	stepped := make(chan answer, 1)
	go func() {
		stepped <- h.do(req{method: "POST", path: "/v1/envs/" + e.ID + "/act", body: []byte(`{"action":"key","keys":"Return"}`)})
	}()
	<-entered
	forked := make(chan answer, 1)
	go func() {
		forked <- h.do(req{method: "POST", path: "/v1/envs/" + e.ID + "/fork", body: []byte(`{"count": 1}`)})
	}()
	select {
	case a := <-forked:
		t.Fatalf("the fork answered while the step was in flight: %d %s", a.status, a.body)
	case <-time.After(200 * time.Millisecond):
	}
	close(release)
	if a := <-stepped; a.status != 200 {
		t.Fatalf("step: %d %s", a.status, a.body)
	}
	a := <-forked
	var fr api.ForkResponse
	a.decode(t, &fr)
	if a.status != 201 || len(fr.Environments) != 1 || fr.Environments[0].ForkedFrom.Step != 1 || fr.Environments[0].Steps != 1 {
		t.Fatalf("fork after the step: %d %s", a.status, a.body)
	}
}

// TestForkInputs: an environment with task inputs forks; each fork's
// sandbox is staged with the parent's inputs (collected back, the same
// bytes), and the set stays open for the forks after the parent is
// closed: a fork's next episode restages them.
func TestForkInputs(t *testing.T) {
	var g countingGuests
	h := newHarness(t, g.guest, nil)
	a := h.do(req{method: "POST", path: "/v1/uploads", body: gameTar(t), contentType: "application/x-tar"})
	if a.status != 201 {
		t.Fatalf("upload: %d %s", a.status, a.body)
	}
	var up api.Upload
	a.decode(t, &up)
	e := h.create(testToken, fmt.Sprintf(`, "inputs": [{"from": "upload:%s/data/level.txt", "to": "~/Documents/level.txt"}], "collect": ["~/Documents/*.txt"]`, up.ID))
	h.act(e.ID, `{"action":"key","keys":"Right"}`)
	h.act(e.ID, `{"action":"wait","ms":5}`)
	a = h.do(req{method: "POST", path: "/v1/envs/" + e.ID + "/fork", body: []byte(`{"count": 2}`)})
	if a.status != 201 {
		t.Fatalf("fork of an environment with inputs: %d %s", a.status, a.body)
	}
	var fr api.ForkResponse
	a.decode(t, &fr)
	if len(fr.Environments) != 2 {
		t.Fatalf("fork: %+v", fr)
	}
	// The upload the inputs come from is deleted and the parent closed:
	// the forks hold both.
	h.do(req{method: "DELETE", path: "/v1/uploads/" + up.ID})
	h.do(req{method: "DELETE", path: "/v1/envs/" + e.ID})
	staged := func(id, when string) {
		t.Helper()
		a := h.do(req{method: "POST", path: "/v1/envs/" + id + "/act", body: []byte(`{"action": "done"}`)})
		var st api.StepResponse
		a.decode(t, &st)
		if st.Ended == nil || len(st.Files) != 1 || st.Files[0].Path != "Documents/level.txt" || st.Files[0].Size != 1 {
			t.Fatalf("fork %s %s: the step that ended it: %s", id, when, a.body)
		}
		if a := h.do(req{method: "GET", path: "/v1/envs/" + id + "/files/Documents%2Flevel.txt"}); a.status != 200 || string(a.body) != "1" {
			t.Fatalf("fork %s %s: the staged input: %d %q", id, when, a.status, a.body)
		}
	}
	for _, f := range fr.Environments {
		staged(f.ID, "after the replay")
		if a := h.do(req{method: "POST", path: "/v1/envs/" + f.ID + "/reset", body: []byte(`{}`)}); a.status != 200 {
			t.Fatalf("reset fork %s after its parent closed: %d %s", f.ID, a.status, a.body)
		}
		staged(f.ID, "in its next episode")
	}
	for _, f := range fr.Environments {
		h.do(req{method: "DELETE", path: "/v1/envs/" + f.ID})
	}
	// The last holder gone, the deleted upload goes too.
	h.srv.mu.Lock()
	_, kept := h.srv.uploads[up.ID]
	h.srv.mu.Unlock()
	if kept {
		t.Fatal("the deleted upload outlived the parent and its forks")
	}
}
