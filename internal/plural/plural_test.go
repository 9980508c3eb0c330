package plural

import "testing"

func TestCount(t *testing.T) {
	for _, c := range []struct {
		got, want string
	}{
		{S(0, "step"), "0 steps"},
		{S(1, "step"), "1 step"},
		{S(2, "step"), "2 steps"},
		{S(-1, "pixel"), "-1 pixel"},
		{Count(1, "line of output", "lines of output"), "1 line of output"},
		{Count(7, "line of output", "lines of output"), "7 lines of output"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}
