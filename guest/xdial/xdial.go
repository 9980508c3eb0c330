// Package xdial opens and closes the guest's raw X11 connections: a context
// bounds the connect and the handshake, and closing never hangs on a server
// that has stopped answering (XGrabServer). guest/x11 (input, capture,
// windows) and guest/xserver (readiness of Xvfb and Openbox) both dial
// through it.
package xdial

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/jezek/xgb"
)

// SocketDir is where an X server on this machine listens (compiled into
// Xvfb).
const SocketDir = "/tmp/.X11-unix"

// ErrBadDisplay marks a display name that is not a local ":N".
var ErrBadDisplay = errors.New("bad display")

func init() {
	// xgb logs protocol noise to stderr by default; the guest's stderr is
	// part of its protocol with the host.
	xgb.Logger = log.New(io.Discard, "", 0)
}

// SocketPath maps ":N", ":N.S" or "unix:N" to SocketDir/XN.
func SocketPath(display string) (string, error) {
	i := strings.LastIndex(display, ":")
	if i < 0 || (display[:i] != "" && display[:i] != "unix") {
		return "", fmt.Errorf("%w %q (want \":N\")", ErrBadDisplay, display)
	}
	d := display[i+1:]
	if j := strings.IndexByte(d, '.'); j >= 0 {
		d = d[:j]
	}
	n, err := strconv.Atoi(d)
	if err != nil || n < 0 {
		return "", fmt.Errorf("%w %q", ErrBadDisplay, display)
	}
	return SocketDir + "/X" + strconv.Itoa(n), nil
}

// Dial connects to display. ctx bounds the connect and xgb's synchronous
// handshake (through the socket's deadline, which cancellation poisons
// too); when ctx ends first the error wraps ctx.Err(). Close the result
// with Close.
func Dial(ctx context.Context, display string) (*xgb.Conn, net.Conn, error) {
	path, err := SocketPath(display)
	if err != nil {
		return nil, nil, err
	}
	var d net.Dialer
	nc, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		if ctx.Err() != nil {
			return nil, nil, fmt.Errorf("connect to %s: %w", display, ctx.Err())
		}
		return nil, nil, fmt.Errorf("connect to %s: %w", display, err)
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = nc.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { _ = nc.SetDeadline(time.Now()) })
	xc, err := xgb.NewConnNet(nc)
	if !stop() || err != nil {
		if xc != nil {
			Close(xc, nc)
		}
		nc.Close()
		if ctx.Err() != nil || errors.Is(err, os.ErrDeadlineExceeded) {
			// The socket deadline is ctx's; it may fire a moment before ctx.
			<-ctx.Done()
			return nil, nil, fmt.Errorf("handshake with the X server at %s: %w", display, ctx.Err())
		}
		return nil, nil, fmt.Errorf("handshake with the X server at %s: %w", display, err)
	}
	_ = nc.SetDeadline(time.Time{})
	return xc, nc, nil
}

// Close closes an xgb connection without hanging: xgb's Close waits for a
// round trip, which a grabbed server never answers, so the socket is
// closed under it after a short grace.
func Close(xc *xgb.Conn, nc net.Conn) {
	done := make(chan struct{})
	go func() {
		xc.Close()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(200 * time.Millisecond):
	}
	nc.Close()
}
