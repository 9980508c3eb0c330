package serve

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/codegirl-games/agentbox/serve/api"
)

// TestBoundBodies: a token's large bodies are read at most largeBodies at
// a time; its small ones, another token's and those without a token are
// not held up meanwhile.
func TestBoundBodies(t *testing.T) {
	entered := make(chan string, 16)
	h := boundBodies(func(r *http.Request) string { return r.Header.Get("X-Owner") },
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			entered <- r.Header.Get("X-Name")
			io.Copy(io.Discard, r.Body)
		}))
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)

	var wg sync.WaitGroup
	t.Cleanup(wg.Wait)
	// send starts a POST of a body of length bytes from owner, of which
	// it sends all but the last KiB until finish is closed.
	send := func(name, owner string, length int64, finish chan struct{}) {
		pr, pw := io.Pipe()
		req, _ := http.NewRequestWithContext(t.Context(), "POST", srv.URL+"/v1/envs/x/act", pr)
		req.ContentLength = length
		req.Header.Set("X-Owner", owner)
		req.Header.Set("X-Name", name)
		wg.Add(2)
		go func() {
			defer wg.Done()
			defer pw.Close()
			pw.Write([]byte(strings.Repeat("x", int(length)-1024)))
			<-finish
			pw.Write([]byte(strings.Repeat("x", 1024)))
		}()
		go func() {
			defer wg.Done()
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
		}()
	}
	waitFor := func(want string) {
		t.Helper()
		select {
		case got := <-entered:
			if got != want {
				t.Fatalf("%s reached the handler, want %s", got, want)
			}
		case <-time.After(time.Minute):
			t.Fatalf("%s did not reach the handler", want)
		}
	}
	notYet := func() {
		t.Helper()
		select {
		case got := <-entered:
			t.Fatalf("%s reached the handler while its token had %d large bodies in flight", got, largeBodies)
		case <-time.After(500 * time.Millisecond):
		}
	}

	first, later, never := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var firstOnce sync.Once
	finishFirst := func() { firstOnce.Do(func() { close(first) }) }
	t.Cleanup(func() { finishFirst(); close(later); close(never) })
	send("large 1", "a", largeBody*4, first)
	waitFor("large 1")
	send("large 2", "a", largeBody*4, never)
	waitFor("large 2")
	send("large 3", "a", largeBody*4, later) // beyond the token's slots: waits
	notYet()
	for _, tt := range []struct{ name, owner string }{
		{"small", "a"},   // a small body of the same token
		{"other", "b"},   // another token's large body
		{"no token", ""}, // refused by the API before its body is read
	} {
		length := int64(largeBody * 4)
		if tt.name == "small" {
			length = largeBody
		}
		send(tt.name, tt.owner, length, never)
		waitFor(tt.name)
	}
	finishFirst() // large 1 ends: large 3 takes its slot
	waitFor("large 3")
}

// TestReadMessageLarge: the messages above largeBody being read are at
// most wsLargeAtOnce in the process; one beyond them is read once a slot
// is freed; small messages and whole large ones are read as they are.
func TestReadMessageLarge(t *testing.T) {
	type got struct {
		data []byte
		err  error
	}
	read := make(chan got, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer c.CloseNow()
		c.SetReadLimit(api.MaxMessage)
		for {
			_, data, err := readMessage(r.Context(), c)
			read <- got{data, err}
			if err != nil {
				return
			}
		}
	}))
	t.Cleanup(srv.Close)
	dial := func() *websocket.Conn {
		t.Helper()
		c, _, err := websocket.Dial(t.Context(), srv.URL, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.CloseNow() })
		return c
	}
	next := func(wait time.Duration) (got, bool) {
		select {
		case g := <-read:
			return g, true
		case <-time.After(wait):
			return got{}, false
		}
	}

	// A small message and a whole large one.
	c := dial()
	large := strings.Repeat("y", 3*largeBody)
	for _, m := range []string{"small", large} {
		if err := c.Write(t.Context(), websocket.MessageText, []byte(m)); err != nil {
			t.Fatal(err)
		}
		if g, ok := next(time.Minute); !ok || g.err != nil || string(g.data) != m {
			t.Fatalf("a message of %d bytes: read %d bytes, %v", len(m), len(g.data), g.err)
		}
	}

	// wsLargeAtOnce connections send large messages never finished: each
	// takes a slot.
	var holders []*websocket.Conn
	for range wsLargeAtOnce {
		h := dial()
		w, err := h.Writer(t.Context(), websocket.MessageText)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte(strings.Repeat("z", 2*largeBody))); err != nil {
			t.Fatal(err)
		}
		holders = append(holders, h)
	}
	for deadline := time.Now().Add(time.Minute); len(wsLarge) < wsLargeAtOnce; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d large messages being read, want %d", len(wsLarge), wsLargeAtOnce)
		}
	}
	// Another connection's whole large message waits for a slot, its
	// small one is read at once.
	if err := c.Write(t.Context(), websocket.MessageText, []byte(large)); err != nil {
		t.Fatal(err)
	}
	if g, ok := next(500 * time.Millisecond); ok {
		t.Fatalf("a large message (%d bytes, %v) was read while %d others held every slot", len(g.data), g.err, wsLargeAtOnce)
	}
	small := dial()
	if err := small.Write(t.Context(), websocket.MessageText, []byte("small")); err != nil {
		t.Fatal(err)
	}
	if g, ok := next(time.Minute); !ok || string(g.data) != "small" {
		t.Fatalf("a small message while the slots were held: %q, %v", g.data, g.err)
	}
	// One holder goes: its slot is the waiting message's.
	holders[0].CloseNow()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	for {
		select {
		case g := <-read:
			if g.err == nil && string(g.data) == large {
				return
			}
		case <-ctx.Done():
			t.Fatal("the large message was not read once a slot was freed")
		}
	}
}
