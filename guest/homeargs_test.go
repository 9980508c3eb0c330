package guest

import (
	"slices"
	"testing"
)

// TestHomeArgs: a leading ~/ in the app's arguments is the home (an input
// named in args), and nothing else is touched.
func TestHomeArgs(t *testing.T) {
	g := &Guest{home: "/tmp/home"}
	got := g.homeArgs([]string{"~/Documents/sales.ods", "~/dir/", "~", "a~/b", "--file=~/x", "~user/x", "-"})
	want := []string{"/tmp/home/Documents/sales.ods", "/tmp/home/dir/", "~", "a~/b", "--file=~/x", "~user/x", "-"}
	if !slices.Equal(got, want) {
		t.Errorf("homeArgs = %q, want %q", got, want)
	}
}
