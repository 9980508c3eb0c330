package session

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestEventLog: numbered events within a byte budget; readers wait for
// new ones, lose the oldest when they fall behind, and end when the log
// is closed.
func TestEventLog(t *testing.T) {
	l := NewEventLog(1000)
	ctx := t.Context()
	got := make(chan []Event, 1)
	go func() {
		ev, _, _ := l.Read(ctx, 0, 10)
		got <- ev
	}()
	time.Sleep(10 * time.Millisecond)
	l.Add(Event{Kind: EventOutput, Text: "a"})
	if ev := <-got; len(ev) != 1 || ev[0].Seq != 1 || ev[0].Text != "a" {
		t.Fatalf("a waiting reader got %+v", ev)
	}
	for i := 0; i < 50; i++ {
		l.Add(Event{Kind: EventOutput, Text: strings.Repeat("x", 100)})
	}
	ev, ok, err := l.Read(ctx, 0, 100)
	if err != nil || !ok || len(ev) == 0 || len(ev) > 5 || ev[len(ev)-1].Seq != 51 {
		t.Fatalf("after 51 events of ~230 bytes in a 1000-byte log: %d events, last %d", len(ev), ev[len(ev)-1].Seq)
	}
	if ev[0].Seq == 1 {
		t.Error("the oldest events were kept beyond the budget")
	}
	l.Add(Event{Kind: EventOutput, Text: strings.Repeat("y", 5000)}) // larger than the budget: kept alone
	if ev, _, _ := l.Read(ctx, 51, 10); len(ev) != 1 || ev[0].Seq != 52 {
		t.Errorf("an event above the budget: %+v", ev)
	}
	l.Close()
	if ev, ok, _ := l.Read(ctx, 52, 10); ok || len(ev) != 0 {
		t.Errorf("reading a closed log past its end: %v %v", ev, ok)
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	open := NewEventLog(10)
	if _, _, err := open.Read(cctx, 0, 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a read of an empty log ends with its context: %v", err)
	}
}
