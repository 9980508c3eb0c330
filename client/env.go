package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/draw"
	"image/png"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"

	"github.com/coder/websocket"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/observe"
	"github.com/codegirl-games/agentbox/serve/api"
)

// Transports an Env may step over.
const (
	WebSocket = "websocket" // one round trip a step on one connection (default)
	HTTP      = "http"      // a request a step
)

// Observation is what the environment looks like before a step.
type Observation struct {
	// The state: the cursor, the windows, the app's output since the last
	// observation, whether it runs, the previous action's result. Its
	// Frame describes the screenshot; its data is in Screen.
	api.Observation
	// Screen is the screenshot as RGBA pixels (decoded when it travelled
	// as PNG); nil when the Env's Image is none. An unchanged screen is
	// the previous observation's Screen again.
	Screen *observe.Frame
}

// Info is what else a step or a reset tells: gymnasium's info.
type Info struct {
	Episode int
	// Step is the step's number in the episode's trace (0 at a reset).
	Step int
	// Result is the action's result (nil at a reset); Invalid says the
	// action failed validation and was not run.
	Result  *action.Result
	Invalid bool
	// Output and Windows are the observation's: the app's lines since the
	// last observation, the windows on the screen.
	Output  []observe.LogLine
	Windows []observe.Window
	// Ended is how the episode ended, when it has.
	Ended *api.End
	// RunID and Trace name the episode's trace on the server.
	RunID, Trace string
	// Files are the files collected when this step ended the episode
	// (the create request's collect; Env.File reads one).
	Files []api.File
}

// Env is one environment on the server. Its methods take turns (one
// request at a time).
type Env struct {
	c  *Client
	id string
	// Transport is WebSocket (default) or HTTP.
	Transport string
	// Image is the observations' image format: api.ImageRGBA (default),
	// api.ImagePNG (smaller, for a server far away) or api.ImageNone.
	Image string
	// AlwaysImage asks for the screen's image every time, also when it is
	// unchanged (benchmarks: the cost of moving every frame).
	AlwaysImage bool
	// Reward, when set, is the reward of a step; by default a step's
	// reward is 0, but for the step that ends a graded episode (a task
	// with grade: docs/tasks.md), whose reward is the grade's score.
	Reward func(obs *Observation, info Info) float64
	// ResetMode is how Reset starts the next episode: api.ResetFresh (a
	// new sandbox) or api.ResetRelaunch (the same sandbox reset in
	// place: the app and everything it started killed, its writable
	// directories and the display's state reset, the app launched
	// again); "" is the environment's (CreateRequest.ResetMode, default
	// fresh).
	ResetMode string

	mu     sync.Mutex
	info   api.Environment
	fresh  bool // the episode has just started: Reset only observes
	ws     *websocket.Conn
	nextID int64
	last   *observe.Frame // the latest screen, sent again only when it changed
}

func newEnv(c *Client, d api.Environment, fresh bool) *Env {
	return &Env{c: c, id: d.ID, Transport: WebSocket, Image: api.ImageRGBA, info: d, fresh: fresh}
}

// ID is the environment's ID.
func (e *Env) ID() string { return e.id }

// Reset starts an episode and returns its first observation: a fresh
// sandbox (or, with ResetMode relaunch, the same one reset in place) with
// the app launched again, and a new trace (the episode Create started is
// used as it is, once).
func (e *Env) Reset(ctx context.Context) (*Observation, Info, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	var obs *api.Observation
	var img []byte
	if e.fresh {
		e.fresh = false
		var err error
		obs, img, err = e.observe(ctx)
		if err != nil {
			return nil, Info{}, err
		}
	} else {
		var d *api.Environment
		var err error
		d, obs, img, err = e.reset(ctx)
		if err != nil {
			return nil, Info{}, err
		}
		e.info = *d
	}
	o, err := e.decode(obs, img)
	if err != nil {
		return nil, Info{}, err
	}
	info := Info{Episode: obs.Episode, Output: obs.Output, Windows: obs.Windows, Ended: obs.Ended, RunID: e.info.RunID, Trace: e.info.Trace}
	return o, info, nil
}

// Step performs an action and returns the next observation (after a done,
// the last one; when the episode ended without one, the previous screen),
// the reward, whether the episode terminated (the app exited, the
// controller finished) or was truncated (steps, deadline, failure), and
// the rest. An invalid action is not an error: Info.Invalid and
// Info.Result say why it was not run.
func (e *Env) Step(ctx context.Context, a action.Action) (obs *Observation, reward float64, terminated, truncated bool, info Info, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.fresh = false
	st, img, err := e.step(ctx, a, e.Image)
	if err != nil {
		return nil, 0, false, false, Info{}, err
	}
	res := st.Result
	info = Info{Episode: st.Episode, Step: st.Step, Result: &res, Invalid: st.Invalid, Ended: st.Ended, RunID: e.info.RunID, Trace: e.info.Trace, Files: st.Files}
	if st.Observation != nil {
		if obs, err = e.decode(st.Observation, img); err != nil {
			return nil, 0, false, false, info, err
		}
		info.Output, info.Windows = obs.Output, obs.Windows
		if info.Ended == nil {
			info.Ended = obs.Ended
		}
	} else {
		obs = &Observation{Screen: e.last}
	}
	if info.Ended != nil {
		terminated, truncated = info.Ended.Terminated, !info.Ended.Terminated
	}
	switch {
	case e.Reward != nil:
		reward = e.Reward(obs, info)
	case info.Ended != nil && info.Ended.Grade != nil:
		reward = info.Ended.Grade.Score
	}
	return obs, reward, terminated, truncated, info, nil
}

// Observe takes the next step's observation without acting.
func (e *Env) Observe(ctx context.Context) (*Observation, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	obs, img, err := e.observe(ctx)
	if err != nil {
		return nil, err
	}
	return e.decode(obs, img)
}

// Act performs an action without observing after it.
func (e *Env) Act(ctx context.Context, a action.Action) (*api.StepResponse, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.fresh = false
	st, _, err := e.step(ctx, a, api.ImageNone)
	return st, err
}

// File reads one file collected when the latest episode ended, by its
// path below the sandbox's home (as Info.Files names it), at most max
// bytes (0: 64 MiB, collect_limits' default).
func (e *Env) File(ctx context.Context, path string, max int64) ([]byte, error) {
	if max <= 0 {
		max = 64 << 20
	}
	u := e.c.base.JoinPath(e.path("/files"), path)
	req, err := http.NewRequestWithContext(ctx, "GET", u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+e.c.token)
	resp, err := e.c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("client: GET file %s: %w", path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, max+1))
	if err != nil {
		return nil, fmt.Errorf("client: GET file %s: reading the answer: %w", path, err)
	}
	if resp.StatusCode >= 300 {
		var eb api.ErrorBody
		if json.Unmarshal(data, &eb) == nil && eb.Error.Code != "" {
			return nil, &eb.Error
		}
		return nil, &api.Error{Code: api.CodeInternal, Status: resp.StatusCode, Message: fmt.Sprintf("GET file %s: %s", path, resp.Status)}
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("client: file %s is larger than %d bytes", path, max)
	}
	return data, nil
}

// Info describes the environment as the server has it now.
func (e *Env) Info(ctx context.Context) (api.Environment, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	var d api.Environment
	if err := e.c.doJSON(ctx, "GET", e.path(""), nil, nil, &d); err != nil {
		return d, err
	}
	e.info = d
	return d, nil
}

// Fork makes n new environments in this one's state at its current step
// (POST /v1/envs/{id}/fork): the server replays the episode so far into
// fresh sandboxes and checks each fork's screen against this one's (an
// *api.Error with the code fork_diverged, naming the first step that
// differed, when one does not match; then none is kept). Each fork is
// independent from then on; its Reset returns its first observation, in
// the forked state, without starting another episode. The forks take
// this Env's Transport, Image, AlwaysImage, Reward and ResetMode. A step
// in flight on the server is waited for.
func (e *Env) Fork(ctx context.Context, n int) ([]*Env, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	var resp api.ForkResponse
	if err := e.c.doJSON(ctx, "POST", e.path("/fork"), nil, api.ForkRequest{Count: n}, &resp); err != nil {
		return nil, err
	}
	forks := make([]*Env, 0, len(resp.Environments))
	for _, d := range resp.Environments {
		f := newEnv(e.c, d, true)
		f.Transport, f.Image, f.AlwaysImage, f.Reward, f.ResetMode = e.Transport, e.Image, e.AlwaysImage, e.Reward, e.ResetMode
		forks = append(forks, f)
	}
	return forks, nil
}

// Close ends the episode (closed, unless it has ended), removes the
// sandbox and forgets the environment on the server; the trace stays.
func (e *Env) Close(ctx context.Context) (api.Environment, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.ws != nil {
		e.ws.Close(websocket.StatusNormalClosure, "")
		e.ws = nil
	}
	var d api.Environment
	err := e.c.doJSON(ctx, "DELETE", e.path(""), nil, nil, &d)
	return d, err
}

// Answer answers a policy's ask (an approval event's approval.id): allow
// lets the step's action run, false denies it; always grants its rule for
// the rest of the episode (never a sensitive one). It does not wait for
// the step in flight, which is the one waiting for this answer: call it
// from another goroutine than the Step or Act that is held (one reading
// Events).
func (e *Env) Answer(ctx context.Context, approval string, allow, always bool) error {
	return e.c.doJSON(ctx, "POST", e.path("/approvals/"+url.PathEscape(approval)), nil, api.ApprovalAnswer{Allow: allow, Always: always}, nil)
}

// Events reads the environment's events (after the one numbered after)
// and calls fn with each, until the environment closes (nil), ctx ends or
// fn returns an error.
func (e *Env) Events(ctx context.Context, after int64, fn func(api.Event) error) error {
	u := *e.c.base
	u.Path += e.path("/events")
	u.RawQuery = url.Values{"after": {strconv.FormatInt(after, 10)}}.Encode()
	req, err := http.NewRequestWithContext(ctx, "GET", u.String(), nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+e.c.token)
	resp, err := e.c.http.Do(req)
	if err != nil {
		return fmt.Errorf("client: events: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		var eb api.ErrorBody
		if json.NewDecoder(resp.Body).Decode(&eb) == nil && eb.Error.Code != "" {
			return &eb.Error
		}
		return fmt.Errorf("client: events: %s", resp.Status)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		line := sc.Text()
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		var ev api.Event
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			return fmt.Errorf("client: events: %w", err)
		}
		if err := fn(ev); err != nil {
			return err
		}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return sc.Err()
}

func (e *Env) path(rest string) string { return "/v1/envs/" + url.PathEscape(e.id) + rest }

// known is the hash of the screen the client has.
func (e *Env) known() string {
	if e.last == nil || e.AlwaysImage {
		return ""
	}
	return strconv.FormatUint(e.last.Hash, 16)
}

func (e *Env) observe(ctx context.Context) (*api.Observation, []byte, error) {
	if e.Transport == HTTP {
		var obs api.Observation
		q := url.Values{"image": {e.Image}, "known": {e.known()}}
		err := e.c.doJSON(ctx, "GET", e.path("/observation"), q, nil, &obs)
		return &obs, obs.Frame.Data, err
	}
	resp, img, err := e.roundTrip(ctx, api.Request{Op: api.OpObserve, Image: e.Image, Known: e.known()})
	if err != nil {
		return nil, nil, err
	}
	if resp.Observation == nil {
		return nil, nil, errors.New("client: the server's answer has no observation")
	}
	return resp.Observation, img, nil
}

func (e *Env) step(ctx context.Context, a action.Action, image string) (*api.StepResponse, []byte, error) {
	body, err := json.Marshal(a)
	if err != nil {
		return nil, nil, fmt.Errorf("client: %w", err)
	}
	if e.Transport == HTTP {
		var st api.StepResponse
		q := url.Values{"observe": {image}, "known": {e.known()}}
		if err := e.c.do(ctx, "POST", e.path("/act"), q, "application/json", bytes.NewReader(body), &st); err != nil {
			return nil, nil, err
		}
		var img []byte
		if st.Observation != nil {
			img = st.Observation.Frame.Data
		}
		return &st, img, nil
	}
	op := api.OpStep
	if image == api.ImageNone {
		op = api.OpAct
		image = ""
	}
	resp, img, err := e.roundTrip(ctx, api.Request{Op: op, Action: body, Image: image, Known: e.known()})
	if err != nil {
		return nil, nil, err
	}
	if resp.Step == nil {
		return nil, nil, errors.New("client: the server's answer has no step")
	}
	return resp.Step, img, nil
}

func (e *Env) reset(ctx context.Context) (*api.Environment, *api.Observation, []byte, error) {
	if e.Transport == HTTP {
		var rr api.ResetResponse
		q := url.Values{"observe": {e.Image}, "known": {e.known()}}
		var in any
		if e.ResetMode != "" {
			in = api.ResetRequest{Mode: e.ResetMode}
		}
		if err := e.c.doJSON(ctx, "POST", e.path("/reset"), q, in, &rr); err != nil {
			return nil, nil, nil, err
		}
		if rr.Observation == nil {
			return nil, nil, nil, errors.New("client: the server's answer has no observation")
		}
		return &rr.Environment, rr.Observation, rr.Observation.Frame.Data, nil
	}
	image := e.Image
	resp, img, err := e.roundTrip(ctx, api.Request{Op: api.OpReset, Image: image, Known: e.known(), Mode: e.ResetMode})
	if err != nil {
		return nil, nil, nil, err
	}
	if resp.Environment == nil || resp.Observation == nil {
		return nil, nil, nil, errors.New("client: the server's answer has no environment or observation")
	}
	return resp.Environment, resp.Observation, img, nil
}

// maxMessage bounds an answer: the largest screen's pixels and the JSON.
const maxMessage = 4*observe.MaxScreenPixels + 16<<20

// roundTrip sends one WebSocket request and reads its answer. A broken
// connection is dropped (the next request dials again) and its error
// returned: the request may or may not have run.
func (e *Env) roundTrip(ctx context.Context, req api.Request) (*api.Response, []byte, error) {
	if e.ws == nil {
		u := *e.c.base
		u.Scheme = map[string]string{"http": "ws", "https": "wss"}[u.Scheme]
		u.Path += e.path("/ws")
		c, resp, err := websocket.Dial(ctx, u.String(), &websocket.DialOptions{
			HTTPClient: e.c.http,
			HTTPHeader: http.Header{"Authorization": {"Bearer " + e.c.token}},
		})
		if err != nil {
			if resp != nil && resp.Body != nil {
				var eb api.ErrorBody
				if json.NewDecoder(resp.Body).Decode(&eb) == nil && eb.Error.Code != "" {
					return nil, nil, &eb.Error
				}
			}
			return nil, nil, fmt.Errorf("client: WebSocket: %w", err)
		}
		c.SetReadLimit(maxMessage)
		e.ws = c
	}
	e.nextID++
	req.ID = e.nextID
	data, err := json.Marshal(req)
	if err != nil {
		return nil, nil, err
	}
	fail := func(err error) (*api.Response, []byte, error) {
		e.ws.CloseNow()
		e.ws = nil
		return nil, nil, fmt.Errorf("client: WebSocket: %w", err)
	}
	if err := e.ws.Write(ctx, websocket.MessageText, data); err != nil {
		return fail(err)
	}
	typ, msg, err := e.ws.Read(ctx)
	if err != nil {
		return fail(err)
	}
	var img []byte
	if typ == websocket.MessageBinary {
		if len(msg) < 4 || int(binary.BigEndian.Uint32(msg)) > len(msg)-4 {
			return fail(errors.New("a binary answer shorter than its header says"))
		}
		n := binary.BigEndian.Uint32(msg)
		msg, img = msg[4:4+n], msg[4+n:]
	}
	var resp api.Response
	if err := json.Unmarshal(msg, &resp); err != nil {
		return fail(fmt.Errorf("an answer that is not JSON: %w", err))
	}
	if resp.ID != req.ID {
		return fail(fmt.Errorf("the answer to request %d came for request %d", resp.ID, req.ID))
	}
	if resp.Error != nil {
		return nil, nil, resp.Error
	}
	return &resp, img, nil
}

// decode makes the observation's screen from its image.
func (e *Env) decode(obs *api.Observation, img []byte) (*Observation, error) {
	o := &Observation{Observation: *obs}
	o.Frame.Data = nil
	f := obs.Frame
	if f.Format == api.ImageNone || f.Format == "" {
		return o, nil
	}
	hash, err := strconv.ParseUint(f.Hash, 16, 64)
	if err != nil {
		return nil, fmt.Errorf("client: frame hash %q: %w", f.Hash, err)
	}
	switch {
	case f.Unchanged:
		if e.last == nil || e.last.Hash != hash {
			return nil, errors.New("client: the server sent no image for a screen the client does not have")
		}
		o.Screen = e.last
		return o, nil
	case f.Format == api.ImageRGBA:
		if len(img) != 4*f.Width*f.Height {
			return nil, fmt.Errorf("client: an rgba frame of %dx%d with %d bytes", f.Width, f.Height, len(img))
		}
		o.Screen = &observe.Frame{Width: f.Width, Height: f.Height, Pix: img, Hash: hash}
	case f.Format == api.ImagePNG:
		m, err := png.Decode(bytes.NewReader(img))
		if err != nil {
			return nil, fmt.Errorf("client: the screenshot: %w", err)
		}
		rgba, ok := m.(*image.RGBA)
		if !ok || rgba.Stride != 4*f.Width {
			rgba = image.NewRGBA(image.Rect(0, 0, f.Width, f.Height))
			draw.Draw(rgba, rgba.Rect, m, m.Bounds().Min, draw.Src)
		}
		o.Screen = &observe.Frame{Width: f.Width, Height: f.Height, Pix: rgba.Pix, Hash: hash}
	default:
		return nil, fmt.Errorf("client: an image of format %q", f.Format)
	}
	e.last = o.Screen
	return o, nil
}
