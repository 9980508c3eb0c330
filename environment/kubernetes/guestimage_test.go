package kubernetes

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/images"
	"github.com/codegirl-games/agentbox/internal/testenv"
)

// TestGuestImage: the image a Pod runs is keyed by the agentbox binary and
// agentbox-guest of its build beside it, whose Pods run agentbox-guest;
// without one (none, another build's) by agentbox alone, whose Pods run
// agentbox; --image naming either image of this agentbox is taken as it
// is, with the guest it carries. What runs, and why, is said (doctor).
func TestGuestImage(t *testing.T) {
	bin := testenv.Build(t, "./cmd/agentbox") // agentbox-guest beside it
	small := filepath.Join(filepath.Dir(bin), "agentbox-guest")
	t.Setenv("AGENTBOX_GUEST_BINARY", "")
	both, err := images.GuestKey(bin, small)
	if err != nil {
		t.Fatal(err)
	}
	whole, err := images.GuestID(bin)
	if err != nil {
		t.Fatal(err)
	}
	place := func(files map[string]string) string {
		dir := t.TempDir()
		for name, src := range files {
			if err := linkOrCopy(src, filepath.Join(dir, name)); err != nil {
				t.Fatal(err)
			}
		}
		return filepath.Join(dir, "agentbox")
	}
	alone := place(map[string]string{"agentbox": bin})
	other := ""
	if out, err := exec.Command("go", "env", "GOROOT").Output(); err == nil {
		gofmt := filepath.Join(strings.TrimSpace(string(out)), "bin", "gofmt")
		if _, err := os.Stat(gofmt); err == nil {
			other = place(map[string]string{"agentbox": bin, "agentbox-guest": gofmt})
		}
	}
	base := testenv.TestImage
	for _, c := range []struct {
		name, bin, image string
		ref, id, command string
		about            string
	}{
		{"both", bin, base, images.GuestRef(base, both), both, images.GuestSmallPath, "run agentbox-guest"},
		{"the default image", bin, "", images.GuestRef(DefaultImage, both), both, images.GuestSmallPath, "carries " + bin + " and " + small},
		{"agentbox alone", alone, base, images.GuestRef(base, whole), whole, images.GuestPath, "no agentbox-guest beside"},
		{"another build's agentbox-guest", other, base, images.GuestRef(base, whole), whole, images.GuestPath, "is not of the build of"},
		{"--image: the image of both", bin, images.GuestRef(base, both), images.GuestRef(base, both), both, images.GuestSmallPath, "run agentbox-guest"},
		{"--image: the image of agentbox alone", bin, images.GuestRef(base, whole), images.GuestRef(base, whole), whole, images.GuestPath, "--image names the image of " + bin + " alone"},
		{"--image: another agentbox's image", bin, base + "-guest-0123456789abcdef", images.GuestRef(base+"-guest-0123456789abcdef", both), both, images.GuestSmallPath, "run agentbox-guest"},
	} {
		if c.bin == "" {
			t.Logf("%s: no other Go binary to stand for it", c.name)
			continue
		}
		g, err := guestImage(environment.Config{Image: c.image, GuestBinary: c.bin})
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if g.ref != c.ref || g.id != c.id || g.command()[0] != c.command || !strings.Contains(g.about, c.about) || !strings.Contains(g.about, g.ref) {
			t.Errorf("%s: %+v, command %v; want %s (key %s) running %s, saying %q", c.name, g, g.command(), c.ref, c.id, c.command, c.about)
		}
		if got := strings.Join(g.command()[1:], " "); got != "guest --sandboxed --await-host" {
			t.Errorf("%s: arguments %q", c.name, got)
		}
	}
	if _, err := guestImage(environment.Config{GuestBinary: filepath.Join(t.TempDir(), "missing")}); err == nil {
		t.Error("a missing agentbox binary gave an image")
	}
}

// linkOrCopy hard-links src to dst, or copies it (mode 0755).
func linkOrCopy(src, dst string) error {
	if os.Link(src, dst) == nil {
		return nil
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
