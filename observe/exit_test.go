package observe

import (
	"fmt"
	"testing"
)

// TestExitString: the one wording of how the app ended, used by the run's
// message, the guest's errors, the report, the model prompt and scripts.
func TestExitString(t *testing.T) {
	for _, c := range []struct {
		e    *Exit
		want string
	}{
		{nil, "exit status unknown"},
		{&Exit{}, "exit code 0"},
		{&Exit{Code: 3}, "exit code 3"},
		{&Exit{Code: -1, Signal: "SIGSEGV"}, "killed by signal SIGSEGV"},
		{&Exit{Code: -1, Signal: "SIGKILL", OOM: true}, "killed by the OOM killer (signal SIGKILL)"},
		{&Exit{OOM: true}, "killed by the OOM killer"},
		{&Exit{Code: -1, Signal: "SIGTERM", Stopped: "the guest received SIGTERM"}, "the guest received SIGTERM (killed by signal SIGTERM)"},
		{&Exit{Stopped: StoppedAtEnd}, "stopped by agentbox at the end of the run (exit code 0)"},
	} {
		if got := c.e.String(); got != c.want {
			t.Errorf("%+v: %q, want %q", c.e, got, c.want)
		}
		if got := fmt.Sprintf("%v", c.e); got != c.want {
			t.Errorf("%%v of %+v: %q, want %q", c.e, got, c.want)
		}
	}
}
