package docker

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/codegirl-games/agentbox/images"
	"github.com/codegirl-games/agentbox/internal/testenv"
)

// TestGuestContextTar: the context holds the Dockerfile and, in "opt",
// the binaries, executable and owned by root: agentbox alone, or with
// agentbox-guest.
func TestGuestContextTar(t *testing.T) {
	dir := t.TempDir()
	whole, small := filepath.Join(dir, "agentbox"), filepath.Join(dir, "agentbox-guest")
	os.WriteFile(whole, []byte("\x7fELF binary"), 0o755)
	os.WriteFile(small, []byte("\x7fELF guest"), 0o755)
	entries := func(whole, small string) map[string]*tar.Header {
		t.Helper()
		data, err := guestContextTar([]byte("FROM x\n"), whole, small)
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(strings.NewReader(string(data)))
		got := map[string]*tar.Header{}
		for {
			h, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			got[h.Name] = h
		}
		return got
	}
	got := entries(whole, small)
	if h := got["opt/agentbox"]; h == nil || h.Mode != 0o555 || h.Uid != 0 || h.Size != 11 {
		t.Errorf("agentbox entry = %+v", h)
	}
	if h := got["opt/agentbox-guest"]; h == nil || h.Mode != 0o555 || h.Uid != 0 || h.Size != 10 {
		t.Errorf("agentbox-guest entry = %+v", h)
	}
	if h := got["Dockerfile"]; h == nil || h.Size != 7 {
		t.Errorf("Dockerfile entry = %+v", h)
	}
	if got := entries(whole, ""); got["opt/agentbox"] == nil || got["opt/agentbox-guest"] != nil {
		t.Errorf("agentbox alone: entries %v", got)
	}
	if _, err := guestContextTar(nil, whole, filepath.Join(dir, "missing")); err == nil {
		t.Error("a missing agentbox-guest made a context")
	}
}

// TestBuildGuestImage: the binary is layered into the image under
// IMAGE-guest-HASH, byte for byte and executable; a second build is up to
// date; --save writes an archive that names the tag.
func TestBuildGuestImage(t *testing.T) {
	testenv.Require(t, testenv.Image(testenv.RuntimeImage))
	bin := testenv.Build(t, "./cmd/agentbox")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cli, err := NewClient(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	save := filepath.Join(t.TempDir(), "guest.tar")
	res, err := BuildGuestImage(ctx, cli, GuestImageOptions{Base: testenv.RuntimeImage, Binary: bin, Save: save})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cli.ImageRemove(context.Background(), res.Ref, client.ImageRemoveOptions{})
	})
	// testenv.Build puts agentbox-guest of the same build beside it:
	// the image carries both, keyed by both.
	small := filepath.Join(filepath.Dir(bin), "agentbox-guest")
	id, _ := images.GuestKey(bin, small)
	smallID, _ := images.GuestID(small)
	if res.Ref != images.GuestRef(testenv.RuntimeImage, id) || res.GuestID != id || res.Small != small {
		t.Errorf("ref %s, id %s, small %q; want %s carrying %s", res.Ref, res.GuestID, res.Small, images.GuestRef(testenv.RuntimeImage, id), small)
	}
	info, err := inspectBuildImage(ctx, cli, res.Ref)
	if err != nil || info.labels[images.LabelGuest] != id || info.labels[images.LabelGuestSmall] != smallID {
		t.Errorf("labels %v, %v", info.labels, err)
	}
	// The binaries inside, as the sandbox user sees them.
	for _, f := range []struct{ host, image string }{{bin, images.GuestPath}, {small, images.GuestSmallPath}} {
		want, _ := os.ReadFile(f.host)
		sum := sha256.Sum256(want)
		code, out := runBuildTestContainer(ctx, t, cli, res.Ref, []string{"sh", "-c", "sha256sum " + f.image + " && stat -c '%a %u' " + f.image})
		if code != 0 || !strings.Contains(out, hex.EncodeToString(sum[:])) || !strings.Contains(out, "555 0") {
			t.Errorf("%s in the image: %q; want sha256 %x, mode 555, owner 0", f.image, out, sum)
		}
	}
	again, err := BuildGuestImage(ctx, cli, GuestImageOptions{Base: testenv.RuntimeImage, Binary: bin})
	if err != nil || !again.UpToDate || again.ID != res.ID {
		t.Errorf("second build: %+v, %v; want up to date", again, err)
	}
	// The reference the build printed, given back as the base (`--image
	// REF` on Kubernetes): taken as it is, not suffixed again.
	same, err := BuildGuestImage(ctx, cli, GuestImageOptions{Base: res.Ref, Binary: bin})
	if err != nil || !same.UpToDate || same.Ref != res.Ref || same.ID != res.ID {
		t.Errorf("build on its own ref: %+v, %v; want %s up to date", same, err, res.Ref)
	}
	f, err := os.Open(save)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	found := false
	for {
		h, err := tr.Next()
		if err != nil {
			break
		}
		if h.Name == "manifest.json" {
			var m []struct{ RepoTags []string }
			json.NewDecoder(tr).Decode(&m)
			found = len(m) == 1 && len(m[0].RepoTags) == 1 && m[0].RepoTags[0] == res.Ref
		}
	}
	if !found {
		t.Errorf("the archive %s does not name %s", save, res.Ref)
	}
	// agentbox without agentbox-guest beside it: the image carries it
	// alone, keyed by its hash only, and says why.
	alone := filepath.Join(t.TempDir(), "agentbox")
	if data, err := os.ReadFile(bin); err != nil || os.WriteFile(alone, data, 0o755) != nil {
		t.Fatal("copy agentbox", err)
	}
	one, err := BuildGuestImage(ctx, cli, GuestImageOptions{Base: testenv.RuntimeImage, Binary: alone})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cli.ImageRemove(context.Background(), one.Ref, client.ImageRemoveOptions{})
	})
	wholeID, _ := images.GuestID(bin)
	if one.Ref != images.GuestRef(testenv.RuntimeImage, wholeID) || one.Ref == res.Ref || one.Small != "" || !strings.Contains(one.Why, "no agentbox-guest beside") {
		t.Errorf("agentbox alone: %+v; want %s, no agentbox-guest and why", one, images.GuestRef(testenv.RuntimeImage, wholeID))
	}
	if info, err := inspectBuildImage(ctx, cli, one.Ref); err != nil || info.labels[images.LabelGuest] != wholeID || info.labels[images.LabelGuestSmall] != "" {
		t.Errorf("agentbox alone: labels %v, %v", info.labels, err)
	}
	if code, out := runBuildTestContainer(ctx, t, cli, one.Ref, []string{"sh", "-c", "test -x " + images.GuestPath + " && test ! -e " + images.GuestSmallPath}); code != 0 {
		t.Errorf("agentbox alone: the image has %s or lacks %s (exit %d): %s", images.GuestSmallPath, images.GuestPath, code, out)
	}

	// An absent base is named with the command that makes it.
	if _, err := BuildGuestImage(ctx, cli, GuestImageOptions{Base: "agentbox/no-such-base:none", Binary: bin}); err == nil || !strings.Contains(err.Error(), "not present") {
		t.Errorf("absent base: %v", err)
	}
}
