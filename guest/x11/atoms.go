package x11

import (
	"github.com/jezek/xgb"
	"github.com/jezek/xgb/xproto"
)

// atoms are the non-predefined atoms the Conn uses.
type atoms struct {
	netClientList          xproto.Atom
	netActiveWindow        xproto.Atom
	netWmName              xproto.Atom
	netWmPid               xproto.Atom
	netSupportingWmCheck   xproto.Atom
	utf8String             xproto.Atom
	wmState                xproto.Atom
	netSupported           xproto.Atom
	netFrameExtents        xproto.Atom
	netRequestFrameExtents xproto.Atom
}

// intern interns all atoms with one round trip.
func (a *atoms) intern(xc *xgb.Conn) error {
	names := []struct {
		name string
		dst  *xproto.Atom
	}{
		{"_NET_CLIENT_LIST", &a.netClientList},
		{"_NET_ACTIVE_WINDOW", &a.netActiveWindow},
		{"_NET_WM_NAME", &a.netWmName},
		{"_NET_WM_PID", &a.netWmPid},
		{"_NET_SUPPORTING_WM_CHECK", &a.netSupportingWmCheck},
		{"UTF8_STRING", &a.utf8String},
		{"WM_STATE", &a.wmState},
		{"_NET_SUPPORTED", &a.netSupported},
		{"_NET_FRAME_EXTENTS", &a.netFrameExtents},
		{"_NET_REQUEST_FRAME_EXTENTS", &a.netRequestFrameExtents},
	}
	cookies := make([]xproto.InternAtomCookie, len(names))
	for i, n := range names {
		cookies[i] = xproto.InternAtom(xc, false, uint16(len(n.name)), n.name)
	}
	for i, ck := range cookies {
		r, err := ck.Reply()
		if err != nil {
			return err
		}
		*names[i].dst = r.Atom
	}
	return nil
}
