package pipes

import (
	"io"
	"testing"
)

func TestOpen(t *testing.T) {
	r, w, err := Open(3)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := w[i].Write([]byte{byte('a' + i)}); err != nil {
			t.Fatal(err)
		}
		Close(w[i])
		b, err := io.ReadAll(r[i])
		if err != nil || string(b) != string(rune('a'+i)) {
			t.Errorf("pipe %d carried %q, %v", i, b, err)
		}
	}
	Close(r...)
}
