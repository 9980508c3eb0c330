package serve

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/codegirl-games/agentbox/app"
	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/environment/guestenv/guestenvtest"
	"github.com/codegirl-games/agentbox/internal/testenv"
	"github.com/codegirl-games/agentbox/serve/api"
)

// testToken and otherToken are two tokens the test servers accept.
const (
	testToken  = "test-token-0123456789abcdef"
	otherToken = "other-token-0123456789abcdef"
)

// harness is a server on a loopback port with a backend of scripted
// guests (the real host side of the protocol, no sandbox): the HTTP
// layer's unit tests. Every answer is checked against openapi.json.
type harness struct {
	t       *testing.T
	srv     *Server
	url     string
	backend *guestenvtest.Backend
	out     string
	log     *testenv.Buffer
	router  routers.Router
	// checked counts the answers validated against the document.
	checked map[string]int
	mu      sync.Mutex
}

// stubAppDir is an app directory the scripted guest "runs".
func stubAppDir(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "game"), []byte("#!/bin/sh\nexit 0\n"), 0o755)
	os.WriteFile(filepath.Join(dir, "agentbox.json"), []byte(`{"command": "game"}`), 0o644)
	return dir
}

func newHarness(t *testing.T, guest func() *guestenvtest.Guest, mod func(*Options)) *harness {
	t.Helper()
	if guest == nil {
		guest = func() *guestenvtest.Guest { return &guestenvtest.Guest{} }
	}
	b, err := app.Load(stubAppDir(t), app.DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, backend: &guestenvtest.Backend{New: guest}, out: t.TempDir(), log: &testenv.Buffer{}, checked: map[string]int{}}
	o := Options{
		Backends: []environment.Backend{h.backend}, Apps: map[string]*app.Bundle{"game": b},
		Tokens: []string{testToken, otherToken}, Out: h.out, UploadDir: filepath.Join(t.TempDir(), "uploads"),
		Log: h.log, MaxEnvironments: 3, MaxUploads: 2,
	}
	if mod != nil {
		mod(&o)
	}
	srv, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h.srv, h.url = srv, "http://"+ln.Addr().String()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln, "", "") }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		<-served
	})
	doc := loadOpenAPI(t)
	doc.Servers = openapi3.Servers{{URL: h.url}}
	if h.router, err = gorillamux.NewRouter(doc); err != nil {
		t.Fatal(err)
	}
	return h
}

// loadOpenAPI reads and validates openapi.json.
func loadOpenAPI(t testing.TB) *openapi3.T {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromData(OpenAPI)
	if err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("openapi.json is not a valid OpenAPI 3 document: %v", err)
	}
	return doc
}

func init() {
	openapi3filter.RegisterBodyDecoder("application/x-tar", openapi3filter.FileBodyDecoder)
}

// req is one request of a test.
type req struct {
	method, path string
	token        string // default testToken; "-" for none
	header       map[string]string
	body         []byte
	contentType  string // default application/json when there is a body
	// invalid: the request breaks the document on purpose; only the
	// answer is checked against it.
	invalid bool
}

// answer is what came back.
type answer struct {
	status int
	header http.Header
	body   []byte
}

func (a answer) errorCode() string {
	var eb api.ErrorBody
	json.Unmarshal(a.body, &eb)
	return eb.Error.Code
}

func (a answer) decode(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(a.body, v); err != nil {
		t.Fatalf("%d %s: %v", a.status, a.body, err)
	}
}

// do sends r and checks request (unless invalid) and answer against
// openapi.json.
func (h *harness) do(r req) answer {
	h.t.Helper()
	hr, err := http.NewRequest(r.method, h.url+r.path, bytes.NewReader(r.body))
	if err != nil {
		h.t.Fatal(err)
	}
	switch r.token {
	case "":
		hr.Header.Set("Authorization", "Bearer "+testToken)
	case "-":
	default:
		hr.Header.Set("Authorization", "Bearer "+r.token)
	}
	if r.body != nil {
		ct := r.contentType
		if ct == "" {
			ct = "application/json"
		}
		hr.Header.Set("Content-Type", ct)
	}
	for k, v := range r.header {
		if k == "Host" {
			hr.Host = v
			continue
		}
		hr.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		h.t.Fatalf("%s %s: %v", r.method, r.path, err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	a := answer{status: resp.StatusCode, header: resp.Header, body: body}
	h.validate(r, hr, a)
	return a
}

// validate checks a request and its answer against openapi.json.
func (h *harness) validate(r req, hr *http.Request, a answer) {
	h.t.Helper()
	vr := hr.Clone(context.Background())
	vr.Body = io.NopCloser(bytes.NewReader(r.body))
	route, params, err := h.router.FindRoute(vr)
	if err != nil {
		if a.status != 404 && a.status != 405 && a.status != 403 {
			h.t.Errorf("%s %s answered %d but the document has no such operation: %v", r.method, r.path, a.status, err)
		}
		return
	}
	opts := &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, IncludeResponseStatus: true}
	in := &openapi3filter.RequestValidationInput{Request: vr, PathParams: params, Route: route, Options: opts}
	if !r.invalid && a.status < 300 {
		if err := openapi3filter.ValidateRequest(context.Background(), in); err != nil {
			h.t.Errorf("%s %s: the request breaks openapi.json: %v", r.method, r.path, err)
		}
	}
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: a.status, Header: a.header, Options: opts}
	out.SetBodyBytes(a.body)
	if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
		h.t.Errorf("%s %s → %d: the answer breaks openapi.json: %v\n%.400s", r.method, r.path, a.status, err, a.body)
	}
	h.mu.Lock()
	h.checked[route.Method+" "+route.Path]++
	h.mu.Unlock()
}

// create makes an environment of the registered app.
func (h *harness) create(token string, extra string) api.Environment {
	h.t.Helper()
	body := `{"app": "game"` + extra + `}`
	a := h.do(req{method: "POST", path: "/v1/envs", token: token, body: []byte(body)})
	if a.status != 201 {
		h.t.Fatalf("create: %d %s", a.status, a.body)
	}
	var e api.Environment
	a.decode(h.t, &e)
	return e
}

// tarOf makes a tar of entries: name → content ("" for a directory when
// the name ends in /), with special entries given as headers.
func tarOf(t testing.TB, entries []tarEntry) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, e := range entries {
		h := e.h
		if h == nil {
			h = &tar.Header{Name: e.name, Mode: 0o644, Size: int64(len(e.data)), Typeflag: tar.TypeReg}
			if strings.HasSuffix(e.name, "/") {
				h.Typeflag, h.Mode = tar.TypeDir, 0o755
			}
			if e.exec {
				h.Mode = 0o755
			}
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			tw.Write([]byte(e.data))
		}
	}
	tw.Close()
	return b.Bytes()
}

type tarEntry struct {
	name, data string
	exec       bool
	h          *tar.Header
}

// gameTar is a valid app as a tar.
func gameTar(t testing.TB) []byte {
	return tarOf(t, []tarEntry{
		{name: "agentbox.json", data: `{"command": "game"}`},
		{name: "game", data: "#!/bin/sh\nexit 0\n", exec: true},
		{name: "data/", data: ""},
		{name: "data/level.txt", data: "1"},
		{h: &tar.Header{Name: "level", Typeflag: tar.TypeSymlink, Linkname: "data/level.txt", Mode: 0o777}},
	})
}
