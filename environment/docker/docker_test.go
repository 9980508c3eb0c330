package docker

import (
	"errors"
	"strings"
	"testing"

	"github.com/codegirl-games/agentbox/environment"
)

func TestGuestBinaryMustBeStatic(t *testing.T) {
	if _, err := GuestBinary("/bin/true"); !errors.Is(err, environment.ErrGuest) || !strings.Contains(err.Error(), "dynamically linked") {
		t.Errorf("GuestBinary(/bin/true) = %v; want ErrGuest saying it is dynamically linked", err)
	}
}
