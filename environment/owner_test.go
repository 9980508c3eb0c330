package environment

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/codegirl-games/agentbox/internal/owner"
)

func TestOwnerAlive(t *testing.T) {
	self := strconv.Itoa(os.Getpid())
	start := owner.Start(os.Getpid())
	if start == 0 {
		t.Fatal("no start time for this process")
	}
	for _, tt := range []struct {
		name, pid, start string
		alive            bool
		why              string
	}{
		{"this process", self, strconv.FormatUint(start, 10), true, ""},
		{"this process, no start recorded", self, "", true, ""},
		{"PID reused", self, strconv.FormatUint(start+1, 10), false, "reused by another process"},
		{"no owner", "", "", false, "no owner recorded"},
		{"not a number", "x1", "", false, "no owner recorded"},
		{"gone", "2147483647", "", false, "is gone"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			alive, why := OwnerAlive(tt.pid, tt.start)
			if alive != tt.alive || !strings.Contains(why, tt.why) {
				t.Errorf("OwnerAlive(%q, %q) = %v, %q; want %v, %q", tt.pid, tt.start, alive, why, tt.alive, tt.why)
			}
		})
	}
}
