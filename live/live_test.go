package live

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/app"
	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/observe"
	"github.com/codegirl-games/agentbox/policy"
	"github.com/codegirl-games/agentbox/session"
	"github.com/codegirl-games/agentbox/trace"
)

// ---- a fake sandbox: a 64×48 screen whose dot moves right on each key ----

type fakeBackend struct {
	watch bool // the environments tell when their screen changes
	mu    sync.Mutex
	envs  []*fakeEnv
}

func (b *fakeBackend) Name() string { return "fake" }

func (b *fakeBackend) Create(_ context.Context, cfg environment.Config) (environment.Environment, error) {
	e := &fakeEnv{cfg: cfg}
	b.mu.Lock()
	b.envs = append(b.envs, e)
	b.mu.Unlock()
	if b.watch {
		e.subs = map[chan struct{}]struct{}{}
		return watchingEnv{e}, nil
	}
	return e, nil
}

// watchingEnv is a fakeEnv that tells when its screen changes (after an
// action that moves the dot), as guestenv.Env does.
type watchingEnv struct{ *fakeEnv }

func (e watchingEnv) WatchScreen(context.Context) (<-chan struct{}, func(), error) {
	ch := make(chan struct{}, 1)
	e.mu.Lock()
	e.subs[ch] = struct{}{}
	e.mu.Unlock()
	return ch, func() {
		e.mu.Lock()
		delete(e.subs, ch)
		e.mu.Unlock()
	}, nil
}

func (e *fakeEnv) watchers() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.subs)
}

type fakeEnv struct {
	cfg environment.Config

	mu      sync.Mutex
	x       int
	actions []action.Action
	looks   int
	slow    time.Duration // how long a look takes
	subs    map[chan struct{}]struct{}
}

func (e *fakeEnv) Info() environment.Info { return environment.Info{Backend: "fake", ID: "f"} }

func (e *fakeEnv) Launch(context.Context, environment.LaunchSpec) (environment.LaunchResult, error) {
	e.cfg.Events.Output(observe.Stdout, []byte("fake: ready\n"), 0)
	return environment.LaunchResult{PID: 1}, nil
}

func (e *fakeEnv) Observe(context.Context) (*observe.Frame, environment.State, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	time.Sleep(e.slow)
	e.looks++
	w, h := 80, 64
	pix := make([]byte, 4*w*h)
	for i := 3; i < len(pix); i += 4 {
		pix[i] = 255
	}
	for y := 20; y < 24; y++ {
		for x := e.x; x < e.x+4 && x < w; x++ {
			pix[4*(y*w+x)+1] = 255
		}
	}
	return &observe.Frame{Width: w, Height: h, Pix: pix, Hash: uint64(e.x) + 1}, environment.State{Running: true, Cursor: action.Point{X: 3, Y: 4}}, nil
}

func (e *fakeEnv) Act(_ context.Context, a action.Action) (action.Result, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.actions = append(e.actions, a)
	if a.Kind == action.Key || a.Kind == action.Type || a.Kind == action.Click {
		e.x = (e.x + 8) % 60
		for ch := range e.subs {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}
	return action.Result{OK: true}, nil
}

func (e *fakeEnv) performed() []action.Action {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]action.Action(nil), e.actions...)
}

func (e *fakeEnv) Close(context.Context) error { return nil }

// ---- a live server with one view of an open session ----

type harness struct {
	srv  *Server
	addr string
	sess *session.Session
	view *View
	env  *fakeEnv
	dir  string
}

func start(t *testing.T, o Options, mod func(*session.Config)) *harness {
	t.Helper()
	o.FrameInterval = 10 * time.Millisecond
	s := New(o)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.Serve(ln)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s.Close(ctx)
	})
	h := &harness{srv: s, addr: ln.Addr().String()}
	b := &fakeBackend{}
	h.dir = filepath.Join(t.TempDir(), "trace")
	v := s.Add(Info{Name: "fake", Task: "watch", Screen: observe.Screen{Width: 80, Height: 64, Depth: 24}})
	cfg := session.Config{RunID: "live", Backend: b, TraceDir: h.dir, Actor: trace.ActorRemote,
		Env: environment.Config{Screen: observe.Screen{Width: 80, Height: 64, Depth: 24}},
		App: &app.Bundle{Target: "fake", Manifest: app.Manifest{Command: "fake"}}, Listener: v.Listen}
	if mod != nil {
		mod(&cfg)
	}
	sess, err := session.Open(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sess.Close(context.Background(), session.End{Outcome: trace.Interrupted, Reason: trace.ReasonClosed})
	})
	v.Open(sess)
	h.sess, h.view, h.env = sess, v, b.envs[0]
	return h
}

func (h *harness) base() string { return "http://" + h.addr }

// noRedirect is a client that shows redirects instead of following them.
var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

func get(t *testing.T, url string, hdr map[string]string) *http.Response {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

// cookieFor goes through the first load with a token and returns the
// cookie it sets.
func (h *harness) cookieFor(t *testing.T, param, tok string) *http.Cookie {
	t.Helper()
	resp := get(t, h.base()+"/?"+param+"="+tok, nil)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/" {
		t.Fatalf("first load: %d, Location %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	cs := resp.Cookies()
	if len(cs) != 1 {
		t.Fatalf("cookies %v", cs)
	}
	return cs[0]
}

// TestTokenMovesToCookie: the printed address carries the token; the
// first load moves it into an HttpOnly, SameSite=Strict cookie named for
// the port and sends the browser on without it; the page then loads
// with the cookie alone, under a policy that runs only its own script
// and style.
func TestTokenMovesToCookie(t *testing.T) {
	h := start(t, Options{}, nil)
	u := h.srv.URL()
	if !strings.HasPrefix(u, h.base()+"/?token=") || len(strings.TrimPrefix(u, h.base()+"/?token=")) != 64 {
		t.Fatalf("URL %q", u)
	}
	tok := strings.TrimPrefix(u, h.base()+"/?token=")
	c := h.cookieFor(t, "token", tok)
	_, port, _ := net.SplitHostPort(h.addr)
	if c.Name != "agentbox_live_"+port || c.Value != tok || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/" || c.MaxAge != 0 || !c.Expires.IsZero() {
		t.Errorf("cookie %+v: want HttpOnly, SameSite=Strict, Path=/, for the session only, named for the port", c)
	}
	hdr := map[string]string{"Cookie": c.Name + "=" + c.Value}
	resp := get(t, h.base()+"/", hdr)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/v/1" {
		t.Fatalf("the first page of a run: %d → %q, want the run's view", resp.StatusCode, resp.Header.Get("Location"))
	}
	req, _ := http.NewRequest("GET", h.base()+"/v/1", nil)
	req.Header.Set("Cookie", hdr["Cookie"])
	r2, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(r2.Body)
	r2.Body.Close()
	if r2.StatusCode != 200 || r2.Header.Get("Content-Security-Policy") != CSP || r2.Header.Get("X-Frame-Options") != "DENY" || r2.Header.Get("Referrer-Policy") != "no-referrer" {
		t.Fatalf("the view: %d, headers %v", r2.StatusCode, r2.Header)
	}
	if strings.Contains(CSP, "unsafe") || !strings.Contains(CSP, "default-src 'none'") || !strings.Contains(CSP, "connect-src 'self'") || !strings.Contains(CSP, "frame-ancestors 'none'") {
		t.Errorf("CSP %q", CSP)
	}
	for _, c := range []struct{ tag, directive string }{{"style", "style-src"}, {"script", "script-src"}} {
		m := regexp.MustCompile(`(?s)<` + c.tag + `>(.*?)</` + c.tag + `>`).FindSubmatch(page)
		if m == nil {
			t.Fatalf("no inline %s", c.tag)
		}
		sum := sha256.Sum256(m[1])
		if want := c.directive + " 'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"; !strings.Contains(CSP, want) {
			t.Errorf("CSP lacks %q: the page's %s would not run", want, c.tag)
		}
	}
	if regexp.MustCompile(`(?i)\son[a-z]+=`).Match(page) || strings.Contains(string(page), tok) {
		t.Errorf("the page has an inline handler, or the token")
	}
}

// TestRefused: every way in without the run's token, from another host
// name or another origin, is refused before anything is served.
func TestRefused(t *testing.T) {
	h := start(t, Options{}, nil)
	tok := strings.TrimPrefix(h.srv.URL(), h.base()+"/?token=")
	good := h.cookieFor(t, "token", tok)
	ck := good.Name + "=" + good.Value
	_, port, _ := net.SplitHostPort(h.addr)
	for _, c := range []struct {
		name string
		path string
		hdr  map[string]string
		want int
	}{
		{"no cookie", "/v/1", nil, 401},
		{"another run's token", "/?token=" + strings.Repeat("0", 64), nil, 401},
		{"a wrong cookie", "/v/1", map[string]string{"Cookie": good.Name + "=" + strings.Repeat("a", 64)}, 401},
		{"the cookie of another port", "/v/1", map[string]string{"Cookie": "agentbox_live_1=" + good.Value}, 401},
		{"a token in a WebSocket's address", "/ws/v/1?token=" + tok, nil, 401},
		{"a rebound host name", "/v/1", map[string]string{"Cookie": ck, "Host": "evil.example:" + port}, 421},
		{"a LAN address as Host", "/v/1", map[string]string{"Cookie": ck, "Host": "192.168.1.5:" + port}, 421},
		{"another origin", "/v/1", map[string]string{"Cookie": ck, "Origin": "http://evil.example"}, 403},
		{"another port's origin", "/v/1", map[string]string{"Cookie": ck, "Origin": "http://127.0.0.1:1"}, 403},
		{"a cross-site fetch", "/v/1", map[string]string{"Cookie": ck, "Sec-Fetch-Site": "cross-site"}, 403},
		{"no such view", "/v/99", map[string]string{"Cookie": ck}, 404},
		{"no such page", "/report.html", map[string]string{"Cookie": ck}, 404},
		{"localhost is fine", "/v/1", map[string]string{"Cookie": ck, "Host": "localhost:" + port}, 200},
		{"its own origin is fine", "/v/1", map[string]string{"Cookie": ck, "Origin": "http://" + h.addr, "Sec-Fetch-Site": "same-origin"}, 200},
	} {
		t.Run(c.name, func(t *testing.T) {
			if resp := get(t, h.base()+c.path, c.hdr); resp.StatusCode != c.want {
				t.Errorf("%d, want %d", resp.StatusCode, c.want)
			}
		})
	}
	// The WebSocket from another origin (a page of another site that
	// found the port) is refused even with the cookie.
	_, resp, err := websocket.Dial(t.Context(), "ws://"+h.addr+"/ws/v/1", &websocket.DialOptions{HTTPHeader: http.Header{
		"Cookie": {ck}, "Origin": {"http://evil.example"}}})
	if err == nil || resp == nil || resp.StatusCode != 403 {
		t.Errorf("a WebSocket from another origin: %v, %v", resp, err)
	}
}

// TestListenLoopbackOnly: the page listens on loopback only.
func TestListenLoopbackOnly(t *testing.T) {
	s := New(Options{})
	defer s.Close(context.Background())
	err := s.Listen("0.0.0.0:0")
	if err == nil || !strings.Contains(err.Error(), "loopback only") {
		t.Fatalf("Listen on every address: %v", err)
	}
	if err := s.Listen("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
}

// ---- a page's WebSocket, as the browser's script uses it ----

type page struct {
	t    *testing.T
	ws   *websocket.Conn
	msgs chan map[string]any
	bins chan []byte
}

func (h *harness) open(t *testing.T, param, tok string) *page {
	t.Helper()
	c := h.cookieFor(t, param, tok)
	ws, _, err := websocket.Dial(t.Context(), "ws://"+h.addr+"/ws/v/"+h.view.id, &websocket.DialOptions{HTTPHeader: http.Header{
		"Cookie": {c.Name + "=" + c.Value}, "Origin": {"http://" + h.addr}}})
	if err != nil {
		t.Fatal(err)
	}
	ws.SetReadLimit(16 << 20)
	p := &page{t: t, ws: ws, msgs: make(chan map[string]any, 1000), bins: make(chan []byte, 1000)}
	go func() {
		defer close(p.msgs)
		for {
			typ, data, err := ws.Read(context.Background())
			if err != nil {
				return
			}
			if typ == websocket.MessageBinary {
				p.bins <- data
				continue
			}
			var m map[string]any
			json.Unmarshal(data, &m)
			p.msgs <- m
		}
	}()
	t.Cleanup(func() { ws.CloseNow() })
	return p
}

func (h *harness) control(t *testing.T) *page {
	return h.open(t, "token", strings.TrimPrefix(h.srv.URL(), h.base()+"/?token="))
}

func (h *harness) readOnly(t *testing.T) *page {
	return h.open(t, "view", strings.TrimPrefix(h.srv.ReadOnlyURL(), h.base()+"/?view="))
}

func (p *page) send(m map[string]any) {
	b, _ := json.Marshal(m)
	if err := p.ws.Write(p.t.Context(), websocket.MessageText, b); err != nil {
		p.t.Fatal(err)
	}
}

// await returns the first message that match accepts.
func (p *page) await(what string, match func(map[string]any) bool) map[string]any {
	p.t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case m, ok := <-p.msgs:
			if !ok {
				p.t.Fatalf("the connection closed while waiting for %s", what)
			}
			if match(m) {
				return m
			}
		case <-deadline:
			p.t.Fatalf("no %s", what)
		}
	}
}

func isT(t string) func(map[string]any) bool {
	return func(m map[string]any) bool { return m["t"] == t }
}

func isEvent(kind string) func(map[string]any) bool {
	return func(m map[string]any) bool {
		ev, _ := m["ev"].(map[string]any)
		return m["t"] == "ev" && ev["kind"] == kind
	}
}

func (p *page) frame() frameHeader {
	p.t.Helper()
	select {
	case b := <-p.bins:
		n := binary.BigEndian.Uint32(b)
		var h frameHeader
		if err := json.Unmarshal(b[4:4+n], &h); err != nil {
			p.t.Fatal(err)
		}
		if string(b[4+n:4+n+8]) != "\x89PNG\r\n\x1a\n" {
			p.t.Fatalf("frame %d is not a PNG", h.Seq)
		}
		return h
	case <-time.After(30 * time.Second):
		p.t.Fatal("no frame")
	}
	return frameHeader{}
}

// TestFramesOnlyWhenChanged: a page gets the whole screen first, then
// only the rectangle that changed, and nothing while the screen stays.
func TestFramesOnlyWhenChanged(t *testing.T) {
	h := start(t, Options{}, nil)
	p := h.control(t)
	hello := p.await("hello", isT("hello"))
	if hello["role"] != RoleControl {
		t.Errorf("hello %v", hello)
	}
	f := p.frame()
	if !f.Full || f.W != 80 || f.H != 64 || f.SW != 80 || f.Cur != [2]int{3, 4} || f.Before > f.Seen {
		t.Fatalf("first frame %+v", f)
	}
	// Nothing changes: no frame, though the screen is looked at.
	looks := func() int { h.env.mu.Lock(); defer h.env.mu.Unlock(); return h.env.looks }
	n := looks()
	for looks() < n+10 {
		time.Sleep(5 * time.Millisecond)
	}
	select {
	case <-p.bins:
		t.Fatal("a frame was sent for an unchanged screen")
	default:
	}
	// The agent (here a remote controller) moves the dot: a rectangle
	// around it arrives, and the step with it.
	if _, err := h.sess.Act(t.Context(), session.Step{Action: action.Action{Kind: action.Key, Keys: "Right"}}); err != nil {
		t.Fatal(err)
	}
	f = p.frame()
	if f.Full || f.X != 0 || f.Y != 20 || f.W != 12 || f.H != 4 {
		t.Errorf("the change arrives as %+v, want the rectangle x 0–12, y 20–24", f)
	}
	st := p.await("the step", isEvent(session.EventStep))
	if ev := st["ev"].(map[string]any); ev["actor"] != trace.ActorRemote || st["s"] != "key Right" {
		t.Errorf("step event %v", st)
	}
}

// TestFramesFollowChanges: where the sandbox tells when its screen
// changes, a watched idle screen is looked at only at the backstop, and a
// change reaches the page at once.
func TestFramesFollowChanges(t *testing.T) {
	for _, tt := range []struct {
		name     string
		backstop time.Duration
	}{{"no backstop meanwhile", time.Hour}, {"the backstop", 20 * time.Millisecond}} {
		t.Run(tt.name, func(t *testing.T) {
			h := start(t, Options{Backstop: tt.backstop}, func(c *session.Config) { c.Backend.(*fakeBackend).watch = true })
			p := h.control(t)
			p.await("hello", isT("hello"))
			p.frame()
			if n := h.env.watchers(); n != 1 {
				t.Fatalf("%d subscribers to the screen's changes, want 1", n)
			}
			looks := func() int { h.env.mu.Lock(); defer h.env.mu.Unlock(); return h.env.looks }
			n := looks()
			if tt.backstop == time.Hour {
				// Polling at FrameInterval (10 ms) would look about 30 times
				// meanwhile; a slower machine only looks less.
				time.Sleep(300 * time.Millisecond)
				if got := looks(); got != n {
					t.Errorf("%d looks at an idle screen within its backstop, want none", got-n)
				}
			} else {
				deadline := time.Now().Add(time.Minute)
				for looks() < n+3 {
					if time.Now().After(deadline) {
						t.Fatalf("%d looks in a minute with a backstop of %v", looks()-n, tt.backstop)
					}
					time.Sleep(5 * time.Millisecond)
				}
			}
			if _, err := h.sess.Act(t.Context(), session.Step{Action: action.Action{Kind: action.Key, Keys: "Right"}}); err != nil {
				t.Fatal(err)
			}
			if f := p.frame(); f.Full || f.W != 12 {
				t.Errorf("the change arrives as %+v", f)
			}
			p.ws.Close(websocket.StatusNormalClosure, "")
			deadline := time.Now().Add(time.Minute)
			for h.env.watchers() != 0 {
				if time.Now().After(deadline) {
					t.Fatal("still subscribed a minute after the page closed")
				}
				time.Sleep(5 * time.Millisecond)
			}
		})
	}
}

// TestTakeover: a viewer with the control token takes control (the
// session's controller pauses), sends input that is performed and
// recorded as the person's, has a bad action refused as any agent's
// would be, and hands back; another viewer cannot take control
// meanwhile and a read-only viewer never.
func TestTakeover(t *testing.T) {
	h := start(t, Options{}, nil)
	a, b, ro := h.control(t), h.control(t), h.readOnly(t)
	for _, p := range []*page{a, b, ro} {
		p.await("hello", isT("hello"))
	}
	ro.send(map[string]any{"t": "take"})
	if m := ro.await("an error", isT("error")); !strings.Contains(m["message"].(string), "read-only") {
		t.Errorf("a read-only viewer's takeover: %v", m)
	}
	ro.send(map[string]any{"t": "act", "id": 1, "a": map[string]any{"action": "key", "keys": "a"}})
	if m := ro.await("acted", isT("acted")); m["ok"] != false || !strings.Contains(m["error"].(string), "read-only") {
		t.Errorf("a read-only viewer's input: %v", m)
	}
	a.send(map[string]any{"t": "act", "id": 1, "a": map[string]any{"action": "key", "keys": "a"}})
	if m := a.await("acted", isT("acted")); m["ok"] != false || !strings.Contains(m["error"].(string), "take control first") {
		t.Errorf("input before taking control: %v", m)
	}

	a.send(map[string]any{"t": "take"})
	a.await("the lease", func(m map[string]any) bool { return m["t"] == "lease" && m["holder"] == "you" })
	if m := b.await("the lease", isT("lease")); m["holder"] == "" || m["holder"] == "you" {
		t.Errorf("the other viewer is told %v", m)
	}
	if c := h.sess.Control(); !c.Human {
		t.Fatalf("the session is not under the person's control: %+v", c)
	}
	b.send(map[string]any{"t": "take"})
	if m := b.await("an error", isT("error")); m["message"] != errHeld.Error() {
		t.Errorf("a second takeover: %v", m)
	}

	// The person's input: typed text with non-ASCII, a key chord, a
	// double click; then an off-screen click (rejected by validation and
	// recorded as such) and a malformed action (refused by the parser,
	// not recorded).
	inputs := []map[string]any{
		{"action": "type", "text": "héllo ✓"},
		{"action": "key", "keys": "ctrl+shift+t"},
		{"action": "click", "x": 10, "y": 12, "button": "right", "count": 2},
	}
	for i, in := range inputs {
		a.send(map[string]any{"t": "act", "id": i + 1, "a": in})
		if m := a.await("acted", isT("acted")); m["ok"] != true || m["id"] != float64(i+1) {
			t.Fatalf("input %v: %v", in, m)
		}
	}
	a.send(map[string]any{"t": "act", "id": 8, "a": map[string]any{"action": "click", "x": 999, "y": 1}})
	if m := a.await("acted", isT("acted")); m["ok"] != false || m["invalid"] != true {
		t.Errorf("an off-screen click: %v", m)
	}
	a.send(map[string]any{"t": "act", "id": 9, "a": map[string]any{"action": "key", "keys": "a", "evil": 1}})
	if m := a.await("acted", isT("acted")); m["ok"] != false || m["invalid"] != true || !strings.Contains(m["error"].(string), "evil") {
		t.Errorf("a malformed action: %v", m)
	}
	a.send(map[string]any{"t": "back"})
	a.await("the lease", func(m map[string]any) bool { return m["t"] == "lease" && m["holder"] == "" })
	if c := h.sess.Control(); c.Human {
		t.Errorf("still under the person's control after the hand-back")
	}
	got := h.env.performed()
	if len(got) != 3 || got[0].Text != "héllo ✓" || got[1].Keys != "ctrl+shift+t" || got[2].Count != 2 || got[2].Button != action.Right {
		t.Errorf("performed %+v", got)
	}
	h.sess.Close(t.Context(), session.End{Outcome: trace.Interrupted, Reason: trace.ReasonClosed})
	tr, err := trace.Open(h.dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.Steps) != 4 {
		t.Fatalf("%d steps recorded, want 4 (the malformed action is not one)", len(tr.Steps))
	}
	for _, st := range tr.Steps {
		if st.Actor != trace.ActorHuman {
			t.Errorf("step %d: actor %q", st.Step, st.Actor)
		}
	}
	if tr.Steps[3].Invalid == "" {
		t.Errorf("the off-screen click is not recorded as rejected")
	}
	var take, back int
	for _, r := range tr.Records {
		switch r.Event {
		case trace.EventTakeover:
			take++
			if !strings.HasPrefix(fmt.Sprint(r.Data["by"]), "viewer ") {
				t.Errorf("takeover by %v", r.Data["by"])
			}
		case trace.EventHandBack:
			back++
		}
	}
	if take != 1 || back != 1 {
		t.Errorf("%d takeovers, %d hand-backs recorded", take, back)
	}
}

// TestControlEndsWithThePage: control is handed back when the page in
// control closes, and when it falls silent beyond the lease.
func TestControlEndsWithThePage(t *testing.T) {
	for _, c := range []struct {
		name, reason string
		leave        func(p *page)
	}{
		{"the page closes", "the person left the live page", func(p *page) { p.ws.Close(websocket.StatusNormalClosure, "") }},
		{"the page falls silent", "the page of the person in control stopped answering", func(*page) {}},
	} {
		t.Run(c.name, func(t *testing.T) {
			reasons := make(chan string, 4)
			h := start(t, Options{Lease: 300 * time.Millisecond}, nil)
			p := h.control(t)
			p.await("hello", isT("hello"))
			watch := h.readOnly(t)
			p.send(map[string]any{"t": "take"})
			p.await("the lease", func(m map[string]any) bool { return m["t"] == "lease" && m["holder"] == "you" })
			go func() {
				m := watch.await("the hand-back", isEvent(session.EventHandBack))
				reasons <- m["ev"].(map[string]any)["reason"].(string)
			}()
			c.leave(p)
			select {
			case r := <-reasons:
				if r != c.reason {
					t.Errorf("handed back because %q, want %q", r, c.reason)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("control was not handed back")
			}
			if h.sess.Control().Human {
				t.Error("the session is still under the person's control")
			}
		})
	}
}

// TestCloseEndsThePage: closing the server (the run ended) tells every
// page and closes its connection; nothing answers afterwards.
func TestCloseEndsThePage(t *testing.T) {
	h := start(t, Options{}, nil)
	p := h.control(t)
	p.await("hello", isT("hello"))
	h.sess.Close(t.Context(), session.End{Outcome: trace.Success, Reason: trace.ReasonDone, Message: "done"})
	if m := p.await("the end", isEvent(session.EventEnd)); m["ev"].(map[string]any)["end"].(map[string]any)["outcome"] != "success" {
		t.Errorf("end event %v", m)
	}
	h.view.Finish(session.Result{Outcome: trace.Success, Reason: trace.ReasonDone})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.srv.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if m := p.await("closed", isT("closed")); !strings.Contains(m["message"].(string), "the run has ended") {
		t.Errorf("closed message %v", m)
	}
	if _, err := http.Get(h.base() + "/"); err == nil {
		t.Error("the server still answers")
	}
}

// TestNoAgentRun: in a run without an agent the person has control from
// the start: the page takes the lease (no takeover), acts, cannot hand
// back, and finishes the run with done.
func TestNoAgentRun(t *testing.T) {
	s := New(Options{FrameInterval: 10 * time.Millisecond})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.Serve(ln)
	defer s.Close(context.Background())
	h := &harness{srv: s, addr: ln.Addr().String()}
	v := s.Add(Info{Name: "demo"})
	h.view = v
	dir := filepath.Join(t.TempDir(), "trace")
	res := make(chan session.Result, 1)
	go func() {
		r, err := session.Run(t.Context(), session.Config{RunID: "demo", Backend: &fakeBackend{}, TraceDir: dir, Timeout: time.Minute,
			AgentInfo: trace.AgentInfo{Name: "human"}, Env: environment.Config{Screen: observe.Screen{Width: 80, Height: 64, Depth: 24}},
			App: &app.Bundle{Target: "fake", Manifest: app.Manifest{Command: "fake"}}, Listener: v.Listen}, session.Loop{Opened: v.Open})
		if err != nil {
			t.Error(err)
		}
		v.Finish(r)
		res <- r
	}()
	for v.status().State == StateStarting {
		time.Sleep(5 * time.Millisecond)
	}
	p := h.control(t)
	if hello := p.await("hello", isT("hello")); hello["state"].(map[string]any)["state"] != StatePaused || hello["state"].(map[string]any)["no_agent"] != true {
		t.Errorf("hello %v", hello)
	}
	p.send(map[string]any{"t": "take"})
	p.await("the lease", func(m map[string]any) bool { return m["t"] == "lease" && m["holder"] == "you" })
	p.send(map[string]any{"t": "back"})
	if m := p.await("an error", isT("error")); !strings.Contains(m["message"].(string), "no agent to hand control back to") {
		t.Errorf("hand back without an agent: %v", m)
	}
	p.send(map[string]any{"t": "act", "id": 1, "a": map[string]any{"action": "type", "text": "x"}})
	p.send(map[string]any{"t": "act", "id": 2, "a": map[string]any{"action": "done", "message": "shown"}})
	p.await("done", func(m map[string]any) bool { return m["t"] == "acted" && m["id"] == float64(2) })
	select {
	case r := <-res:
		if r.Outcome != trace.Success || r.Message != "shown" || r.Steps != 2 {
			t.Errorf("%+v", r)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the run did not end")
	}
	tr, err := trace.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range tr.Steps {
		if st.Actor != trace.ActorHuman {
			t.Errorf("step %d: actor %q", st.Step, st.Actor)
		}
	}
}

// TestGrid: a grid page lists every view with its state and gets a
// thumbnail of each running one.
func TestGrid(t *testing.T) {
	h := start(t, Options{Grid: true, ThumbInterval: 50 * time.Millisecond}, nil)
	h.srv.Add(Info{Name: "second"}) // never opens: starting
	c := h.cookieFor(t, "token", strings.TrimPrefix(h.srv.URL(), h.base()+"/?token="))
	hdr := map[string]string{"Cookie": c.Name + "=" + c.Value}
	if resp := get(t, h.base()+"/", hdr); resp.StatusCode != 200 {
		t.Fatalf("the grid page: %d", resp.StatusCode)
	}
	ws, _, err := websocket.Dial(t.Context(), "ws://"+h.addr+"/ws/grid", &websocket.DialOptions{HTTPHeader: http.Header{
		"Cookie": {hdr["Cookie"]}, "Origin": {"http://" + h.addr}}})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	var list []status
	thumb := false
	deadline := time.Now().Add(30 * time.Second)
	for (list == nil || !thumb) && time.Now().Before(deadline) {
		typ, data, err := ws.Read(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if typ == websocket.MessageBinary {
			n := binary.BigEndian.Uint32(data)
			var th struct{ ID string }
			json.Unmarshal(data[4:4+n], &th)
			thumb = th.ID == h.view.id
			continue
		}
		var m struct {
			T     string
			Views []status
		}
		json.Unmarshal(data, &m)
		if m.T == "views" {
			list = m.Views
		}
	}
	if len(list) != 2 || list[0].State != StateRunning || list[1].State != StateStarting || list[0].Info.Name != "fake" || !thumb {
		t.Errorf("views %+v, thumbnail %v", list, thumb)
	}
}

// TestPageBeforeTheSessionOpens: a page that connects while the sandbox
// is starting is told when the run is running (it used to stay
// "starting" until the run ended).
func TestPageBeforeTheSessionOpens(t *testing.T) {
	s := New(Options{FrameInterval: 10 * time.Millisecond})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.Serve(ln)
	t.Cleanup(func() { s.Close(context.Background()) })
	h := &harness{srv: s, addr: ln.Addr().String()}
	v := s.Add(Info{Name: "early"})
	h.view = v
	p := h.control(t)
	if hello := p.await("hello", isT("hello")); hello["state"].(map[string]any)["state"] != StateStarting {
		t.Fatalf("hello before the session opened: %v", hello)
	}
	sess, err := session.Open(t.Context(), session.Config{RunID: "early", Backend: &fakeBackend{}, TraceDir: filepath.Join(t.TempDir(), "trace"),
		Env: environment.Config{Screen: observe.Screen{Width: 80, Height: 64, Depth: 24}},
		App: &app.Bundle{Target: "fake", Manifest: app.Manifest{Command: "fake"}}, Listener: v.Listen})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sess.Close(context.Background(), session.End{Outcome: trace.Interrupted, Reason: trace.ReasonClosed})
	})
	v.Open(sess)
	p.await("the state running", func(m map[string]any) bool {
		st, _ := m["state"].(map[string]any)
		return st != nil && st["state"] == StateRunning
	})
	if h := p.frame(); !h.Full {
		t.Errorf("the first frame is not whole: %+v", h)
	}
}

// TestWatchingKeepsToBudget: when a look at the screen takes long (here
// 20 ms, as a full screen sent by a busy sandbox may), a watched view
// spaces its looks out so that they take about Budget of the time: ten
// looks at a tenth take well over a second (about 1.5 s as the smoothed
// cost rises to 20 ms), where a budget of the whole time takes them at
// the pace of the looks themselves (the control, logged). A loaded
// machine only makes looks slower, never this lower bound shorter.
func TestWatchingKeepsToBudget(t *testing.T) {
	for _, c := range []struct {
		budget  float64
		atLeast time.Duration
	}{{0.1, time.Second}, {1, 0}} {
		t.Run(fmt.Sprint(c.budget), func(t *testing.T) {
			h := start(t, Options{Budget: c.budget}, nil)
			h.env.mu.Lock()
			h.env.slow = 20 * time.Millisecond
			h.env.mu.Unlock()
			p := h.control(t)
			p.frame()
			looks := func() int {
				h.env.mu.Lock()
				defer h.env.mu.Unlock()
				return h.env.looks
			}
			n0, t0 := looks(), time.Now()
			deadline := time.Now().Add(time.Minute)
			for looks() < n0+10 {
				if time.Now().After(deadline) {
					t.Fatalf("only %d looks in a minute", looks()-n0)
				}
				time.Sleep(5 * time.Millisecond)
			}
			took := time.Since(t0)
			t.Logf("budget %v: 10 looks of 20 ms took %v", c.budget, took)
			if took < c.atLeast {
				t.Errorf("10 looks of 20 ms took %v at a budget of %v, want at least %v", took, c.budget, c.atLeast)
			}
		})
	}
}

// approverFunc lets a test hand the session an approver made later.
type approverFunc func(context.Context, policy.Request) (policy.Answer, error)

func (f approverFunc) Approve(ctx context.Context, r policy.Request) (policy.Answer, error) {
	return f(ctx, r)
}

// TestApproveLive: with --approve live the policy's ask comes to the page
// as an approval event; a read-only page cannot answer it, a control page
// can, and the action runs only after its yes — a no is a denial; an
// answer to an ask that no longer waits is an error.
func TestApproveLive(t *testing.T) {
	pol, err := policy.Parse("p.yaml", []byte("rules:\n  - {name: keys, kind: [key], decision: ask}\n"))
	if err != nil {
		t.Fatal(err)
	}
	var ap atomic.Pointer[View]
	h := start(t, Options{}, func(cfg *session.Config) {
		cfg.Policy = pol
		cfg.Approver = approverFunc(func(ctx context.Context, r policy.Request) (policy.Answer, error) {
			return ap.Load().Approver().Approve(ctx, r)
		})
	})
	ap.Store(h.view)
	ro, p := h.readOnly(t), h.control(t)
	for _, c := range []struct {
		allow bool
		keys  string
	}{{true, "a"}, {false, "b"}} {
		res := make(chan session.StepResult, 1)
		go func() {
			r, err := h.sess.Act(t.Context(), session.Step{Actor: trace.ActorRemote, Action: action.Action{Kind: action.Key, Keys: c.keys}})
			if err != nil {
				t.Error(err)
			}
			res <- r
		}()
		ask := p.await("the ask", func(m map[string]any) bool {
			ev, _ := m["ev"].(map[string]any)
			return isEvent("approval")(m) && ev["answer"] == nil
		})
		id := ask["ev"].(map[string]any)["approval"].(map[string]any)["id"].(string)
		ro.send(map[string]any{"t": "answer", "a": map[string]any{"approval": id, "allow": true}})
		if m := ro.await("an error", isT("error")); !strings.Contains(m["message"].(string), "read-only") {
			t.Errorf("a read-only page's answer: %v", m)
		}
		p.send(map[string]any{"t": "answer", "a": map[string]any{"approval": id, "allow": c.allow}})
		r := <-res
		if r.Result.OK != c.allow || r.Denied != !c.allow {
			t.Errorf("answer %v: the step's result %+v", c.allow, r)
		}
		p.send(map[string]any{"t": "answer", "a": map[string]any{"approval": id, "allow": true}})
		if m := p.await("an error", isT("error")); !strings.Contains(m["message"].(string), "no longer waits") {
			t.Errorf("an answer twice: %v", m)
		}
	}
	got := h.env.performed()
	if len(got) != 1 || got[0].Keys != "a" {
		t.Errorf("performed %+v, want the allowed key only", got)
	}
}
