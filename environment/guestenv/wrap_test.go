package guestenv

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/wire"
)

// TestWrapClassifies: a call's error is the guest's (environment.ErrGuest,
// so that the sandbox explains how it ended) when the stream ended, even
// when the stream's end wraps context.Canceled (a Kubernetes Pod being
// deleted cancels its attach stream); the caller's own context ending is
// not.
func TestWrapClassifies(t *testing.T) {
	closedBy := func(why error) error {
		c := wire.NewConn(nil, nil)
		c.Abort(why)
		return fmt.Errorf("wire: act: %w", c.Err())
	}
	for _, tc := range []struct {
		name  string
		err   error
		guest bool
	}{
		{"stream ended by the backend's cancel", closedBy(context.Canceled), true},
		{"stream ended at EOF", closedBy(nil), true},
		{"stream broke", closedBy(errors.New("read: connection reset by peer")), true},
		{"caller cancelled", fmt.Errorf("wire: act: %w", context.Canceled), false},
		{"caller's deadline", fmt.Errorf("wire: act: %w", context.DeadlineExceeded), false},
		{"refused by the guest", &wire.RemoteError{Code: wire.CodeInvalid, Message: "bad key"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := (&Client{}).wrap("act", tc.err)
			if got := errors.Is(err, environment.ErrGuest); got != tc.guest {
				t.Errorf("wrap(%v) = %v: a guest failure %v, want %v", tc.err, err, got, tc.guest)
			}
		})
	}
}
