package mcp

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/environment/guestenv/guestenvtest"
	"github.com/codegirl-games/agentbox/internal/testenv"
	"github.com/codegirl-games/agentbox/observe"
	"github.com/codegirl-games/agentbox/policy"
	"github.com/codegirl-games/agentbox/session"
)

const (
	stdioInit  = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}` + "\n" + `{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n"
	stdioTools = `{"jsonrpc":"2.0","id":2,"method":"tools/list"}` + "\n"
)

// manyCalls is n tools/calls of type with size bytes of text each.
func manyCalls(n, size int) string {
	var b strings.Builder
	for i := range n {
		b.WriteString(typeCall(100+i, size))
	}
	return b.String()
}

// typeCall is a tools/call of type with n bytes of text.
func typeCall(id, n int) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"type","arguments":{"text":"%s"}}}`+"\n", id, strings.Repeat("x", n))
}

// serveStdio serves input over stdio, its end once the output has every
// string of until or ServeStdio returned, and returns what ServeStdio
// wrote and returned.
func serveStdio(t *testing.T, input string, until []string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithCancelCause(context.Background())
	t.Cleanup(func() { cancel(nil) })
	local := NewLocal(LocalOptions{
		Config: session.Config{
			Backend: &guestenvtest.Backend{New: func() *guestenvtest.Guest { return &guestenvtest.Guest{} }}, App: stubApp(t), Task: "play",
			Env: environment.Config{Screen: observe.Screen{Width: 320, Height: 240, Depth: 24}},
		},
		App: "game", Out: t.TempDir(), Context: ctx,
		RunID: func() string { return "episode" },
	})
	srv := New(Options{Open: func(string, policy.Approver) Episodes { return local }, Version: "test"})
	var out testenv.Buffer // ServeStdio's output
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- srv.ServeStdio(t.Context(), pr, &out) }()
	go func() {
		io.WriteString(pw, input)
		for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			all := true
			for _, u := range until {
				all = all && strings.Contains(out.String(), u)
			}
			if all {
				break
			}
		}
		pw.Close()
	}()
	select {
	case err := <-done:
		pr.Close()
		return out.String(), err
	case <-time.After(3 * time.Minute):
		t.Fatal("ServeStdio did not end at the end of its input")
		return "", nil
	}
}

func TestServeStdio(t *testing.T) {
	for _, tt := range []struct {
		name    string
		input   string
		wantErr error
		want    []string // in the output
	}{
		{"tools listed", stdioInit + stdioTools, nil, []string{`"id":2,"result":{`}},
		{"megabytes of text: the tool's error", stdioInit + typeCall(3, 3<<20) + stdioTools, nil,
			[]string{`"id":3,"result":{"content":[{"type":"text","text":"type: the arguments are 3145739 bytes; the most is 1048576"}],"isError":true}`, `"id":2,"result":{`}},
		{"many large messages, one at a time", stdioInit + manyCalls(8, 2<<20) + stdioTools, nil, []string{`"id":2,"result":{`}},
		{"a line above the bound", stdioInit + typeCall(5, MaxLine) + stdioTools, ErrMessageTooLarge, nil},
		{"a line above the bound without its end", stdioInit + strings.Repeat("x", MaxLine+1), ErrMessageTooLarge, nil},
		{"a malformed message", stdioInit + "{\"jsonrpc\":\n", nil, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out, err := serveStdio(t, tt.input, tt.want)
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) || tt.wantErr == nil && tt.name != "a malformed message" && err != nil {
				t.Fatalf("ServeStdio: %v, want %v", err, tt.wantErr)
			}
			if tt.name == "a malformed message" && (err == nil || !strings.Contains(err.Error(), "malformed message on standard input")) {
				t.Fatalf("ServeStdio: %v, want a malformed message", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("the output has no %q:\n%.2000s", w, out)
				}
			}
		})
	}
	if want := "a message on standard input exceeds 4 MiB (the limit); ending the session"; ErrMessageTooLarge.Error() != want {
		t.Errorf("ErrMessageTooLarge says %q, want %q", ErrMessageTooLarge, want)
	}
}

// TestStdioOneLargeAtATime: a large request's successor beyond
// stdioLarge is not read until it is answered; small messages are read
// meanwhile.
func TestStdioOneLargeAtATime(t *testing.T) {
	pr, pw := io.Pipe()
	t.Cleanup(func() { pw.Close() })
	tr := &stdioTransport{in: pr, out: io.Discard}
	conn, err := tr.Connect(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	written := make(chan int, 1)
	go func() {
		w := bufio.NewWriter(pw)
		n := 0
		for _, m := range []string{typeCall(1, 1<<20), `{"jsonrpc":"2.0","id":2,"method":"ping"}` + "\n", typeCall(3, 1<<20)} {
			w.WriteString(m)
			if w.Flush() != nil {
				return
			}
			n++
			written <- n
		}
	}()
	read := func() jsonrpc.Message {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		m, err := conn.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	idOf := func(m jsonrpc.Message) any { return m.(*jsonrpc.Request).ID.Raw() }
	if id := idOf(read()); id != int64(1) {
		t.Fatalf("first message %v", id)
	}
	if id := idOf(read()); id != int64(2) {
		t.Fatalf("second message %v", id)
	}
	// The third, large, is not taken beyond its first bytes while the
	// first is unanswered.
	<-written
	<-written
	select {
	case n := <-written:
		t.Fatalf("message %d was read whole while a large request was unanswered", n)
	case <-time.After(500 * time.Millisecond):
	}
	id1, _ := jsonrpc.MakeID(float64(1))
	resp := &jsonrpc.Response{ID: id1, Result: []byte(`{}`)}
	if err := conn.Write(t.Context(), resp); err != nil {
		t.Fatal(err)
	}
	if id := idOf(read()); id != int64(3) {
		t.Fatalf("third message %v", id)
	}
}
