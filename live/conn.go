package live

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/session"
)

// writeTimeout bounds writing one message: a page that stops reading
// loses its connection and holds nothing else up.
const writeTimeout = 10 * time.Second

// conn is one page's WebSocket.
type conn struct {
	srv  *Server
	v    *View // nil for a grid page
	ws   *websocket.Conn
	role string
	name string

	ctx    context.Context
	cancel context.CancelFunc

	mu       sync.Mutex
	needFull bool // the next frame must be whole (the page missed one)
	frames   chan *frameMsg
	text     chan []byte // JSON messages: hello, lease, acted, …
	closing  string
}

type frameMsg struct{ data []byte }

func newConn(s *Server, v *View, ws *websocket.Conn, role string) *conn {
	c := &conn{srv: s, v: v, ws: ws, role: role, needFull: true,
		frames: make(chan *frameMsg, 4), text: make(chan []byte, 256)}
	c.ctx, c.cancel = context.WithCancel(s.base)
	return c
}

// offer queues a screen change: the changed rectangle when the page has
// every frame before, the whole frame when it missed one. A page too
// slow to take it misses it and gets the next one whole.
func (c *conn) offer(u *update) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := &frameMsg{data: u.message(c.needFull)}
	select {
	case c.frames <- m:
		c.needFull = false
	default:
		c.needFull = true
	}
}

// sendJSON queues a text message; a page that lets 256 pile up is
// disconnected rather than waited for.
func (c *conn) sendJSON(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		return
	}
	select {
	case c.text <- b:
	default:
		c.cancel()
	}
}

// finish tells the page why its session ends and closes the connection.
func (c *conn) finish(why string) {
	c.mu.Lock()
	c.closing = why
	c.mu.Unlock()
	b, _ := json.Marshal(map[string]any{"t": "closed", "message": why})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	_ = c.ws.Write(ctx, websocket.MessageText, b)
	cancel()
	c.ws.Close(websocket.StatusNormalClosure, "the run has ended")
	c.cancel()
}

// write sends queued messages until the connection ends.
func (c *conn) write(events <-chan []byte) {
	defer c.cancel()
	for {
		var typ websocket.MessageType
		var data []byte
		select {
		case <-c.ctx.Done():
			return
		case b := <-c.text:
			typ, data = websocket.MessageText, b
		case b, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			typ, data = websocket.MessageText, b
		case m := <-c.frames:
			typ, data = websocket.MessageBinary, m.data
		}
		ctx, cancel := context.WithTimeout(c.ctx, writeTimeout)
		err := c.ws.Write(ctx, typ, data)
		cancel()
		if err != nil {
			return
		}
	}
}

// readEvents passes the view's events to the writer, from the first one
// kept; a page that falls behind sees the gap in their numbers.
func (c *conn) readEvents(out chan<- []byte) {
	defer close(out)
	var after int64
	for {
		evs, ok, err := c.v.log.Read(c.ctx, after, 64)
		if err != nil || !ok {
			return
		}
		for _, e := range evs {
			after = e.Seq
			b, err := json.Marshal(pageEvent{T: "ev", Ev: e, Words: words(e)})
			if err != nil {
				continue
			}
			select {
			case out <- b:
			case <-c.ctx.Done():
				return
			}
		}
	}
}

// pageEvent is a session event as the page gets it, with the action in
// words (as the report writes it).
type pageEvent struct {
	T     string        `json:"t"`
	Ev    session.Event `json:"ev"`
	Words string        `json:"s,omitempty"`
}

func words(e session.Event) string {
	if e.Action == nil {
		return ""
	}
	return e.Action.String()
}

// inMsg is what a page sends.
type inMsg struct {
	T  string          `json:"t"`
	ID int64           `json:"id,omitempty"`
	A  json.RawMessage `json:"a,omitempty"`
}

// serveView runs a view page's connection: hello, then the events and
// frames out, and the page's requests in, one at a time, in order.
func (c *conn) serveView() {
	v := c.v
	defer c.ws.CloseNow()
	defer c.cancel()
	v.join(c)
	defer v.leave(c)
	events := make(chan []byte, 64)
	go c.readEvents(events)
	go c.write(events)
	for {
		typ, data, err := c.ws.Read(c.ctx)
		if err != nil {
			return // the page went, the server closes, or the message was too large
		}
		v.heardFrom(c)
		if typ != websocket.MessageText {
			c.sendJSON(map[string]any{"t": "error", "message": "messages are JSON text"})
			continue
		}
		var m inMsg
		if err := json.Unmarshal(data, &m); err != nil {
			c.sendJSON(map[string]any{"t": "error", "message": "malformed message: " + err.Error()})
			continue
		}
		c.handle(m)
	}
}

// handle answers one request of a view page.
func (c *conn) handle(m inMsg) {
	v := c.v
	reply := func(err error) {
		if err != nil {
			c.sendJSON(map[string]any{"t": "error", "id": m.ID, "message": err.Error()})
		}
	}
	switch m.T {
	case "ping":
	case "take":
		reply(v.take(c))
	case "back":
		reply(v.back(c))
	case "answer":
		// A person's answer to a policy's ask (--approve live).
		var ans struct {
			Approval string `json:"approval"`
			Allow    bool   `json:"allow"`
			Always   bool   `json:"always"`
		}
		dec := json.NewDecoder(bytes.NewReader(m.A))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&ans); err != nil || ans.Approval == "" {
			reply(fmt.Errorf("malformed answer (want {\"approval\": ID, \"allow\": true|false, \"always\": true|false}): %v", err))
			return
		}
		reply(v.answer(c, ans.Approval, ans.Allow, ans.Always))
	case "act":
		// The page's input, parsed as strictly as any agent's answer and
		// performed (validated, rate-limited, recorded) as the person's.
		a, err := action.Parse(m.A)
		if err != nil {
			c.sendJSON(map[string]any{"t": "acted", "id": m.ID, "ok": false, "error": err.Error(), "invalid": true})
			return
		}
		res, err := v.act(c.ctx, c, a)
		if err != nil {
			var ee *session.EndedError
			msg := err.Error()
			if errors.As(err, &ee) {
				msg = "the run has ended: " + ee.End.String()
			}
			c.sendJSON(map[string]any{"t": "acted", "id": m.ID, "ok": false, "error": msg})
			return
		}
		c.sendJSON(map[string]any{"t": "acted", "id": m.ID, "ok": res.Result.OK, "step": res.Step,
			"error": res.Result.Error, "invalid": res.Invalid})
	default:
		reply(fmt.Errorf("unknown request %q", m.T))
	}
}

// serveGrid runs a grid page's connection: the list of views whenever it
// changes, and each one's thumbnail when its screen changed.
func (c *conn) serveGrid() {
	defer c.ws.CloseNow()
	defer c.cancel()
	go c.write(nil)
	go func() { // the page says nothing; reading notices it leave
		for {
			if _, _, err := c.ws.Read(c.ctx); err != nil {
				c.cancel()
				return
			}
		}
	}()
	c.sendJSON(map[string]any{"t": "hello", "role": c.role, "you": c.name, "title": c.srv.o.Title})
	sent := map[string]int64{}
	tick := time.NewTicker(c.srv.o.ThumbInterval)
	defer tick.Stop()
	for {
		c.srv.mu.Lock()
		views := append([]*View(nil), c.srv.order...)
		changed := c.srv.changed
		c.srv.mu.Unlock()
		list := make([]status, len(views))
		for i, v := range views {
			list[i] = v.status()
		}
		c.sendJSON(map[string]any{"t": "views", "views": list})
		for _, v := range views {
			v.mu.Lock()
			u := v.last
			v.mu.Unlock()
			if u == nil || sent[v.id] == u.seq {
				continue
			}
			sent[v.id] = u.seq
			if png := thumbnail(u.frame); png != nil {
				m := &frameMsg{data: packed(map[string]any{"id": v.id, "sw": u.frame.Width, "sh": u.frame.Height}, png)}
				select {
				case c.frames <- m:
				case <-c.ctx.Done():
					return
				}
			}
		}
		select {
		case <-c.ctx.Done():
			return
		case <-changed:
			for _, v := range views {
				v.kick()
			}
		case <-tick.C:
		}
	}
}
