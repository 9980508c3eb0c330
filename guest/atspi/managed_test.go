package atspi_test

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/godbus/dbus/v5"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/observe"
)

// sheetApp is an application like LibreOffice Calc on the accessibility
// bus: its one child is a table that manages its descendants, with more
// cells than can be listed (asking for its children blocks, as Calc's
// 2^31 cells do); the cells on screen are found through Component and
// Table. Cell (r, c) is 50x20 pixels at (50c, 20r), its index r*1000+c.
type sheetApp struct {
	bus       string
	kidsAsked atomic.Int32 // GetChildren calls on the table
	hang      chan struct{}
	// width and height are the table's size on screen; the test changes
	// them while the bus's goroutines answer.
	width, height atomic.Int32
}

func (s *sheetApp) GetRole(msg dbus.Message) (uint32, *dbus.Error) {
	switch id := idOf(msg); {
	case id == "root":
		return 75, nil // application
	case id == "table":
		return 55, nil
	}
	return 56, nil // table cell
}

func (s *sheetApp) GetState(msg dbus.Message) ([]uint32, *dbus.Error) {
	st := uint32(1<<8 | 1<<25 | 1<<30) // enabled, showing, visible
	if idOf(msg) == "table" {
		st |= 1 << 31 // manages_descendants
	}
	return []uint32{st, 0}, nil
}

func (s *sheetApp) GetInterfaces(msg dbus.Message) ([]string, *dbus.Error) {
	if idOf(msg) == "table" {
		return []string{"org.a11y.atspi.Accessible", "org.a11y.atspi.Component", "org.a11y.atspi.Table"}, nil
	}
	return []string{"org.a11y.atspi.Accessible", "org.a11y.atspi.Component"}, nil
}

func (s *sheetApp) cell(r, c int32) ref {
	return ref{s.bus, dbus.ObjectPath(fmt.Sprintf("%sc%d_%d", accessible, r, c))}
}

func (s *sheetApp) rc(msg dbus.Message) (r, c int32) {
	_, _ = fmt.Sscanf(idOf(msg), "c%d_%d", &r, &c)
	return r, c
}

func (s *sheetApp) GetChildren(msg dbus.Message) ([]ref, *dbus.Error) {
	switch idOf(msg) {
	case "root":
		return []ref{{s.bus, accessible + "table"}}, nil
	case "table":
		s.kidsAsked.Add(1)
		<-s.hang // billions of cells: never done
	}
	return []ref{}, nil
}

func (s *sheetApp) GetIndexInParent(msg dbus.Message) (int32, *dbus.Error) {
	r, c := s.rc(msg)
	return r*1000 + c, nil
}

func (s *sheetApp) GetExtents(msg dbus.Message, _ uint32) (struct{ X, Y, W, H int32 }, *dbus.Error) {
	if idOf(msg) == "table" {
		return struct{ X, Y, W, H int32 }{0, 0, s.width.Load(), s.height.Load()}, nil
	}
	r, c := s.rc(msg)
	return struct{ X, Y, W, H int32 }{50 * c, 20 * r, 50, 20}, nil
}

func (s *sheetApp) GetAccessibleAtPoint(_ dbus.Message, x, y int32, _ uint32) (ref, *dbus.Error) {
	return s.cell(y/20, x/50), nil
}

func (s *sheetApp) GetAccessibleAt(_ dbus.Message, r, c int32) (ref, *dbus.Error) {
	return s.cell(r, c), nil
}
func (s *sheetApp) GetRowAtIndex(_ dbus.Message, i int32) (int32, *dbus.Error) { return i / 1000, nil }
func (s *sheetApp) GetColumnAtIndex(_ dbus.Message, i int32) (int32, *dbus.Error) {
	return i % 1000, nil
}

func (s *sheetApp) Get(msg dbus.Message, _, prop string) (dbus.Variant, *dbus.Error) {
	if prop == "ChildCount" && idOf(msg) == "table" {
		return dbus.MakeVariant(int32(1<<31 - 1)), nil // as Calc says
	}
	if prop != "Name" {
		return dbus.MakeVariant(""), nil
	}
	switch id := idOf(msg); id {
	case "root":
		return dbus.MakeVariant("sheet"), nil
	case "table":
		return dbus.MakeVariant("Sheet1"), nil
	}
	r, c := s.rc(msg)
	return dbus.MakeVariant(fmt.Sprintf("%c%d", 'A'+c, r+1)), nil
}

// TestManagedDescendants: a table that manages its descendants is never
// asked for its children (LibreOffice Calc would hang answering); the
// cells on screen are its children in the tree, named, placed and found
// by selector, and a table too large for the bound says so in cut.
func TestManagedDescendants(t *testing.T) {
	d := startDesktop(t)
	s := &sheetApp{hang: make(chan struct{})}
	s.width.Store(250)
	s.height.Store(100)
	defer close(s.hang)
	startSheet(t, d, s)

	tr, err := d.bus.Tree(t.Context(), observe.TreeLimits{TimeoutMS: 20000})
	if err != nil {
		t.Fatal(err)
	}
	if n := s.kidsAsked.Load(); n != 0 {
		t.Errorf("the table was asked for its children %d times", n)
	}
	var cells []observe.Element
	for _, e := range tr.Elements {
		if e.Role == "table cell" {
			cells = append(cells, e)
		}
	}
	if len(cells) != 25 {
		t.Fatalf("%d cells, want the 5x5 on screen; cut %q, note %q", len(cells), tr.Cut, tr.Note)
	}
	e, err := tr.Find(action.Selector{Role: "table cell", Name: "C2"})
	if err != nil {
		t.Fatal(err)
	}
	if want := (action.Rect{100, 20, 150, 40}); e.Bounds == nil || *e.Bounds != want {
		t.Errorf("C2's bounds %v, want %v", e.Bounds, want)
	}
	if len(tr.Cut) != 0 {
		t.Errorf("cut %q", tr.Cut)
	}

	// A table larger on screen than the bound: the first cells, and a cut.
	s.width.Store(50 * 200)
	s.height.Store(20 * 100)
	tr, err = d.bus.Tree(t.Context(), observe.TreeLimits{MaxNodes: observe.MaxTreeNodes, TimeoutMS: observe.MaxTreeTimeout})
	if err != nil {
		t.Fatal(err)
	}
	if cut := strings.Join(tr.Cut, "\n"); !strings.Contains(cut, "only the first 4096 cells on screen") {
		t.Errorf("a large table: %d elements, cut %q", len(tr.Elements), tr.Cut)
	}
	if n := s.kidsAsked.Load(); n != 0 {
		t.Errorf("the table was asked for its children %d times", n)
	}
}

func startSheet(t *testing.T, d *desktop, s *sheetApp) {
	t.Helper()
	s.bus = startApp(t, d, s, "org.a11y.atspi.Accessible", "org.a11y.atspi.Component", "org.a11y.atspi.Table", "org.freedesktop.DBus.Properties")
}
