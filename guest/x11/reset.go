package x11

import (
	"context"
	"slices"

	"github.com/jezek/xgb/xproto"
)

// Baseline is the X server's state a reset returns to: the clients that
// were connected (by their resource-ID base) and the root window's
// properties when the desktop was up and no app had run, and where the
// pointer was.
type Baseline struct {
	bases      []uint32
	props      []xproto.Atom
	px, py     int
	selections []xproto.Atom
}

// TakeBaseline records the server's state now: call it once the desktop
// (window manager, accessibility bus) is up and before any app starts.
func (c *Conn) TakeBaseline(ctx context.Context) (*Baseline, error) {
	o, err := c.begin(ctx, &c.query, "baseline")
	if err != nil {
		return nil, err
	}
	defer o.end()
	b := &Baseline{}
	err = o.do(func() error {
		bases, err := c.clientBases()
		if err != nil {
			return err
		}
		props, err := xproto.ListProperties(c.xc, c.root).Reply()
		if err != nil {
			return err
		}
		p, err := xproto.QueryPointer(c.xc, c.root).Reply()
		if err != nil {
			return err
		}
		sels, err := c.selectionAtoms()
		if err != nil {
			return err
		}
		b.bases, b.props, b.px, b.py, b.selections = bases, props.Atoms, int(p.RootX), int(p.RootY), sels
		return nil
	})
	if err != nil {
		return nil, o.wrap("baseline", err)
	}
	return b, nil
}

// selectionAtoms are the selections a reset clears: PRIMARY, SECONDARY
// and CLIPBOARD (a selection whose owner's client is killed is cleared by
// the server itself).
func (c *Conn) selectionAtoms() ([]xproto.Atom, error) {
	out := []xproto.Atom{xproto.AtomPrimary, xproto.AtomSecondary}
	r, err := xproto.InternAtom(c.xc, false, uint16(len("CLIPBOARD")), "CLIPBOARD").Reply()
	if err != nil {
		return nil, err
	}
	return append(out, r.Atom), nil
}

// clientBases are the resource-ID bases of the clients owning the root
// window's children, the Conn's own first.
func (c *Conn) clientBases() ([]uint32, error) {
	setup := xproto.Setup(c.xc)
	mask := setup.ResourceIdMask
	bases := []uint32{setup.ResourceIdBase}
	tree, err := xproto.QueryTree(c.xc, c.root).Reply()
	if err != nil {
		return nil, err
	}
	for _, w := range tree.Children {
		b := uint32(w) &^ mask
		if !slices.Contains(bases, b) {
			bases = append(bases, b)
		}
	}
	return bases, nil
}

// ResetStats says what Reset did.
type ResetStats struct {
	Clients int // clients killed (by a window of theirs)
	Props   int // root-window properties deleted
}

// Reset returns the server to b: resources kept by clients that have gone
// (a close-down mode of RetainPermanent or RetainTemporary) are freed,
// every client owning a top-level window that was not connected at b is
// killed (XKillClient), the root window's properties that b did not have
// are deleted, the selections cleared, every key and button released, the
// pointer put back and the focus given back to the pointer's root.
// Properties b had (the window manager's, the accessibility bus's) are
// left as their owners keep them.
func (c *Conn) Reset(ctx context.Context, b *Baseline) (ResetStats, error) {
	var st ResetStats
	if err := c.ReleaseAll(ctx); err != nil {
		return st, err
	}
	o, err := c.begin(ctx, &c.input, "reset")
	if err != nil {
		return st, err
	}
	defer o.end()
	err = o.do(func() error {
		// Resources of clients gone with a retaining close-down mode.
		_ = xproto.KillClientChecked(c.xc, xproto.KillAllTemporary).Check()
		mask := xproto.Setup(c.xc).ResourceIdMask
		tree, err := xproto.QueryTree(c.xc, c.root).Reply()
		if err != nil {
			return err
		}
		killed := map[uint32]bool{}
		for _, w := range tree.Children {
			base := uint32(w) &^ mask
			if slices.Contains(b.bases, base) || killed[base] {
				continue
			}
			killed[base] = true
			if xproto.KillClientChecked(c.xc, uint32(w)).Check() == nil {
				st.Clients++
			}
		}
		props, err := xproto.ListProperties(c.xc, c.root).Reply()
		if err != nil {
			return err
		}
		for _, p := range props.Atoms {
			if slices.Contains(b.props, p) {
				continue
			}
			if xproto.DeletePropertyChecked(c.xc, c.root, p).Check() == nil {
				st.Props++
			}
		}
		for _, s := range b.selections {
			_ = xproto.SetSelectionOwnerChecked(c.xc, xproto.WindowNone, s, xproto.TimeCurrentTime).Check()
		}
		_ = xproto.WarpPointerChecked(c.xc, xproto.WindowNone, c.root, 0, 0, 0, 0, int16(b.px), int16(b.py)).Check()
		_ = xproto.SetInputFocusChecked(c.xc, xproto.InputFocusPointerRoot, xproto.Window(xproto.InputFocusPointerRoot), xproto.TimeCurrentTime).Check()
		return c.syncX()
	})
	if err != nil {
		return st, o.wrap("reset", err)
	}
	c.ptr.wmPress = false
	return st, nil
}
