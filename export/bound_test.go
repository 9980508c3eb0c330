package export

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"image"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFrameBound: a screenshot whose header claims 100000×100000 (what a
// crafted trace can hold) is refused before a pixel is decoded.
func TestFrameBound(t *testing.T) {
	var b bytes.Buffer
	if err := png.Encode(&b, image.NewGray(image.Rect(0, 0, 1, 1))); err != nil {
		t.Fatal(err)
	}
	ok := append([]byte(nil), b.Bytes()...)
	bomb := b.Bytes()
	binary.BigEndian.PutUint32(bomb[16:], 100000)
	binary.BigEndian.PutUint32(bomb[20:], 100000)
	binary.BigEndian.PutUint32(bomb[29:], crc32.ChecksumIEEE(bomb[12:29]))
	dir := t.TempDir()
	okPath, bombPath := filepath.Join(dir, "ok.png"), filepath.Join(dir, "bomb.png")
	os.WriteFile(okPath, ok, 0o644)
	os.WriteFile(bombPath, bomb, 0o644)
	if _, err := loadRGBA(okPath); err != nil {
		t.Errorf("a 1×1 frame (the control): %v", err)
	}
	if _, err := loadRGBA(bombPath); err == nil || !strings.Contains(err.Error(), "larger than any screen") {
		t.Errorf("loadRGBA: %v", err)
	}
	if _, _, err := frameSize(bombPath); err == nil || !strings.Contains(err.Error(), "larger than any screen") {
		t.Errorf("frameSize: %v", err)
	}
}
