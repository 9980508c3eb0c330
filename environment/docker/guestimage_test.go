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

// TestGuestContextTar: the context holds the Dockerfile and the binary,
// executable and owned by root.
func TestGuestContextTar(t *testing.T) {
	data, err := guestContextTar([]byte("FROM x\n"), []byte("\x7fELF binary"))
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
	if h := got["agentbox"]; h == nil || h.Mode != 0o555 || h.Uid != 0 || h.Size != 11 {
		t.Errorf("agentbox entry = %+v", h)
	}
	if h := got["Dockerfile"]; h == nil || h.Size != 7 {
		t.Errorf("Dockerfile entry = %+v", h)
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
	id, _ := images.GuestID(bin)
	if res.Ref != images.GuestRef(testenv.RuntimeImage, id) || res.GuestID != id {
		t.Errorf("ref %s, id %s; want %s", res.Ref, res.GuestID, images.GuestRef(testenv.RuntimeImage, id))
	}
	info, err := inspectBuildImage(ctx, cli, res.Ref)
	if err != nil || info.labels[images.LabelGuest] != id {
		t.Errorf("labels %v, %v", info.labels, err)
	}
	// The binary inside, as the sandbox user sees it.
	want, _ := os.ReadFile(bin)
	sum := sha256.Sum256(want)
	code, out := runBuildTestContainer(ctx, t, cli, res.Ref, []string{"sh", "-c", "sha256sum " + images.GuestPath + " && stat -c '%a %u' " + images.GuestPath})
	if code != 0 || !strings.Contains(out, hex.EncodeToString(sum[:])) || !strings.Contains(out, "555 0") {
		t.Errorf("in the image: %q; want sha256 %x, mode 555, owner 0", out, sum)
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
	// An absent base is named with the command that makes it.
	if _, err := BuildGuestImage(ctx, cli, GuestImageOptions{Base: "agentbox/no-such-base:none", Binary: bin}); err == nil || !strings.Contains(err.Error(), "not present") {
		t.Errorf("absent base: %v", err)
	}
}
