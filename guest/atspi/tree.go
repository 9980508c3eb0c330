package atspi

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/godbus/dbus/v5"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/internal/textcut"
	"github.com/codegirl-games/agentbox/observe"
)

// AT-SPI's names on the accessibility bus.
const (
	registryName    = "org.a11y.atspi.Registry"
	accessiblePath  = "/org/a11y/atspi/accessible/"
	rootPath        = dbus.ObjectPath(accessiblePath + "root")
	nullPath        = "/org/a11y/atspi/null"
	ifaceAccessible = "org.a11y.atspi.Accessible"
	ifaceComponent  = "org.a11y.atspi.Component"
	ifaceTable      = "org.a11y.atspi.Table"
	ifaceText       = "org.a11y.atspi.Text"
	ifaceValue      = "org.a11y.atspi.Value"
	ifaceAction     = "org.a11y.atspi.Action"
	ifaceProps      = "org.freedesktop.DBus.Properties"
	coordTypeScreen = uint32(0)
)

// MaxTreeBytes bounds the encoded size of one tree (its answer must fit a
// frame of the wire protocol, 64 MiB, with room to spare).
const MaxTreeBytes = 16 << 20

// elementSize is about what e takes in JSON (strings may grow when
// escaped; the bound has room for it).
func elementSize(e *observe.Element) int {
	n := 160 + len(e.ID) + len(e.Role) + 2*len(e.Name) + 2*len(e.Text)
	for _, s := range e.States {
		n += len(s) + 3
	}
	return n
}

// CallTimeout bounds one D-Bus call: an application that does not answer
// within it is left out of the read (and said to be), not waited for.
const CallTimeout = time.Second

// callTimeout is CallTimeout, but for tests of the read's other bounds
// (export_test.go): on a busy machine a hostile app's megabyte answers
// take longer than a second, and those tests are not about the deadline.
var callTimeout = CallTimeout

// batch bounds the calls in flight at once (and so the replies held at
// once: a hostile application may answer each with a message as large as
// the bus allows).
const batch = 256

// ref names an accessible object: its connection and path.
type ref struct {
	bus  string
	path dbus.ObjectPath
}

// ID is the element ID of r (observe.Element.ID).
func (r ref) ID() string {
	b := strings.TrimPrefix(r.bus, ":")
	p := string(r.path)
	if rest, ok := strings.CutPrefix(p, accessiblePath); ok && rest != "" && !strings.Contains(rest, "/") {
		return b + "/" + rest
	}
	return b + ":" + p
}

// refOf parses an element ID back into a ref.
func refOf(id string) (ref, error) {
	if i := strings.IndexAny(id, "/:"); i > 0 {
		bus := ":" + id[:i]
		if id[i] == '/' {
			return ref{bus, dbus.ObjectPath(accessiblePath + id[i+1:])}, nil
		}
		p := dbus.ObjectPath(id[i+1:])
		if p.IsValid() {
			return ref{bus, p}, nil
		}
	}
	return ref{}, fmt.Errorf("%q is not an element id", id)
}

// node is an element being read.
type node struct {
	ref    ref
	parent int
	depth  int
	el     observe.Element
	ifaces []string
	kids   []ref
	failed bool
	// The calls of the read's passes (readLevel).
	state                  *dbus.Call
	name, role, ifc, place *dbus.Call
	children               *dbus.Call // ChildCount where it manages descendants
	// nkids is the child count an element that manages its descendants
	// says it has; -1: it did not say.
	nkids                  int32
	text, count, val, keys *dbus.Call
}

// reader is one read of the tree.
type reader struct {
	b     *Bus
	ctx   context.Context // the read's deadline
	calls int
	// slow names applications that did not answer a call in time.
	slow map[string]bool
	// done receives each call of the read when it ends; open are the
	// calls not ended yet (with their cancel functions), per application
	// too. The read keeps no answer once it has ended: the caller holds
	// it (a hostile application's may be as large as the bus allows).
	done    chan *dbus.Call
	open    map[*dbus.Call]context.CancelFunc
	openPer map[string]int
	// heard is when each application last answered, or was first asked
	// while nothing else was open; stalled are the applications that
	// answered nothing for callTimeout while asked: the read asks them
	// nothing more.
	heard   map[string]time.Time
	stalled map[string]bool
	// bytes is about the size of what was read; past MaxTreeBytes the
	// read stops.
	bytes int
	// cut says what the read of managed descendants left out.
	cut []string
}

func newReader(b *Bus, ctx context.Context) *reader {
	return &reader{
		b: b, ctx: ctx, slow: map[string]bool{},
		// Room for every call open at once (a pass has at most batch,
		// and a role's name one more), so that the bus's reader never
		// waits on this channel.
		done: make(chan *dbus.Call, 4*batch),
		open: map[*dbus.Call]context.CancelFunc{}, openPer: map[string]int{},
		heard: map[string]time.Time{}, stalled: map[string]bool{},
	}
}

func (r *reader) close() {
	for _, cancel := range r.open {
		cancel()
	}
}

// Tree reads the whole tree: every application the registry knows and
// everything showing below it, breadth first, within the limits. What the
// limits, a deadline or an application that did not answer left out is
// said in Tree.Cut; an empty tree has a Note, and is not an error.
func (b *Bus) Tree(ctx context.Context, lim observe.TreeLimits) (*observe.Tree, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.conn == nil {
		return nil, errors.New("the accessibility bus is closed")
	}
	lim = lim.OrDefault()
	t0 := time.Now()
	rctx, cancel := context.WithTimeout(ctx, time.Duration(lim.TimeoutMS)*time.Millisecond)
	defer cancel()
	r := newReader(b, rctx)
	defer r.close()
	tree, err := r.read(lim)
	if err != nil {
		return nil, err
	}
	tree.ElapsedUS = time.Since(t0).Microseconds()
	tree.Calls = r.calls
	return tree, nil
}

func (r *reader) read(lim observe.TreeLimits) (*observe.Tree, error) {
	tree := &observe.Tree{Elements: []observe.Element{}}
	var apps []struct {
		Bus  string
		Path dbus.ObjectPath
	}
	c := r.call(ref{registryName, rootPath}, ifaceAccessible+".GetChildren")
	if err := r.wait([]*dbus.Call{c}); err != nil {
		return nil, err
	}
	if err := c.Store(&apps); err != nil {
		return nil, fmt.Errorf("the accessibility registry's list of applications: %w", err)
	}
	var nodes []*node
	var level []*node
	for _, a := range apps {
		if a.Bus == "" || !a.Path.IsValid() || string(a.Path) == nullPath {
			continue
		}
		level = append(level, &node{ref: ref{a.Bus, a.Path}, parent: -1})
	}
	tree.Apps = len(level)
	more := 0 // elements known but not read (the node bound)
	size := 0 // the elements' encoded size, about
	for depth := 0; len(level) > 0; depth++ {
		if room := lim.MaxNodes - len(nodes); len(level) > room {
			more += len(level) - room
			level = level[:room]
		}
		if r.ctx.Err() != nil {
			break
		}
		r.readLevel(level)
		var next []*node
		for _, n := range level {
			if n.failed {
				continue
			}
			if n.depth > 0 && !n.el.Has("showing") {
				tree.Hidden++
				continue
			}
			n.el.Depth = n.depth
			if size += elementSize(&n.el); size > MaxTreeBytes {
				tree.Cut = appendOnce(tree.Cut, fmt.Sprintf("size: the tree reached %d MiB; elements after that were dropped", MaxTreeBytes>>20))
				continue
			}
			idx := len(nodes)
			nodes = append(nodes, n)
			if depth+1 > lim.MaxDepth {
				if len(n.kids) > 0 {
					tree.Cut = appendOnce(tree.Cut, fmt.Sprintf("depth: elements below depth %d were not read (max_depth)", lim.MaxDepth))
				}
				continue
			}
			for _, k := range n.kids {
				next = append(next, &node{ref: k, parent: idx, depth: depth + 1})
			}
		}
		level = next
		if size > MaxTreeBytes || r.bytes > MaxTreeBytes {
			tree.Cut = appendOnce(tree.Cut, fmt.Sprintf("size: the tree reached %d MiB; elements after that were dropped", MaxTreeBytes>>20))
			break
		}
		if r.ctx.Err() != nil && len(level) > 0 {
			tree.Cut = append(tree.Cut, fmt.Sprintf("time: the read stopped at its %dms deadline; %d references to elements at depth %d and below were not followed", lim.TimeoutMS, len(level), depth+1))
			break
		}
	}
	if more > 0 {
		tree.Cut = append(tree.Cut, fmt.Sprintf("nodes: %d elements were read; %d more references to elements were not followed (max_nodes)", len(nodes), more))
	}
	tree.Cut = append(tree.Cut, r.cut...)
	for bus := range r.slow {
		tree.Cut = append(tree.Cut, fmt.Sprintf("application %s did not answer within %v; what it did not answer is missing", bus, callTimeout))
	}
	tree.Elements = preorder(nodes)
	switch {
	case len(tree.Elements) > 0:
	case len(r.slow) > 0:
		tree.Note = "the applications on the accessibility bus did not answer in time (see cut)"
	case tree.Apps == 0:
		tree.Note = "no application exposes an accessibility tree: the app's toolkit has no AT-SPI support (Xaw, Xlib, SDL, most games) or turned it off; GTK and Qt apps expose one"
	default:
		tree.Note = "the applications on the accessibility bus show nothing"
	}
	return tree, nil
}

func appendOnce(list []string, s string) []string {
	for _, l := range list {
		if l == s {
			return list
		}
	}
	return append(list, s)
}

// preorder orders the nodes read breadth first as a tree: each parent
// before its children, siblings in their order, with parents renumbered.
func preorder(nodes []*node) []observe.Element {
	kids := make([][]int, len(nodes))
	var roots []int
	for i, n := range nodes {
		if n.parent < 0 {
			roots = append(roots, i)
		} else {
			kids[n.parent] = append(kids[n.parent], i)
		}
	}
	out := make([]observe.Element, 0, len(nodes))
	var walk func(i, parent int)
	walk = func(i, parent int) {
		e := nodes[i].el
		e.Parent = parent
		me := len(out)
		out = append(out, e)
		for _, k := range kids[i] {
			walk(k, me)
		}
	}
	for _, r := range roots {
		walk(r, -1)
	}
	return out
}

// call starts one method call under the read's deadline. An application
// that stalled in this read is not asked again: the call ends at once as
// not answered.
func (r *reader) call(o ref, method string, args ...any) *dbus.Call {
	r.calls++
	if r.stalled[o.bus] {
		return &dbus.Call{Destination: o.bus, Path: o.path, Method: method, Err: errStalled}
	}
	if err := r.ctx.Err(); err != nil {
		return &dbus.Call{Destination: o.bus, Path: o.path, Method: method, Err: err}
	}
	// Every open call ends once on done: with fewer open than it holds,
	// the bus's reader never waits on it.
	r.await(func() bool { return len(r.open) < cap(r.done)-1 }, nil)
	if r.openPer[o.bus] == 0 {
		r.heard[o.bus] = time.Now()
	}
	ctx, cancel := context.WithCancel(r.ctx)
	c := r.b.conn.Object(o.bus, o.path).GoWithContext(ctx, method, 0, r.done, args...)
	r.open[c] = cancel
	r.openPer[o.bus]++
	return c
}

// errStalled is the error of a call that was not made, or was given up,
// because its application answered nothing for callTimeout.
var errStalled = errors.New("the application answered nothing within the per-call deadline")

// wait waits for every call to end. An application that answers nothing
// for callTimeout while calls to it are open has stalled: its open calls
// are given up and it is asked nothing more in this read. The bound is on
// the application's silence, not on each call: a busy application that
// answers the calls queued before one in turn is slow, not stalled. It
// returns an error only when the first call of a read finds no registry.
func (r *reader) wait(calls []*dbus.Call) error {
	need := map[*dbus.Call]bool{}
	for _, c := range calls {
		if _, open := r.open[c]; open {
			need[c] = true
		}
	}
	r.await(func() bool { return len(need) == 0 }, func(c *dbus.Call) { delete(need, c) })
	if len(calls) == 1 && calls[0].Err != nil && calls[0].Destination == registryName {
		return fmt.Errorf("the accessibility registry did not answer: %w", calls[0].Err)
	}
	return nil
}

// await books the calls that end, giving each to got, until enough says
// so, and stalls the applications that answer nothing for callTimeout
// meanwhile.
func (r *reader) await(enough func() bool, got func(*dbus.Call)) {
	var timer *time.Timer
	for !enough() {
		now := time.Now()
		next := now.Add(time.Hour)
		for bus, n := range r.openPer {
			if n > 0 && r.heard[bus].Add(callTimeout).Before(next) {
				next = r.heard[bus].Add(callTimeout)
			}
		}
		if timer == nil {
			timer = time.NewTimer(next.Sub(now))
			defer timer.Stop()
		} else {
			timer.Reset(next.Sub(now))
		}
		select {
		case c := <-r.done:
			r.end(c)
			if got != nil {
				got(c)
			}
		case <-timer.C:
			now := time.Now()
			for bus, n := range r.openPer {
				if n > 0 && !now.Before(r.heard[bus].Add(callTimeout)) {
					r.stall(bus)
				}
			}
		}
	}
}

// end books a call that ended.
func (r *reader) end(c *dbus.Call) {
	cancel, ok := r.open[c]
	if !ok {
		return
	}
	cancel()
	delete(r.open, c)
	r.openPer[c.Destination]--
	if !isTimeout(c.Err) {
		r.heard[c.Destination] = time.Now()
	}
}

// stall gives up an application's open calls: they end as not answered
// (through done), and the application is asked nothing more.
func (r *reader) stall(bus string) {
	r.stalled[bus] = true
	r.slow[bus] = true
	for c, cancel := range r.open {
		if c.Destination == bus {
			cancel()
		}
	}
	r.heard[bus] = time.Now().Add(time.Hour) // its calls are coming back
}

// readLevel reads one level of nodes in passes of calls in flight
// together. A large level (a menu bar's closed menus hold hundreds of
// items that are not showing) is read state first: what does not show is
// read no further; then the facts and children of the rest; then the
// text, value and keys of those that have them, and the visible cells of
// tables that manage their descendants. A small level (a dialog's) saves
// a round trip: the state and facts together, then the children with the
// text.
func (r *reader) readLevel(level []*node) {
	small := len(level) <= smallLevel
	per := 1
	if small {
		per = 5
	}
	var showing []*node
	r.pass(level, per, func(n *node) []*dbus.Call {
		n.state = r.call(n.ref, ifaceAccessible+".GetState")
		if small {
			return append(r.askFacts(n), n.state)
		}
		return []*dbus.Call{n.state}
	}, func(n *node) {
		if isTimeout(n.state.Err) {
			r.slow[n.ref.bus] = true
		}
		var words []uint32
		err := n.state.Store(&words)
		n.state = nil
		n.el.ID = n.ref.ID()
		switch {
		case err == nil:
			n.el.States = stateList(words)
		case n.depth > 0:
			// Gone, or not answering: whether it shows is not known.
			n.failed = true
		}
		if n.el.Has("defunct") {
			n.failed = true
		}
		show := !n.failed && (n.depth == 0 || n.el.Has("showing"))
		if show {
			showing = append(showing, n)
		}
		switch {
		case small && show:
			r.fill(n)
		case small:
			n.name, n.role, n.ifc, n.place = nil, nil, nil, nil
		}
	})
	var managed []*node
	keep := func(n *node) {
		if n.failed {
			return
		}
		r.bytes += elementSize(&n.el)
		if n.el.Has("manages_descendants") {
			managed = append(managed, n)
		}
	}
	if small {
		for _, n := range showing {
			keep(n)
		}
	} else {
		r.pass(showing, 6, func(n *node) []*dbus.Call {
			return append(r.askFacts(n), r.askChildren(n))
		}, func(n *node) {
			r.fill(n)
			r.children(n)
			keep(n)
		})
	}
	// Qt and LibreOffice answer an end offset past the text with nothing:
	// such a text is asked for again up to its length.
	var again []*node
	length := map[*node]int32{}
	var ask []*node
	for _, n := range showing {
		if !n.failed {
			ask = append(ask, n)
		}
	}
	r.pass(ask, 5, func(n *node) []*dbus.Call {
		var out []*dbus.Call
		if small {
			out = append(out, r.askChildren(n))
		}
		for _, f := range n.ifaces {
			switch f {
			case ifaceText:
				if !readsText(&n.el) {
					continue
				}
				n.text = r.call(n.ref, ifaceText+".GetText", int32(0), int32(observe.MaxElementText))
				n.count = r.call(n.ref, ifaceProps+".Get", ifaceText, "CharacterCount")
				out = append(out, n.text, n.count)
			case ifaceValue:
				n.val = r.call(n.ref, ifaceProps+".Get", ifaceValue, "CurrentValue")
				out = append(out, n.val)
			case ifaceAction:
				if pressRoles[n.el.Role] {
					n.keys = r.call(n.ref, ifaceAction+".GetKeyBinding", int32(0))
					out = append(out, n.keys)
				}
			}
		}
		return out
	}, func(n *node) {
		if small {
			r.children(n)
		}
		r.more(n)
		var count dbus.Variant
		if n.el.Text == "" && n.count != nil && n.count.Store(&count) == nil {
			if c, ok := count.Value().(int32); ok && c > 0 {
				again = append(again, n)
				length[n] = min(c, int32(observe.MaxElementText))
			}
		}
		n.count = nil
	})
	r.pass(again, 1, func(n *node) []*dbus.Call {
		n.text = r.call(n.ref, ifaceText+".GetText", int32(0), length[n])
		return []*dbus.Call{n.text}
	}, r.more)
	r.visibleDescendants(managed)
}

// smallLevel is the most nodes a level may have to be read in one pass
// of state and facts (readLevel).
const smallLevel = 16

// pass makes the calls ask gives for each node, at most batch in flight
// at once (per calls a node), waits for them and gives each node to
// after, a part at a time: the answers of a part are read and let go of
// before the next part is asked (a hostile application may answer each
// call with a message as large as the bus allows). Past MaxTreeBytes the
// nodes left are not read.
func (r *reader) pass(nodes []*node, per int, ask func(*node) []*dbus.Call, after func(*node)) {
	step := max(1, batch/per)
	for start := 0; start < len(nodes); start += step {
		part := nodes[start:min(len(nodes), start+step)]
		if r.bytes > MaxTreeBytes {
			for _, n := range nodes[start:] {
				n.failed = true
			}
			return
		}
		var calls []*dbus.Call
		for _, n := range part {
			calls = append(calls, ask(n)...)
		}
		_ = r.wait(calls)
		for _, n := range part {
			after(n)
		}
	}
}

// more reads a node's text, value and keys, and lets go of their calls.
func (r *reader) more(n *node) {
	for _, c := range []*dbus.Call{n.text, n.val, n.keys} {
		if c != nil && isTimeout(c.Err) {
			r.slow[n.ref.bus] = true
		}
	}
	if n.text != nil {
		var s string
		if n.text.Store(&s) == nil {
			n.el.Text = clip(s)
			r.bytes += 2 * len(n.el.Text)
		}
	}
	if n.val != nil {
		var v dbus.Variant
		if n.val.Store(&v) == nil {
			if f, ok := v.Value().(float64); ok {
				n.el.Value = &f
			}
		}
	}
	if n.keys != nil {
		var kb string
		if n.keys.Store(&kb) == nil {
			n.el.Keys = KeyBindings(kb)
			for _, k := range n.el.Keys {
				r.bytes += len(k) + 4
			}
		}
	}
	n.text, n.val, n.keys = nil, nil, nil
}

// pressRoles are the roles whose keyboard shortcuts are read (the
// Action interface's key binding): what a policy's press rule can name.
var pressRoles = map[string]bool{
	"push button": true, "toggle button": true, "menu item": true, "check menu item": true,
	"radio menu item": true, "check box": true, "radio button": true, "link": true,
}

// KeyBindings turns an AT-SPI key binding — "mnemonic;sequence;shortcut"
// in GTK's accelerator syntax ("<Alt>d", "<Alt>f:d", "<Control>Delete";
// parts may be empty) — into agentbox's chords ("alt+d", "ctrl+Delete"):
// the mnemonic and the shortcut, since the sequence (a menu's path)
// presses nothing by itself. Parts that do not parse are left out.
func KeyBindings(kb string) []string {
	parts := strings.Split(kb, ";")
	var out []string
	for i, p := range parts {
		if i == 1 || i > 2 {
			continue
		}
		if c, ok := chordOf(strings.TrimSpace(p)); ok && !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	return out
}

// chordOf converts one accelerator ("<Control><Shift>Delete", "<Alt>d",
// "F2") to a chord ("ctrl+shift+Delete").
func chordOf(acc string) (string, bool) {
	if acc == "" || len(acc) > 64 || strings.ContainsAny(acc, ": ") {
		return "", false
	}
	var mods []string
	for strings.HasPrefix(acc, "<") {
		end := strings.IndexByte(acc, '>')
		if end < 0 {
			return "", false
		}
		switch strings.ToLower(acc[1:end]) {
		case "control", "ctrl", "primary", "ctl":
			mods = append(mods, "ctrl")
		case "shift", "shft":
			mods = append(mods, "shift")
		case "alt", "mod1":
			mods = append(mods, "alt")
		case "super", "mod4":
			mods = append(mods, "super")
		case "meta":
			mods = append(mods, "meta")
		default:
			return "", false
		}
		acc = acc[end+1:]
	}
	if acc == "" || strings.ContainsAny(acc, "<>+") {
		return "", false
	}
	return strings.Join(append(mods, acc), "+"), true
}

// textRoles are the roles whose text is their content (an entry, a text
// view, a terminal), not their name said again.
var textRoles = map[string]bool{
	"text": true, "entry": true, "password text": true, "terminal": true, "paragraph": true,
	"document text": true, "document web": true, "document frame": true, "spin button": true,
	"editbar": true, "autocomplete": true, "combo box": true,
}

// readsText reports whether an element's text is read: the content of an
// editable or text role, or the only words of an element without a name.
// A label's, a cell's or a button's text is its name: reading it again
// would double the calls of a large table.
func readsText(e *observe.Element) bool {
	return textRoles[e.Role] || e.Name == "" || e.Has("editable")
}

// fill reads the facts of a showing node (its state is read already). A
// node whose role cannot be read is dropped (it went away, or its
// application did not answer).
func (r *reader) fill(n *node) {
	defer func() { n.name, n.role, n.ifc, n.place = nil, nil, nil, nil }()
	for _, c := range []*dbus.Call{n.name, n.role, n.ifc, n.place} {
		if c != nil && isTimeout(c.Err) {
			r.slow[n.ref.bus] = true
		}
	}
	var role uint32
	if err := n.role.Store(&role); err != nil {
		n.failed = true
		return
	}
	n.el.Role = r.roleName(n.ref, role)
	var name dbus.Variant
	if n.name.Store(&name) == nil {
		if s, ok := name.Value().(string); ok {
			n.el.Name = clip(s)
		}
	}
	_ = n.ifc.Store(&n.ifaces)
	var ext struct{ X, Y, W, H int32 }
	if n.place != nil && n.place.Store(&ext) == nil && ext.W > 0 && ext.H > 0 && ext.W < 1<<20 && ext.H < 1<<20 {
		n.el.Bounds = &action.Rect{int(ext.X), int(ext.Y), int(ext.X) + int(ext.W), int(ext.Y) + int(ext.H)}
	}
}

// askFacts asks for a node's facts: name, role, interfaces, and its
// place (an element's).
func (r *reader) askFacts(n *node) []*dbus.Call {
	o := n.ref
	n.name = r.call(o, ifaceProps+".Get", ifaceAccessible, "Name")
	n.role = r.call(o, ifaceAccessible+".GetRole")
	n.ifc = r.call(o, ifaceAccessible+".GetInterfaces")
	if n.depth == 0 {
		// An application has no place on the screen (GTK complains when
		// asked).
		return []*dbus.Call{n.name, n.role, n.ifc}
	}
	n.place = r.call(o, ifaceComponent+".GetExtents", coordTypeScreen)
	return []*dbus.Call{n.name, n.role, n.ifc, n.place}
}

// askChildren asks for a node's children, once its state says it is
// safe: an element that manages its descendants may have billions (a
// LibreOffice Calc sheet has 2^31 cells), and listing them blocks its
// application for good; it is asked how many it has instead.
func (r *reader) askChildren(n *node) *dbus.Call {
	if n.el.Has("manages_descendants") {
		n.children = r.call(n.ref, ifaceProps+".Get", ifaceAccessible, "ChildCount")
	} else {
		n.children = r.call(n.ref, ifaceAccessible+".GetChildren")
	}
	return n.children
}

// children reads the answer askChildren asked for.
func (r *reader) children(n *node) {
	c := n.children
	n.children, n.nkids = nil, -1
	if c == nil {
		return
	}
	if isTimeout(c.Err) {
		r.slow[n.ref.bus] = true
	}
	if !n.el.Has("manages_descendants") {
		n.kids = refList(c)
		return
	}
	var count dbus.Variant
	if c.Store(&count) == nil {
		if k, ok := count.Value().(int32); ok && k >= 0 {
			n.nkids = k
		}
	}
}

// refList is the references a call answered (GetChildren), without the
// null and malformed ones.
func refList(c *dbus.Call) []ref {
	var list []struct {
		Bus  string
		Path dbus.ObjectPath
	}
	if c.Store(&list) != nil {
		return nil
	}
	var out []ref
	for _, k := range list {
		if k.Bus == "" || !k.Path.IsValid() || string(k.Path) == nullPath {
			continue
		}
		out = append(out, ref{k.Bus, k.Path})
	}
	return out
}

// oneRef is the one reference a call answered, if it is one.
func oneRef(c *dbus.Call) (ref, bool) {
	var k struct {
		Bus  string
		Path dbus.ObjectPath
	}
	if c == nil || c.Store(&k) != nil || k.Bus == "" || !k.Path.IsValid() || string(k.Path) == nullPath {
		return ref{}, false
	}
	return ref{k.Bus, k.Path}, true
}

func int32Of(c *dbus.Call) (int32, bool) {
	var v int32
	if c == nil || c.Store(&v) != nil {
		return 0, false
	}
	return v, true
}

// MaxManagedCells bounds the descendants read of one element that manages
// its descendants: the cells of the visible part of a table.
const MaxManagedCells = 4096

// visibleDescendants gives the elements that manage their descendants
// their children: all of them where they say they have at most
// MaxManagedCells (a GTK list), else the descendants on screen, where
// they are tables: the cells from the one at the top left corner of its
// bounds to the one at the bottom right (Component.GetAccessibleAtPoint,
// then Table's row and column of each, then Table.GetAccessibleAt for
// the rectangle), at most MaxManagedCells. Any other is read without
// children, and said to be.
func (r *reader) visibleDescendants(managed []*node) {
	// A few children (a GTK list's cells) are listed as any other
	// element's: those not showing are left out as usual.
	var few []*node
	managed = slices.DeleteFunc(managed, func(n *node) bool {
		if n.nkids >= 0 && n.nkids <= MaxManagedCells {
			few = append(few, n)
			return true
		}
		return false
	})
	r.pass(few, 1, func(n *node) []*dbus.Call {
		n.children = r.call(n.ref, ifaceAccessible+".GetChildren")
		return []*dbus.Call{n.children}
	}, func(n *node) {
		if isTimeout(n.children.Err) {
			r.slow[n.ref.bus] = true
		}
		n.kids, n.children = refList(n.children), nil
	})
	type corner struct {
		n        *node
		at       [2]*dbus.Call // top left, bottom right
		idx      [2]*dbus.Call
		row, col [2]*dbus.Call
	}
	var cs []*corner
	var calls []*dbus.Call
	for _, n := range managed {
		b := n.el.Bounds
		if b == nil || !slices.Contains(n.ifaces, ifaceTable) || !slices.Contains(n.ifaces, ifaceComponent) {
			r.cut = appendOnce(r.cut, fmt.Sprintf("descendants: %s %q manages its descendants and is no table: its children were not read", n.el.Role, n.el.Name))
			continue
		}
		c := &corner{n: n}
		c.at[0] = r.call(n.ref, ifaceComponent+".GetAccessibleAtPoint", int32(b[0]+1), int32(b[1]+1), coordTypeScreen)
		c.at[1] = r.call(n.ref, ifaceComponent+".GetAccessibleAtPoint", int32(b[2]-2), int32(b[3]-2), coordTypeScreen)
		cs = append(cs, c)
		calls = append(calls, c.at[:]...)
	}
	_ = r.wait(calls)
	calls = calls[:0]
	for _, c := range cs {
		for k := range 2 {
			if o, ok := oneRef(c.at[k]); ok {
				c.idx[k] = r.call(o, ifaceAccessible+".GetIndexInParent")
				calls = append(calls, c.idx[k])
			}
		}
	}
	_ = r.wait(calls)
	calls = calls[:0]
	for _, c := range cs {
		for k := range 2 {
			if i, ok := int32Of(c.idx[k]); ok && i >= 0 {
				c.row[k] = r.call(c.n.ref, ifaceTable+".GetRowAtIndex", i)
				c.col[k] = r.call(c.n.ref, ifaceTable+".GetColumnAtIndex", i)
				calls = append(calls, c.row[k], c.col[k])
			}
		}
	}
	_ = r.wait(calls)
	calls = calls[:0]
	type cell struct {
		n *node
		c *dbus.Call
	}
	var cells []cell
	for _, c := range cs {
		// A corner its application did not answer in time is said as
		// such (transient), not as a table that cannot tell its cells.
		for _, k := range slices.Concat(c.at[:], c.idx[:], c.row[:], c.col[:]) {
			if k != nil && isTimeout(k.Err) {
				r.slow[c.n.ref.bus] = true
			}
		}
		r0, ok0 := int32Of(c.row[0])
		c0, ok1 := int32Of(c.col[0])
		r1, ok2 := int32Of(c.row[1])
		c1, ok3 := int32Of(c.col[1])
		if !ok0 || !ok1 || !ok2 || !ok3 || r0 < 0 || c0 < 0 || r1 < r0 || c1 < c0 {
			r.cut = appendOnce(r.cut, fmt.Sprintf("descendants: the visible cells of %s %q could not be told (its application did not say which are at its corners)", c.n.el.Role, c.n.el.Name))
			continue
		}
		cols := int64(c1-c0) + 1
		rows := int64(r1-r0) + 1
		if rows*cols > MaxManagedCells {
			rows = max(1, MaxManagedCells/cols)
			cols = min(cols, MaxManagedCells)
			r.cut = appendOnce(r.cut, fmt.Sprintf("descendants: only the first %d cells on screen of %s %q were read", MaxManagedCells, c.n.el.Role, c.n.el.Name))
		}
		for row := int64(r0); row < int64(r0)+rows; row++ {
			for col := int64(c0); col < int64(c0)+cols; col++ {
				call := r.call(c.n.ref, ifaceTable+".GetAccessibleAt", int32(row), int32(col))
				cells = append(cells, cell{c.n, call})
				calls = append(calls, call)
			}
			if len(calls) >= batch {
				_ = r.wait(calls)
				calls = calls[:0]
			}
		}
	}
	_ = r.wait(calls)
	for _, c := range cells {
		if isTimeout(c.c.Err) {
			r.slow[c.n.ref.bus] = true
		}
		if o, ok := oneRef(c.c); ok {
			c.n.kids = append(c.n.kids, o)
		}
	}
}

// isTimeout reports whether a call ended unanswered: the read's deadline,
// its application stalled, or the read was called off.
func isTimeout(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) || errors.Is(err, errStalled)
}

// roleName names a role by AT-SPI's table, asking the application only for
// a role outside it.
func (r *reader) roleName(o ref, role uint32) string {
	if int(role) < len(roleNames) && roleNames[role] != "" && roleNames[role] != "extended" {
		return roleNames[role]
	}
	key := fmt.Sprintf("%s/%d", o.bus, role)
	if n, ok := r.b.roleNames[key]; ok {
		return n
	}
	var name string
	c := r.call(o, ifaceAccessible+".GetRoleName")
	_ = r.wait([]*dbus.Call{c})
	if c.Store(&name) != nil || name == "" {
		name = fmt.Sprintf("role %d", role)
	}
	name = clip(name)
	if len(r.b.roleNames) < 1024 {
		r.b.roleNames[key] = name
	}
	return name
}

// stateList names the set bits of AT-SPI's state set (two 32-bit words).
func stateList(words []uint32) []string {
	var out []string
	for w, bits := range words {
		for bit := 0; bit < 32; bit++ {
			if bits&(1<<bit) == 0 {
				continue
			}
			i := 32*w + bit
			if i > 0 && i < len(stateNames) {
				out = append(out, stateNames[i])
			}
		}
		if w == 1 {
			break
		}
	}
	return out
}

// clip bounds a string from an application and makes it valid UTF-8.
func clip(s string) string {
	return strings.ToValidUTF8(textcut.Bytes(s, observe.MaxElementText, ""), "\uFFFD")
}

// Find reads the tree and returns the element sel picks, with the tree
// it was found in; see observe.Tree.Find for the errors.
//
// A read that finds nothing and was cut for a reason another read may not
// have (its deadline, an application that did not answer in time: a busy
// machine) is read again, up to findReads reads in all, so that a target
// on a loaded machine is not "no element matches" because the read
// stopped before it; the error then says how the last read was cut.
func (b *Bus) Find(ctx context.Context, sel action.Selector) (*observe.Element, *observe.Tree, error) {
	for i := 1; ; i++ {
		tr, err := b.Tree(ctx, observe.TreeLimits{})
		if err != nil {
			return nil, nil, err
		}
		if afterFindRead != nil {
			afterFindRead(i, tr)
		}
		e, err := tr.Find(sel)
		if err == nil || i == findReads || len(tr.Transient()) == 0 || ctx.Err() != nil {
			return e, tr, err
		}
	}
}

// findReads bounds the reads of one Find.
const findReads = 3

// afterFindRead, when set (by tests), sees each read of Find.
var afterFindRead func(n int, tr *observe.Tree)

// GrabFocus asks the element's application to give it the keyboard focus
// (Component.GrabFocus; GTK also raises its window) and reports whether
// the element then says it is focused, waiting up to wait for it.
func (b *Bus) GrabFocus(ctx context.Context, id string, wait time.Duration) (bool, error) {
	o, err := refOf(id)
	if err != nil {
		return false, err
	}
	b.mu.Lock()
	conn := b.conn
	b.mu.Unlock()
	if conn == nil {
		return false, errors.New("the accessibility bus is closed")
	}
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	var ok bool
	err = conn.Object(o.bus, o.path).CallWithContext(cctx, ifaceComponent+".GrabFocus", 0).Store(&ok)
	cancel()
	if err != nil {
		return false, fmt.Errorf("grab focus of %s: %w", id, err)
	}
	return b.WaitState(ctx, id, "focused", wait)
}

// WaitState reports whether the element has state, polling up to wait.
func (b *Bus) WaitState(ctx context.Context, id, state string, wait time.Duration) (bool, error) {
	o, err := refOf(id)
	if err != nil {
		return false, err
	}
	deadline := time.Now().Add(wait)
	for {
		b.mu.Lock()
		conn := b.conn
		b.mu.Unlock()
		if conn == nil {
			return false, errors.New("the accessibility bus is closed")
		}
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		var words []uint32
		err := conn.Object(o.bus, o.path).CallWithContext(cctx, ifaceAccessible+".GetState", 0).Store(&words)
		cancel()
		if err != nil {
			return false, fmt.Errorf("state of %s: %w", id, err)
		}
		for _, s := range stateList(words) {
			if s == state {
				return true, nil
			}
		}
		if time.Now().After(deadline) {
			return false, nil
		}
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}
