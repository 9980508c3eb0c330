// Package xserver starts and stops the guest's display: one Xvfb server and,
// optionally, the Openbox window manager on it.
//
// Everything here works inside the hardened sandbox the guest runs in: a
// read-only root, a non-root uid, HOME and /tmp on tmpfs and no network. The
// only files written are the X socket directory /tmp/.X11-unix (created with
// mode 1777 if missing), the socket Xvfb creates in it, and the Openbox
// configuration written to a directory the caller names (or a temporary one).
//
// # Xvfb command line
//
// Start runs
//
//	Xvfb [:N] -displayfd 3 -screen 0 WxHxD -nolisten tcp -noreset \
//	     +extension XTEST +extension MIT-SHM -dpi 96 [ExtraArgs...]
//
// and the reasons for each flag are:
//
//   - -displayfd 3: Xvfb writes its display number to fd 3 once it accepts
//     connections. It is the only readiness signal used: no sleeps, no polling
//     of the socket. Without an explicit display Xvfb picks the first free
//     number itself.
//   - -nolisten tcp: no TCP listener (already the default of Xvfb 21.1, stated
//     so that a different build cannot open a port).
//   - the abstract-namespace socket ("local") is deliberately left on. With
//     -displayfd Xvfb takes no lock file and decides that a display number is
//     taken only when binding one of its listeners fails; the filesystem socket
//     /tmp/.X11-unix/X<n> is unlinked and re-bound, so it never fails. With
//     -nolisten local two servers sharing one /tmp both choose :0 and the
//     second silently steals the first one's socket (measured with Xvfb
//     21.1.7). The abstract socket lives in the network namespace, so inside a
//     sandbox with its own network namespace (docker --network none, bwrap
//     --unshare-net) it is as private as the file.
//   - -noreset: the server keeps its state when the last client disconnects
//     (the guest may reconnect while the app keeps running).
//   - +extension XTEST, +extension MIT-SHM: both are on by default; naming
//     them makes the dependency explicit and survives a build with other
//     defaults. XTEST is required for input, MIT-SHM makes capture ~10× faster.
//   - -dpi 96: a fixed, conventional resolution so toolkits lay out the same
//     way on every machine.
//   - no -ac: without -auth the server already admits clients on the local
//     sockets (host-based access for "local" connections), which is all the
//     guest and the app need. -ac would additionally switch access control off
//     for any listener a future flag might open. Nothing else runs in the
//     sandbox; a backend that cannot give the sandbox its own network
//     namespace should add cookie authentication (-auth) instead.
//
// # Lock files
//
// With -displayfd Xvfb neither creates nor honours /tmp/.X<n>-lock, so a
// stale lock file left by a killed server cannot block a start: stale locks
// are moot for this package. A stale socket file is unlinked and replaced by
// Xvfb. Servers started without -displayfd (not by this package) still use
// lock files; they cannot take a number in use by one of ours because binding
// the abstract socket fails.
//
// The socket directory and lock directory are compiled into Xvfb as /tmp;
// Config.RuntimeDir exists to make that explicit and rejects anything else.
//
// # Start-up cost
//
// Measured here (Xvfb 21.1.7, 2 vCPU, p50 of 10): Xvfb ready in about 75 ms
// without GLX and 180–280 ms with it (Mesa's software renderer, linked
// against LLVM, is loaded at start), plus about 60 ms of xkbcomp in both;
// Openbox ready in 130–190 ms. GLX stays on by default because games and
// many toolkits need OpenGL; Config.NoGLX leaves it out for an app whose
// manifest says it draws without OpenGL ("opengl": false).
//
// # Window manager
//
// StartWM runs Openbox with the embedded openbox/rc.xml and openbox/menu.xml:
// new windows get the focus, focus does not follow the mouse, there are no key
// bindings at all (so Alt+Tab, Ctrl+Alt+arrows, Super+… reach the
// application), a click in a window focuses and raises it, the title bar
// moves and the borders resize, one desktop, no menus bound. Readiness is
// _NET_SUPPORTING_WM_CHECK on the root window followed by an answer from
// Openbox's event loop (see StartWM): with the property alone a window mapped
// right away is lost about one start in three.
package xserver
