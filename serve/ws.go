package serve

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/serve/api"
)

// wsWriteTimeout bounds writing one answer: a client that stops reading
// loses its connection, and holds nothing else up.
const wsWriteTimeout = 30 * time.Second

// wsLarge holds the messages above largeBody being read, wsLargeAtOnce
// at most in the process: a message's first largeBody bytes are read at
// once (every request a well-behaved client sends fits), the rest only
// with a slot, within largeRead. Whatever the number of connections that
// send messages up to api.MaxMessage and never finish them, the memory
// they hold is bounded.
var wsLarge = make(chan struct{}, wsLargeAtOnce)

const wsLargeAtOnce = 4

// wsImages bounds the observations with an image (PNG or RGBA) one
// token's WebSockets hold at once, being made or sent (imageSlot); an
// observe beyond them waits largeWait for a slot, then is refused, a
// step or reset waits for one. One: each costs about 20 MiB while it is made and sent (the capture's copies of a
// frame; TestFloodServeWebSockets: +101 MiB with 4, +20 MiB with 1), and
// a token's other environments' images wait for it (a client that reads
// its answers frees it within milliseconds).
const wsImages = 1

// tokenSlots are a number of slots for each token.
type tokenSlots struct {
	mu sync.Mutex
	m  map[string]chan struct{}
}

// take waits for one of owner's n slots, largeWait at most.
func (s *tokenSlots) take(ctx context.Context, owner string, n int) bool {
	s.mu.Lock()
	if s.m == nil {
		s.m = map[string]chan struct{}{}
	}
	ch := s.m[owner]
	if ch == nil {
		ch = make(chan struct{}, n)
		s.m[owner] = ch
	}
	s.mu.Unlock()
	wait := time.NewTimer(largeWait)
	defer wait.Stop()
	select {
	case ch <- struct{}{}:
		return true
	case <-wait.C:
	case <-ctx.Done():
	}
	return false
}

// give frees one of owner's slots.
func (s *tokenSlots) give(owner string) {
	s.mu.Lock()
	ch := s.m[owner]
	s.mu.Unlock()
	<-ch
}

// readMessage reads one message of c: its first largeBody bytes, then
// the rest with a wsLarge slot (waiting largeWait for one at most).
// Errors close the connection.
func readMessage(base context.Context, c *websocket.Conn) (websocket.MessageType, []byte, error) {
	ctx, cancel := context.WithCancel(base)
	defer cancel()
	typ, r, err := c.Reader(ctx)
	if err != nil {
		return 0, nil, err
	}
	data, err := io.ReadAll(io.LimitReader(r, largeBody+1))
	if err != nil || len(data) <= largeBody {
		return typ, data, err
	}
	wait := time.NewTimer(largeWait)
	defer wait.Stop()
	select {
	case wsLarge <- struct{}{}:
	case <-wait.C:
		c.Close(websocket.StatusTryAgainLater, "too many large messages are being read: try again")
		return 0, nil, errors.New("no slot for a large message")
	case <-ctx.Done():
		return 0, nil, ctx.Err()
	}
	defer func() { <-wsLarge }()
	// A message that does not arrive within largeRead ends its
	// connection (cancelling a read closes it).
	slow := time.AfterFunc(largeRead, cancel)
	defer slow.Stop()
	rest, err := io.ReadAll(r)
	if err != nil {
		return 0, nil, err
	}
	return typ, append(data, rest...), nil
}

// handleWS is the step loop's WebSocket: requests in, answers out, one
// each, in order (api.Request, api.Response). A step is one round trip.
func (s *Server) handleWS(w http.ResponseWriter, r *http.Request, owner string) {
	e, aerr := s.lookup(r, owner)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	detach, aerr := e.attach()
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	defer detach()
	// Accept checks the Origin too (only the server's own host).
	c, err := websocket.Accept(w, r, nil)
	if err != nil {
		return // Accept answered
	}
	c.SetReadLimit(api.MaxMessage)
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		c.Close(websocket.StatusGoingAway, "the server is shutting down")
		return
	}
	s.conns[c] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		c.CloseNow()
	}()
	ctx := s.base
	for {
		typ, data, err := readMessage(ctx, c)
		if err != nil {
			return // the client went, the server stops, the message was too large (closed with 1009) or too slow
		}
		e.touch()
		var req api.Request
		var resp api.Response
		var image []byte
		slot := &imageSlot{s: s, ctx: ctx, owner: owner}
		switch {
		case typ != websocket.MessageText:
			resp.Error = apiError(api.CodeInvalidJSON, "requests are text messages holding JSON")
		default:
			if aerr := decodeStrict(data, &req); aerr != nil {
				resp.Error = aerr
				break
			}
			resp, image = s.wsOp(e, req, slot)
		}
		resp.ID = req.ID
		err = writeResponse(ctx, c, &resp, image)
		image = nil
		slot.give()
		if err != nil {
			return
		}
	}
}

// imageSlot is one WebSocket request's claim on one of its token's
// wsImages slots. It is taken just before the request's observation is
// captured and given back once the answer is sent: an image (megabytes
// as RGBA) is made only with a slot, so a token's clients that ask for
// images and never read them hold at most wsImages of them. What comes
// before the capture (the action, a reset waiting for a sandbox) holds
// no slot: a reset that waited seconds for a sandbox while holding it
// left every other environment of the token waiting, then refused
// (TestServeLoad, 0.1 steps a second beside a loaded machine).
type imageSlot struct {
	s     *Server
	ctx   context.Context
	owner string
	held  bool
}

// take waits for a slot (none when one is held already): largeWait at
// most when wait is false, then refuses with 429; until the server stops
// when wait is true (a step or
// reset that has already acted owes its client the observation, and a
// slot is held at most for one capture and one write, wsWriteTimeout).
// A nil slot (HTTP, MCP) takes nothing.
func (g *imageSlot) take(wait bool) *api.Error {
	if g == nil || g.held {
		return nil
	}
	for {
		if g.s.images.take(g.ctx, g.owner, wsImages) {
			g.held = true
			return nil
		}
		if !wait || g.ctx.Err() != nil {
			return apiError(api.CodeTooManyConnections, "this token's WebSockets have %d observations with an image being sent, the most they may at once: try again", wsImages)
		}
	}
}

// give frees the slot, if it is held.
func (g *imageSlot) give() {
	if g != nil && g.held {
		g.held = false
		g.s.images.give(g.owner)
	}
}

// wsOp performs one WebSocket request; image is the observation's image,
// sent after the JSON.
func (s *Server) wsOp(e *env, req api.Request, slot *imageSlot) (api.Response, []byte) {
	var resp api.Response
	image := req.Image
	if image == "" {
		image = api.ImageNone
	}
	switch image {
	case api.ImageNone, api.ImagePNG, api.ImageRGBA:
	default:
		resp.Error = apiError(api.CodeInvalidRequest, "image %q: want none, png or rgba", req.Image)
		return resp, nil
	}
	if (req.Op == api.OpStep || req.Op == api.OpAct) != (len(req.Action) > 0) {
		if len(req.Action) > 0 {
			resp.Error = apiError(api.CodeInvalidRequest, "op %s takes no action", req.Op)
		} else {
			resp.Error = apiError(api.CodeInvalidRequest, "op %s needs an action", req.Op)
		}
		return resp, nil
	}
	var aerr *api.Error
	switch req.Op {
	case api.OpStep, api.OpAct:
		a, err := action.Parse(req.Action)
		if err != nil {
			resp.Error = apiError(api.CodeInvalidAction, "%v (docs/actions.md has the vocabulary)", err)
			return resp, nil
		}
		if req.Op == api.OpAct {
			image = api.ImageNone
		}
		resp.Step, aerr = s.step(e, a, image, req.Known, slot)
	case api.OpObserve:
		resp.Observation, aerr = s.observe(e, image, req.Known, slot)
	case api.OpReset:
		var rr *api.ResetResponse
		if req.Task != nil {
			aerr = checkTask(*req.Task)
		}
		if aerr == nil {
			rr, aerr = s.reset(e, req.Task, req.Mode, image, req.Known, slot)
		}
		if rr != nil {
			resp.Environment, resp.Observation = &rr.Environment, rr.Observation
		}
	case api.OpInfo:
		d := e.describe()
		resp.Environment = &d
	default:
		aerr = apiError(api.CodeUnsupportedOperation, "op %q: want step, act, observe, reset or info", req.Op)
	}
	resp.Error = aerr
	// The image goes after the JSON, not inside it.
	var obs *api.Observation
	switch {
	case resp.Step != nil:
		obs = resp.Step.Observation
	default:
		obs = resp.Observation
	}
	if obs == nil || len(obs.Frame.Data) == 0 {
		return resp, nil
	}
	data := obs.Frame.Data
	obs.Frame.Data, obs.Frame.Bytes = nil, len(data)
	return resp, data
}

// writeResponse sends an answer: a text message, or with an image a
// binary one (4-byte big-endian length, the JSON, the image).
func writeResponse(ctx context.Context, c *websocket.Conn, resp *api.Response, image []byte) error {
	js, err := json.Marshal(resp)
	if err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, wsWriteTimeout)
	defer cancel()
	if image == nil {
		return c.Write(wctx, websocket.MessageText, js)
	}
	w, err := c.Writer(wctx, websocket.MessageBinary)
	if err != nil {
		return err
	}
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], uint32(len(js)))
	for _, b := range [][]byte{n[:], js, image} {
		if _, err := w.Write(b); err != nil {
			w.Close()
			return err
		}
	}
	return w.Close()
}
