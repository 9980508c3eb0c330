package atspi_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/godbus/dbus/v5"

	"github.com/codegirl-games/agentbox/guest/atspi"
	"github.com/codegirl-games/agentbox/observe"
)

// hostileApp is an application on the accessibility bus that says what it
// likes: every element has fanout children (and its parent again, a
// cycle), megabyte names and texts, bounds far off any
// screen, and optionally never answers GetChildren at all.
type hostileApp struct {
	fanout int
	name   string
	silent bool // never answer GetChildren (block until the caller gives up)
	hang   chan struct{}
	bus    string
	// inflight counts the calls being answered: a read that gave up on
	// calls (their deadline passed on a busy machine) leaves the app
	// answering them, and the next read must not start behind them.
	inflight atomic.Int32
}

// busy counts a call in flight until the function it returns is called.
func (h *hostileApp) busy() func() {
	h.inflight.Add(1)
	return func() { h.inflight.Add(-1) }
}

// waitIdle waits until the app has answered every call it was sent (and
// none came for a moment), so a test may change what it says.
func waitIdle(t *testing.T, h *hostileApp) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for quiet := 0; quiet < 5; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the app still answers %d calls after two minutes", h.inflight.Load())
		}
		if h.inflight.Load() == 0 {
			quiet++
		} else {
			quiet = 0
		}
	}
}

const accessible = "/org/a11y/atspi/accessible/"

func idOf(msg dbus.Message) string {
	p, _ := msg.Headers[dbus.FieldPath].Value().(dbus.ObjectPath)
	return strings.TrimPrefix(string(p), accessible)
}

type ref struct {
	Bus  string
	Path dbus.ObjectPath
}

func (h *hostileApp) GetRole(dbus.Message) (uint32, *dbus.Error) { defer h.busy()(); return 43, nil } // push button
func (h *hostileApp) GetState(dbus.Message) ([]uint32, *dbus.Error) {
	defer h.busy()()
	return []uint32{1<<8 | 1<<25 | 1<<30, 0xffffffff}, nil // enabled, showing, visible; every high bit
}
func (h *hostileApp) GetInterfaces(dbus.Message) ([]string, *dbus.Error) {
	defer h.busy()()
	return []string{"org.a11y.atspi.Accessible", "org.a11y.atspi.Component", "org.a11y.atspi.Text"}, nil
}
func (h *hostileApp) GetChildren(msg dbus.Message) ([]ref, *dbus.Error) {
	defer h.busy()()
	if h.silent {
		<-h.hang
	}
	id := idOf(msg)
	out := []ref{{h.bus, dbus.ObjectPath(accessible + "root")}} // a cycle
	for i := range h.fanout {
		out = append(out, ref{h.bus, dbus.ObjectPath(accessible + "n" + strings.ReplaceAll(id, "root", "") + string(rune('a'+i%26)) + strings.Repeat("x", i/26))})
	}
	return out, nil
}
func (h *hostileApp) GetExtents(dbus.Message, uint32) (struct{ X, Y, W, H int32 }, *dbus.Error) {
	defer h.busy()()
	return struct{ X, Y, W, H int32 }{-2000000000, 5, 2000000000, 10}, nil
}
func (h *hostileApp) GetText(dbus.Message, int32, int32) (string, *dbus.Error) {
	defer h.busy()()
	return h.name, nil
}
func (h *hostileApp) Get(msg dbus.Message, iface, prop string) (dbus.Variant, *dbus.Error) {
	defer h.busy()()
	switch prop {
	case "Name":
		return dbus.MakeVariant(h.name), nil
	case "CharacterCount":
		return dbus.MakeVariant(int32(1 << 30)), nil
	}
	return dbus.MakeVariant(""), nil
}

// startApp connects an application to the bus, exports obj there under
// the accessible path with ifaces, and registers it with the registry, as
// an app's bridge does (Socket.Embed). It returns the app's bus name.
func startApp(t *testing.T, d *desktop, obj any, ifaces ...string) string {
	t.Helper()
	var addr string
	for _, kv := range d.bus.Env() {
		if v, ok := strings.CutPrefix(kv, "AT_SPI_BUS_ADDRESS="); ok {
			addr = v
		}
	}
	conn, err := dbus.Connect(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	bus := conn.Names()[0]
	for _, iface := range ifaces {
		if err := conn.ExportSubtree(obj, "/org/a11y/atspi/accessible", iface); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	var parent ref
	err = conn.Object("org.a11y.atspi.Registry", "/org/a11y/atspi/accessible/root").
		CallWithContext(ctx, "org.a11y.atspi.Socket.Embed", 0, ref{bus, accessible + "root"}).Store(&parent)
	if err != nil {
		t.Fatalf("embed in the registry: %v", err)
	}
	return bus
}

// startHostile starts h on the bus.
func startHostile(t *testing.T, d *desktop, h *hostileApp) {
	t.Helper()
	h.bus = startApp(t, d, h, "org.a11y.atspi.Accessible", "org.a11y.atspi.Component", "org.a11y.atspi.Text", "org.freedesktop.DBus.Properties")
}

// TestHostileApp: an application that lies without bounds is read within
// the read's bounds: the cycle and the fanout stop at the element bound
// (said in cut), names and texts are clipped to valid UTF-8, bounds that
// overflow are dropped, and a silent application costs the per-call
// deadline, not the read's budget.
func TestHostileApp(t *testing.T) {
	d := startDesktop(t)
	big := strings.Repeat("€", 400_000) // 1.2 MB; 4096 bytes end inside a character
	h := &hostileApp{fanout: 200, name: big}
	startHostile(t, d, h)

	// The element and size bounds are tested with a per-call deadline a
	// busy machine cannot reach (megabyte answers, hundreds in flight);
	// the silent app below has the real one.
	restore := atspi.SetCallTimeout(time.Minute)
	t0 := time.Now()
	tr, err := d.bus.Tree(t.Context(), observe.TreeLimits{MaxNodes: 500, TimeoutMS: 120000})
	took := time.Since(t0)
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.Elements) > 500 || !strings.Contains(strings.Join(tr.Cut, "\n"), "max_nodes") {
		t.Errorf("%d elements, cut %q", len(tr.Elements), tr.Cut)
	}
	for _, e := range tr.Elements {
		if len(e.Name) > observe.MaxElementText || len(e.Text) > observe.MaxElementText || !utf8.ValidString(e.Name) || !utf8.ValidString(e.Text) {
			t.Fatalf("%s: name %d bytes, text %d bytes, valid %v", e.ID, len(e.Name), len(e.Text), utf8.ValidString(e.Name))
		}
		if e.Bounds != nil && (e.Bounds[2] < e.Bounds[0] || e.Bounds.Dx() > 1<<20) {
			t.Fatalf("%s: bounds %v", e.ID, *e.Bounds)
		}
		if len(e.States) > 64 {
			t.Fatalf("%s: %d states", e.ID, len(e.States))
		}
	}
	t.Logf("hostile fanout: %d elements in %v (%d calls); cut %q", len(tr.Elements), took, tr.Calls, tr.Cut)

	// Many elements with names and texts at the clip: the tree stops at
	// its size bound, well inside a wire frame.
	waitIdle(t, h)
	h.name = strings.Repeat("n", 5000)
	tr, err = d.bus.Tree(t.Context(), observe.TreeLimits{MaxNodes: observe.MaxTreeNodes, TimeoutMS: observe.MaxTreeTimeout})
	if err != nil {
		t.Fatal(err)
	}
	data, _ := json.Marshal(tr)
	// The size bound stops it — or, on a machine too busy to read that
	// much within the read's 30 s, the read's deadline does first; either
	// way the tree stays within the bound.
	cut := strings.Join(tr.Cut, "\n")
	if len(data) > atspi.MaxTreeBytes+1<<20 || !strings.Contains(cut, "size: the tree reached") && !strings.Contains(cut, "time: the read stopped") {
		t.Errorf("a large tree: %d elements, %d bytes, cut %q", len(tr.Elements), len(data), tr.Cut)
	}
	t.Logf("large names: %d elements, %d bytes of JSON; cut %q", len(tr.Elements), len(data), tr.Cut)

	// Silent: GetChildren never answers.
	waitIdle(t, h)
	restore()
	h.silent, h.hang = true, make(chan struct{})
	defer close(h.hang)
	t0 = time.Now()
	tr, err = d.bus.Tree(t.Context(), observe.TreeLimits{TimeoutMS: 20000})
	took = time.Since(t0)
	if err != nil {
		t.Fatal(err)
	}
	if took > 10*time.Second || !strings.Contains(strings.Join(tr.Cut, "\n"), "did not answer") {
		t.Errorf("a silent app: %v, cut %q", took, tr.Cut)
	}
	t.Logf("silent app: %v; %d elements; cut %q", took, len(tr.Elements), tr.Cut)
}
