package serve

import (
	"encoding/binary"
	"encoding/json"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"github.com/codegirl-games/agentbox/serve/api"
)

// FrameMediaType is the binary answer of observe, act and reset over HTTP,
// for a client that lists it in Accept: the WebSocket's layout — a 4-byte
// big-endian length, the JSON, then the image's bytes (Frame.Bytes of
// them; none when the observation has no image) — so the pixels travel as
// they are instead of in base64 inside the JSON. Errors stay JSON.
const FrameMediaType = "application/vnd.agentbox.frame"

// wantsFrame: the request's Accept lists FrameMediaType (not with q=0).
func wantsFrame(r *http.Request) bool {
	for _, v := range r.Header.Values("Accept") {
		for _, part := range strings.Split(v, ",") {
			mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
			if err == nil && mt == FrameMediaType {
				q, err := strconv.ParseFloat(params["q"], 64)
				return params["q"] == "" || (err == nil && q > 0)
			}
		}
	}
	return false
}

// writeObserved answers v, which carries the observation obs (or nil), as
// JSON, or in FrameMediaType when the client asked for it.
func writeObserved(w http.ResponseWriter, r *http.Request, v any, obs *api.Observation) {
	if !wantsFrame(r) {
		writeJSON(w, 200, v)
		return
	}
	var image []byte
	if obs != nil && len(obs.Frame.Data) > 0 {
		image = obs.Frame.Data
		obs.Frame.Data, obs.Frame.Bytes = nil, len(image)
	}
	js, err := json.Marshal(v)
	if err != nil {
		writeError(w, apiError(api.CodeInternal, "encoding the answer: %v", err))
		return
	}
	h := w.Header()
	h.Set("Content-Type", FrameMediaType)
	h.Set("Content-Length", strconv.Itoa(4+len(js)+len(image)))
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(200)
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], uint32(len(js)))
	for _, b := range [][]byte{n[:], js, image} {
		if _, err := w.Write(b); err != nil {
			return // the client went
		}
	}
}
