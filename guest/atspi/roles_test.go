package atspi

import (
	"slices"
	"testing"

	"github.com/codegirl-games/agentbox/observe"
)

// TestRolesAgree keeps observe.Roles (what a policy's selector may name)
// equal to the role names this reader gives.
func TestRolesAgree(t *testing.T) {
	if !slices.Equal(roleNames[:], observe.Roles) {
		t.Fatalf("observe.Roles differs from guest/atspi's roleNames: keep them equal")
	}
}
