package live

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/observe"
	"github.com/codegirl-games/agentbox/policy"
	"github.com/codegirl-games/agentbox/session"
	"github.com/codegirl-games/agentbox/trace"
)

// Info describes what a view shows.
type Info struct {
	// Name is the view's title ("mover", "move-right · episode 2").
	Name   string         `json:"name"`
	Task   string         `json:"task,omitempty"`
	Agent  string         `json:"agent,omitempty"`
	RunID  string         `json:"run_id,omitempty"`
	Trace  string         `json:"trace,omitempty"`
	Screen observe.Screen `json:"screen"`
}

// States of a view.
const (
	StateStarting = "starting" // the sandbox and the app are starting
	StateRunning  = "running"  // the controller drives
	StatePaused   = "paused"   // a person has control: the controller waits
	StateEnded    = "ended"
)

// eventLogBytes bounds what a view keeps of its events for pages that
// open later or fall behind.
const eventLogBytes = 2 << 20

// View is one episode on the live page. Give the session's events to
// Listen (session.Config.Listener) and the session to Open
// (session.Loop.Opened, or after session.Open).
type View struct {
	id   string
	srv  *Server
	info Info
	log  *session.EventLog

	mu       sync.Mutex
	sess     *session.Session
	state    string
	end      *session.End
	result   *session.Result
	steps    int
	human    bool   // a person has control of the session
	by       string // who
	noAgent  bool   // the person is the only controller
	holder   *conn  // the viewer holding the lease
	heard    time.Time
	conns    map[*conn]struct{}
	watchers int  // open view pages (frames at full rate)
	pumping  bool // the frame pump runs
	leasing  bool // the lease watch runs
	last     *update
	stopped  chan struct{} // closed when the server shuts the view down
	left     chan struct{} // wakes the pump when the last page leaves (buffered)

	// approvals are the policy's asks the page answers (--approve live:
	// Approver).
	approvals policy.Waiting
}

// Approver answers the session's policy asks at the page (--approve
// live): a card with allow and deny; the person who holds control
// decides (anyone with the control address while nobody holds it), and
// an ask nobody answers in time is denied.
func (v *View) Approver() policy.Approver { return &v.approvals }

// errNoAsk is the answer to an ask that no longer waits.
var errNoAsk = errors.New("that ask no longer waits: it was answered or timed out")

// answer gives a person's answer to the ask id.
func (v *View) answer(c *conn, id string, allow, always bool) error {
	if c.role != RoleControl {
		return errReadOnly
	}
	v.mu.Lock()
	holder := v.holder
	if holder == c {
		v.heard = time.Now()
	}
	v.mu.Unlock()
	if holder != nil && holder != c {
		return fmt.Errorf("%s holds control: they answer", holder.name)
	}
	if !v.approvals.Answer(id, policy.Answer{Allow: allow, Always: always, By: policy.ApproveLive + ":" + c.name}) {
		return errNoAsk
	}
	return nil
}

// Add makes a view (ended views beyond Options.MaxEnded are dropped,
// oldest first).
func (s *Server) Add(info Info) *View {
	s.mu.Lock()
	s.nextID++
	v := &View{id: strconv.Itoa(s.nextID), srv: s, info: info, log: session.NewEventLog(eventLogBytes),
		state: StateStarting, conns: map[*conn]struct{}{}, stopped: make(chan struct{}), left: make(chan struct{}, 1)}
	v.approvals.By = policy.ApproveLive
	s.views[v.id] = v
	s.order = append(s.order, v)
	s.pruneLocked()
	s.mu.Unlock()
	s.notify()
	return v
}

// pruneLocked drops the oldest ended views beyond the bound; s.mu is held.
func (s *Server) pruneLocked() {
	ended := 0
	for _, v := range s.order {
		if v.ended() {
			ended++
		}
	}
	keep := s.order[:0]
	for _, v := range s.order {
		if ended > s.o.MaxEnded && v.ended() && v.watchCount() == 0 {
			ended--
			delete(s.views, v.id)
			continue
		}
		keep = append(keep, v)
	}
	s.order = keep
}

// ID is the view's number in its page's address (/v/ID).
func (v *View) ID() string { return v.id }

// ReadOnlyURL is the address of this view for viewers who may only watch
// (the dashboard links a running trace to it).
func (v *View) ReadOnlyURL() string {
	v.srv.mu.Lock()
	defer v.srv.mu.Unlock()
	return "http://" + v.srv.addr + "/v/" + v.id + "?view=" + v.srv.view
}

func (v *View) ended() bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.state == StateEnded
}

func (v *View) watchCount() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return len(v.conns)
}

// Listen takes one of the session's events (session.Config.Listener); it
// does not block.
func (v *View) Listen(e session.Event) {
	v.log.Add(e)
	v.mu.Lock()
	changed := false
	switch e.Kind {
	case session.EventStep:
		v.steps = max(v.steps, e.Step)
	case session.EventTakeover:
		v.human, v.by = true, e.By
		if v.state == StateRunning {
			v.state, changed = StatePaused, true
		}
	case session.EventHandBack:
		v.human, v.by = false, ""
		if v.state == StatePaused {
			v.state, changed = StateRunning, true
		}
	case session.EventEnd:
		if v.state != StateEnded {
			v.state, v.end, changed = StateEnded, e.End, true
		}
	}
	var holder *conn
	if v.state == StateEnded {
		holder, v.holder = v.holder, nil
	}
	v.mu.Unlock()
	if holder != nil {
		v.broadcastLease()
	}
	if changed {
		v.srv.notify()
	}
}

// Open attaches the running session (session.Loop.Opened): the page
// can now look at its screen and a person take control.
func (v *View) Open(s *session.Session) {
	c := s.Control()
	v.mu.Lock()
	v.sess = s
	v.human, v.by, v.noAgent = c.Human, c.By, c.NoAgent
	if v.state == StateStarting {
		v.state = StateRunning
		if c.Human {
			v.state = StatePaused
		}
	}
	// A page that connected while the sandbox started has "starting"
	// (sent under the lock, so never before its hello).
	for c := range v.conns {
		c.sendJSON(map[string]any{"t": "state", "state": v.statusLocked()})
	}
	v.mu.Unlock()
	v.srv.notify()
	v.kick()
}

// Finish records how the episode ended, once its trace is finalised; a
// view whose session never opened ends here.
func (v *View) Finish(r session.Result) {
	v.mu.Lock()
	v.result = &r
	if v.state != StateEnded {
		v.state = StateEnded
		v.end = &session.End{Outcome: r.Outcome, Reason: r.Reason, Message: r.Message}
	}
	holder := v.holder
	v.holder = nil
	conns := v.connList()
	v.mu.Unlock()
	v.srv.notify()
	for _, c := range conns {
		c.sendJSON(map[string]any{"t": "finished", "state": v.status()})
	}
	if holder != nil {
		v.broadcastLease()
	}
}

func (v *View) connList() []*conn {
	out := make([]*conn, 0, len(v.conns))
	for c := range v.conns {
		out = append(out, c)
	}
	return out
}

// shutdown stops the view's goroutines (the server is closing).
func (v *View) shutdown() {
	v.mu.Lock()
	select {
	case <-v.stopped:
	default:
		close(v.stopped)
	}
	v.mu.Unlock()
	v.log.Close()
}

// status is the view as the pages show it.
type status struct {
	ID      string       `json:"id"`
	Info    Info         `json:"info"`
	State   string       `json:"state"`
	Steps   int          `json:"steps"`
	By      string       `json:"by,omitempty"`
	NoAgent bool         `json:"no_agent,omitempty"`
	End     *session.End `json:"end,omitempty"`
	// Trace is the trace directory once it is finalised.
	Finished bool `json:"finished,omitempty"`
	Viewers  int  `json:"viewers"`
	// Holder: "" nobody, else the viewer in control.
	Holder string `json:"holder,omitempty"`
}

func (v *View) status() status {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.statusLocked()
}

func (v *View) statusLocked() status {
	st := status{ID: v.id, Info: v.info, State: v.state, Steps: v.steps, NoAgent: v.noAgent, End: v.end,
		Finished: v.result != nil, Viewers: len(v.conns)}
	if v.human {
		st.By = v.by
	}
	if v.holder != nil {
		st.Holder = v.holder.name
	}
	return st
}

// join adds a page and greets it; frames at full rate for a view page.
func (v *View) join(c *conn) {
	v.mu.Lock()
	v.conns[c] = struct{}{}
	c.sendJSON(map[string]any{"t": "hello", "role": c.role, "you": c.name, "state": v.statusLocked()})
	v.watchers++
	last := v.last
	v.mu.Unlock()
	if last != nil {
		c.offer(last)
	}
	v.kick()
}

// leave removes a page; control it held is handed back.
func (v *View) leave(c *conn) {
	v.mu.Lock()
	delete(v.conns, c)
	v.watchers--
	if v.watchers == 0 {
		select { // the pump, waiting for a change, stops watching
		case v.left <- struct{}{}:
		default:
		}
	}
	held := v.holder == c
	if held {
		v.holder = nil
	}
	v.mu.Unlock()
	if held {
		v.release(c, "the person left the live page")
	}
}

// ---- control ----

// Errors of taking control, as the page is told them.
var (
	errReadOnly = errors.New("this page is read-only: it was opened with the read-only address")
	errHeld     = errors.New("another viewer has control")
	errNotHeld  = errors.New("take control first")
	errNotOpen  = errors.New("the run is not running")
)

// take gives c the lease and the session's control.
func (v *View) take(c *conn) error {
	if c.role != RoleControl {
		return errReadOnly
	}
	v.mu.Lock()
	switch {
	case v.holder == c:
		v.mu.Unlock()
		return nil
	case v.holder != nil:
		v.mu.Unlock()
		return errHeld
	case v.sess == nil || v.state == StateEnded:
		v.mu.Unlock()
		return errNotOpen
	}
	v.holder, v.heard = c, time.Now()
	sess, already := v.sess, v.human && v.noAgent
	v.mu.Unlock()
	if !already {
		if err := sess.TakeOver(c.name); err != nil && !errors.Is(err, session.ErrControlled) {
			v.mu.Lock()
			if v.holder == c {
				v.holder = nil
			}
			v.mu.Unlock()
			return err
		}
	}
	v.srv.logf("%s: %s took control", v.info.Name, c.name)
	v.broadcastLease()
	v.watchLease()
	return nil
}

// back hands control back (the page's button).
func (v *View) back(c *conn) error {
	v.mu.Lock()
	switch {
	case v.holder != c:
		v.mu.Unlock()
		return errNotHeld
	case v.noAgent:
		v.mu.Unlock()
		return fmt.Errorf("%w: finish the run or give up", session.ErrNoController)
	}
	v.holder = nil
	v.mu.Unlock()
	v.release(c, "handed back")
	return nil
}

// release hands the session back (unless the person is its only
// controller) after c lost the lease.
func (v *View) release(c *conn, why string) {
	v.mu.Lock()
	sess, noAgent := v.sess, v.noAgent
	v.mu.Unlock()
	if sess != nil && !noAgent {
		if err := sess.HandBack(why); err != nil && !errors.Is(err, session.ErrNotControlled) {
			v.srv.logf("%s: hand back: %v", v.info.Name, err)
		}
	}
	v.srv.logf("%s: %s gave up control (%s)", v.info.Name, c.name, why)
	v.broadcastLease()
}

// heardFrom renews c's lease.
func (v *View) heardFrom(c *conn) {
	v.mu.Lock()
	if v.holder == c {
		v.heard = time.Now()
	}
	v.mu.Unlock()
}

// watchLease hands control back when the holder's page falls silent.
func (v *View) watchLease() {
	v.mu.Lock()
	if v.leasing {
		v.mu.Unlock()
		return
	}
	v.leasing = true
	v.mu.Unlock()
	lease := v.srv.o.Lease
	go func() {
		t := time.NewTicker(min(lease/4, time.Second))
		defer t.Stop()
		for {
			select {
			case <-t.C:
			case <-v.stopped:
				v.mu.Lock()
				v.leasing = false
				v.mu.Unlock()
				return
			}
			v.mu.Lock()
			h := v.holder
			if h == nil {
				v.leasing = false
				v.mu.Unlock()
				return
			}
			expired := time.Since(v.heard) > lease
			if expired {
				v.holder = nil
			}
			v.mu.Unlock()
			if expired {
				v.release(h, "the page of the person in control stopped answering")
			}
		}
	}()
}

// act performs a person's action.
func (v *View) act(ctx context.Context, c *conn, a action.Action) (session.StepResult, error) {
	v.mu.Lock()
	if v.holder != c {
		v.mu.Unlock()
		if c.role != RoleControl {
			return session.StepResult{}, errReadOnly
		}
		return session.StepResult{}, errNotHeld
	}
	v.heard = time.Now()
	sess := v.sess
	v.mu.Unlock()
	return sess.Act(ctx, session.Step{Actor: trace.ActorHuman, Action: a})
}

func (v *View) broadcastLease() {
	v.mu.Lock()
	conns := v.connList()
	holder := v.holder
	v.mu.Unlock()
	for _, c := range conns {
		who := ""
		switch {
		case holder == c:
			who = "you"
		case holder != nil:
			who = holder.name
		}
		c.sendJSON(map[string]any{"t": "lease", "holder": who, "state": v.status()})
	}
}

// ---- frames ----

// kick starts the frame pump when someone watches a running session.
func (v *View) kick() {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.pumping || v.sess == nil || v.state == StateEnded {
		return
	}
	if v.watchers == 0 && !v.srv.gridWatched() {
		return
	}
	v.pumping = true
	sess := v.sess
	v.srv.wg.Add(1)
	go func() {
		defer v.srv.wg.Done()
		v.pump(sess)
	}()
}

// pump looks at the screen while someone watches and sends what changed:
// a grid alone every ThumbInterval; a view page on each change the
// sandbox reports (Session.WatchScreen), FrameInterval apart at most as
// often, and after Backstop without one — or, where the sandbox cannot
// tell, every FrameInterval.
func (v *View) pump(sess *session.Session) {
	var changed <-chan struct{} // the screen's changes, while subscribed
	unwatch := func() {}
	noEvents := false // the sandbox cannot tell: poll
	defer func() {
		unwatch()
		v.mu.Lock()
		v.pumping = false
		v.mu.Unlock()
	}()
	var prev *observe.Frame
	var seq int64
	var cost time.Duration // what a look costs, smoothed
	lastLook := time.Now()
	for {
		v.mu.Lock()
		watchers, ended := v.watchers, v.state == StateEnded
		v.mu.Unlock()
		interval := v.srv.o.FrameInterval
		if watchers == 0 {
			if !v.srv.gridWatched() || ended {
				return
			}
			interval = v.srv.o.ThumbInterval
			if changed != nil {
				unwatch()
				changed, unwatch = nil, func() {}
			}
		} else if changed == nil && !noEvents {
			// Subscribe before looking: no change after the look goes
			// unreported.
			ctx, cancel := context.WithTimeout(v.srv.base, 10*time.Second)
			ch, stop, err := sess.WatchScreen(ctx)
			cancel()
			switch {
			case err == nil:
				changed, unwatch = ch, stop
			case errors.Is(err, environment.ErrNoScreenEvents):
				noEvents = true
			}
		}
		t0 := time.Now()
		ctx, cancel := context.WithTimeout(v.srv.base, 10*time.Second)
		f, st, err := sess.Peek(ctx)
		cancel()
		t1 := time.Now()
		switch {
		case errors.Is(err, session.ErrFrozen):
			// The app cannot change meanwhile.
		case errors.Is(err, session.ErrEnded), errors.Is(err, environment.ErrClosed), v.srv.base.Err() != nil:
			return
		case err != nil:
			// A look failed (the sandbox is busy or going): try again.
		case prev == nil || f.Hash != prev.Hash || f.Width != prev.Width:
			seq++
			u := newUpdate(seq, prev, f, st.Cursor, lastLook, t1, t1.Sub(t0))
			v.mu.Lock()
			v.last = u
			conns := v.connList()
			v.mu.Unlock()
			for _, c := range conns {
				c.offer(u)
			}
			prev = f
		}
		if err == nil {
			lastLook = t0
		}
		// Keep to the budget: the next look waits until this one's cost is
		// its share of the time.
		took := time.Since(t0)
		cost = (7*cost + 3*took) / 10
		interval = max(interval, min(time.Duration(float64(cost)/v.srv.o.Budget), 500*time.Millisecond))
		select {
		case <-time.After(time.Until(t0.Add(interval))):
		case <-v.stopped:
			return
		case <-sess.Done():
			return
		}
		if changed == nil {
			continue
		}
		// Then wait for a change (one that came meanwhile is waiting in
		// the channel), or the backstop.
		backstop := time.NewTimer(time.Until(t0.Add(max(interval, v.srv.o.Backstop))))
		select {
		case _, ok := <-changed:
			if !ok { // the environment went (a relaunch): subscribe again
				unwatch()
				changed, unwatch = nil, func() {}
			}
		case <-backstop.C:
		case <-v.left:
		case <-v.stopped:
			backstop.Stop()
			return
		case <-sess.Done():
			backstop.Stop()
			return
		}
		backstop.Stop()
	}
}
