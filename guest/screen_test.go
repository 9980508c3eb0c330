package guest

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/klauspost/compress/s2"

	"github.com/codegirl-games/agentbox/guest/x11"
	"github.com/codegirl-games/agentbox/observe"
	"github.com/codegirl-games/agentbox/wire"
)

// TestStartRefusesScreens: the guest holds a start request to the same
// screen bound as the host (observe.Screen.Validate), before it starts
// anything; it used to take up to 8192x8192 at any depth.
func TestStartRefusesScreens(t *testing.T) {
	for _, s := range []observe.Screen{
		{},
		{Width: 640, Height: 480},
		{Width: 640, Height: 480, Depth: 16},
		{Width: 8000, Height: 8000, Depth: 24},
		{Width: 32, Height: 32, Depth: 24},
	} {
		g := &Guest{logw: io.Discard}
		_, err := g.start(t.Context(), wire.StartRequest{Screen: s, Home: t.TempDir()})
		if !wire.IsCode(err, wire.CodeInvalid) || !strings.Contains(err.Error(), "bad screen") {
			t.Errorf("start at %v: %v; want an invalid request", s, err)
		}
		if g.server != nil {
			t.Errorf("start at %v started Xvfb", s)
			g.server.Stop(t.Context())
		}
	}
}

// TestWarmKeepsAnswerBuffer: the warming capture hashes the frame and
// encodes it only into a buffer of its own, never into one a screenshot
// made (its answer may be on its way with it).
func TestWarmKeepsAnswerBuffer(t *testing.T) {
	pix := bytes.Repeat([]byte{1, 2, 3, 0}, 8*4)
	f := x11.Frame{Width: 8, Height: 4, Stride: 32, Pix: pix, Gen: 7}
	var k keptFrame
	got := k.warm(f, nil)
	if dec, err := s2.Decode(nil, got); err != nil || !bytes.Equal(dec, pix) || k.encGen != 7 || k.hashGen != 7 || k.sum == 0 {
		t.Fatalf("warm without a buffer: decodes to %d bytes (%v), encGen %d, hashGen %d", len(dec), err, k.encGen, k.hashGen)
	}

	answer := []byte("a screenshot's answer")
	k = keptFrame{encGen: 3}
	f.Gen = 9
	out := k.warm(f, answer)
	if &out[0] != &answer[0] || string(answer) != "a screenshot's answer" || k.encGen != 3 || k.hashGen != 9 {
		t.Errorf("warm with a buffer set: wrote or replaced it (%q), encGen %d, hashGen %d", answer, k.encGen, k.hashGen)
	}
}
