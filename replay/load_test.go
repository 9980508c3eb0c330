package replay

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"image"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/codegirl-games/agentbox/trace"
)

// pngClaiming encodes a 1×1 image whose header then claims w×h: what a
// crafted trace can hold to make a decoder allocate gigabytes.
func pngClaiming(t *testing.T, w, h uint32) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, image.NewGray(image.Rect(0, 0, 1, 1))); err != nil {
		t.Fatal(err)
	}
	data := b.Bytes()
	// Signature (8), IHDR length and type (8), then width and height.
	binary.BigEndian.PutUint32(data[16:], w)
	binary.BigEndian.PutUint32(data[20:], h)
	binary.BigEndian.PutUint32(data[29:], crc32.ChecksumIEEE(data[12:29]))
	return data
}

func TestLoadTracePNG(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "screenshots"), 0o755)
	os.WriteFile(filepath.Join(dir, "screenshots", "bomb.png"), pngClaiming(t, 100000, 100000), 0o644)
	os.WriteFile(filepath.Join(dir, "screenshots", "ok.png"), pngClaiming(t, 1, 1), 0o644)
	secret := filepath.Join(t.TempDir(), "secret.png")
	os.WriteFile(secret, pngClaiming(t, 1, 1), 0o600)
	os.Symlink(secret, filepath.Join(dir, "screenshots", "link.png"))

	if img, err := LoadTracePNG(dir, "screenshots/ok.png"); err != nil || img.Bounds().Dx() != 1 {
		t.Errorf("a plain screenshot (the control): %v", err)
	}
	if _, err := LoadTracePNG(dir, "screenshots/bomb.png"); err == nil || !strings.Contains(err.Error(), "100000x100000 is larger than any screen") {
		t.Errorf("a 100000×100000 header: %v", err)
	}
	for _, rel := range []string{"screenshots/link.png", "../" + filepath.Base(secret), secret} {
		if _, err := LoadTracePNG(dir, rel); !errors.Is(err, trace.ErrRefused) {
			t.Errorf("%s: %v, want refused", rel, err)
		}
	}
}
