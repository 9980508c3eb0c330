package docker

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/codegirl-games/agentbox/environment"
)

func TestGuestBinaryMustBeStatic(t *testing.T) {
	if _, err := GuestBinary("/bin/true"); !errors.Is(err, environment.ErrGuest) || !strings.Contains(err.Error(), "dynamically linked") {
		t.Errorf("GuestBinary(/bin/true) = %v; want ErrGuest saying it is dynamically linked", err)
	}
}

func TestRetryStalePaused(t *testing.T) {
	refused := errors.New("Error response from daemon: Container 2b7bea77d8f1 is not paused")
	other := errors.New("Error response from daemon: No such container: 2b7bea77d8f1")
	// as the project's CI saw it on a busy machine (cgroup v1)
	freeze := errors.New("Error response from daemon: Cannot pause container 302a6a26c0aa: OCI runtime pause failed: unable to freeze: unknown")
	tests := []struct {
		name    string
		errs    []error // op's results in turn; nil after the last
		within  time.Duration
		want    error
		wantOps int
	}{
		{"succeeds at once", nil, time.Second, nil, 1},
		{"stale flag, then right", []error{refused, refused}, time.Second, nil, 3},
		{"other errors are not retried", []error{other}, time.Second, other, 1},
		{"cgroup v1 freezer stuck in FREEZING, then frozen", []error{freeze, refused}, time.Second, nil, 3},
		{"gives up after within", []error{refused, refused, refused, refused, refused, refused, refused, refused}, 40 * time.Millisecond, refused, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ops := 0
			err := retryStalePaused(t.Context(), tt.within, []string{"is not paused", cgroup1FreezeFailed}, func(context.Context) error {
				ops++
				if ops <= len(tt.errs) {
					return tt.errs[ops-1]
				}
				return nil
			})
			if !errors.Is(err, tt.want) {
				t.Errorf("err = %v, want %v", err, tt.want)
			}
			if tt.wantOps > 0 && ops != tt.wantOps {
				t.Errorf("%d calls, want %d", ops, tt.wantOps)
			}
			if tt.wantOps == 0 && (ops < 2 || ops >= len(tt.errs)) {
				t.Errorf("%d calls: want a few retries, then the refusal before the errors ran out", ops)
			}
		})
	}
	t.Run("context ends the retries", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		err := retryStalePaused(ctx, time.Second, []string{"is not paused"}, func(context.Context) error { return refused })
		if !errors.Is(err, refused) || !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v, want the refusal and context.Canceled", err)
		}
	})
}
