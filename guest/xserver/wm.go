package xserver

import (
	"context"
	_ "embed"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/jezek/xgb"
	"github.com/jezek/xgb/xproto"

	"github.com/codegirl-games/agentbox/guest/xdial"
)

//go:embed openbox/rc.xml
var rcXML string

//go:embed openbox/menu.xml
var menuXML string

// ErrNoWM is returned by StartWM when the window manager executable is not
// installed. The caller may continue without a window manager.
var ErrNoWM = errors.New("xserver: window manager (openbox) not installed")

// DefaultOpenbox is the window manager executable StartWM looks up in PATH.
const DefaultOpenbox = "openbox"

// WMConfig describes the window manager to start.
type WMConfig struct {
	// Openbox is the executable, a path or a name looked up in PATH
	// (default "openbox").
	Openbox string
	// Dir is the directory rc.xml and menu.xml are written to (created if
	// missing); it must be writable, e.g. $HOME/.config/openbox on a tmpfs.
	// "" means a new directory under os.TempDir(), removed again by Stop.
	Dir string
	// ExtraArgs are appended to the command line.
	ExtraArgs []string
	// Env is the environment; nil means the current process's. DISPLAY is
	// set to the display StartWM was given either way.
	Env []string
	// Stderr receives Openbox's stdout and stderr (bounded by the caller; it
	// prints its messages on stdout); nil discards them.
	Stderr io.Writer
}

// WM is a running Openbox.
type WM struct {
	p       *proc
	rc      string
	tmpDir  string // removed by Stop when non-empty
	readyIn time.Duration

	// The readiness probe's window and its connection, kept open (its
	// events drained) until Stop: see "The probe's connection outlives
	// the start" in StartWM.
	probe      xproto.Window
	closeProbe func() // once only (sync.OnceFunc)
}

// StartWM starts Openbox on display with agentbox's configuration (see
// openbox/rc.xml: new windows get the focus, focus does not follow the mouse,
// no key bindings) and returns once Openbox manages the screen: it has set
// _NET_SUPPORTING_WM_CHECK on the root window and its event loop answers
// requests (see the comment in the code for why the property alone is not
// enough). Both are watched with PropertyNotify events selected before
// Openbox starts, so no moment can be missed. ctx bounds the start only.
//
// If Openbox is not installed the error is ErrNoWM (wrapping exec.ErrNotFound).
// If it exits before it is ready (another window manager runs, bad display)
// the error carries the tail of its stderr.
func StartWM(ctx context.Context, display string, cfg WMConfig) (wm *WM, err error) {
	t0 := time.Now()
	if cfg.Openbox == "" {
		cfg.Openbox = DefaultOpenbox
	}
	path, err := exec.LookPath(cfg.Openbox)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoWM, err)
	}

	dir, tmpDir := cfg.Dir, ""
	if dir == "" {
		dir, err = os.MkdirTemp("", "agentbox-openbox-")
		if err != nil {
			return nil, fmt.Errorf("xserver: openbox config dir: %w", err)
		}
		tmpDir = dir
	} else if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("xserver: openbox config dir: %w", err)
	}
	defer func() {
		if err != nil && tmpDir != "" {
			os.RemoveAll(tmpDir)
		}
	}()
	rc, err := writeOpenboxConfig(dir)
	if err != nil {
		return nil, err
	}

	// Watch the root window before Openbox exists.
	xc, nc, err := xdial.Dial(ctx, display)
	if err != nil {
		return nil, fmt.Errorf("xserver: %w", err)
	}
	closeProbe := sync.OnceFunc(func() { xdial.Close(xc, nc) })
	stopEvents := make(chan struct{})
	defer func() {
		close(stopEvents)
		if closeProbe != nil {
			closeProbe()
		}
	}()
	events := make(chan xgb.Event)
	go func() {
		// Always drain, also after StartWM returned (stopEvents): xgb
		// stops delivering replies when its event buffer is full.
		defer close(events)
		for {
			ev, xerr := xc.WaitForEvent()
			if ev == nil && xerr == nil {
				return
			}
			if ev == nil {
				continue
			}
			select {
			case events <- ev:
			case <-stopEvents:
			}
		}
	}()
	w, err := newWatcher(ctx, xc)
	if err != nil {
		return nil, err
	}

	env := cfg.Env
	if env == nil {
		env = os.Environ()
	}
	env = setEnv(env, "DISPLAY", display)
	args := append([]string{"--config-file", rc, "--sm-disable"}, cfg.ExtraArgs...)
	p, err := startProc("openbox", path, args, env, cfg.Stderr, nil)
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*WM, error) {
		_ = p.terminate(context.Background())
		return nil, err
	}
	// Two stages. First Openbox sets _NET_SUPPORTING_WM_CHECK, early in its
	// start. Then it must be running its event loop: Openbox 3.6 can pull a
	// MapRequest that arrives during its start into a private queue its main
	// loop does not look at until the next X event arrives, so a window
	// mapped right after the check appears can stay unmanaged (and unmapped)
	// indefinitely (seen here in about one start of three). Openbox answers
	// _NET_REQUEST_FRAME_EXTENTS only from its event loop, so the second
	// stage sends that request for a hidden probe window, repeating it every
	// probeInterval (each request is also new input that wakes the loop),
	// until Openbox sets _NET_FRAME_EXTENTS on the probe.
	var probe *time.Ticker
	var probeC <-chan time.Time
	defer func() {
		if probe != nil {
			probe.Stop()
		}
	}()
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				return fail(fmt.Errorf("xserver: connection to %s lost while starting openbox", display))
			}
			pn, isPN := ev.(xproto.PropertyNotifyEvent)
			if !isPN || pn.State != xproto.PropertyNewValue {
				continue
			}
			switch {
			case pn.Window == w.root && pn.Atom == w.check && probe == nil:
				w.requestExtents()
				probe = time.NewTicker(probeInterval)
				probeC = probe.C
			case pn.Window == w.probe && pn.Atom == w.extents && probe != nil:
				// Only after our own request: a window manager already
				// running may still answer requests of an earlier StartWM
				// whose probe window had the same (reused) ID.
				//
				// The probe's connection outlives the start. Requests
				// repeated while Openbox was busy are still queued for
				// it, and it handles each as it would a new window of
				// that ID (it pretends to manage it to work out the
				// frame). Were the probe destroyed and the connection
				// closed, the X server would give the next client (the
				// app) the same ID range, and its first window the
				// probe's ID: Openbox, reading the 1×1 probe and acting
				// on the app's window, then placed the app as a 1×1
				// window, centred (the mover's 640×480 window at (318,
				// 229) instead of (0, 0), under load;
				// TestWMProbeIDNotReused). Kept open, the probe keeps its ID
				// until Stop; its root window events are no longer asked
				// for.
				w.quiet()
				wm := &WM{p: p, rc: rc, tmpDir: tmpDir, readyIn: time.Since(t0), probe: w.probe, closeProbe: closeProbe}
				closeProbe = nil
				return wm, nil
			}
		case <-probeC:
			w.requestExtents()
		case <-p.done:
			return nil, p.exitError("exited before it was ready")
		case <-ctx.Done():
			return fail(fmt.Errorf("xserver: waiting for openbox to be ready: %w", ctx.Err()))
		}
	}
}

// probeInterval is how often the readiness probe is repeated until Openbox
// answers it.
const probeInterval = 20 * time.Millisecond

// watcher observes the root window and a probe window while Openbox starts.
type watcher struct {
	xc                     *xgb.Conn
	root, probe            xproto.Window
	check, extents, reqExt xproto.Atom
}

// newWatcher selects PropertyChange on the root window, creates the unmapped
// probe window (also watched) and interns the atoms, all before Openbox
// exists, bounded by ctx.
func newWatcher(ctx context.Context, xc *xgb.Conn) (*watcher, error) {
	w := &watcher{xc: xc}
	done := make(chan error, 1)
	go func() {
		scr := xproto.Setup(xc).DefaultScreen(xc)
		w.root = scr.Root
		err := xproto.ChangeWindowAttributesChecked(xc, w.root, xproto.CwEventMask,
			[]uint32{xproto.EventMaskPropertyChange}).Check()
		if err != nil {
			done <- err
			return
		}
		wid, err := xproto.NewWindowId(xc)
		if err != nil {
			done <- err
			return
		}
		w.probe = wid
		err = xproto.CreateWindowChecked(xc, 0, wid, w.root, -10, -10, 1, 1, 0,
			xproto.WindowClassInputOnly, 0, xproto.CwEventMask,
			[]uint32{xproto.EventMaskPropertyChange}).Check()
		if err != nil {
			done <- err
			return
		}
		for _, a := range []struct {
			name string
			dst  *xproto.Atom
		}{
			{"_NET_SUPPORTING_WM_CHECK", &w.check},
			{"_NET_FRAME_EXTENTS", &w.extents},
			{"_NET_REQUEST_FRAME_EXTENTS", &w.reqExt},
		} {
			r, err := xproto.InternAtom(xc, false, uint16(len(a.name)), a.name).Reply()
			if err != nil {
				done <- err
				return
			}
			*a.dst = r.Atom
		}
		done <- nil
	}()
	select {
	case err := <-done:
		if err != nil {
			return nil, fmt.Errorf("xserver: watch root window: %w", err)
		}
		return w, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("xserver: watch root window: %w", ctx.Err())
	}
}

// requestExtents sends _NET_REQUEST_FRAME_EXTENTS for the probe window
// (unchecked; nothing to wait for).
func (w *watcher) requestExtents() {
	ev := xproto.ClientMessageEvent{
		Format: 32,
		Window: w.probe,
		Type:   w.reqExt,
		Data:   xproto.ClientMessageDataUnionData32New(make([]uint32, 5)),
	}
	xproto.SendEvent(w.xc, false, w.root,
		xproto.EventMaskSubstructureRedirect|xproto.EventMaskSubstructureNotify, string(ev.Bytes()))
}

// quiet stops the root window's events to the watcher (unchecked).
func (w *watcher) quiet() {
	xproto.ChangeWindowAttributes(w.xc, w.root, xproto.CwEventMask, []uint32{0})
}

// writeOpenboxConfig writes rc.xml and menu.xml into dir and returns the
// path of rc.xml.
func writeOpenboxConfig(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("xserver: %w", err)
	}
	menu := filepath.Join(dir, "menu.xml")
	var esc strings.Builder
	if err := xml.EscapeText(&esc, []byte(menu)); err != nil {
		return "", fmt.Errorf("xserver: %w", err)
	}
	rc := filepath.Join(dir, "rc.xml")
	if err := os.WriteFile(menu, []byte(menuXML), 0o600); err != nil {
		return "", fmt.Errorf("xserver: write openbox menu: %w", err)
	}
	if err := os.WriteFile(rc, []byte(strings.Replace(rcXML, "{{MENU}}", esc.String(), 1)), 0o600); err != nil {
		return "", fmt.Errorf("xserver: write openbox config: %w", err)
	}
	return rc, nil
}

// setEnv returns env with key set to value (replacing earlier settings).
func setEnv(env []string, key, value string) []string {
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if !strings.HasPrefix(kv, key+"=") {
			out = append(out, kv)
		}
	}
	return append(out, key+"="+value)
}

// ConfigFile returns the path of the rc.xml Openbox was started with.
func (w *WM) ConfigFile() string { return w.rc }

// Pid returns the process id of Openbox.
func (w *WM) Pid() int { return w.p.pid() }

// ReadyAfter returns how long StartWM took until Openbox managed the screen.
func (w *WM) ReadyAfter() time.Duration { return w.readyIn }

// Done is closed when Openbox has exited.
func (w *WM) Done() <-chan struct{} { return w.p.done }

// Stop stops Openbox like Server.Stop, closes the readiness probe's
// connection and removes the configuration directory if StartWM created
// it.
func (w *WM) Stop(ctx context.Context) error {
	err := w.p.terminate(ctx)
	w.closeProbe()
	if w.tmpDir != "" {
		if rerr := os.RemoveAll(w.tmpDir); rerr != nil && err == nil {
			err = fmt.Errorf("xserver: %w", rerr)
		}
	}
	return err
}
