package guest

import (
	"bytes"
	"strings"
	"testing"
)

// TestCommandUsage: the guest's command line (both binaries') refuses bad
// arguments with exit code 2 and says why, before it starts anything.
// (--exec-app is not run here: it raises this process's OOM score.)
func TestCommandUsage(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"extra"}, "guest takes no arguments"},
		{[]string{"--display", "bad"}, "--display"},
		{[]string{"--nope"}, "-nope"},
	} {
		var out, errb bytes.Buffer
		if code := Command(tt.args, strings.NewReader(""), &out, &errb); code != exitUsage || !strings.Contains(errb.String(), tt.want) {
			t.Errorf("Command(%q) = %d, stderr %q; want %d saying %q", tt.args, code, errb.String(), exitUsage, tt.want)
		}
	}
}
