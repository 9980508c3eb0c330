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
}

// reader is one read of the tree.
type reader struct {
	b     *Bus
	ctx   context.Context // the read's deadline
	calls int
	// slow names applications that did not answer a call in time.
	slow    map[string]bool
	cancels []context.CancelFunc
	// bytes is about the size of what was read; past MaxTreeBytes the
	// read stops.
	bytes int
	// cut says what the read of managed descendants left out.
	cut []string
}

func (r *reader) close() {
	for _, c := range r.cancels {
		c()
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
	r := &reader{b: b, ctx: rctx, slow: map[string]bool{}}
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

// call starts one method call under the read's deadline and the per-call
// bound.
func (r *reader) call(o ref, method string, args ...any) *dbus.Call {
	r.calls++
	ctx, cancel := context.WithTimeout(r.ctx, callTimeout)
	r.cancels = append(r.cancels, cancel)
	return r.b.conn.Object(o.bus, o.path).GoWithContext(ctx, method, 0, make(chan *dbus.Call, 1), args...)
}

// wait waits for every call (each ends by its deadline at the latest). It
// returns an error only when the first call of a read finds no registry.
func (r *reader) wait(calls []*dbus.Call) error {
	for _, c := range calls {
		<-c.Done
	}
	if len(calls) == 1 && calls[0].Err != nil && calls[0].Destination == registryName {
		return fmt.Errorf("the accessibility registry did not answer: %w", calls[0].Err)
	}
	return nil
}

// per-node calls of the first pass, in this order.
const (
	cName = iota
	cRole
	cState
	cIfaces
	cExtents
	nCalls
)

// readLevel reads one level of nodes: their own facts in one pass of
// calls in flight together, then the text and value of those that have
// them in a second.
func (r *reader) readLevel(level []*node) {
	for start := 0; start < len(level); start += batch / nCalls {
		if r.bytes > MaxTreeBytes {
			// Full: what is left of the level is not read.
			for _, n := range level[start:] {
				n.failed = true
			}
			return
		}
		part := level[start:min(len(level), start+batch/nCalls)]
		calls := make([][nCalls]*dbus.Call, len(part))
		var all []*dbus.Call
		for i, n := range part {
			o := n.ref
			calls[i] = [nCalls]*dbus.Call{
				cName:   r.call(o, ifaceProps+".Get", ifaceAccessible, "Name"),
				cRole:   r.call(o, ifaceAccessible+".GetRole"),
				cState:  r.call(o, ifaceAccessible+".GetState"),
				cIfaces: r.call(o, ifaceAccessible+".GetInterfaces"),
			}
			if n.depth > 0 {
				// An application has no place on the screen (GTK complains
				// when asked).
				calls[i][cExtents] = r.call(o, ifaceComponent+".GetExtents", coordTypeScreen)
			}
			for _, c := range calls[i] {
				if c != nil {
					all = append(all, c)
				}
			}
		}
		_ = r.wait(all)
		var second []*dbus.Call
		type pending struct {
			n     *node
			text  *dbus.Call
			count *dbus.Call
			val   *dbus.Call
			keys  *dbus.Call
		}
		var more []pending
		var kids []*dbus.Call // per node of part; nil: none asked
		var managed []*node
		for i, n := range part {
			r.fill(n, calls[i])
			for _, c := range calls[i] {
				if c != nil && isTimeout(c.Err) {
					r.slow[n.ref.bus] = true
				}
			}
			kids = append(kids, nil)
			if n.failed {
				continue
			}
			// The children are asked for once the state is known: an
			// element that manages its descendants may have billions
			// (a LibreOffice Calc sheet has 2^31 cells), and listing
			// them blocks its application for good.
			if n.el.Has("manages_descendants") {
				managed = append(managed, n)
			} else {
				kids[i] = r.call(n.ref, ifaceAccessible+".GetChildren")
				second = append(second, kids[i])
			}
			p := pending{n: n}
			for _, f := range n.ifaces {
				switch f {
				case ifaceText:
					if !readsText(&n.el) {
						continue
					}
					p.text = r.call(n.ref, ifaceText+".GetText", int32(0), int32(observe.MaxElementText))
					p.count = r.call(n.ref, ifaceProps+".Get", ifaceText, "CharacterCount")
					second = append(second, p.text, p.count)
				case ifaceValue:
					p.val = r.call(n.ref, ifaceProps+".Get", ifaceValue, "CurrentValue")
					second = append(second, p.val)
				case ifaceAction:
					if pressRoles[n.el.Role] {
						p.keys = r.call(n.ref, ifaceAction+".GetKeyBinding", int32(0))
						second = append(second, p.keys)
					}
				}
			}
			if p.text != nil || p.val != nil || p.keys != nil {
				more = append(more, p)
			}
		}
		_ = r.wait(second)
		for i, c := range kids {
			if c == nil {
				continue
			}
			if isTimeout(c.Err) {
				r.slow[part[i].ref.bus] = true
			}
			part[i].kids = refList(c)
		}
		r.visibleDescendants(managed)
		for _, p := range more {
			for _, c := range []*dbus.Call{p.text, p.count, p.val, p.keys} {
				if c != nil && isTimeout(c.Err) {
					r.slow[p.n.ref.bus] = true
				}
			}
		}
		// Qt answers an end offset past the text with nothing: ask it
		// again up to the text's length.
		var third []*dbus.Call
		for i, p := range more {
			var s string
			var count dbus.Variant
			if p.text == nil || p.text.Store(&s) != nil || s != "" || p.count.Store(&count) != nil {
				continue
			}
			if n, ok := count.Value().(int32); ok && n > 0 {
				more[i].text = r.call(p.n.ref, ifaceText+".GetText", int32(0), min(n, int32(observe.MaxElementText)))
				third = append(third, more[i].text)
			}
		}
		_ = r.wait(third)
		for _, n := range part {
			r.bytes += elementSize(&n.el)
		}
		for _, p := range more {
			if p.text != nil {
				var s string
				if p.text.Store(&s) == nil {
					p.n.el.Text = clip(s)
					r.bytes += 2 * len(p.n.el.Text)
				}
			}
			if p.val != nil {
				var v dbus.Variant
				if p.val.Store(&v) == nil {
					if f, ok := v.Value().(float64); ok {
						p.n.el.Value = &f
					}
				}
			}
			if p.keys != nil {
				var kb string
				if p.keys.Store(&kb) == nil {
					p.n.el.Keys = KeyBindings(kb)
					for _, k := range p.n.el.Keys {
						r.bytes += len(k) + 4
					}
				}
			}
		}
	}
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

// fill reads the first pass's answers into n. A node whose role cannot be
// read is dropped (it went away, or its application did not answer).
func (r *reader) fill(n *node, c [nCalls]*dbus.Call) {
	n.el.ID = n.ref.ID()
	var role uint32
	if err := c[cRole].Store(&role); err != nil {
		n.failed = true
		return
	}
	n.el.Role = r.roleName(n.ref, role)
	var name dbus.Variant
	if c[cName].Store(&name) == nil {
		if s, ok := name.Value().(string); ok {
			n.el.Name = clip(s)
		}
	}
	var states []uint32
	if c[cState].Store(&states) == nil {
		n.el.States = stateList(states)
	}
	if n.el.Has("defunct") {
		n.failed = true
		return
	}
	_ = c[cIfaces].Store(&n.ifaces)
	var ext struct{ X, Y, W, H int32 }
	if c[cExtents] != nil && c[cExtents].Store(&ext) == nil && ext.W > 0 && ext.H > 0 && ext.W < 1<<20 && ext.H < 1<<20 {
		n.el.Bounds = &action.Rect{int(ext.X), int(ext.Y), int(ext.X) + int(ext.W), int(ext.Y) + int(ext.H)}
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

// visibleDescendants gives the elements that manage their descendants the
// descendants on screen as children, where they are tables: the cells
// from the one at the top left corner of its bounds to the one at the
// bottom right (Component.GetAccessibleAtPoint, then Table's row and
// column of each, then Table.GetAccessibleAt for the rectangle), at most
// MaxManagedCells. Any other is read without children, and said to be.
func (r *reader) visibleDescendants(managed []*node) {
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

func isTimeout(err error) bool {
	return errors.Is(err, context.DeadlineExceeded)
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
func (b *Bus) Find(ctx context.Context, sel action.Selector) (*observe.Element, *observe.Tree, error) {
	tr, err := b.Tree(ctx, observe.TreeLimits{})
	if err != nil {
		return nil, nil, err
	}
	e, err := tr.Find(sel)
	return e, tr, err
}

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
