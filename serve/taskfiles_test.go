package serve

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/codegirl-games/agentbox/serve/api"
)

// TestTaskFilesServed: a create request's inputs come from an upload
// (upload:ID/PATH), its collect copies them back out when the episode
// ends; the step that ends it answers with the files, the description
// lists them and GET /v1/envs/{id}/files/{path} sends one. Bad task parts
// are refused before anything starts.
func TestTaskFilesServed(t *testing.T) {
	h := newHarness(t, nil, nil)
	a := h.do(req{method: "POST", path: "/v1/uploads", body: gameTar(t), contentType: "application/x-tar"})
	if a.status != 201 {
		t.Fatalf("upload: %d %s", a.status, a.body)
	}
	var up api.Upload
	a.decode(t, &up)

	for _, tt := range []struct {
		name, extra string
		status      int
		want        string
	}{
		{"from a host path", `, "inputs": [{"from": "/etc/passwd", "to": "~/p"}]`, 422, "want upload:ID"},
		{"from no such upload", `, "inputs": [{"from": "upload:up-nope", "to": "~/p"}]`, 404, `no upload "up-nope"`},
		{"from a path that leaves the upload", fmt.Sprintf(`, "inputs": [{"from": "upload:%s/../x", "to": "~/p"}]`, up.ID), 422, "leaves the upload"},
		{"to outside the home", fmt.Sprintf(`, "inputs": [{"from": "upload:%s/data/level.txt", "to": "~/../p"}]`, up.ID), 422, `field "inputs"[0].to`},
		{"collect outside the home", `, "collect": ["/etc/*"]`, 422, `field "collect"[0]`},
		{"before_collect without collect", `, "before_collect": [{"action": "key", "keys": "ctrl+s"}]`, 422, `without "collect"`},
		{"before_collect unknown expect", `, "collect": ["~/a"], "before_collect": [{"expect": "moved"}]`, 422, `field "before_collect"[0]: expect: unknown "moved"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a := h.do(req{method: "POST", path: "/v1/envs", body: []byte(`{"app": "game"` + tt.extra + `}`)})
			var eb api.ErrorBody
			a.decode(t, &eb)
			if a.status != tt.status || !strings.Contains(eb.Error.Message, tt.want) {
				t.Errorf("%d %s, want %d with %q", a.status, a.body, tt.status, tt.want)
			}
		})
	}

	e := h.create("", fmt.Sprintf(`, "inputs": [{"from": "upload:%s/data/level.txt", "to": "~/Documents/level.txt"}], "collect": ["~/Documents/*.txt"], "before_collect": [{"action": "key", "keys": "ctrl+s"}, {"expect": "running"}]`, up.ID))
	// A grade that checks the observer's activity turns the observer on.
	observed := func(id string) bool {
		h.srv.mu.Lock()
		defer h.srv.mu.Unlock()
		return h.srv.envs[id].cfg.Observe
	}
	if observed(e.ID) {
		t.Error("a grade without observer checks turned the observer on")
	}
	if o := h.create("", `, "grade": [{"file_written": "~/out/*.txt"}]`); !observed(o.ID) {
		t.Error("a grade with a file_written check: the environment's observer is off")
	}
	a = h.do(req{method: "POST", path: "/v1/envs/" + e.ID + "/act", body: []byte(`{"action": "done"}`)})
	var st api.StepResponse
	a.decode(t, &st)
	if st.Ended == nil || len(st.Files) != 1 || st.Files[0].Path != "Documents/level.txt" || st.Files[0].Size != 1 {
		t.Fatalf("the step that ended the episode: %s", a.body)
	}
	var d api.Environment
	h.do(req{method: "GET", path: "/v1/envs/" + e.ID}).decode(t, &d)
	if len(d.Files) != 1 || d.Files[0] != st.Files[0] {
		t.Errorf("description files %+v, want %+v", d.Files, st.Files)
	}
	a = h.do(req{method: "GET", path: "/v1/envs/" + e.ID + "/files/Documents%2Flevel.txt"})
	if a.status != 200 || string(a.body) != "1" || a.header.Get("Content-Type") != "application/octet-stream" {
		t.Errorf("GET the file: %d %q %s", a.status, a.body, a.header.Get("Content-Type"))
	}
	// The path's slashes may also be sent as they are (the Go client's
	// way), which the document cannot say (one path segment a parameter).
	hr, _ := http.NewRequest("GET", h.url+"/v1/envs/"+e.ID+"/files/Documents/level.txt", nil)
	hr.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "1" {
		t.Errorf("GET the file with its slashes: %d %q", resp.StatusCode, body)
	}
	for _, p := range []string{"Documents%2Fnope.txt", "..%2Frun.json", "run.json", "Documents%2F..%2F..%2Frun.json"} {
		if a := h.do(req{method: "GET", path: "/v1/envs/" + e.ID + "/files/" + p}); a.status != 404 {
			t.Errorf("GET files/%s: %d %s, want 404", p, a.status, a.body)
		}
	}
}

// TestGradeServed: a create request's grade judges each episode's
// collected files on the server; the step that ends a collecting episode
// answers with the verdict in its end, and the description keeps it. A
// grade whose checks would run a program or read a file of the server's
// host is refused.
func TestGradeServed(t *testing.T) {
	h := newHarness(t, nil, nil)
	a := h.do(req{method: "POST", path: "/v1/uploads", body: gameTar(t), contentType: "application/x-tar"})
	var up api.Upload
	a.decode(t, &up)
	for _, tt := range []struct{ name, grade, want string }{
		{"a command", `[{"command": ["sh", "-c", "echo pwned"]}]`, "command"},
		{"an expected host file", `[{"image": "x.png", "expected": "/etc/passwd"}]`, "expected"},
		{"an unknown check", `[{"exsits": "x"}]`, "exsits"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a := h.do(req{method: "POST", path: "/v1/envs", body: []byte(`{"app": "game", "collect": ["~/*.txt"], "grade": ` + tt.grade + `}`)})
			var eb api.ErrorBody
			a.decode(t, &eb)
			if a.status != 422 || !strings.Contains(eb.Error.Message, tt.want) {
				t.Errorf("%d %s, want 422 naming %q", a.status, a.body, tt.want)
			}
		})
	}
	e := h.create("", fmt.Sprintf(`, "inputs": [{"from": "upload:%s/data/level.txt", "to": "~/level.txt"}], "collect": ["~/*.txt"], "grade": [{"exists": "level.txt"}, {"text": "level.txt", "equals": "2", "weight": 3}]`, up.ID))
	a = h.do(req{method: "POST", path: "/v1/envs/" + e.ID + "/act", body: []byte(`{"action": "done"}`)})
	var st api.StepResponse
	a.decode(t, &st)
	if st.Ended == nil || st.Ended.Grade == nil || st.Ended.Grade.Outcome != "incorrect" || st.Ended.Grade.Score != 0.25 || len(st.Ended.Grade.Checks) != 2 {
		t.Fatalf("the step that ended the graded episode: %s", a.body)
	}
	var d api.Environment
	h.do(req{method: "GET", path: "/v1/envs/" + e.ID}).decode(t, &d)
	if d.End == nil || d.End.Grade == nil || d.End.Grade.Score != 0.25 {
		t.Errorf("the description's end: %+v", d.End)
	}
}
