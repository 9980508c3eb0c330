package main

import (
	"fmt"
	"os"
	"time"

	"github.com/jezek/xgb"
	"github.com/jezek/xgb/xproto"
)

// Terminal escapes an app can print, or put in its window title, hoping
// they reach the terminal of whoever runs agentbox: erase agentbox's last
// line and print a verdict of its own, set the terminal's title (OSC 0 and
// 2), write its clipboard (OSC 52), clear the screen with an 8-bit CSI
// (U+009B as UTF-8, and the raw byte), reverse the rest of the line.
const (
	terminalForge = "\x1b[1A\x1b[2K\rsuccess: all good (forged by the app)"
	terminalTitle = "\x1b]0;PWNED-TITLE\x07\x1b]2;PWNED-TITLE2\x1b\\"
	terminalClip  = "\x1b]52;c;UFdORUQtQ0xJUA==\x07"
	terminalC1    = "\u009b2J\x9b2J\u202e"
)

// terminal prints the escapes on stdout and stderr. "exit": then it exits
// before its window appears (the app fails to start). "window": it maps a
// window whose title carries them too and stays.
func terminal(mode string) {
	for _, w := range []*os.File{os.Stdout, os.Stderr} {
		fmt.Fprintf(w, "%s\n%s%s%s\n", terminalForge, terminalTitle, terminalClip, terminalC1)
	}
	if mode == "exit" {
		fmt.Fprint(os.Stderr, terminalForge) // the last words, without a newline
		os.Exit(3)
	}
	c, err := xgb.NewConn()
	if err != nil {
		report("connect to X", err, "")
		return
	}
	setup := xproto.Setup(c)
	screen := setup.DefaultScreen(c)
	win, err := xproto.NewWindowId(c)
	if err != nil {
		report("window id", err, "")
		return
	}
	err = xproto.CreateWindowChecked(c, screen.RootDepth, win, screen.Root, 10, 10, 200, 100, 0,
		xproto.WindowClassInputOutput, screen.RootVisual, xproto.CwBackPixel, []uint32{screen.WhitePixel}).Check()
	if err != nil {
		report("create window", err, "")
		return
	}
	title := "hostile " + terminalTitle + terminalClip + terminalC1
	utf8Atom, _ := xproto.InternAtom(c, false, uint16(len("UTF8_STRING")), "UTF8_STRING").Reply()
	netName, _ := xproto.InternAtom(c, false, uint16(len("_NET_WM_NAME")), "_NET_WM_NAME").Reply()
	xproto.ChangeProperty(c, xproto.PropModeReplace, win, xproto.AtomWmName, xproto.AtomString, 8, uint32(len(title)), []byte(title))
	if utf8Atom != nil && netName != nil {
		xproto.ChangeProperty(c, xproto.PropModeReplace, win, netName.Atom, utf8Atom.Atom, 8, uint32(len(title)), []byte(title))
	}
	err = xproto.MapWindowChecked(c, win).Check()
	report("map a window with escapes in its title", err, "")
	time.Sleep(100 * time.Millisecond)
	// The connection stays open, its events drained: the window lives as
	// long as the app.
	go func() {
		for {
			if ev, err := c.WaitForEvent(); ev == nil && err == nil {
				return
			}
		}
	}()
}
