package x11

import (
	"context"
	"errors"
	"fmt"
	"io"
)

// ErrTimeout is returned (wrapped) when a call's deadline passes before the X
// server answers. It matches context.DeadlineExceeded with errors.Is too.
var ErrTimeout error = timeoutError{}

type timeoutError struct{}

func (timeoutError) Error() string   { return "x11: the X server did not answer before the deadline" }
func (timeoutError) Timeout() bool   { return true }
func (timeoutError) Unwrap() error   { return context.DeadlineExceeded }
func (timeoutError) Temporary() bool { return true }

// ErrClosed is returned by calls on a Conn that was closed or whose server
// went away.
var ErrClosed = errors.New("x11: connection closed")

// ErrNoXTEST is returned by Open when the server lacks the XTEST extension,
// without which no input can be sent.
var ErrNoXTEST = errors.New("x11: the X server has no XTEST extension")

// ErrUnsupportedFormat is returned by the capture methods when the screen is
// not 24-bit TrueColor stored in 32 bits per pixel, least significant byte
// first (BGRX in memory).
var ErrUnsupportedFormat = errors.New("x11: unsupported screen format (want depth 24, 32 bits per pixel, LSB first)")

// ErrNoSpareKeycode is returned when a keysym is missing from the keyboard
// mapping and no spare keycode is left to bind it to.
var ErrNoSpareKeycode = errors.New("x11: no spare keycode to bind a keysym to")

// ErrBadText is returned (wrapped) by TypeText for text that cannot be typed:
// invalid UTF-8 or control characters other than \n and \t.
var ErrBadText = errors.New("x11: text cannot be typed")

// ErrUnconfirmed is returned (wrapped) when input was not confirmed before
// the action's deadline because the window manager, which had to act on it
// (see press.go), did not answer: a press that needed its window activated
// first was not sent at all; a press on the window manager's own windows
// was delivered, but its effect (a move, a close) may not have happened.
var ErrUnconfirmed = errors.New("x11: input not confirmed")

// ErrBadArgument is returned (wrapped) for out-of-range arguments such as a
// rectangle outside the screen or button 0.
var ErrBadArgument = errors.New("x11: bad argument")

// ctxError converts a finished context into the package's error for op.
func ctxError(ctx context.Context, op string) error {
	err := ctx.Err()
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("x11: %s: %w", op, ErrTimeout)
	}
	return fmt.Errorf("x11: %s: %w", op, err)
}

// xError wraps an error from xgb for op. io.EOF (connection gone) becomes
// ErrClosed.
func xError(op string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, io.EOF) || errors.Is(err, ErrClosed) {
		return fmt.Errorf("x11: %s: %w", op, ErrClosed)
	}
	return fmt.Errorf("x11: %s: %w", op, err)
}

func isContextErr(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)
}

func isClosed(err error) bool { return errors.Is(err, io.EOF) || errors.Is(err, ErrClosed) }
