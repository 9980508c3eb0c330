package serve

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"net/http/httptest"
	"testing"

	"github.com/getkin/kin-openapi/openapi3filter"

	"github.com/codegirl-games/agentbox/serve/api"
)

func init() {
	openapi3filter.RegisterBodyDecoder(FrameMediaType, openapi3filter.FileBodyDecoder)
}

// splitFrame reads a FrameMediaType answer: the JSON and the image.
func splitFrame(t *testing.T, a answer) ([]byte, []byte) {
	t.Helper()
	if ct := a.header.Get("Content-Type"); ct != FrameMediaType {
		t.Fatalf("Content-Type %q, want %s: %.200s", ct, FrameMediaType, a.body)
	}
	if len(a.body) < 4 {
		t.Fatalf("a binary answer of %d bytes", len(a.body))
	}
	n := int(binary.BigEndian.Uint32(a.body))
	if n > len(a.body)-4 {
		t.Fatalf("the header says %d bytes of JSON, %d follow", n, len(a.body)-4)
	}
	return a.body[4 : 4+n], a.body[4+n:]
}

// TestBinaryAnswer: observe, act and reset answer in the WebSocket's
// layout when Accept asks for it — the same JSON (its frame.bytes saying
// how many bytes of image follow) and the same pixels the JSON answer
// carries in base64; no image, an unchanged screen and errors as they
// should be; every answer checked against openapi.json.
func TestBinaryAnswer(t *testing.T) {
	h := newHarness(t, nil, nil)
	e := h.create("", "")
	frame := map[string]string{"Accept": FrameMediaType}

	var inJSON api.Observation
	h.do(req{method: "GET", path: "/v1/envs/" + e.ID + "/observation?image=rgba"}).decode(t, &inJSON)
	js, img := splitFrame(t, h.do(req{method: "GET", path: "/v1/envs/" + e.ID + "/observation?image=rgba", header: frame}))
	var obs api.Observation
	if err := json.Unmarshal(js, &obs); err != nil {
		t.Fatal(err)
	}
	if obs.Frame.Bytes != len(img) || len(img) != 640*480*4 || obs.Frame.Data != nil || obs.Frame.Hash != inJSON.Frame.Hash || !bytes.Equal(img, inJSON.Frame.Data) {
		t.Errorf("observe: frame %+v with %d bytes; the JSON answer's hash %s, %d bytes", obs.Frame, len(img), inJSON.Frame.Hash, len(inJSON.Frame.Data))
	}

	// act with a PNG observation; then one of an unchanged screen (no image).
	js, img = splitFrame(t, h.do(req{method: "POST", path: "/v1/envs/" + e.ID + "/act?observe=png", body: []byte(`{"action":"mouse_move","x":3,"y":4}`), header: frame}))
	var st api.StepResponse
	if err := json.Unmarshal(js, &st); err != nil {
		t.Fatal(err)
	}
	if !st.Result.OK || st.Observation == nil || st.Observation.Frame.Bytes != len(img) || !bytes.HasPrefix(img, []byte("\x89PNG\r\n\x1a\n")) {
		t.Fatalf("act: %+v, %d bytes", st, len(img))
	}
	js, img = splitFrame(t, h.do(req{method: "POST", path: "/v1/envs/" + e.ID + "/act?observe=rgba&known=" + st.Observation.Frame.Hash, body: []byte(`{"action":"mouse_move","x":5,"y":4}`), header: frame}))
	st = api.StepResponse{}
	json.Unmarshal(js, &st)
	if len(img) != 0 || st.Observation == nil || !st.Observation.Frame.Unchanged || st.Observation.Frame.Bytes != 0 {
		t.Errorf("an unchanged screen: %+v, %d bytes", st.Observation, len(img))
	}
	// No observation asked for: the JSON alone, in the same layout.
	js, img = splitFrame(t, h.do(req{method: "POST", path: "/v1/envs/" + e.ID + "/act", body: []byte(`{"action":"wait","ms":1}`), header: frame}))
	st = api.StepResponse{}
	if err := json.Unmarshal(js, &st); err != nil || len(img) != 0 || st.Observation != nil || st.Step != 3 {
		t.Errorf("act without an observation: %v %+v, %d bytes", err, st, len(img))
	}

	// reset, among other media types the client accepts.
	js, img = splitFrame(t, h.do(req{method: "POST", path: "/v1/envs/" + e.ID + "/reset?observe=rgba", header: map[string]string{"Accept": "application/json;q=0.5, " + FrameMediaType}}))
	var rr api.ResetResponse
	if err := json.Unmarshal(js, &rr); err != nil {
		t.Fatal(err)
	}
	if rr.Environment.Episode != 2 || rr.Observation == nil || rr.Observation.Frame.Bytes != len(img) || len(img) != 640*480*4 {
		t.Errorf("reset: %+v, %d bytes", rr, len(img))
	}

	// Errors stay JSON with their status.
	a := h.do(req{method: "POST", path: "/v1/envs/" + e.ID + "/act", body: []byte(`{"action":"fly"}`), header: frame, invalid: true})
	if a.status != 400 || a.errorCode() != api.CodeInvalidAction || a.header.Get("Content-Type") != "application/json" {
		t.Errorf("an error: %d %s %s", a.status, a.header.Get("Content-Type"), a.body)
	}
	// Without it, or refused with q=0, the answer is JSON.
	for _, accept := range []string{"", "application/json", FrameMediaType + ";q=0", "*/*"} {
		a := h.do(req{method: "GET", path: "/v1/envs/" + e.ID + "/observation?image=none", header: map[string]string{"Accept": accept}})
		if a.header.Get("Content-Type") != "application/json" {
			t.Errorf("Accept %q: %s", accept, a.header.Get("Content-Type"))
		}
	}
}

func TestWantsFrame(t *testing.T) {
	for _, tt := range []struct {
		accept []string
		want   bool
	}{
		{nil, false},
		{[]string{"application/json"}, false},
		{[]string{FrameMediaType}, true},
		{[]string{"application/json, " + FrameMediaType + "; q=0.9"}, true},
		{[]string{"application/json", FrameMediaType}, true},
		{[]string{FrameMediaType + ";q=0"}, false},
		{[]string{FrameMediaType + ";q=zero"}, false},
		{[]string{"application/vnd.agentbox.frames"}, false},
		{[]string{"*/*"}, false},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		for _, v := range tt.accept {
			r.Header.Add("Accept", v)
		}
		if got := wantsFrame(r); got != tt.want {
			t.Errorf("Accept %q: %v, want %v", tt.accept, got, tt.want)
		}
	}
}
