package xserver

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/jezek/xgb"
)

func init() {
	// xgb logs protocol noise to stderr by default; the guest's stderr is
	// part of its protocol with the host.
	xgb.Logger = log.New(io.Discard, "", 0)
}

// socketPath maps ":N" or ":N.S" to /tmp/.X11-unix/XN.
func socketPath(display string) (string, error) {
	d := display
	if i := strings.LastIndex(d, ":"); i >= 0 && (d[:i] == "" || d[:i] == "unix") {
		d = d[i+1:]
	} else {
		return "", fmt.Errorf("xserver: unsupported display %q (want \":N\")", display)
	}
	if i := strings.IndexByte(d, '.'); i >= 0 {
		d = d[:i]
	}
	n, err := strconv.Atoi(d)
	if err != nil || n < 0 {
		return "", fmt.Errorf("xserver: bad display %q", display)
	}
	return SocketDir + "/X" + strconv.Itoa(n), nil
}

// dialX connects to display with ctx bounding the dial and the handshake.
// Close the result with closeX.
func dialX(ctx context.Context, display string) (*xgb.Conn, net.Conn, error) {
	path, err := socketPath(display)
	if err != nil {
		return nil, nil, err
	}
	var d net.Dialer
	nc, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, nil, fmt.Errorf("xserver: connect to %s: %w", display, err)
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = nc.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { _ = nc.SetDeadline(time.Now()) })
	xc, err := xgb.NewConnNet(nc)
	stopped := stop()
	if err != nil {
		nc.Close()
		if ctx.Err() != nil {
			return nil, nil, fmt.Errorf("xserver: X handshake with %s: %w", display, ctx.Err())
		}
		return nil, nil, fmt.Errorf("xserver: X handshake with %s: %w", display, err)
	}
	if !stopped {
		// ctx ended during the handshake; the deadline is poisoned.
		closeX(xc, nc)
		return nil, nil, fmt.Errorf("xserver: X handshake with %s: %w", display, ctx.Err())
	}
	_ = nc.SetDeadline(time.Time{})
	return xc, nc, nil
}

// closeX closes an xgb connection without hanging: xgb's Close waits for a
// round trip, which a grabbed server never answers, so the socket is closed
// under it after a short grace.
func closeX(xc *xgb.Conn, nc net.Conn) {
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
