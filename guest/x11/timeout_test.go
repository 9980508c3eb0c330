package x11

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jezek/xgb/xproto"

	"github.com/codegirl-games/agentbox/guest/xserver"
)

// TestServerGrabTimesOut has another client grab the server: no reply comes,
// and every call must return ErrTimeout by its deadline instead of hanging;
// after the grab the Conn works again.
func TestServerGrabTimesOut(t *testing.T) {
	e := newEnv(t, xserver.Config{}, false)
	c := e.c
	if _, err := c.Capture(testCtx(t, 5*time.Second), nil); err != nil { // set up the SHM segment
		t.Fatal(err)
	}
	grabber := client(t, e.srv.Display())
	if err := xproto.GrabServerChecked(grabber).Check(); err != nil {
		t.Fatal(err)
	}

	const deadline = 300 * time.Millisecond
	calls := map[string]func(ctx context.Context) error{
		"Capture":    func(ctx context.Context) error { _, err := c.Capture(ctx, nil); return err },
		"Cursor":     func(ctx context.Context) error { _, _, err := c.Cursor(ctx); return err },
		"MouseMove":  func(ctx context.Context) error { return c.MouseMove(ctx, 5, 5) },
		"TypeText":   func(ctx context.Context) error { return c.TypeText(ctx, "é", 0) },
		"Windows":    func(ctx context.Context) error { _, err := c.Windows(ctx); return err },
		"ReleaseAll": c.ReleaseAll,
	}
	for _, round := range []string{"first", "queued behind the first"} {
		for name, call := range calls {
			ctx, cancel := context.WithTimeout(t.Context(), deadline)
			t0 := time.Now()
			err := call(ctx)
			took := time.Since(t0)
			cancel()
			if !errors.Is(err, ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("%s (%s call) during a server grab: %v, want ErrTimeout", name, round, err)
			}
			if took > hangBound {
				t.Errorf("%s (%s call) took %v with a %v deadline", name, round, took, deadline)
			}
		}
	}
	// Opening a second connection during the grab also respects its deadline.
	ctx, cancel := context.WithTimeout(t.Context(), deadline)
	t0 := time.Now()
	c2, err := Open(ctx, e.srv.Display())
	cancel()
	if err == nil {
		c2.Close()
		t.Errorf("Open during a grab succeeded")
	} else if !errors.Is(err, ErrTimeout) || time.Since(t0) > hangBound {
		t.Errorf("Open during a grab: %v after %v", err, time.Since(t0))
	}

	if err := xproto.UngrabServerChecked(grabber).Check(); err != nil {
		t.Fatal(err)
	}
	ctx = testCtx(t, 10*time.Second)
	if _, err := c.Capture(ctx, nil); err != nil {
		t.Fatalf("Capture after the grab: %v", err)
	}
	if err := c.MouseMove(ctx, 7, 8); err != nil {
		t.Fatalf("MouseMove after the grab: %v", err)
	}
	if x, y, err := c.Cursor(ctx); err != nil || x != 7 || y != 8 {
		t.Fatalf("Cursor after the grab: %d,%d %v", x, y, err)
	}
	if err := c.TypeText(ctx, "ok é", 0); err != nil {
		t.Fatalf("TypeText after the grab: %v", err)
	}
	if err := c.ReleaseAll(ctx); err != nil {
		t.Fatal(err)
	}
}

// hangBound tells a call that returned late on a busy machine from one
// that hung: during the grab no reply comes until the test ends it.
const hangBound = 20 * time.Second

// TestCloseDuringGrab: Close never hangs, even when the server is grabbed.
func TestCloseDuringGrab(t *testing.T) {
	e := newEnv(t, xserver.Config{}, false)
	grabber := client(t, e.srv.Display())
	if err := xproto.GrabServerChecked(grabber).Check(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	_, _ = e.c.Capture(ctx, nil) // leave a request stalled
	cancel()
	t0 := time.Now()
	e.c.Close()
	if took := time.Since(t0); took > hangBound {
		t.Fatalf("Close took %v during a grab", took)
	}
	if _, err := e.c.Capture(t.Context(), nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("Capture after Close: %v", err)
	}
}

func TestServerGone(t *testing.T) {
	e := newEnv(t, xserver.Config{}, false)
	if err := e.srv.Stop(testCtx(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-e.c.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("Done not closed after the server exited")
	}
	if _, err := e.c.Capture(testCtx(t, 5*time.Second), nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("Capture after the server exited: %v", err)
	}
}
