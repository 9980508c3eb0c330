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

// TestGuestKey: an image of agentbox alone is keyed by its GuestID; one
// that carries agentbox-guest too by both binaries, so that neither the
// whole binary's key nor the small one's names it, and a change of either
// binary changes the key.
func TestGuestKey(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	whole, small := write("agentbox", "the whole agentbox"), write("agentbox-guest", "the guest alone")
	whole2, small2 := write("agentbox2", "another agentbox"), write("agentbox-guest2", "another guest")
	key := func(w, s string) string {
		t.Helper()
		k, err := GuestKey(w, s)
		if err != nil || len(k) != 16 {
			t.Fatalf("GuestKey(%s, %s) = %q, %v", w, s, k, err)
		}
		return k
	}
	id, _ := GuestID(whole)
	sid, _ := GuestID(small)
	if k := key(whole, ""); k != id {
		t.Errorf("GuestKey of agentbox alone = %s, want its GuestID %s", k, id)
	}
	both := key(whole, small)
	if both == id || both == sid {
		t.Errorf("GuestKey of both = %s: the key of one binary alone (%s, %s)", both, id, sid)
	}
	if key(whole, small) != both {
		t.Error("GuestKey is not stable")
	}
	seen := map[string]string{both: "both"}
	for name, k := range map[string]string{
		"another agentbox":       key(whole2, small),
		"another agentbox-guest": key(whole, small2),
		"both others":            key(whole2, small2),
		"swapped":                key(small, whole),
	} {
		if prev, ok := seen[k]; ok {
			t.Errorf("%s has the key of %s (%s)", name, prev, k)
		}
		seen[k] = name
	}
	if _, err := GuestKey(whole, filepath.Join(dir, "missing")); err == nil {
		t.Error("GuestKey with a missing agentbox-guest succeeded")
	}
	if _, err := GuestKey(filepath.Join(dir, "missing"), small); err == nil {
		t.Error("GuestKey with a missing agentbox succeeded")
	}
}
