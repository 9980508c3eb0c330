package serve

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/environment/guestenv/guestenvtest"
	"github.com/codegirl-games/agentbox/serve/api"
)

// heldUpload is an upload whose body goes in two halves: the first at
// once, the second once release is closed (issue 22, finding 1: the
// red team sent them two seconds apart).
type heldUpload struct {
	status int
	code   string
	msg    string
	err    error
	done   chan struct{}
}

// holdUpload starts an upload of body with token, holding its second
// half until release is closed.
func (h *harness) holdUpload(token string, body []byte, release <-chan struct{}) *heldUpload {
	u := &heldUpload{done: make(chan struct{})}
	pr, pw := io.Pipe()
	half := len(body) / 2
	go func() {
		if _, err := pw.Write(body[:half]); err != nil {
			return
		}
		select {
		case <-release:
		case <-u.done: // answered before its second half
			return
		}
		if _, err := pw.Write(body[half:]); err == nil {
			pw.Close()
		}
	}()
	go func() {
		defer close(u.done)
		defer pr.CloseWithError(errors.New("answered"))
		hr, err := http.NewRequest("POST", h.url+"/v1/uploads", pr)
		if err != nil {
			u.err = err
			return
		}
		hr.Header.Set("Authorization", "Bearer "+token)
		hr.Header.Set("Content-Type", "application/x-tar")
		resp, err := (&http.Client{Timeout: 2 * time.Minute}).Do(hr)
		if err != nil {
			u.err = err
			return
		}
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		u.status = resp.StatusCode
		var eb api.ErrorBody
		if resp.StatusCode >= 300 && json.Unmarshal(data, &eb) == nil {
			u.code, u.msg = eb.Error.Code, eb.Error.Message
		}
	}()
	return u
}

// answered reports whether u has its answer.
func (u *heldUpload) answered() bool {
	select {
	case <-u.done:
		return true
	default:
		return false
	}
}

// uploadDirs counts the directories uploads are (being) unpacked in.
func (h *harness) uploadDirs() int {
	entries, _ := os.ReadDir(h.srv.o.UploadDir)
	return len(entries)
}

// TestUploadSlotsHoldUnderConcurrency (issue 22, finding 1): uploads sent
// at once, each body in two halves, cannot all pass the token's count
// and then all be added; nor can they all be received at once over the
// server. Each test waits until every upload has either started unpacking
// (its directory exists: it passed the count) or been answered, then
// sends the second halves.
func TestUploadSlotsHoldUnderConcurrency(t *testing.T) {
	cases := []struct {
		name                  string
		maxUploads, receiving int
		tokens                []string
		n                     int
		want                  int // uploads that succeed
		refusal               string
	}{
		// The red team's: --max-uploads 1, eight at once from one token.
		{"one token's count", 1, 16, []string{testToken}, 8, 1, "this token holds 1 uploads"},
		// Two tokens of plenty: at most two received at once.
		{"uploads in progress over the server", 8, 2, []string{testToken, otherToken}, 6, 2, "the server is receiving 2 uploads"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, nil, func(o *Options) { o.MaxUploads, o.UploadsInProgress = c.maxUploads, c.receiving })
			release := make(chan struct{})
			var once sync.Once
			free := func() { once.Do(func() { close(release) }) }
			t.Cleanup(free) // before the server's shutdown, which waits for them
			var ups []*heldUpload
			for i := range c.n {
				ups = append(ups, h.holdUpload(c.tokens[i%len(c.tokens)], gameTar(t), release))
			}
			waitFor(t, func() bool {
				answered := 0
				for _, u := range ups {
					if u.answered() {
						answered++
					}
				}
				return answered+h.uploadDirs() >= c.n
			})
			free()
			ok := 0
			for i, u := range ups {
				<-u.done
				switch {
				case u.err != nil:
					t.Errorf("upload %d: %v", i, u.err)
				case u.status == 201:
					ok++
				case u.status != 429 || u.code != api.CodeTooManyUploads || !strings.Contains(u.msg, c.refusal):
					t.Errorf("upload %d: %d %s %q, want 201 or 429 %s saying %q", i, u.status, u.code, u.msg, api.CodeTooManyUploads, c.refusal)
				}
			}
			held := 0
			for _, tok := range c.tokens {
				var list []api.Upload
				h.do(req{method: "GET", path: "/v1/uploads", token: tok}).decode(t, &list)
				held += len(list)
			}
			if ok != c.want || held != c.want {
				t.Errorf("%d uploads sent at once: %d answered 201 and the tokens hold %d; want %d", c.n, ok, held, c.want)
			}
			if n := h.uploadDirs(); n != c.want {
				t.Errorf("%d directories under the upload directory, want %d", n, c.want)
			}
			// The refused ones gave their slots back: once the held ones
			// are deleted, as many go through again.
			var list []api.Upload
			h.do(req{method: "GET", path: "/v1/uploads"}).decode(t, &list)
			for _, u := range list {
				h.do(req{method: "DELETE", path: "/v1/uploads/" + u.ID})
			}
			if a := h.do(req{method: "POST", path: "/v1/uploads", body: gameTar(t), contentType: "application/x-tar"}); a.status != 201 {
				t.Errorf("an upload after: %d %s", a.status, a.body)
			}
		})
	}
}

// TestUploadTimeout (issue 22, finding 1): an upload whose body does not
// arrive within --upload-timeout is answered, removed, and gives its
// slot back.
func TestUploadTimeout(t *testing.T) {
	h := newHarness(t, nil, func(o *Options) { o.MaxUploads, o.UploadTimeout = 1, time.Second })
	release := make(chan struct{})
	defer close(release)
	u := h.holdUpload(testToken, gameTar(t), release)
	select {
	case <-u.done:
	case <-time.After(time.Minute):
		t.Fatal("an upload whose body stopped half way was not answered within a minute (its timeout is 1s)")
	}
	if u.status != 422 || u.code != api.CodeInvalidUpload || !strings.Contains(u.msg, "did not arrive within 1s") {
		t.Errorf("the stalled upload: %d %s %q %v", u.status, u.code, u.msg, u.err)
	}
	waitFor(t, func() bool { return h.uploadDirs() == 0 })
	if a := h.do(req{method: "POST", path: "/v1/uploads", body: gameTar(t), contentType: "application/x-tar"}); a.status != 201 {
		t.Errorf("the next upload (the slot is free again): %d %s", a.status, a.body)
	}
}

// collidingTokens finds two tokens whose SHA-256 digests share their
// first 4 bytes: a birthday search, about 80,000 digests.
func collidingTokens(t *testing.T) (a, b string) {
	t.Helper()
	seen := make(map[uint32]string, 1<<18)
	for i := range 1 << 24 {
		tok := fmt.Sprintf("collide-%012d", i)
		sum := sha256.Sum256([]byte(tok))
		k := binary.BigEndian.Uint32(sum[:4])
		if prev, ok := seen[k]; ok {
			return prev, tok
		}
		seen[k] = tok
	}
	t.Fatal("no two tokens share 4 bytes of digest in 2^24")
	return "", ""
}

// TestOwnersAreWholeDigests (issue 22, finding 2): two tokens whose
// digests share their first 4 bytes are two owners: the second sees and
// deletes none of the first's uploads and environments. The log shows a
// short label, not the digest; New refuses one token given twice.
func TestOwnersAreWholeDigests(t *testing.T) {
	a, b := collidingTokens(t)
	sa, sb := sha256.Sum256([]byte(a)), sha256.Sum256([]byte(b))
	t.Logf("%s and %s: digests %x… and %x…", a, b, sa[:6], sb[:6])
	h := newHarness(t, nil, func(o *Options) { o.Tokens = []string{a, b} })

	up := h.do(req{method: "POST", path: "/v1/uploads", token: a, body: gameTar(t), contentType: "application/x-tar"})
	if up.status != 201 {
		t.Fatalf("upload: %d %s", up.status, up.body)
	}
	var u api.Upload
	up.decode(t, &u)
	e := h.create(a, "")
	for _, c := range []struct {
		name   string
		r      req
		status int
		body   string
	}{
		{"list the uploads", req{method: "GET", path: "/v1/uploads", token: b}, 200, "[]"},
		{"read the upload", req{method: "GET", path: "/v1/uploads/" + u.ID, token: b}, 404, ""},
		{"delete the upload", req{method: "DELETE", path: "/v1/uploads/" + u.ID, token: b}, 404, ""},
		{"create from the upload", req{method: "POST", path: "/v1/envs", token: b, body: []byte(`{"upload":"` + u.ID + `"}`)}, 404, ""},
		{"list the environments", req{method: "GET", path: "/v1/envs", token: b}, 200, "[]"},
		{"read the environment", req{method: "GET", path: "/v1/envs/" + e.ID, token: b}, 404, ""},
		{"close the environment", req{method: "DELETE", path: "/v1/envs/" + e.ID, token: b}, 404, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := h.do(c.r)
			if r.status != c.status || c.body != "" && strings.TrimSpace(string(r.body)) != c.body {
				t.Errorf("the other token: %d %s, want %d %s", r.status, r.body, c.status, c.body)
			}
		})
	}
	var list []api.Upload
	h.do(req{method: "GET", path: "/v1/uploads", token: a}).decode(t, &list)
	if len(list) != 1 || list[0].ID != u.ID {
		t.Errorf("the first token's uploads after: %+v", list)
	}
	if envs := h.envs(a); len(envs) != 1 || envs[0].ID != e.ID {
		t.Errorf("the first token's environments after: %+v", envs)
	}
	log := h.log.String()
	if !strings.Contains(log, "for token "+hex.EncodeToString(sa[:4])) {
		t.Errorf("the log does not name the owner by its short label:\n%s", log)
	}
	if strings.Contains(log, hex.EncodeToString(sa[:])) || strings.Contains(log, hex.EncodeToString(sa[:5])) {
		t.Errorf("the log prints more of the digest than its label:\n%s", log)
	}

	_, err := New(Options{Backends: []environment.Backend{&guestenvtest.Backend{}}, Tokens: []string{testToken, otherToken, testToken}, UploadDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "tokens 1 and 3 are the same token") {
		t.Errorf("one token twice: %v", err)
	}
}

// TestCrossSiteRefused (issue 22, finding 6): a browser's request from
// another site or origin (Sec-Fetch-Site) is refused for every method,
// GET included; a same-origin request, one typed in the address bar, and
// one from no browser are served.
func TestCrossSiteRefused(t *testing.T) {
	h := newHarness(t, nil, nil)
	e := h.create("", "")
	host := strings.TrimPrefix(h.url, "http://")
	for _, c := range []struct {
		name   string
		r      req
		status int
	}{
		{"a cross-site GET", req{method: "GET", path: "/v1/envs", header: map[string]string{"Sec-Fetch-Site": "cross-site"}}, 403},
		{"a cross-site GET of an observation", req{method: "GET", path: "/v1/envs/" + e.ID + "/observation?image=none", header: map[string]string{"Sec-Fetch-Site": "cross-site"}}, 403},
		{"a cross-site DELETE", req{method: "DELETE", path: "/v1/envs/" + e.ID, header: map[string]string{"Sec-Fetch-Site": "cross-site"}}, 403},
		{"a same-site GET (another port)", req{method: "GET", path: "/v1/envs", header: map[string]string{"Sec-Fetch-Site": "same-site"}}, 403},
		{"a same-origin GET", req{method: "GET", path: "/v1/envs/" + e.ID, header: map[string]string{"Sec-Fetch-Site": "same-origin"}}, 200},
		{"a same-origin POST", req{method: "POST", path: "/v1/envs/" + e.ID + "/act", body: []byte(`{"action":"wait","ms":1}`), header: map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": "http://" + host}}, 200},
		{"a GET typed in the address bar", req{method: "GET", path: "/v1/server", header: map[string]string{"Sec-Fetch-Site": "none"}}, 200},
		{"no browser", req{method: "GET", path: "/v1/server"}, 200},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := h.do(c.r)
			if a.status != c.status || c.status == 403 && a.errorCode() != api.CodeCrossOrigin {
				t.Errorf("got %d %s, want %d", a.status, a.body, c.status)
			}
		})
	}
	ws := "ws" + strings.TrimPrefix(h.url, "http") + "/v1/envs/" + e.ID + "/ws"
	_, resp, err := websocket.Dial(t.Context(), ws, &websocket.DialOptions{HTTPHeader: http.Header{
		"Authorization": {"Bearer " + testToken}, "Sec-Fetch-Site": {"cross-site"}}})
	if err == nil || resp == nil || resp.StatusCode != 403 {
		t.Errorf("a cross-site WebSocket: %v", err)
	}
	c, _, err := websocket.Dial(t.Context(), ws, &websocket.DialOptions{HTTPHeader: http.Header{
		"Authorization": {"Bearer " + testToken}, "Sec-Fetch-Site": {"same-origin"}}})
	if err != nil {
		t.Errorf("a same-origin WebSocket: %v", err)
	} else {
		c.CloseNow()
	}
}

// TestLimitsHoldUnderConcurrency (issue 22, finding 1, the audit): the
// other per-token limits are taken under the lock they are counted
// under, so requests sent at once cannot all pass the count: a token's
// environments (reserved before their sandbox starts), an environment's
// connections, a token's MCP sessions (made one at a time per owner).
func TestLimitsHoldUnderConcurrency(t *testing.T) {
	h := newHarness(t, nil, nil) // 3 environments per token
	at := func(n int, f func() bool) int {
		var wg sync.WaitGroup
		var mu sync.Mutex
		ok := 0
		start := make(chan struct{})
		for range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				if f() {
					mu.Lock()
					ok++
					mu.Unlock()
				}
			}()
		}
		close(start)
		wg.Wait()
		return ok
	}
	var envs []string
	var mu sync.Mutex
	created := at(12, func() bool {
		hr, _ := http.NewRequest("POST", h.url+"/v1/envs", strings.NewReader(`{"app":"game"}`))
		hr.Header.Set("Authorization", "Bearer "+testToken)
		hr.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(hr)
		if err != nil {
			t.Error(err)
			return false
		}
		var e api.Environment
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 201 {
			if resp.StatusCode != 429 {
				t.Errorf("create: %d %s", resp.StatusCode, data)
			}
			return false
		}
		if err := json.Unmarshal(data, &e); err != nil {
			t.Errorf("create: %s: %v", data, err)
		}
		mu.Lock()
		envs = append(envs, e.ID)
		mu.Unlock()
		return true
	})
	if created != 3 || len(h.envs(testToken)) != 3 {
		t.Errorf("12 environments asked for at once: %d created, %d listed; want 3", created, len(h.envs(testToken)))
	}
	if len(envs) == 0 {
		t.FailNow()
	}
	ws := "ws" + strings.TrimPrefix(h.url, "http") + "/v1/envs/" + envs[0] + "/ws"
	var conns []*websocket.Conn
	opened := at(2*maxConnections, func() bool {
		c, _, err := websocket.Dial(t.Context(), ws, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + testToken}}})
		if err != nil {
			return false
		}
		mu.Lock()
		conns = append(conns, c)
		mu.Unlock()
		return true
	})
	for _, c := range conns {
		c.CloseNow()
	}
	if opened != maxConnections {
		t.Errorf("%d WebSockets opened at once: %d accepted, want %d", 2*maxConnections, opened, maxConnections)
	}
	sessions := at(24, func() bool {
		_, err := mcpConnect(t, h, otherToken)
		return err == nil
	})
	if sessions != 16 {
		t.Errorf("24 MCP sessions opened at once: %d made, want 16", sessions)
	}
}
