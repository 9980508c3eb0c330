package serve

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/app"
	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/environment/named"
	"github.com/codegirl-games/agentbox/grade"
	"github.com/codegirl-games/agentbox/internal/stagepath"
	"github.com/codegirl-games/agentbox/policy"
	"github.com/codegirl-games/agentbox/serve/api"
	"github.com/codegirl-games/agentbox/session"
	"github.com/codegirl-games/agentbox/trace"
)

// OpenAPI is the API's description (OpenAPI 3), served at
// /v1/openapi.json. `go generate ./serve/` writes it: the routes of
// openapi_paths.json (hand-kept) with the schemas of serve/api's Go types
// and the types they use (serve/internal/openapigen); TestOpenAPIGenerated
// fails while the file differs from what the generator writes.
//
//go:generate go run ./internal/openapigen/cmd/openapigen
//go:embed openapi.json
var OpenAPI []byte

// Bounds on what a request may carry.
const (
	maxJSONBody = 64 << 10 // a create or reset request
	maxTask     = 64 << 10 // bytes of a task
)

// route is one operation of the API.
type route struct {
	method, pattern string
	handle          func(w http.ResponseWriter, r *http.Request, owner string)
}

// routeTable is every operation the server answers; openapi.json
// describes exactly these (TestOpenAPIAgrees).
func (s *Server) routeTable() []route {
	return []route{
		{"GET", "/v1/openapi.json", s.handleOpenAPI},
		{"GET", "/v1/server", s.handleServer},
		{"POST", "/v1/uploads", s.handleCreateUpload},
		{"GET", "/v1/uploads", s.handleListUploads},
		{"GET", "/v1/uploads/{id}", s.handleGetUpload},
		{"DELETE", "/v1/uploads/{id}", s.handleDeleteUpload},
		{"POST", "/v1/envs", s.handleCreateEnv},
		{"GET", "/v1/envs", s.handleListEnvs},
		{"GET", "/v1/envs/{id}", s.handleGetEnv},
		{"DELETE", "/v1/envs/{id}", s.handleCloseEnv},
		{"GET", "/v1/envs/{id}/observation", s.handleObserve},
		{"POST", "/v1/envs/{id}/act", s.handleAct},
		{"POST", "/v1/envs/{id}/reset", s.handleReset},
		{"POST", "/v1/envs/{id}/fork", s.handleFork},
		{"GET", "/v1/envs/{id}/events", s.handleEvents},
		{"GET", "/v1/envs/{id}/ws", s.handleWS},
		{"GET", "/v1/envs/{id}/files/{path}", s.handleGetFile},
		{"POST", "/v1/envs/{id}/approvals/{approval}", s.handleApproval},
	}
}

type ownerKey struct{}

// routes is the API behind its defences: the Host check, cross-origin
// browser requests refused, the token.
func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	byPattern := map[string]map[string]route{}
	var patterns []string
	for _, rt := range s.routeTable() {
		if byPattern[rt.pattern] == nil {
			byPattern[rt.pattern] = map[string]route{}
			patterns = append(patterns, rt.pattern)
		}
		byPattern[rt.pattern][rt.method] = rt
	}
	for _, p := range patterns {
		methods := byPattern[p]
		var allow []string
		for m := range methods {
			allow = append(allow, m)
		}
		sort.Strings(allow)
		// {path} at the end takes the rest of the path (a file's path
		// below the home, with its slashes).
		mux.HandleFunc(strings.Replace(p, "/{path}", "/{path...}", 1), func(w http.ResponseWriter, r *http.Request) {
			rt, ok := methods[r.Method]
			if !ok {
				w.Header().Set("Allow", strings.Join(allow, ", "))
				writeError(w, apiError(api.CodeMethodNotAllowed, "%s %s: the methods are %s", r.Method, r.URL.Path, strings.Join(allow, ", ")))
				return
			}
			rt.handle(w, r, r.Context().Value(ownerKey{}).(string))
		})
	}
	// The MCP endpoint speaks MCP (JSON-RPC over streamable HTTP), not
	// this API: openapi.json leaves it out (mcp.go).
	mux.Handle(mcpPath, s.mcpHandler())
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, apiError(api.CodeNotFound, "no route %s %s (the API is under /%s; see /%s/openapi.json)", r.Method, r.URL.Path, api.Version, api.Version))
	})

	var h http.Handler = mux
	h = s.authenticate(h)
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, apiError(api.CodeCrossOrigin, "a cross-origin browser request is refused"))
	}))
	h = cop.Handler(h)
	h = s.checkOrigin(h)
	h = s.checkHost(h)
	h = recoverPanics(s, h)
	return h
}

// checkHost refuses a Host header naming a host the server does not
// answer to: a page of another site whose name was rebound to this
// machine's address (DNS rebinding) sends its own name.
func (s *Server) checkHost(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.hostAllowed(r.Host) {
			writeError(w, apiError(api.CodeBadHost, "the Host header %q is not a host this server answers to (an IP address, localhost, or one given with --allow-host)", r.Host))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// hostAllowed: an IP address (no name can be rebound to reach it),
// localhost, or a name the operator allowed.
func (s *Server) hostAllowed(host string) bool {
	h := host
	if name, _, err := net.SplitHostPort(host); err == nil {
		h = name
	}
	h = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
	if h == "" {
		return false
	}
	if net.ParseIP(h) != nil || strings.EqualFold(h, "localhost") {
		return true
	}
	for _, a := range s.o.AllowedHosts {
		if strings.EqualFold(a, h) {
			return true
		}
	}
	return false
}

// checkOrigin refuses any request whose Origin is not the server's own
// (its host is not the Host header), and any a browser says comes from
// another site or origin (Sec-Fetch-Site other than same-origin or
// none), whatever the method: the API has no browser clients of other
// origins, and a GET is refused like a POST (http.CrossOriginProtection,
// behind this, lets safe methods through).
func (s *Server) checkOrigin(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch site := r.Header.Get("Sec-Fetch-Site"); site {
		case "", "same-origin", "none": // not a browser's, the server's own page, or typed in the address bar
		default:
			writeError(w, apiError(api.CodeCrossOrigin, "a browser request from another origin (Sec-Fetch-Site: %.40q) is refused", site))
			return
		}
		if o := r.Header.Get("Origin"); o != "" {
			u, err := url.Parse(o)
			if err != nil || u.Host == "" || !strings.EqualFold(u.Host, r.Host) {
				writeError(w, apiError(api.CodeCrossOrigin, "requests from the origin %q are refused", o))
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// authenticate requires a token the server knows.
func (s *Server) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		owner := s.owner(r)
		if owner == "" {
			w.Header().Set("WWW-Authenticate", `Bearer realm="agentbox"`)
			msg := "a bearer token is needed: Authorization: Bearer TOKEN"
			if r.Header.Get("Authorization") != "" {
				msg = "the token is not one this server accepts"
			}
			writeError(w, apiError(api.CodeUnauthorized, "%s", msg))
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), ownerKey{}, owner)))
	})
}

// recoverPanics answers a request whose handler panicked with an internal
// error; everyone else is served on.
func recoverPanics(s *Server, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				s.logf("panic serving %s %s: %v", r.Method, r.URL.Path, p)
				writeError(w, apiError(api.CodeInternal, "the server failed on this request"))
			}
		}()
		next.ServeHTTP(w, r)
	})
}

// apiError makes an error of a code with its status.
func apiError(code, format string, args ...any) *api.Error {
	return &api.Error{Code: code, Status: api.Status(code), Message: fmt.Sprintf(format, args...)}
}

func writeError(w http.ResponseWriter, e *api.Error) {
	writeJSON(w, e.Status, api.ErrorBody{Error: *e})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		status = 500
		data = []byte(`{"error":{"code":"internal","message":"encoding the answer failed","status":500}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	w.Write(append(data, '\n'))
}

// readBody reads a body of a media type, at most limit bytes.
func readBody(w http.ResponseWriter, r *http.Request, mediaType string, limit int64, optional bool) ([]byte, *api.Error) {
	if r.ContentLength == 0 && optional {
		return nil, nil
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != mediaType {
		if optional && r.Header.Get("Content-Type") == "" {
			return nil, nil
		}
		return nil, apiError(api.CodeUnsupportedMedia, "the body must be %s, not %q", mediaType, r.Header.Get("Content-Type"))
	}
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return nil, apiError(api.CodeTooLarge, "the body is larger than %d bytes", limit)
	case err != nil:
		return nil, apiError(api.CodeInvalidJSON, "reading the body: %v", err)
	}
	return data, nil
}

// decodeStrict decodes one JSON value: unknown fields and anything after
// the value are errors.
func decodeStrict(data []byte, v any) *api.Error {
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return apiError(api.CodeInvalidJSON, "%s", jsonMessage(err))
	}
	if _, err := dec.Token(); err != io.EOF {
		return apiError(api.CodeInvalidJSON, "unexpected data after the JSON value")
	}
	return nil
}

// jsonMessage words a decoding error.
func jsonMessage(err error) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Sprintf("malformed JSON at byte %d: %v", se.Offset, err)
	case errors.As(err, &te):
		return fmt.Sprintf("field %q: want %s, got a JSON %s", te.Field, te.Type, te.Value)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "the JSON ends early"
	}
	return strings.TrimPrefix(err.Error(), "json: ")
}

// lookup is the request's environment, if its token owns it; the lease
// is renewed.
func (s *Server) lookup(r *http.Request, owner string) (*env, *api.Error) {
	id := r.PathValue("id")
	s.mu.Lock()
	e := s.envs[id]
	s.mu.Unlock()
	if e == nil || e.owner != owner {
		// Another token's environment is as absent as a missing one.
		return nil, apiError(api.CodeNotFound, "no environment %q", id)
	}
	e.touch()
	return e, nil
}

// imageParam reads the image format of a query (image=…, or observe=…).
func imageParam(q url.Values, name, def string) (string, *api.Error) {
	v := q.Get(name)
	if v == "" {
		return def, nil
	}
	switch v {
	case api.ImageNone, api.ImagePNG, api.ImageRGBA:
		return v, nil
	}
	return "", apiError(api.CodeInvalidRequest, "%s=%q: want none, png or rgba", name, v)
}

func (s *Server) handleOpenAPI(w http.ResponseWriter, _ *http.Request, _ string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Write(OpenAPI)
}

func (s *Server) handleServer(w http.ResponseWriter, _ *http.Request, _ string) {
	writeJSON(w, 200, s.info())
}

// track counts work that Shutdown must wait for; false once the server
// is shutting down.
func (s *Server) track() (done func(), ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return nil, false
	}
	s.wg.Add(1)
	return s.wg.Done, true
}

func (s *Server) handleCreateEnv(w http.ResponseWriter, r *http.Request, owner string) {
	data, aerr := readBody(w, r, "application/json", maxJSONBody, false)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	var req api.CreateRequest
	if aerr := decodeStrict(data, &req); aerr != nil {
		writeError(w, aerr)
		return
	}
	e, aerr := s.createEnv(owner, req, trace.ActorRemote, "", nil)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	writeJSON(w, 201, e.describe())
}

// createEnv makes an environment for owner, driven by actor (named client
// when known), and starts its first episode.
//
// asks, for an MCP client's environment, answers the policy's asks of
// its steps (the actor mcp); the API's answer any other's (nil: all).
func (s *Server) createEnv(owner string, req api.CreateRequest, actor, client string, asks policy.Approver) (*env, *api.Error) {
	e, aerr := s.newEnv(owner, req)
	if aerr != nil {
		return nil, aerr
	}
	e.actor, e.client, e.mcpAsks = actor, client, asks
	done, ok := s.track()
	if !ok {
		s.removeEnv(e)
		return nil, apiError(api.CodeShuttingDown, "the server is shutting down")
	}
	defer done()
	// The client's going away does not stop the start: the environment
	// then waits for it for its lease.
	if aerr := e.open(s.base, nil); aerr != nil {
		s.removeEnv(e)
		return nil, aerr
	}
	s.logf("environment %s created for token %s: %s on %s", e.id, ownerLabel(owner), e.appName, e.backend.Name())
	return e, nil
}

// newEnv checks a create request against the server's bounds and
// reserves the token's slot for the environment.
func (s *Server) newEnv(owner string, req api.CreateRequest) (*env, *api.Error) {
	e := &env{id: "env-" + randomID(6), owner: owner, srv: s, created: time.Now(), lastSeen: time.Now(),
		state: api.StateStarting, closed: make(chan struct{}), log: session.NewEventLog(eventLogBytes)}
	e.approvals.By = policy.ApproveAPI
	backend := req.Backend
	if req.Name != "" {
		var aerr *api.Error
		if backend, aerr = s.namedBackend(req.Name, req.Backend); aerr != nil {
			return nil, aerr
		}
	}
	b, ok := s.backend(backend)
	if !ok {
		return nil, apiError(api.CodeInvalidRequest, "backend %q: this server offers %s", backend, strings.Join(s.info().Backends, ", "))
	}
	e.backend = b
	if req.Name != "" && !environment.CapabilitiesOf(b).Named {
		return nil, apiError(api.CodeInvalidRequest, "name %s: the %s backend has no named sandboxes (it lacks the capability named)", req.Name, b.Name())
	}
	switch req.ResetMode {
	case "", api.ResetFresh:
		e.resetMode = api.ResetFresh
	case api.ResetRelaunch:
		if req.Name != "" {
			return nil, apiError(api.CodeInvalidRequest, "reset_mode relaunch with name %s: a named sandbox is never reset in place (its home is the name's, not the sandbox's to restore); use fresh", req.Name)
		}
		if aerr := canRelaunch(b); aerr != nil {
			return nil, aerr
		}
		e.resetMode = api.ResetRelaunch
	default:
		return nil, apiError(api.CodeInvalidRequest, "reset_mode %q: want %s", req.ResetMode, strings.Join(api.ResetModes, " or "))
	}
	e.cfg = s.o.Env
	e.cfg.Events = nil
	if req.Screen != nil {
		sc := *req.Screen
		if sc.Depth == 0 {
			sc.Depth = 24
		}
		if err := sc.Validate(); err != nil {
			return nil, apiError(api.CodeInvalidRequest, "screen: %v", err)
		}
		if sc.Width > s.o.MaxScreen.Width || sc.Height > s.o.MaxScreen.Height {
			return nil, apiError(api.CodeInvalidRequest, "screen %dx%d: this server's largest is %dx%d", sc.Width, sc.Height, s.o.MaxScreen.Width, s.o.MaxScreen.Height)
		}
		e.cfg.Screen = sc
	}
	if req.Limits != nil {
		res, aerr := s.limits(*req.Limits)
		if aerr != nil {
			return nil, aerr
		}
		e.cfg.Resources = res
	}
	e.maxSteps, e.timeout = s.o.MaxSteps, s.o.Timeout
	switch {
	case req.MaxSteps < 0 || req.MaxSteps > s.o.MaxSteps:
		return nil, apiError(api.CodeInvalidRequest, "max_steps %d: between 1 and %d (0: %d)", req.MaxSteps, s.o.MaxSteps, s.o.MaxSteps)
	case req.MaxSteps > 0:
		e.maxSteps = req.MaxSteps
	}
	switch {
	case req.TimeoutMS < 0 || req.TimeoutMS > s.o.Timeout.Milliseconds():
		return nil, apiError(api.CodeInvalidRequest, "timeout_ms %d: between 1 and %d (0: %d)", req.TimeoutMS, s.o.Timeout.Milliseconds(), s.o.Timeout.Milliseconds())
	case req.TimeoutMS > 0:
		e.timeout = time.Duration(req.TimeoutMS) * time.Millisecond
	}
	e.settle = s.o.Settle
	if req.Settle != "" {
		st, err := session.ParseSettle(req.Settle)
		if err != nil {
			return nil, apiError(api.CodeInvalidRequest, "%v", err)
		}
		e.settle = st
	}
	var err error
	if e.clock, err = session.ClockOf(req.Clock, time.Duration(req.ClockStepMS)*time.Millisecond); err != nil {
		return nil, apiError(api.CodeInvalidRequest, "%v", err)
	}
	if aerr := checkTask(req.Task); aerr != nil {
		return nil, aerr
	}
	e.task = req.Task
	tf, aerr := taskFiles(req)
	if aerr != nil {
		return nil, aerr
	}
	if len(req.Grade) > 0 {
		// NoHost: a client's checks never run a program or read a file
		// of the server's host.
		data, _ := json.Marshal(req.Grade)
		spec, err := grade.ParseJSON("grade", data, grade.Options{NoHost: true})
		if err != nil {
			return nil, apiError(api.CodeInvalidRequest, "%s", strings.TrimPrefix(err.Error(), grade.ErrInvalid.Error()+": "))
		}
		e.grader = spec
		// A check of the observer's activity needs the observer.
		e.cfg.Observe = e.cfg.Observe || spec.NeedsObserver()
	}
	if req.Policy != "" {
		if len(req.Policy) > maxPolicyText {
			return nil, apiError(api.CodeInvalidRequest, "policy: %d bytes; at most %d", len(req.Policy), maxPolicyText)
		}
		p, err := policy.Parse("policy", []byte(req.Policy))
		if err != nil {
			return nil, apiError(api.CodeInvalidRequest, "%s", strings.TrimPrefix(err.Error(), policy.ErrInvalid.Error()+": "))
		}
		e.policy = p
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return nil, apiError(api.CodeShuttingDown, "the server is shutting down")
	}
	switch {
	case (req.App == "") == (req.Upload == ""):
		return nil, apiError(api.CodeInvalidRequest, "name the app: either app (registered: %s) or upload (an upload's ID)", strings.Join(s.info().Apps, ", "))
	case req.App != "":
		bundle, ok := s.o.Apps[req.App]
		if !ok {
			return nil, apiError(api.CodeUnknownApp, "no app %q is registered (registered: %s)", req.App, strings.Join(s.info().Apps, ", "))
		}
		e.appName, e.bundle = req.App, bundle
	default:
		u := s.uploads[req.Upload]
		if u == nil || u.owner != owner || u.deleted {
			return nil, apiError(api.CodeNotFound, "no upload %q", req.Upload)
		}
		e.appName, e.bundle, e.upload = u.name, u.bundle, u
	}
	if e.policy == nil && req.App != "" {
		e.policy = s.o.AppPolicies[req.App]
	}
	if err := session.CheckClock(e.clock, e.backend, e.bundle); err != nil {
		return nil, apiError(api.CodeInvalidRequest, "clock virtual: %s", strings.TrimPrefix(err.Error(), session.ErrNoClock.Error()+": "))
	}
	if tmpfs := int64(e.cfg.Resources.TmpfsMB) << 20; e.bundle.TotalBytes > tmpfs*3/4 {
		return nil, apiError(api.CodeInvalidRequest, "the app's files (%d bytes) need a larger tmpfs than %d MiB: three quarters of it at most", e.bundle.TotalBytes, e.cfg.Resources.TmpfsMB)
	}
	n := 0
	for _, other := range s.envs {
		if other.owner == owner {
			n++
		}
	}
	if n >= s.o.MaxEnvironments {
		return nil, apiError(api.CodeTooManyEnvironments, "this token holds %d live environments, the most it may (close one first)", n)
	}
	var inputUploads []*upload
	for i := range tf.Inputs {
		u, from, aerr := s.inputFrom(owner, i, tf.Inputs[i].From)
		if aerr != nil {
			return nil, aerr
		}
		tf.Inputs[i].From = from
		inputUploads = append(inputUploads, u)
	}
	tf = e.bundle.Manifest.Task.Merge(tf) // the app manifest's task, then the request's
	e.collect = tf.Collect
	if len(tf.Inputs) > 0 {
		tmpfs := int64(e.cfg.Resources.TmpfsMB) << 20
		in, err := app.LoadInputs(tf, e.bundle, app.Limits{MaxFiles: app.DefaultLimits.MaxFiles, MaxBytes: min(app.DefaultLimits.MaxBytes, tmpfs*3/4)})
		if err != nil {
			msg := err.Error()
			for _, u := range inputUploads {
				msg = strings.ReplaceAll(msg, u.dir, "upload:"+u.id)
			}
			return nil, apiError(api.CodeInvalidRequest, "%s", msg)
		}
		e.inputs = &inputSet{in: in, refs: 1}
	}
	if req.Name != "" {
		// Held from here to removeEnv, on every path: no other run or
		// environment takes the name between the episodes' sandboxes.
		root, err := named.Root()
		if err == nil {
			e.hold, err = named.TakeHold(root, req.Name, b.Name(), e.id)
		}
		if err != nil {
			if e.inputs != nil {
				e.inputs.in.Close()
			}
			return nil, namedError(req.Name, err)
		}
		e.cfg.Name = req.Name
	}
	if e.upload != nil {
		e.upload.inUse++
	}
	for _, u := range inputUploads {
		u.inUse++
	}
	e.inputUploads = inputUploads
	s.envs[e.id] = e
	return e, nil
}

// limits checks the limits a client asks for: each positive and no more
// than the server's, together what every backend accepts.
func (s *Server) limits(l api.Limits) (environment.Resources, *api.Error) {
	max := s.o.Env.Resources
	r := max
	for _, c := range []struct {
		name string
		v, m float64
		set  func()
	}{
		{"cpus", l.CPUs, max.CPUs, func() { r.CPUs = l.CPUs }},
		{"memory_mb", float64(l.MemoryMB), float64(max.MemoryMB), func() { r.MemoryMB = l.MemoryMB }},
		{"pids", float64(l.PIDs), float64(max.PIDs), func() { r.PIDs = l.PIDs }},
		{"tmpfs_mb", float64(l.TmpfsMB), float64(max.TmpfsMB), func() { r.TmpfsMB = l.TmpfsMB }},
	} {
		switch {
		case c.v == 0:
		case !(c.v > 0) || c.v > c.m:
			return r, apiError(api.CodeInvalidRequest, "limits.%s %s: more than 0 and at most %s (this server's)", c.name, strconv.FormatFloat(c.v, 'f', -1, 64), strconv.FormatFloat(c.m, 'f', -1, 64))
		default:
			c.set()
		}
	}
	if err := r.Validate(); err != nil {
		return r, apiError(api.CodeInvalidRequest, "limits: %v", err)
	}
	return r, nil
}

func checkTask(t string) *api.Error {
	if len(t) > maxTask {
		return apiError(api.CodeInvalidRequest, "task: %d bytes; the most is %d", len(t), maxTask)
	}
	if !utf8.ValidString(t) {
		return apiError(api.CodeInvalidRequest, "task: not valid UTF-8")
	}
	return nil
}

// removeEnv forgets an environment whose episode is over, and gives its
// token's slot and its upload back.
func (s *Server) removeEnv(e *env) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e.removed {
		return
	}
	e.removed = true
	delete(s.envs, e.id)
	e.hold.Release() // its sandboxes are gone: closeEnv waited for them; a failed open removed its own
	if in := e.inputs; in != nil {
		if in.refs--; in.refs == 0 {
			in.in.Close()
		}
	}
	for _, u := range append([]*upload{e.upload}, e.inputUploads...) {
		if u == nil {
			continue
		}
		u.inUse--
		if u.deleted && u.inUse == 0 {
			u.remove()
			delete(s.uploads, u.id)
		}
	}
}

// taskFiles reads a create request's task parts with the rules every
// task has (app.TaskFiles), inputs' from still upload:ID[/PATH].
func taskFiles(req api.CreateRequest) (app.TaskFiles, *api.Error) {
	var tf app.TaskFiles
	set := func(field string, v any, given bool) *api.Error {
		if !given {
			return nil
		}
		raw, err := json.Marshal(v)
		if err == nil {
			err = tf.Set(field, raw)
		}
		if err != nil {
			return apiError(api.CodeInvalidRequest, "%v", err)
		}
		return nil
	}
	for _, f := range []struct {
		name  string
		v     any
		given bool
	}{
		{"inputs", req.Inputs, len(req.Inputs) > 0},
		{"collect", req.Collect, len(req.Collect) > 0},
		{"collect_limits", req.CollectLimits, req.CollectLimits != nil},
		{"before_collect", req.BeforeCollect, len(req.BeforeCollect) > 0},
	} {
		if aerr := set(f.name, f.v, f.given); aerr != nil {
			return tf, aerr
		}
	}
	if err := tf.Check(); err != nil {
		return tf, apiError(api.CodeInvalidRequest, "%v", err)
	}
	return tf, nil
}

// inputFrom resolves an input's from, upload:ID or upload:ID/PATH, to the
// upload of owner and the host path in it. Called with s.mu held.
func (s *Server) inputFrom(owner string, i int, from string) (*upload, string, *api.Error) {
	rest, ok := strings.CutPrefix(from, "upload:")
	if !ok {
		return nil, "", apiError(api.CodeInvalidRequest, "field \"inputs\"[%d].from: %q: want upload:ID or upload:ID/PATH (an upload of this token)", i, from)
	}
	id, p, _ := strings.Cut(rest, "/")
	u := s.uploads[id]
	if u == nil || u.owner != owner || u.deleted {
		return nil, "", apiError(api.CodeNotFound, "field \"inputs\"[%d].from: no upload %q", i, id)
	}
	if p == "" {
		return u, u.dir, nil
	}
	if err := stagepath.Check(p); err != nil {
		return nil, "", apiError(api.CodeInvalidRequest, "field \"inputs\"[%d].from: %v", i, strings.Replace(err.Error(), "the app directory", "the upload", 1))
	}
	return u, filepath.Join(u.dir, filepath.FromSlash(p)), nil
}

// closeEnv ends the environment's episode with end (unless it has ended),
// removes its sandbox, finalises its trace and forgets it. It waits for
// all that; a second call waits for the first.
func (s *Server) closeEnv(e *env, end session.End) api.Environment {
	e.mu.Lock()
	if e.closing {
		e.mu.Unlock()
		<-e.closed
		return e.describe()
	}
	e.closing = true
	e.mu.Unlock()
	e.finish(s.base, end)
	e.waitBehind()
	e.mu.Lock()
	e.state = api.StateClosed
	e.mu.Unlock()
	e.log.Close()
	s.removeEnv(e)
	close(e.closed)
	s.logf("environment %s closed (%s)", e.id, end.Reason)
	return e.describe()
}

func (s *Server) handleListEnvs(w http.ResponseWriter, _ *http.Request, owner string) {
	s.mu.Lock()
	var envs []*env
	for _, e := range s.envs {
		if e.owner == owner {
			envs = append(envs, e)
		}
	}
	s.mu.Unlock()
	list := make([]api.Environment, 0, len(envs))
	for _, e := range envs {
		list = append(list, e.describe())
	}
	sort.Slice(list, func(i, j int) bool { return list[i].Created.Before(list[j].Created) })
	writeJSON(w, 200, list)
}

func (s *Server) handleGetEnv(w http.ResponseWriter, r *http.Request, owner string) {
	e, aerr := s.lookup(r, owner)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	writeJSON(w, 200, e.describe())
}

func (s *Server) handleCloseEnv(w http.ResponseWriter, r *http.Request, owner string) {
	e, aerr := s.lookup(r, owner)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	e.mu.Lock()
	starting := e.state == api.StateStarting
	e.mu.Unlock()
	if starting {
		writeError(w, apiError(api.CodeBusy, "environment %s is starting an episode; close it once it has", e.id))
		return
	}
	writeJSON(w, 200, s.closeEnv(e, session.End{Outcome: trace.Interrupted, Reason: trace.ReasonClosed, Message: "the client closed the environment"}))
}

// handleGetFile sends one file the latest episode's end collected.
func (s *Server) handleGetFile(w http.ResponseWriter, r *http.Request, owner string) {
	e, aerr := s.lookup(r, owner)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	rel := r.PathValue("path")
	e.mu.Lock()
	dir, files := e.trace, e.files
	e.mu.Unlock()
	var want *api.File
	for i := range files {
		if files[i].Path == rel {
			want = &files[i]
		}
	}
	if want == nil || stagepath.Check(rel) != nil {
		writeError(w, apiError(api.CodeNotFound, "environment %s: no collected file %q (the latest episode's files: GET /v1/envs/%s)", e.id, rel, e.id))
		return
	}
	root, err := os.OpenRoot(filepath.Join(dir, trace.FilesDir))
	if err != nil {
		writeError(w, apiError(api.CodeNotFound, "environment %s: %v", e.id, err))
		return
	}
	defer root.Close()
	f, err := root.Open(filepath.FromSlash(rel))
	if err != nil {
		writeError(w, apiError(api.CodeNotFound, "environment %s: %v", e.id, err))
		return
	}
	defer f.Close()
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.FormatInt(want.Size, 10))
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(200)
	_, _ = io.CopyN(w, f, want.Size)
}

func (s *Server) handleObserve(w http.ResponseWriter, r *http.Request, owner string) {
	e, aerr := s.lookup(r, owner)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	image, aerr := imageParam(r.URL.Query(), "image", api.ImagePNG)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	obs, aerr := s.observe(e, image, r.URL.Query().Get("known"), nil)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	writeObserved(w, r, obs, obs)
}

// observe takes the running episode's next observation; an image is
// made only with slot (nil: none needed), refused after largeWait
// without one (a caller that must not be refused takes it first).
func (s *Server) observe(e *env, image, known string, slot *imageSlot) (*api.Observation, *api.Error) {
	sess, ep, aerr := e.current()
	if aerr != nil {
		return nil, aerr
	}
	if image != api.ImageNone {
		if aerr := slot.take(false); aerr != nil {
			return nil, aerr
		}
	}
	o, err := sess.Observe(s.base)
	if err != nil {
		return nil, e.stepError(ep, err)
	}
	if o.Ended != nil {
		e.ended(ep, o.Ended)
	}
	obs, err := observation(e, ep, o, image, known)
	if err != nil {
		return nil, apiError(api.CodeInternal, "%v", err)
	}
	return obs, nil
}

// stepError is the API's error for a step refused because the episode
// ended (now, or before).
func (e *env) stepError(episode int, err error) *api.Error {
	var ee *session.EndedError
	if errors.As(err, &ee) {
		e.ended(episode, &ee.End)
		ae := apiError(api.CodeEpisodeEnded, "episode %d of environment %s has ended: %s", episode, e.id, ee.End.String())
		ae.End = apiEnd(&ee.End)
		return ae
	}
	if errors.Is(err, session.ErrRelaunching) {
		return apiError(api.CodeBusy, "environment %s is being relaunched", e.id)
	}
	return apiError(api.CodeInternal, "%v", err)
}

func (s *Server) handleAct(w http.ResponseWriter, r *http.Request, owner string) {
	e, aerr := s.lookup(r, owner)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	q := r.URL.Query()
	image, aerr := imageParam(q, "observe", api.ImageNone)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	data, aerr := readBody(w, r, "application/json", action.MaxJSON, false)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	a, err := action.Parse(data)
	if err != nil {
		writeError(w, apiError(api.CodeInvalidAction, "%v (docs/actions.md has the vocabulary)", err))
		return
	}
	resp, aerr := s.step(e, a, image, q.Get("known"), nil)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	writeObserved(w, r, resp, resp.Observation)
}

// step performs one action in the running episode and, unless image is
// none, observes after it (after a done: the last observation).
// An image is made only with slot (nil: none needed), waited for after
// the action.
func (s *Server) step(e *env, a action.Action, image, known string, slot *imageSlot) (_ *api.StepResponse, _ *api.Error) {
	sess, ep, aerr := e.current()
	if aerr != nil {
		return nil, aerr
	}
	resp := &api.StepResponse{Env: e.id, Episode: ep}
	defer func() {
		if resp.Ended != nil {
			// ended has closed the session when it collects: the files,
			// and the grade of a graded episode, come with this answer
			resp.Files = e.collected()
			resp.Ended.Grade = e.endGrade()
		}
	}()
	res, err := sess.Act(s.base, session.Step{Actor: trace.ActorRemote, Action: a})
	if err != nil {
		var ee *session.EndedError
		if errors.Is(err, session.ErrRelaunching) {
			return nil, apiError(api.CodeBusy, "environment %s is being relaunched", e.id)
		}
		if !errors.As(err, &ee) {
			return nil, apiError(api.CodeInternal, "%v", err)
		}
		// The episode ended during the step (the app was seen gone, the
		// deadline passed, the sandbox failed) or just before it.
		e.ended(ep, &ee.End)
		resp.Step = res.Step
		resp.Result = action.Result{OK: false, Error: ee.Error()}
		resp.Ended = apiEnd(&ee.End)
		return resp, nil
	}
	resp.Step, resp.Result, resp.Invalid, resp.Ended = res.Step, res.Result, res.Invalid, apiEnd(res.Ended)
	e.stepped(ep, res.Step)
	if res.Ended != nil {
		e.ended(ep, res.Ended)
	}
	if image == api.ImageNone {
		return resp, nil
	}
	if aerr := slot.take(true); aerr != nil {
		return nil, aerr
	}
	var o *session.Observation
	switch {
	case res.Final != nil:
		o = res.Final
	case res.Ended != nil:
		return resp, nil
	default:
		o, err = sess.Observe(s.base)
		if err != nil {
			var ee *session.EndedError
			if errors.As(err, &ee) {
				e.ended(ep, &ee.End)
				resp.Ended = apiEnd(&ee.End)
				return resp, nil
			}
			return nil, apiError(api.CodeInternal, "%v", err)
		}
		if o.Ended != nil {
			e.ended(ep, o.Ended)
			resp.Ended = apiEnd(o.Ended)
		}
	}
	obs, err := observation(e, ep, o, image, known)
	if err != nil {
		return nil, apiError(api.CodeInternal, "%v", err)
	}
	resp.Observation = obs
	return resp, nil
}

func (s *Server) handleReset(w http.ResponseWriter, r *http.Request, owner string) {
	e, aerr := s.lookup(r, owner)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	image, aerr := imageParam(r.URL.Query(), "observe", api.ImageNone)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	var req api.ResetRequest
	data, aerr := readBody(w, r, "application/json", maxJSONBody, true)
	if aerr == nil && len(data) > 0 {
		aerr = decodeStrict(data, &req)
	}
	if aerr == nil && req.Task != nil {
		aerr = checkTask(*req.Task)
	}
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	resp, aerr := s.reset(e, req.Task, req.Mode, image, r.URL.Query().Get("known"), nil)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	writeObserved(w, r, resp, resp.Observation)
}

// reset ends the running episode (closed by the client) and starts the
// next: in a fresh sandbox, or with mode relaunch in the same sandbox
// reset in place (session.Relaunch). mode "" is the environment's.
// An image is made only with slot (nil: none needed), waited for once
// the next episode has started.
func (s *Server) reset(e *env, task *string, mode, image, known string, slot *imageSlot) (*api.ResetResponse, *api.Error) {
	switch mode {
	case "", api.ResetFresh:
	case api.ResetRelaunch:
		if e.cfg.Name != "" {
			return nil, apiError(api.CodeInvalidRequest, "mode relaunch: environment %s's sandbox is named (%s), and a named sandbox is never reset in place; use fresh", e.id, e.cfg.Name)
		}
		if aerr := canRelaunch(e.backend); aerr != nil {
			return nil, aerr
		}
	default:
		return nil, apiError(api.CodeInvalidRequest, "mode %q: want %s", mode, strings.Join(api.ResetModes, " or "))
	}
	e.mu.Lock()
	switch {
	case e.closing || e.state == api.StateClosed:
		e.mu.Unlock()
		return nil, apiError(api.CodeNotFound, "environment %s is closed", e.id)
	case e.state == api.StateStarting:
		e.mu.Unlock()
		return nil, apiError(api.CodeBusy, "environment %s is starting an episode already", e.id)
	}
	if mode == "" {
		mode = e.resetMode
	}
	sess, was := e.sess, e.state
	if mode == api.ResetRelaunch && was == api.StateRunning {
		if busy, _ := sess.Activity(); busy {
			e.mu.Unlock()
			return nil, relaunchBusy(e)
		}
	}
	kept := e.kept
	e.kept = nil
	e.state = api.StateStarting
	e.lookAtLaunch = image != api.ImageNone // the answer's observation comes with the launch
	prevMode := e.resetMode
	e.resetMode = mode
	prevTask := e.task
	if task != nil {
		e.task = *task
	}
	e.mu.Unlock()
	done, ok := s.track()
	if !ok {
		return nil, apiError(api.CodeShuttingDown, "the server is shutting down")
	}
	defer done()
	end := session.End{Outcome: trace.Interrupted, Reason: trace.ReasonClosed, Message: "the client reset the environment"}
	var prep *session.Prepared
	switch {
	case mode == api.ResetRelaunch && was == api.StateRunning:
		// The sandbox is taken as soon as it is reset in place; the
		// episode's trace is finalised behind the next one's start
		// (closeBehind below waits for it), as a fresh reset's teardown.
		p, err := sess.RelaunchBehind(s.base, end)
		if errors.Is(err, session.ErrStepInFlight) { // a step came in meanwhile: nothing changed
			e.mu.Lock()
			e.state, e.kept, e.resetMode, e.task = was, kept, prevMode, prevTask
			e.mu.Unlock()
			return nil, relaunchBusy(e)
		}
		if err != nil {
			s.logf("environment %s: no relaunch, a fresh sandbox instead: %v", e.id, err)
		}
		prep = p
	case mode == api.ResetRelaunch && kept != nil:
		<-kept.done // the ended episode's relaunch (ended)
		if kept.err != nil {
			s.logf("environment %s: no relaunch, a fresh sandbox instead: %v", e.id, kept.err)
		}
		prep, kept = kept.prep, nil
	}
	// The next episode starts first, then the previous one is closed
	// behind it: on Docker its teardown (the daemon stopping and removing
	// a container) slowed the next one's staging through the same daemon
	// (the median reset went from 133–143 ms to 94–135 ms in three runs
	// of 20, the two orders in turn).
	if sess != nil && e.cfg.Name != "" {
		// A named sandbox's home is one sandbox's at a time: the ended
		// episode's is gone before the next one mounts it.
		e.closeBehind(sess, end)
		e.waitBehind()
		sess = nil
	}
	aerr := e.open(s.base, prep)
	if sess != nil {
		e.closeBehind(sess, end)
	}
	if kept != nil { // a sandbox kept for a relaunch, and the reset is fresh
		e.closeKept(kept)
	}
	if aerr != nil {
		return nil, aerr
	}
	resp := &api.ResetResponse{}
	if image != api.ImageNone {
		if aerr := slot.take(true); aerr != nil {
			return nil, aerr
		}
		obs, aerr := s.observe(e, image, known, slot)
		if aerr != nil {
			return nil, aerr
		}
		resp.Observation = obs
	}
	resp.Environment = e.describe()
	return resp, nil
}

// namedBackend is the backend of a create request that names a sandbox:
// the one asked for, or, when none is, the name's own when this server
// offers it (a name keeps its first backend).
func (s *Server) namedBackend(name, backend string) (string, *api.Error) {
	if err := named.Validate(name); err != nil {
		return "", apiError(api.CodeInvalidRequest, "name: %v", err)
	}
	if backend != "" {
		return backend, nil
	}
	root, err := named.Root()
	if err != nil {
		return "", apiError(api.CodeInternal, "name %s: %v", name, err)
	}
	if got, err := named.Get(root, name); err == nil {
		if _, ok := s.backend(got.Backend); ok {
			return got.Backend, nil
		}
	}
	return backend, nil
}

// namedError is the API's error for a named sandbox that cannot be had.
func namedError(name string, err error) *api.Error {
	switch {
	case errors.Is(err, named.ErrLocked):
		return apiError(api.CodeSandboxInUse, "name %s: %v", name, err)
	case errors.Is(err, named.ErrBackend), errors.Is(err, named.ErrTooBig):
		return apiError(api.CodeInvalidRequest, "name %s: %v", name, err)
	}
	return apiError(api.CodeInternal, "name %s: %v", name, err)
}

// canRelaunch says why b cannot reset in place, if it cannot.
func canRelaunch(b environment.Backend) *api.Error {
	if environment.CapabilitiesOf(b).Relaunch {
		return nil
	}
	return apiError(api.CodeInvalidRequest, "reset mode relaunch: the %s backend cannot reset a sandbox in place (it lacks the capability relaunch); use fresh", b.Name())
}

// relaunchBusy is the error of a relaunch asked for while a step runs.
func relaunchBusy(e *env) *api.Error {
	return apiError(api.CodeBusy, "environment %s has a step in flight: a relaunch neither waits for it nor aborts it; reset once it has answered (or reset with mode fresh, which aborts it)", e.id)
}

// handleEvents streams the environment's events as Server-Sent Events,
// from after Last-Event-ID (or ?after=N), until the environment closes or
// the client goes.
func (s *Server) handleEvents(w http.ResponseWriter, r *http.Request, owner string) {
	e, aerr := s.lookup(r, owner)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	var after int64
	for _, v := range []string{r.Header.Get("Last-Event-ID"), r.URL.Query().Get("after")} {
		if v == "" {
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			writeError(w, apiError(api.CodeInvalidRequest, "after %q: want a non-negative event number", v))
			return
		}
		after = n
	}
	flusher, ok := w.(http.Flusher)
	if !ok {
		writeError(w, apiError(api.CodeInternal, "this connection cannot stream"))
		return
	}
	detach, aerr := e.attach()
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	defer detach()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(200)
	flusher.Flush()
	ctx := r.Context()
	for {
		rctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		events, open, err := e.log.Read(rctx, after, 256)
		cancel()
		switch {
		case ctx.Err() != nil:
			return
		case err != nil: // nothing for a while: a comment keeps proxies and the client awake
			if _, err := io.WriteString(w, ": keep-alive\n\n"); err != nil {
				return
			}
		case !open:
			return
		}
		for _, ev := range events {
			data, _ := json.Marshal(apiEvent(ev))
			if _, err := fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", ev.Seq, ev.Kind, data); err != nil {
				return
			}
			after = ev.Seq
		}
		flusher.Flush()
	}
}

// apiEvent is a session event as the API shows it.
func apiEvent(ev session.Event) api.Event {
	return api.Event{
		Seq: ev.Seq, Kind: ev.Kind, Episode: ev.Episode, TNS: int64(ev.T),
		Stream: string(ev.Stream), Text: ev.Text, Dropped: ev.Dropped, Change: ev.Change, Window: ev.Window,
		Exit: ev.Exit, Step: ev.Step, Actor: ev.Actor, Action: ev.Action, Invalid: ev.Invalid, Result: ev.Result,
		End: apiEnd(ev.End), RunID: ev.RunID, Trace: ev.Trace, By: ev.By, Reason: ev.Reason, Steps: ev.Steps,
		Approval: apiApproval(ev.Approval), Answer: ev.Answer,
	}
}

// apiApproval is the API's form of a policy's ask (the screenshot's path
// is the server's own, left out).
func apiApproval(r *policy.Request) *api.Approval {
	if r == nil {
		return nil
	}
	return &api.Approval{ID: r.ID, Step: r.Step, Actor: r.Actor, Action: r.Action, Rule: r.Rule, Sensitive: r.Sensitive, Element: r.Element}
}
