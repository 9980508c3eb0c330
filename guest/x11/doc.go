// Package x11 is the guest's single connection to its X server: screen
// capture (MIT-SHM, falling back to core GetImage), keyboard and mouse input
// through the XTEST extension, and the list of top-level windows with change
// notifications. It speaks the protocol through github.com/jezek/xgb and
// starts no helper processes.
//
// # Capture
//
// Capture and CaptureRect copy the screen out; CaptureShared hands the
// MIT-SHM segment itself to a callback. CaptureDamaged does the same for
// only what changed: where the server offers DAMAGE it keeps the last
// frame, captures nothing when the server reports no damage since, and
// only the damaged rows otherwise (see damage.go); WatchDamage reports
// damage as it happens.
//
// # Deadlines
//
// Every method that talks to the server takes a context and returns by its
// deadline: a hostile client can grab the server (XGrabServer) and then no
// reply arrives. When ctx's deadline passes first the method returns an error
// matching ErrTimeout (which also matches context.DeadlineExceeded); when ctx
// is cancelled it returns an error matching context.Canceled. A context
// without deadline or cancellation may wait forever.
//
// A timed-out request stays in flight, and the Conn is not marked broken.
// Calls are grouped in three lanes (capture; keyboard and mouse input;
// window and pointer queries); a call waits, within its own deadline, for
// the stalled request of its lane, so requests of one lane never interleave
// with a half-finished one, and the Conn recovers by itself once the server
// answers again (when the grab ends). State the Conn tracks may lag behind
// after an input timeout: a key press whose release timed out still counts
// as held, so ReleaseAll releases it. When the server is gone (Xvfb exited)
// or Close was called, methods return ErrClosed.
//
// # Input
//
// Each input method sends XTEST events followed by one GetInputFocus round
// trip, so when it returns the server has processed the events and a capture
// taken next shows their effect (as far as the application has redrawn).
// Methods that press a mouse button also wait for the window manager to
// handle the press (see wmsync.go): Openbox freezes the pointer on a click
// until it has replayed the click to the application.
//
// Keysyms become keycodes as in xdotool's xdo.c: a keysym found in column 0
// of the core keyboard mapping is pressed alone, one found in column 1 with
// Shift_L around it; any other keysym is bound to a spare keycode (all
// columns NoSymbol; Xvfb has 19) with ChangeKeyboardMapping, written into
// columns 0 and 1 so that no modifier is needed, and the mapping change is
// synced before the key event. Spares are kept bound (no unbinding after the
// key, unlike xdotool) and reused least-recently-used first, never within
// 250 ms of their last press (see reuseAge), and nothing is bound within
// 250 ms of the Conn's first key press (see bind). TypeText binds the
// text's missing keysyms before typing its first character (see prebind).
//
// TypeText clears active modifiers as xdotool's type does: modifier keys
// that are down are released and a locked Caps Lock is switched off for the
// duration of the text, then restored. Multi-clicks are spaced by
// DefaultClickInterval (40 ms).
//
// # Windows
//
// Open selects PropertyChange and SubstructureNotify on the root window, so
// no window created after Open is missed: open the Conn before starting the
// application. Windows lists _NET_CLIENT_LIST when a window manager keeps
// one, otherwise the viewable children of the root window; titles come from
// _NET_WM_NAME, falling back to WM_NAME. WatchWindows and WindowsChanged
// notify of changes without polling.
package x11
