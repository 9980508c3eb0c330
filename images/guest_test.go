package images

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestGuestRef(t *testing.T) {
	const id = "0123456789abcdef"
	long := strings.Repeat("t", 130)
	for _, c := range []struct{ base, want string }{
		{"agentbox/runtime:bookworm", "agentbox/runtime:bookworm-guest-" + id},
		{"agentbox/test", "agentbox/test:latest-guest-" + id},
		{"registry:5000/team/app", "registry:5000/team/app:latest-guest-" + id},
		{"registry:5000/team/app:v2", "registry:5000/team/app:v2-guest-" + id},
		{"app@sha256:aabbccddeeff00112233", "app:guest-" + id + "-aabbccddeeff"},
		{"app:v1@sha256:aabbccddeeff00112233", "app:guest-" + id + "-aabbccddeeff"},
		{"app:" + long, "app:" + long[:128-len("-guest-")-len(id)] + "-guest-" + id},
		// The reference `image build --guest` printed, given back: as it is.
		{"agentbox/runtime:bookworm-guest-" + id, "agentbox/runtime:bookworm-guest-" + id},
		{"registry:5000/team/app:latest-guest-" + id, "registry:5000/team/app:latest-guest-" + id},
		// Another guest's image is a base like any other.
		{"agentbox/runtime:bookworm-guest-fedcba9876543210", "agentbox/runtime:bookworm-guest-fedcba9876543210-guest-" + id},
	} {
		got := GuestRef(c.base, id)
		if got != c.want {
			t.Errorf("GuestRef(%q) = %q, want %q", c.base, got, c.want)
		}
		if _, tag := splitTag(got); len(tag) > 128 {
			t.Errorf("GuestRef(%q): tag of %d characters", c.base, len(tag))
		}
	}
}

func TestGuestID(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	os.WriteFile(a, []byte("one binary"), 0o755)
	os.WriteFile(b, []byte("another binary"), 0o755)
	ia, err := GuestID(a)
	if err != nil || len(ia) != 16 {
		t.Fatalf("GuestID = %q, %v", ia, err)
	}
	ib, _ := GuestID(b)
	ia2, _ := GuestID(a)
	if ia == ib || ia != ia2 {
		t.Errorf("ids %q %q %q: want equal for equal content only", ia, ib, ia2)
	}
	if _, err := GuestID(filepath.Join(dir, "missing")); err == nil {
		t.Error("GuestID of a missing file succeeded")
	}
}
