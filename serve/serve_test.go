package serve

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/codegirl-games/agentbox/session"

	"github.com/coder/websocket"

	"github.com/codegirl-games/agentbox/environment/guestenv/guestenvtest"
	"github.com/codegirl-games/agentbox/serve/api"
	"github.com/codegirl-games/agentbox/trace"
)

// TestOpenAPIAgrees: openapi.json is a valid OpenAPI 3 document, every
// route the server answers is in it, and every operation in it is a
// route the server answers.
func TestOpenAPIAgrees(t *testing.T) {
	doc := loadOpenAPI(t)
	var documented, served []string
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			documented = append(documented, method+" "+path)
		}
	}
	s := &Server{}
	for _, r := range s.routeTable() {
		served = append(served, r.method+" "+r.pattern)
	}
	sort.Strings(documented)
	sort.Strings(served)
	if !slices.Equal(documented, served) {
		t.Errorf("openapi.json and the server disagree:\ndocumented: %v\nserved:     %v", documented, served)
	}
}

// TestAPIFollowsTheDocument drives every route through a whole life —
// server, uploads, create, observe in each format, act (valid, invalid,
// not an action), events, reset, close — and checks each request and
// answer against openapi.json (the harness does), and that every
// documented operation was exercised.
func TestAPIFollowsTheDocument(t *testing.T) {
	h := newHarness(t, nil, nil)
	a := h.do(req{method: "GET", path: "/v1/openapi.json"})
	if a.status != 200 || !bytes.Equal(a.body, OpenAPI) {
		t.Errorf("openapi.json: %d", a.status)
	}
	var info api.Server
	h.do(req{method: "GET", path: "/v1/server"}).decode(t, &info)
	if info.API != "v1" || len(info.Apps) != 1 || info.MaxEnvironments != 3 {
		t.Errorf("server: %+v", info)
	}

	a = h.do(req{method: "POST", path: "/v1/uploads", body: gameTar(t), contentType: "application/x-tar"})
	if a.status != 201 {
		t.Fatalf("upload: %d %s", a.status, a.body)
	}
	var up api.Upload
	a.decode(t, &up)
	if up.Command != "game" || up.Files != 5 {
		t.Errorf("upload: %+v", up)
	}
	h.do(req{method: "GET", path: "/v1/uploads"})
	h.do(req{method: "GET", path: "/v1/uploads/" + up.ID})

	a = h.do(req{method: "POST", path: "/v1/envs", body: []byte(`{"upload":"` + up.ID + `","task":"play","screen":{"width":320,"height":240},"limits":{"cpus":0.5},"max_steps":50,"timeout_ms":60000,"settle":"none"}`)})
	if a.status != 201 {
		t.Fatalf("create from the upload: %d %s", a.status, a.body)
	}
	var e api.Environment
	a.decode(t, &e)
	if e.State != api.StateRunning || e.Screen.Width != 320 || e.Limits.CPUs != 0.5 || e.Episode != 1 || e.LeaseExpires == nil {
		t.Errorf("environment: %+v", e)
	}
	// An upload in use is deleted with its last environment.
	h.do(req{method: "DELETE", path: "/v1/uploads/" + up.ID})
	h.do(req{method: "GET", path: "/v1/envs"})
	h.do(req{method: "GET", path: "/v1/envs/" + e.ID})
	for _, image := range []string{"png", "rgba", "none"} {
		var obs api.Observation
		a := h.do(req{method: "GET", path: "/v1/envs/" + e.ID + "/observation?image=" + image})
		a.decode(t, &obs)
		want := map[string]int{"png": 1, "rgba": 320 * 240 * 4, "none": 0}[image]
		if obs.Frame.Format != image || (image == "png" && len(obs.Frame.Data) < 8) || (image != "png" && len(obs.Frame.Data) != want) {
			t.Errorf("observation %s: format %q, %d bytes", image, obs.Frame.Format, len(obs.Frame.Data))
		}
		if image == "rgba" {
			// The screen has not changed: the client that has it gets no pixels.
			var again api.Observation
			h.do(req{method: "GET", path: "/v1/envs/" + e.ID + "/observation?image=rgba&known=" + obs.Frame.Hash}).decode(t, &again)
			if !again.Frame.Unchanged || len(again.Frame.Data) != 0 {
				t.Errorf("an unchanged screen was sent again: %+v", again.Frame)
			}
		}
	}
	var st api.StepResponse
	h.do(req{method: "POST", path: "/v1/envs/" + e.ID + "/act?observe=png", body: []byte(`{"action":"key","keys":"Return"}`)}).decode(t, &st)
	if !st.Result.OK || st.Observation == nil || st.Invalid || st.Step != 1 {
		t.Errorf("act: %+v", st)
	}
	h.do(req{method: "POST", path: "/v1/envs/" + e.ID + "/act", body: []byte(`{"action":"click","x":400,"y":10}`)}).decode(t, &st)
	if st.Result.OK || !st.Invalid || !strings.Contains(st.Result.Error, "outside the 320x240 screen") {
		t.Errorf("an off-screen click: %+v", st)
	}
	a = h.do(req{method: "POST", path: "/v1/envs/" + e.ID + "/act", body: []byte(`{"action":"jump"}`), invalid: true})
	if a.status != 400 || a.errorCode() != api.CodeInvalidAction {
		t.Errorf("not an action: %d %s", a.status, a.body)
	}

	// The events so far, as Server-Sent Events; the stream stays open.
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	hr, _ := http.NewRequestWithContext(ctx, "GET", h.url+"/v1/envs/"+e.ID+"/events", nil)
	hr.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("events: %s", resp.Status)
	}
	events := readEvents(t, resp.Body, 6)
	resp.Body.Close()
	var kinds []string
	for _, ev := range events {
		kinds = append(kinds, ev.Kind)
	}
	if got := strings.Join(kinds, " "); !strings.HasPrefix(got, "episode step result step result") {
		t.Errorf("events: %s", got)
	}
	h.checked["GET /v1/envs/{id}/events"]++

	var rr api.ResetResponse
	h.do(req{method: "POST", path: "/v1/envs/" + e.ID + "/reset?observe=png", body: []byte(`{"task":"again"}`)}).decode(t, &rr)
	if rr.Environment.Episode != 2 || rr.Environment.Task != "again" || rr.Observation == nil || rr.Observation.Step != 1 || rr.Environment.RunID == e.RunID {
		t.Errorf("reset: %+v", rr)
	}
	var fr api.ForkResponse
	h.do(req{method: "POST", path: "/v1/envs/" + e.ID + "/fork", body: []byte(`{"count":1}`)}).decode(t, &fr)
	if len(fr.Environments) != 1 || fr.Environments[0].ForkedFrom == nil || fr.Environments[0].ForkedFrom.Env != e.ID || fr.Fork != "replay" {
		t.Errorf("fork: %+v", fr)
	} else {
		h.do(req{method: "DELETE", path: "/v1/envs/" + fr.Environments[0].ID})
	}
	h.do(req{method: "POST", path: "/v1/envs/" + e.ID + "/act", body: []byte(`{"action":"done","message":"ok"}`)}).decode(t, &st)
	if st.Ended == nil || st.Ended.Outcome != "success" || !st.Ended.Terminated {
		t.Errorf("done: %+v", st)
	}
	a = h.do(req{method: "POST", path: "/v1/envs/" + e.ID + "/act", body: []byte(`{"action":"wait","ms":1}`)})
	if a.status != 409 || a.errorCode() != api.CodeEpisodeEnded {
		t.Errorf("an action after done: %d %s", a.status, a.body)
	}
	wsOnce(t, h, e.ID)
	h.checked["GET /v1/envs/{id}/ws"]++
	a = h.do(req{method: "DELETE", path: "/v1/envs/" + e.ID})
	var closed api.Environment
	a.decode(t, &closed)
	if closed.State != api.StateClosed || closed.End == nil || closed.End.Reason != trace.ReasonDone {
		t.Errorf("closed: %+v", closed)
	}
	// Both episodes' traces are complete, their steps by the remote actor.
	for _, dir := range []string{e.Trace, rr.Environment.Trace} {
		tr, err := trace.Open(dir)
		if err != nil || tr.Incomplete {
			t.Fatalf("%s: %v incomplete", dir, err)
		}
		for _, s := range tr.Steps {
			if s.Actor != trace.ActorRemote {
				t.Errorf("%s step %d: actor %q", dir, s.Step, s.Actor)
			}
		}
	}
	// The upload went with its environment.
	if a := h.do(req{method: "GET", path: "/v1/uploads/" + up.ID}); a.status != 404 {
		t.Errorf("the deleted upload is still there: %d", a.status)
	}
	if entries, _ := os.ReadDir(h.srv.o.UploadDir); len(entries) != 0 {
		t.Errorf("upload directories left: %v", entries)
	}
	// An upload nobody uses goes at once.
	a = h.do(req{method: "POST", path: "/v1/uploads", body: gameTar(t), contentType: "application/x-tar"})
	a.decode(t, &up)
	h.do(req{method: "DELETE", path: "/v1/uploads/" + up.ID})

	// A collected file of no environment (TestTaskFilesServed has them).
	if a := h.do(req{method: "GET", path: "/v1/envs/env-none/files/x.txt"}); a.status != 404 {
		t.Errorf("a file of no environment: %d", a.status)
	}

	// An answer to an ask of no environment (TestApprovals has asks).
	if a := h.do(req{method: "POST", path: "/v1/envs/env-none/approvals/1", body: []byte(`{"allow": true}`)}); a.status != 404 {
		t.Errorf("an answer for no environment: %d", a.status)
	}

	doc := loadOpenAPI(t)
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			if h.checked[method+" "+path] == 0 {
				t.Errorf("%s %s was never exercised", method, path)
			}
		}
	}
}

// readEvents reads n Server-Sent Events, each checked against
// openapi.json's Event schema.
func readEvents(t *testing.T, r io.Reader, n int) []api.Event {
	t.Helper()
	var out []api.Event
	buf := make([]byte, 0, 4096)
	tmp := make([]byte, 4096)
	for len(out) < n {
		k, err := r.Read(tmp)
		buf = append(buf, tmp[:k]...)
		for {
			i := bytes.Index(buf, []byte("\n\n"))
			if i < 0 {
				break
			}
			block := string(buf[:i])
			buf = buf[i+2:]
			for _, line := range strings.Split(block, "\n") {
				if data, ok := strings.CutPrefix(line, "data: "); ok {
					validateEvent(t, []byte(data))
					var ev api.Event
					if err := json.Unmarshal([]byte(data), &ev); err != nil {
						t.Fatalf("event %q: %v", data, err)
					}
					out = append(out, ev)
				}
			}
		}
		if err != nil {
			break
		}
	}
	return out
}

// wsOnce opens the WebSocket and asks for the environment's info, then
// sends what it must refuse; each answer checked against the document.
func wsOnce(t *testing.T, h *harness, id string) {
	t.Helper()
	c, _, err := websocket.Dial(t.Context(), "ws"+strings.TrimPrefix(h.url, "http")+"/v1/envs/"+id+"/ws",
		&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + testToken}}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	c.Write(t.Context(), websocket.MessageText, []byte(`{"id":7,"op":"info"}`))
	_, data, err := c.Read(t.Context())
	if err == nil {
		validateSchema(t, "WSResponse", data)
	}
	var resp api.Response
	if err != nil || json.Unmarshal(data, &resp) != nil || resp.ID != 7 || resp.Environment == nil || resp.Environment.ID != id {
		t.Errorf("info over the WebSocket: %s %v", data, err)
	}
	// An operation the server does not know, and a step after the
	// episode's end: their errors too are as the document says.
	for i, msg := range []string{`{"id":8,"op":"jump"}`, `{"id":9,"op":"step","action":{"action":"wait","ms":1}}`} {
		c.Write(t.Context(), websocket.MessageText, []byte(msg))
		_, data, err := c.Read(t.Context())
		if err != nil || json.Unmarshal(data, &resp) != nil || resp.ID != int64(8+i) || resp.Error == nil {
			t.Errorf("%s over the WebSocket: %s %v", msg, data, err)
			continue
		}
		validateSchema(t, "WSResponse", data)
	}
}

// TestBadInput: every kind of bad request gets its code and status, and
// the server serves a good request right after each.
func TestBadInput(t *testing.T) {
	h := newHarness(t, nil, nil)
	e := h.create("", "")
	env := "/v1/envs/" + e.ID
	big := []byte(`{"app":"game","task":"` + strings.Repeat("x", maxJSONBody) + `"}`)
	cases := []struct {
		name   string
		r      req
		status int
		code   string
	}{
		{"no token", req{method: "GET", path: "/v1/envs", token: "-"}, 401, api.CodeUnauthorized},
		{"a wrong token", req{method: "GET", path: "/v1/envs", token: "wrong-token-0123456789abcdef"}, 401, api.CodeUnauthorized},
		{"a token in another scheme", req{method: "GET", path: "/v1/envs", token: "-", header: map[string]string{"Authorization": "Basic " + testToken}}, 401, api.CodeUnauthorized},
		{"another host (DNS rebinding)", req{method: "GET", path: "/v1/envs", header: map[string]string{"Host": "evil.example:8470"}}, 403, api.CodeBadHost},
		{"another origin", req{method: "POST", path: "/v1/envs", body: []byte(`{"app":"game"}`), header: map[string]string{"Origin": "http://evil.example"}}, 403, api.CodeCrossOrigin},
		{"another origin, reading", req{method: "GET", path: "/v1/envs", header: map[string]string{"Origin": "https://evil.example"}}, 403, api.CodeCrossOrigin},
		{"a cross-site fetch", req{method: "POST", path: "/v1/envs", body: []byte(`{"app":"game"}`), header: map[string]string{"Sec-Fetch-Site": "cross-site"}}, 403, api.CodeCrossOrigin},
		{"no such route", req{method: "GET", path: "/v1/nothing"}, 404, api.CodeNotFound},
		{"no such environment", req{method: "GET", path: "/v1/envs/env-000000000000"}, 404, api.CodeNotFound},
		{"another token's environment", req{method: "GET", path: env, token: otherToken}, 404, api.CodeNotFound},
		{"another token acts", req{method: "POST", path: env + "/act", token: otherToken, body: []byte(`{"action":"wait","ms":1}`)}, 404, api.CodeNotFound},
		{"a wrong method", req{method: "PUT", path: "/v1/envs"}, 405, api.CodeMethodNotAllowed},
		{"malformed JSON", req{method: "POST", path: "/v1/envs", body: []byte(`{"app": "game"`), invalid: true}, 400, api.CodeInvalidJSON},
		{"an unknown field", req{method: "POST", path: "/v1/envs", body: []byte(`{"app": "game", "priviledged": true}`), invalid: true}, 400, api.CodeInvalidJSON},
		{"trailing data", req{method: "POST", path: "/v1/envs", body: []byte(`{"app": "game"} {}`), invalid: true}, 400, api.CodeInvalidJSON},
		{"a wrong type", req{method: "POST", path: "/v1/envs", body: []byte(`{"app": 7}`), invalid: true}, 400, api.CodeInvalidJSON},
		{"not JSON", req{method: "POST", path: "/v1/envs", body: []byte(`app=game`), contentType: "application/x-www-form-urlencoded", invalid: true}, 415, api.CodeUnsupportedMedia},
		{"an oversized body", req{method: "POST", path: "/v1/envs", body: big, invalid: true}, 413, api.CodeTooLarge},
		{"an oversized action", req{method: "POST", path: env + "/act", body: []byte(`{"action":"type","text":"` + strings.Repeat("a", 1<<20) + `"}`), invalid: true}, 413, api.CodeTooLarge},
		{"an unknown app", req{method: "POST", path: "/v1/envs", body: []byte(`{"app": "nope"}`)}, 422, api.CodeUnknownApp},
		{"no app", req{method: "POST", path: "/v1/envs", body: []byte(`{}`)}, 422, api.CodeInvalidRequest},
		{"an app and an upload", req{method: "POST", path: "/v1/envs", body: []byte(`{"app":"game","upload":"up-1"}`)}, 422, api.CodeInvalidRequest},
		{"a screen too large", req{method: "POST", path: "/v1/envs", body: []byte(`{"app":"game","screen":{"width":7680,"height":4320}}`)}, 422, api.CodeInvalidRequest},
		{"a screen too small", req{method: "POST", path: "/v1/envs", body: []byte(`{"app":"game","screen":{"width":8,"height":8}}`)}, 422, api.CodeInvalidRequest},
		{"more memory than the server's", req{method: "POST", path: "/v1/envs", body: []byte(`{"app":"game","limits":{"memory_mb":1000000}}`)}, 422, api.CodeInvalidRequest},
		{"negative CPUs", req{method: "POST", path: "/v1/envs", body: []byte(`{"app":"game","limits":{"cpus":-1}}`)}, 422, api.CodeInvalidRequest},
		{"tmpfs above memory", req{method: "POST", path: "/v1/envs", body: []byte(`{"app":"game","limits":{"memory_mb":100,"tmpfs_mb":200}}`)}, 422, api.CodeInvalidRequest},
		{"too many steps", req{method: "POST", path: "/v1/envs", body: []byte(`{"app":"game","max_steps":100000000}`)}, 422, api.CodeInvalidRequest},
		{"a bad settle", req{method: "POST", path: "/v1/envs", body: []byte(`{"app":"game","settle":"soon"}`)}, 422, api.CodeInvalidRequest},
		{"an unknown backend", req{method: "POST", path: "/v1/envs", body: []byte(`{"app":"game","backend":"vm"}`)}, 422, api.CodeInvalidRequest},
		{"an unknown clock", req{method: "POST", path: "/v1/envs", body: []byte(`{"app":"game","clock":"fast"}`)}, 422, api.CodeInvalidRequest},
		{"a clock step without the virtual clock", req{method: "POST", path: "/v1/envs", body: []byte(`{"app":"game","clock_step_ms":500}`)}, 422, api.CodeInvalidRequest},
		{"a clock step above an hour", req{method: "POST", path: "/v1/envs", body: []byte(`{"app":"game","clock":"virtual","clock_step_ms":3600001}`)}, 422, api.CodeInvalidRequest},
		{"a virtual clock of a backend without one", req{method: "POST", path: "/v1/envs", body: []byte(`{"app":"game","clock":"virtual"}`)}, 422, api.CodeInvalidRequest},
		{"a bad image format", req{method: "GET", path: env + "/observation?image=gif", invalid: true}, 422, api.CodeInvalidRequest},
		{"a bad event number", req{method: "GET", path: env + "/events?after=-1", invalid: true}, 422, api.CodeInvalidRequest},
		{"an action with a field of another kind", req{method: "POST", path: env + "/act", body: []byte(`{"action":"key","keys":"a","x":1}`), invalid: true}, 400, api.CodeInvalidAction},
		{"an action that is not an object", req{method: "POST", path: env + "/act", body: []byte(`[1]`), invalid: true}, 400, api.CodeInvalidAction},
		{"an upload that is not a tar", req{method: "POST", path: "/v1/uploads", body: []byte("not a tar at all, no"), contentType: "application/x-tar"}, 422, api.CodeInvalidUpload},
		{"an upload as JSON", req{method: "POST", path: "/v1/uploads", body: []byte(`{}`), invalid: true}, 415, api.CodeUnsupportedMedia},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := h.do(c.r)
			if a.status != c.status || a.errorCode() != c.code {
				t.Errorf("got %d %s, want %d %s", a.status, a.body, c.status, c.code)
			}
			var eb api.ErrorBody
			a.decode(t, &eb)
			if eb.Error.Status != a.status || eb.Error.Message == "" {
				t.Errorf("the error body does not say its status and a message: %s", a.body)
			}
			if c.status == 401 && !strings.HasPrefix(a.header.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("401 without WWW-Authenticate: Bearer")
			}
			// The server goes on serving.
			if a := h.do(req{method: "GET", path: env}); a.status != 200 {
				t.Errorf("after %s the environment answered %d", c.name, a.status)
			}
		})
	}
	// Nothing bad became an environment; the good one has taken no step.
	var list []api.Environment
	h.do(req{method: "GET", path: "/v1/envs"}).decode(t, &list)
	if len(list) != 1 || list[0].Steps != 0 {
		t.Errorf("environments after the bad requests: %+v", list)
	}
}

// TestNoHost: a request without a Host header (HTTP/1.0) is refused.
func TestNoHost(t *testing.T) {
	h := newHarness(t, nil, nil)
	c, err := net.Dial("tcp", strings.TrimPrefix(h.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET /v1/server HTTP/1.0\r\nAuthorization: Bearer %s\r\n\r\n", testToken)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 403 || !strings.Contains(string(body), api.CodeBadHost) {
		t.Errorf("no Host: %s %s", resp.Status, body)
	}
}

// TestPerTokenLimits: a token holds at most its environments and uploads;
// another token's count is its own; closing one frees its place.
func TestPerTokenLimits(t *testing.T) {
	h := newHarness(t, nil, nil) // 3 environments, 2 uploads per token
	var ids []string
	for range 3 {
		ids = append(ids, h.create("", "").ID)
	}
	a := h.do(req{method: "POST", path: "/v1/envs", body: []byte(`{"app":"game"}`)})
	if a.status != 429 || a.errorCode() != api.CodeTooManyEnvironments {
		t.Fatalf("a fourth environment: %d %s", a.status, a.body)
	}
	other := h.create(otherToken, "")
	var list []api.Environment
	h.do(req{method: "GET", path: "/v1/envs", token: otherToken}).decode(t, &list)
	if len(list) != 1 || list[0].ID != other.ID {
		t.Errorf("the other token sees %+v", list)
	}
	h.do(req{method: "DELETE", path: "/v1/envs/" + ids[0]})
	h.create("", "")

	for range 2 {
		if a := h.do(req{method: "POST", path: "/v1/uploads", body: gameTar(t), contentType: "application/x-tar"}); a.status != 201 {
			t.Fatalf("upload: %d %s", a.status, a.body)
		}
	}
	a = h.do(req{method: "POST", path: "/v1/uploads", body: gameTar(t), contentType: "application/x-tar"})
	if a.status != 429 || a.errorCode() != api.CodeTooManyUploads {
		t.Errorf("a third upload: %d %s", a.status, a.body)
	}
}

// TestUploadsRejected: an uploaded app meets the staging checks of
// `agentbox run DIR`, and the unpacking itself refuses what could reach
// outside its directory; nothing is left behind.
func TestUploadsRejected(t *testing.T) {
	h := newHarness(t, nil, func(o *Options) {
		o.UploadLimits.MaxFiles, o.UploadLimits.MaxBytes = 20, 1<<20
	})
	manifest := tarEntry{name: "agentbox.json", data: `{"command": "game"}`}
	game := tarEntry{name: "game", data: "#!/bin/sh\n", exec: true}
	many := []tarEntry{manifest, game}
	for i := range 30 {
		many = append(many, tarEntry{name: fmt.Sprintf("f%02d", i), data: "x"})
	}
	cases := []struct {
		name    string
		entries []tarEntry
		raw     []byte
		status  int
		want    string
	}{
		{"a path with ..", []tarEntry{manifest, game, {name: "../escape", data: "x"}}, nil, 422, "not a path inside"},
		{"an absolute path", []tarEntry{manifest, game, {name: "/etc/cron.d/x", data: "x"}}, nil, 422, "not a path inside"},
		{"a link out", []tarEntry{manifest, game, {h: &tar.Header{Name: "passwd", Typeflag: tar.TypeSymlink, Linkname: "/etc/passwd"}}}, nil, 422, "leaves the app directory"},
		{"a link up", []tarEntry{manifest, game, {h: &tar.Header{Name: "up", Typeflag: tar.TypeSymlink, Linkname: "../.."}}}, nil, 422, "leaves the app directory"},
		{"a write through a link", []tarEntry{manifest, game, {h: &tar.Header{Name: "s", Typeflag: tar.TypeSymlink, Linkname: "."}}, {h: &tar.Header{Name: "t", Typeflag: tar.TypeSymlink, Linkname: "s/.."}}, {name: "t/escaped", data: "x"}}, nil, 422, "t/escaped"},
		{"a link chain out", []tarEntry{manifest, game, {h: &tar.Header{Name: "s", Typeflag: tar.TypeSymlink, Linkname: "."}}, {h: &tar.Header{Name: "t", Typeflag: tar.TypeSymlink, Linkname: "s/.."}}}, nil, 422, "leaves the app directory (through s -> .)"},
		{"a hard link", []tarEntry{manifest, game, {h: &tar.Header{Name: "h", Typeflag: tar.TypeLink, Linkname: "game"}}}, nil, 422, "hard link"},
		{"a device", []tarEntry{manifest, game, {h: &tar.Header{Name: "sda", Typeflag: tar.TypeBlock, Devmajor: 8}}}, nil, 422, "a device"},
		{"a FIFO", []tarEntry{manifest, game, {h: &tar.Header{Name: "fifo", Typeflag: tar.TypeFifo}}}, nil, 422, "FIFO"},
		{"a duplicate", []tarEntry{manifest, game, {name: "game", data: "again"}}, nil, 422, "twice"},
		{"too many files", many, nil, 422, "more than 20 files"},
		{"too many bytes", []tarEntry{manifest, game, {name: "big", data: strings.Repeat("x", 1<<20+1)}}, nil, 422, "exceed 1048576 bytes"},
		{"no manifest", []tarEntry{game}, nil, 422, "without agentbox.json"},
		{"a bad manifest", []tarEntry{{name: "agentbox.json", data: `{"command": "../../bin/sh"}`}, game}, nil, 422, "leaves the app directory"},
		{"a command that is not executable", []tarEntry{manifest, {name: "game", data: "#!/bin/sh\n"}}, nil, 422, "not executable"},
		{"empty", nil, tarOf(t, nil), 422, "empty"},
		{"a body beyond the limit", []tarEntry{manifest, game, pad("a"), pad("b"), pad("c")}, nil, 413, "larger than"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			body := c.raw
			if body == nil {
				body = tarOf(t, c.entries)
			}
			a := h.do(req{method: "POST", path: "/v1/uploads", body: body, contentType: "application/x-tar"})
			var eb api.ErrorBody
			json.Unmarshal(a.body, &eb)
			if a.status != c.status || !strings.Contains(eb.Error.Message, c.want) {
				t.Errorf("got %d %s, want %d containing %q", a.status, a.body, c.status, c.want)
			}
			if strings.Contains(eb.Error.Message, h.srv.o.UploadDir) {
				t.Errorf("the message names the server's directory: %s", eb.Error.Message)
			}
		})
	}
	entries, _ := os.ReadDir(h.srv.o.UploadDir)
	if len(entries) != 0 {
		t.Errorf("rejected uploads left %d directories", len(entries))
	}
	if _, err := os.Lstat(filepath.Join(filepath.Dir(h.srv.o.UploadDir), "escaped")); err == nil {
		t.Error("an upload wrote outside its directory")
	}
}

// pad is an entry with a PAX header of 900 KiB: three of them pass the
// body's bound (1 MiB of files + 20 files' headers + 1 MiB) while the
// files stay small.
func pad(name string) tarEntry {
	return tarEntry{h: &tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644,
		PAXRecords: map[string]string{"AGENTBOX.pad": strings.Repeat("p", 900<<10)}}}
}

// TestLease: an environment nobody uses for its lease is closed (its
// episode interrupted as lease_expired, its sandbox removed, its trace
// finalised); requests and an open WebSocket keep it.
func TestLease(t *testing.T) {
	// A lease the test's own requests, 100 ms apart, never miss on a busy
	// machine.
	h := newHarness(t, nil, func(o *Options) { o.Lease = 1500 * time.Millisecond })
	kept, idle, held := h.create("", ""), h.create("", ""), h.create("", "")
	c, _, err := websocket.Dial(t.Context(), "ws"+strings.TrimPrefix(h.url, "http")+"/v1/envs/"+held.ID+"/ws",
		&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + testToken}}})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		if a := h.do(req{method: "GET", path: "/v1/envs/" + kept.ID}); a.status != 200 {
			t.Fatalf("the environment in use was closed: %d %s", a.status, a.body)
		}
		if h.do(req{method: "GET", path: "/v1/envs/" + idle.ID, token: otherToken}); time.Now().After(deadline) {
			t.Fatal("the idle environment was not closed within a minute")
		}
		h.srv.mu.Lock()
		_, there := h.srv.envs[idle.ID]
		h.srv.mu.Unlock()
		if !there {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	tr := waitComplete(t, idle.Trace)
	if tr.Run.Reason != trace.ReasonLeaseExpired || tr.Run.Outcome != trace.Interrupted {
		t.Errorf("the idle environment's episode: %s/%s", tr.Run.Outcome, tr.Run.Reason)
	}
	// The WebSocket kept its environment past several leases; once it is
	// closed the lease runs again.
	time.Sleep(2 * time.Second)
	if a := h.do(req{method: "GET", path: "/v1/envs/" + held.ID}); a.status != 200 {
		t.Fatalf("the environment with an open WebSocket was closed: %d", a.status)
	}
	c.Close(websocket.StatusNormalClosure, "")
	waitFor(t, func() bool {
		h.srv.mu.Lock()
		defer h.srv.mu.Unlock()
		return h.srv.envs[held.ID] == nil
	})
	if !strings.Contains(h.log.String(), "no request from its client") {
		t.Errorf("the log does not say why: %s", h.log.String())
	}
}

// TestLeaseLongStep: a step that takes longer than the lease (a long
// wait, a slow app on a busy machine) is use: the environment is not
// closed in the middle of it, and the lease runs again from its end. (The
// lease ran from the request's start and closed the environment mid-step:
// seen as TestMCPLease failing under -race, where a step took over the
// test's 300 ms lease.)
func TestLeaseLongStep(t *testing.T) {
	// Long enough that the request just after the step is within it on a
	// busy machine.
	const lease = time.Second
	guest := func() *guestenvtest.Guest {
		return &guestenvtest.Guest{OnAct: func(*guestenvtest.Writer) { time.Sleep(4 * lease) }}
	}
	h := newHarness(t, guest, func(o *Options) { o.Lease = lease })
	e := h.create("", "")
	var st api.StepResponse
	a := h.do(req{method: "POST", path: "/v1/envs/" + e.ID + "/act", body: []byte(`{"action":"key","keys":"Return"}`)})
	a.decode(t, &st)
	if a.status != 200 || !st.Result.OK || st.Ended != nil {
		t.Fatalf("a step four leases long: %d %s", a.status, a.body)
	}

	// The lease runs from the step's end: a moment later the environment
	// is still there, and some leases later it is closed.
	var d api.Environment
	if a := h.do(req{method: "GET", path: "/v1/envs/" + e.ID}); a.status != 200 {
		t.Fatalf("just after the long step the environment is gone: %d %s", a.status, a.body)
	} else if a.decode(t, &d); d.State != api.StateRunning || d.End != nil {
		t.Fatalf("just after the long step the episode is %s (%+v): the lease ended it during the step", d.State, d.End)
	}
	waitFor(t, func() bool {
		h.srv.mu.Lock()
		defer h.srv.mu.Unlock()
		return h.srv.envs[e.ID] == nil
	})
	if tr := waitComplete(t, e.Trace); tr.Run.Reason != trace.ReasonLeaseExpired || len(tr.Steps) != 1 || tr.Steps[0].Result == nil {
		t.Errorf("the trace: %s, %d steps, the step's result: %v", tr.Run.Reason, len(tr.Steps), tr.Steps[0].Result)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within a minute")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitComplete waits for a trace to be finalised and opens it.
func waitComplete(t *testing.T, dir string) *trace.Trace {
	t.Helper()
	var tr *trace.Trace
	waitFor(t, func() bool {
		var err error
		tr, err = trace.Open(dir)
		return err == nil && !tr.Incomplete
	})
	return tr
}

// slowGuest takes 1.5 s over every action.
func slowGuest() *guestenvtest.Guest {
	return &guestenvtest.Guest{OnAct: func(*guestenvtest.Writer) { time.Sleep(1500 * time.Millisecond) }}
}

// TestClientVanishesMidStep: a client that goes away while its action
// runs (an HTTP request cancelled, a WebSocket dropped) does not end the
// episode: the action finishes and is recorded with its result, and the
// environment and everyone else are served on.
func TestClientVanishesMidStep(t *testing.T) {
	h := newHarness(t, slowGuest, nil)
	e := h.create("", "")
	other := h.create(otherToken, "")

	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	hr, _ := http.NewRequestWithContext(ctx, "POST", h.url+"/v1/envs/"+e.ID+"/act", strings.NewReader(`{"action":"key","keys":"a"}`))
	hr.Header.Set("Authorization", "Bearer "+testToken)
	hr.Header.Set("Content-Type", "application/json")
	if _, err := http.DefaultClient.Do(hr); err == nil {
		t.Fatal("the request was not cut short")
	}
	// Meanwhile another client is served.
	if a := h.do(req{method: "GET", path: "/v1/envs/" + other.ID, token: otherToken}); a.status != 200 {
		t.Errorf("another client: %d", a.status)
	}

	c, _, err := websocket.Dial(t.Context(), "ws"+strings.TrimPrefix(h.url, "http")+"/v1/envs/"+e.ID+"/ws",
		&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + testToken}}})
	if err != nil {
		t.Fatal(err)
	}
	c.Write(t.Context(), websocket.MessageText, []byte(`{"id":1,"op":"act","action":{"action":"key","keys":"b"}}`))
	time.Sleep(100 * time.Millisecond)
	c.CloseNow()

	// The next step is served, after both: steps 1 and 2 have results.
	var st api.StepResponse
	a := h.do(req{method: "POST", path: "/v1/envs/" + e.ID + "/act", body: []byte(`{"action":"key","keys":"c"}`)})
	a.decode(t, &st)
	if a.status != 200 || st.Step != 3 || !st.Result.OK {
		t.Fatalf("the step after: %d %s", a.status, a.body)
	}
	h.do(req{method: "DELETE", path: "/v1/envs/" + e.ID})
	tr := waitComplete(t, e.Trace)
	if len(tr.Steps) != 3 {
		t.Fatalf("%d steps recorded, want 3", len(tr.Steps))
	}
	for _, s := range tr.Steps {
		if s.Result == nil || !s.Result.Result.OK {
			t.Errorf("step %d (%s) has no good result: %+v", s.Step, s.Action, s.Result)
		}
	}
	if tr.Run.Reason != trace.ReasonClosed {
		t.Errorf("the episode ended %s, want closed", tr.Run.Reason)
	}
}

// TestShutdown: shutting down interrupts a step in flight, closes every
// environment of every token (episodes interrupted by the signal, traces
// finalised, sandboxes removed) and refuses new work.
func TestShutdown(t *testing.T) {
	h := newHarness(t, slowGuest, nil)
	a, b := h.create("", ""), h.create(otherToken, "")
	done := make(chan answer, 1)
	go func() {
		done <- h.do(req{method: "POST", path: "/v1/envs/" + a.ID + "/act", body: []byte(`{"action":"key","keys":"a"}`)})
	}()
	waitFor(t, func() bool {
		tr, err := trace.Open(a.Trace)
		return err == nil && len(tr.Steps) == 1
	})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := h.srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	for _, e := range []api.Environment{a, b} {
		tr, err := trace.Open(e.Trace)
		if err != nil || tr.Incomplete || tr.Run.Outcome != trace.Interrupted || tr.Run.Reason != trace.ReasonSignal {
			t.Errorf("%s after shutdown: %v %+v", e.ID, err, tr.Run)
		}
	}
	if errs, closed := h.backend.GuestErrors(); closed != 2 {
		t.Errorf("%d of 2 sandboxes removed (%v)", closed, errs)
	}
	<-done
	hr, _ := http.NewRequest("GET", h.url+"/v1/envs", nil)
	hr.Header.Set("Authorization", "Bearer "+testToken)
	if resp, err := http.DefaultClient.Do(hr); err == nil {
		resp.Body.Close()
		t.Errorf("the server still answers after shutdown: %s", resp.Status)
	}
}

// dialWS opens environment id's WebSocket with testToken; send writes
// one request and reads its answer (with its image, if one came); a
// connection that fails is an error of the test, and a zero answer (send
// may be called from any goroutine).
func (h *harness) dialWS(id string) (*websocket.Conn, func(msg string) (api.Response, []byte)) {
	t := h.t
	t.Helper()
	c, _, err := websocket.Dial(t.Context(), "ws"+strings.TrimPrefix(h.url, "http")+"/v1/envs/"+id+"/ws",
		&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + testToken}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.CloseNow() })
	c.SetReadLimit(64 << 20)
	return c, func(msg string) (api.Response, []byte) {
		t.Helper()
		if err := c.Write(t.Context(), websocket.MessageText, []byte(msg)); err != nil {
			t.Errorf("%s: %v", msg, err)
			return api.Response{}, nil
		}
		typ, data, err := c.Read(t.Context())
		if err != nil {
			t.Errorf("%s: %v", msg, err)
			return api.Response{}, nil
		}
		var img []byte
		if typ == websocket.MessageBinary {
			n := int(data[0])<<24 | int(data[1])<<16 | int(data[2])<<8 | int(data[3])
			data, img = data[4:4+n], data[4+n:]
		}
		var r api.Response
		if err := json.Unmarshal(data, &r); err != nil {
			t.Errorf("%s: %s: %v", msg, data, err)
		}
		return r, img
	}
}

// TestImageSlotNotHeldByReset: a token's image slot is held only while
// an image is made and sent. One environment's reset that waits for its
// sandbox (here, a launch held open) does not hold it, so the token's
// other environment steps with images meanwhile; the reset's own image
// comes once its episode has started. (The slot was taken before the
// whole request: every other environment of the token waited behind a
// reset, then was refused with 429 — TestServeLoad under load.)
func TestImageSlotNotHeldByReset(t *testing.T) {
	var hold atomic.Bool
	release := make(chan struct{})
	var once sync.Once
	free := func() { once.Do(func() { hold.Store(false); close(release) }) }
	h := newHarness(t, func() *guestenvtest.Guest {
		return &guestenvtest.Guest{OnLaunch: func(*guestenvtest.Writer) {
			if hold.Load() {
				<-release
			}
		}}
	}, nil)
	t.Cleanup(free) // before the harness's own (cleanups run last first)
	a, b := h.create("", ""), h.create("", "")
	_, sendA := h.dialWS(a.ID)
	_, sendB := h.dialWS(b.ID)
	hold.Store(true)
	type answer struct {
		r   api.Response
		img []byte
	}
	reset := make(chan answer, 1)
	go func() {
		r, img := sendA(`{"id":1,"op":"reset","image":"png"}`)
		reset <- answer{r, img}
	}()
	// The reset is waiting for its launch once a sandbox beyond the
	// first two was made.
	waitFor(t, func() bool { return len(h.backend.Names()) == 3 })
	for i := 1; i <= 3; i++ {
		r, img := sendB(fmt.Sprintf(`{"id":%d,"op":"step","action":{"action":"mouse_move","x":%d,"y":5},"image":"png"}`, i, 10*i))
		if r.Error != nil || r.Step == nil || r.Step.Observation == nil || len(img) == 0 {
			t.Fatalf("step %d beside a reset waiting for its sandbox: %+v (%d bytes of image)", i, r, len(img))
		}
	}
	select {
	case got := <-reset:
		t.Fatalf("the reset answered while its launch was held: %+v", got.r)
	default:
	}
	free()
	got := <-reset
	if got.r.Error != nil || got.r.Observation == nil || len(got.img) == 0 || got.r.Environment == nil || got.r.Environment.Episode != 2 {
		t.Fatalf("reset: %+v (%d bytes of image)", got.r, len(got.img))
	}
}

// TestWebSocketProtocol: the step loop over one connection: answers in
// order with the request's ID, the image after the JSON in a binary
// message, no image for an unchanged screen, errors per request without
// closing the connection, and oversized messages closing it.
func TestWebSocketProtocol(t *testing.T) {
	h := newHarness(t, nil, nil)
	e := h.create("", "")
	c, send := h.dialWS(e.ID)
	r, img := send(`{"id":1,"op":"step","action":{"action":"mouse_move","x":5,"y":5},"image":"rgba"}`)
	if r.ID != 1 || r.Step == nil || r.Step.Observation == nil || len(img) != 640*480*4 || r.Step.Observation.Frame.Bytes != len(img) {
		t.Fatalf("step: %+v, %d bytes", r, len(img))
	}
	hash := r.Step.Observation.Frame.Hash
	r, img = send(`{"id":2,"op":"step","action":{"action":"mouse_move","x":6,"y":5},"image":"rgba","known":"` + hash + `"}`)
	if r.ID != 2 || img != nil || !r.Step.Observation.Frame.Unchanged {
		t.Errorf("an unchanged screen: %+v, %d bytes", r.Step.Observation.Frame, len(img))
	}
	for _, bad := range []struct{ msg, code string }{
		{`{"id":3,"op":"step","action":{"action":"fly"}}`, api.CodeInvalidAction},
		{`{"id":4,"op":"dance"}`, api.CodeUnsupportedOperation},
		{`{"id":5,"op":"observe","image":"gif"}`, api.CodeInvalidRequest},
		{`{"id":6,"op":"observe","extra":1}`, api.CodeInvalidJSON},
		{`{"id":7,"op":"act"}`, api.CodeInvalidRequest},
		{`{"id":8,`, api.CodeInvalidJSON},
	} {
		r, _ := send(bad.msg)
		if r.Error == nil || r.Error.Code != bad.code {
			t.Errorf("%s: %+v, want %s", bad.msg, r.Error, bad.code)
		}
	}
	r, _ = send(`{"id":9,"op":"observe","image":"none"}`)
	if r.ID != 9 || r.Observation == nil || r.Error != nil {
		t.Errorf("the connection does not go on after errors: %+v", r)
	}
	// A message beyond the limit closes the connection (1009); the
	// environment and the server go on.
	c.Write(t.Context(), websocket.MessageText, bytes.Repeat([]byte("x"), api.MaxMessage+1))
	if _, _, err := c.Read(t.Context()); websocket.CloseStatus(err) != websocket.StatusMessageTooBig {
		t.Errorf("an oversized message: %v, want close 1009", err)
	}
	if a := h.do(req{method: "POST", path: "/v1/envs/" + e.ID + "/act", body: []byte(`{"action":"wait","ms":1}`)}); a.status != 200 {
		t.Errorf("the environment after the oversized message: %d", a.status)
	}
	// A WebSocket from a page of another origin is refused.
	_, resp, err := websocket.Dial(t.Context(), "ws"+strings.TrimPrefix(h.url, "http")+"/v1/envs/"+e.ID+"/ws",
		&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + testToken}, "Origin": {"http://evil.example"}}})
	if err == nil || resp == nil || resp.StatusCode != 403 {
		t.Errorf("a cross-origin WebSocket: %v", err)
	}
}

// TestConcurrentEnvironments: many clients stepping at once each get
// their own answers (the cursor each asked for, their own environment
// and step numbers).
func TestConcurrentEnvironments(t *testing.T) {
	h := newHarness(t, nil, func(o *Options) { o.MaxEnvironments = 8 })
	var wg sync.WaitGroup
	for i := range 8 {
		e := h.create("", "")
		wg.Add(1)
		go func() {
			defer wg.Done()
			for s := 1; s <= 30; s++ {
				body := fmt.Sprintf(`{"action":"mouse_move","x":%d,"y":%d}`, 10+i, s)
				var st api.StepResponse
				h.do(req{method: "POST", path: "/v1/envs/" + e.ID + "/act?observe=none", body: []byte(body)}).decode(t, &st)
				if st.Env != e.ID || st.Step != s || !st.Result.OK {
					t.Errorf("client %d step %d got %+v", i, s, st)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// TestNoRegisteredApps: a server for uploads only says so in the shape
// the document gives (empty lists, not null), and refuses an app name.
func TestNoRegisteredApps(t *testing.T) {
	h := newHarness(t, nil, func(o *Options) { o.Apps = nil })
	var info api.Server
	a := h.do(req{method: "GET", path: "/v1/server"})
	a.decode(t, &info)
	if info.Apps == nil || len(info.Apps) != 0 || !strings.Contains(string(a.body), `"apps":[]`) {
		t.Errorf("server: %s", a.body)
	}
	if a := h.do(req{method: "POST", path: "/v1/envs", body: []byte(`{"app":"game"}`)}); a.errorCode() != api.CodeUnknownApp {
		t.Errorf("an app name on a server without apps: %d %s", a.status, a.body)
	}
	if a := h.do(req{method: "GET", path: "/v1/uploads"}); string(bytes.TrimSpace(a.body)) != "[]" {
		t.Errorf("uploads: %s", a.body)
	}
}

// TestConnectionLimit: an environment holds at most 16 WebSockets and
// event streams together; the 17th is refused, and closing one makes room.
func TestConnectionLimit(t *testing.T) {
	h := newHarness(t, nil, nil)
	e := h.create("", "")
	var conns []*websocket.Conn
	dial := func() (*websocket.Conn, *http.Response, error) {
		return websocket.Dial(t.Context(), "ws"+strings.TrimPrefix(h.url, "http")+"/v1/envs/"+e.ID+"/ws",
			&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + testToken}}})
	}
	for i := range maxConnections {
		c, _, err := dial()
		if err != nil {
			t.Fatalf("connection %d: %v", i+1, err)
		}
		conns = append(conns, c)
	}
	_, resp, err := dial()
	if err == nil || resp == nil || resp.StatusCode != 429 {
		t.Fatalf("connection %d: %v", maxConnections+1, err)
	}
	a := h.do(req{method: "GET", path: "/v1/envs/" + e.ID + "/events"})
	if a.status != 429 || a.errorCode() != api.CodeTooManyConnections {
		t.Errorf("an event stream beyond the limit: %d %s", a.status, a.body)
	}
	conns[0].Close(websocket.StatusNormalClosure, "")
	waitFor(t, func() bool {
		c, _, err := dial()
		if err == nil {
			conns[0] = c
		}
		return err == nil
	})
	for _, c := range conns {
		c.CloseNow()
	}
}

// TestServerSettle: an environment whose create request names no settle
// has the server's (agentbox serve --settle); one that names it, its own.
func TestServerSettle(t *testing.T) {
	h := newHarness(t, nil, func(o *Options) { o.Settle = session.Settle{Mode: "fixed", Duration: 5 * time.Millisecond} })
	for _, c := range []struct{ extra, want string }{{"", "fixed:5ms"}, {`, "settle": "none"`, "none"}} {
		e := h.create("", c.extra)
		if a := h.do(req{method: "DELETE", path: "/v1/envs/" + e.ID}); a.status/100 != 2 {
			t.Fatalf("close: %d %s", a.status, a.body)
		}
		if tr := waitComplete(t, e.Trace); tr.Run.Settings == nil || tr.Run.Settings.Settle != c.want {
			t.Errorf("create {%s}: run.json's settings %+v, want settle %q", c.extra, tr.Run.Settings, c.want)
		}
	}
}
