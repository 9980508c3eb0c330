package xdial

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestSocketPath(t *testing.T) {
	tests := []struct {
		display, want string
		bad           bool
	}{
		{":0", SocketDir + "/X0", false},
		{":12.0", SocketDir + "/X12", false},
		{"unix:3", SocketDir + "/X3", false},
		{"localhost:0", "", true},
		{"0", "", true},
		{":x", "", true},
		{":-1", "", true},
	}
	for _, tt := range tests {
		got, err := SocketPath(tt.display)
		if tt.bad {
			if !errors.Is(err, ErrBadDisplay) {
				t.Errorf("SocketPath(%q) = %q, %v; want ErrBadDisplay", tt.display, got, err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("SocketPath(%q) = %q, %v; want %q", tt.display, got, err, tt.want)
		}
	}
}

// A display nobody listens on fails at once with the connect error, and a
// context that has ended is reported as such.
func TestDialFailures(t *testing.T) {
	if _, _, err := Dial(t.Context(), ":9999"); err == nil {
		t.Fatal("Dial(:9999) succeeded")
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Nanosecond)
	defer cancel()
	<-ctx.Done()
	_, _, err := Dial(ctx, ":9999")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Dial with an ended context: %v, want DeadlineExceeded", err)
	}
}
