package serve

import (
	"context"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/observe"
	"github.com/codegirl-games/agentbox/policy"
	"github.com/codegirl-games/agentbox/serve/api"
	"github.com/codegirl-games/agentbox/session"
	"github.com/codegirl-games/agentbox/trace"
)

// The contract tests hold every hand-kept copy of agentbox's vocabulary —
// the action kinds and fields, the event kinds, the error codes — to the
// Go definitions (action.Kinds and action.Fields, session.EventKinds,
// api.Codes): a kind added in Go and missing from a surface fails here
// with a message that names the surface. The MCP tool table has its own
// test in its package (mcp/contract_test.go), since its table is
// unexported.

// Surfaces read from disk, relative to this package.
const (
	docActions  = "../docs/actions.md"
	drawScript  = "../report/assets/draw.js"
	liveScript  = "../live/assets/live.js"
	pyErrors    = "../python/agentbox/errors.py"
	goEvents    = "../session/events.go"
	goAPI       = "api/api.go"
	openAPIName = "serve/openapi.json"
)

// notDrawn are the action kinds the drawing script (report and live page)
// shows by their words alone, with no case of their own, and why.
var notDrawn = map[action.Kind]string{
	action.Key:               "a key press has no place on the screen: the caption (the action in words) says it, and held keys are listed beside",
	action.KeyDown:           "as key",
	action.KeyUp:             "as key",
	action.Wait:              "nothing to point at: the caption says how long or until what",
	action.CursorPosition:    "asks for the pointer and changes nothing: the caption says so",
	action.AccessibilityTree: "asks for the tree and changes nothing: the caption says so",
}

// notOnLivePage are the event kinds the live page's script does not
// switch on, and why. (None: each has its line.)
var notOnLivePage = map[string]string{}

// jsonFields lists the JSON names of a struct type's fields.
func jsonFields(t reflect.Type) []string {
	var names []string
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" || !f.IsExported() {
			continue
		}
		names = append(names, name)
	}
	return names
}

// surface names a file of the module by its path from the module's root.
func surface(path string) string { return filepath.ToSlash(filepath.Join("serve", path)) }

// readSurface reads a surface's file.
func readSurface(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return string(b)
}

// constNames lists the names of the constants with that prefix declared in
// a Go file.
func constNames(t *testing.T, path, prefix string) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, spec := range g.Specs {
			for _, n := range spec.(*ast.ValueSpec).Names {
				if strings.HasPrefix(n.Name, prefix) {
					names = append(names, n.Name)
				}
			}
		}
	}
	return names
}

// listed lists the identifiers of a variable's composite literal in a Go
// file (var Codes = []string{CodeA, CodeB}).
func listed(t *testing.T, path, name string) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	ast.Inspect(f, func(n ast.Node) bool {
		vs, ok := n.(*ast.ValueSpec)
		if !ok || len(vs.Names) != 1 || vs.Names[0].Name != name || len(vs.Values) != 1 {
			return true
		}
		for _, e := range vs.Values[0].(*ast.CompositeLit).Elts {
			if id, ok := e.(*ast.Ident); ok {
				ids = append(ids, id.Name)
			}
		}
		return false
	})
	if ids == nil {
		t.Fatalf("%s: no variable %s", path, name)
	}
	return ids
}

// enumOf is the enum of a property of a schema of openapi.json.
func enumOf(t *testing.T, schema, prop string) []string {
	t.Helper()
	doc := loadOpenAPI(t)
	s := doc.Components.Schemas[schema]
	if s == nil || s.Value.Properties[prop] == nil {
		t.Fatalf("%s: no %s.%s", openAPIName, schema, prop)
	}
	var out []string
	for _, v := range s.Value.Properties[prop].Value.Enum {
		out = append(out, fmt.Sprint(v))
	}
	return out
}

// propertiesOf lists a schema's properties in openapi.json.
func propertiesOf(t *testing.T, schema string) []string {
	t.Helper()
	s := loadOpenAPI(t).Components.Schemas[schema]
	if s == nil {
		t.Fatalf("%s: no schema %s", openAPIName, schema)
	}
	var out []string
	for p := range s.Value.Properties {
		out = append(out, p)
	}
	return out
}

// sameSet reports what want has that got lacks, and what got has beyond.
func sameSet(t *testing.T, surface string, got, want []string) {
	t.Helper()
	for _, w := range want {
		if !slices.Contains(got, w) {
			t.Errorf("%s lacks %s", surface, w)
		}
	}
	for _, g := range got {
		if !slices.Contains(want, g) {
			t.Errorf("%s has %s, which the Go definition does not", surface, g)
		}
	}
}

// switchCases lists the string cases of a script's switch statements.
var caseRE = regexp.MustCompile(`case "([a-z_]+)"`)

func switchCases(src string) []string {
	var out []string
	for _, m := range caseRE.FindAllStringSubmatch(src, -1) {
		out = append(out, m[1])
	}
	return out
}

// actionRows maps each kind of docs/actions.md's vocabulary table (the
// one headed "| action | fields | example |") to its fields cell.
func actionRows(t *testing.T) map[string]string {
	t.Helper()
	rows := map[string]string{}
	row := regexp.MustCompile("^\\| `([a-z_]+)` \\| (.*) \\| .* \\|$")
	in := false
	for _, line := range strings.Split(readSurface(t, docActions), "\n") {
		switch {
		case strings.HasPrefix(line, "| action | fields | example |"):
			in = true
		case in && !strings.HasPrefix(line, "|"):
			return rows
		case in:
			if m := row.FindStringSubmatch(line); m != nil {
				rows[m[1]] = m[2]
			}
		}
	}
	if !in {
		t.Fatalf("%s: no vocabulary table (| action | fields | example |)", surface(docActions))
	}
	return rows
}

// TestContractActions: every action kind and every field of each is in
// openapi.json's Action schema, in docs/actions.md's table (the kind's row
// naming each of its fields) and, where it is drawn, in the drawing
// script; and nothing is in them that the vocabulary lacks.
func TestContractActions(t *testing.T) {
	var kinds []string
	for _, k := range action.Kinds {
		kinds = append(kinds, string(k))
	}
	sameSet(t, openAPIName+": Action.action's enum", enumOf(t, "Action", "action"), kinds)
	sameSet(t, openAPIName+": Action's properties", propertiesOf(t, "Action"), jsonFields(reflect.TypeFor[action.Action]()))

	// Every field a kind takes is a field of Action, and every field of
	// Action belongs to some kind.
	fields := jsonFields(reflect.TypeFor[action.Action]())
	used := map[string]bool{"action": true}
	for _, k := range action.Kinds {
		for _, f := range action.Fields(k) {
			used[f] = true
			if !slices.Contains(fields, f) {
				t.Errorf("action.Fields(%s) has %s, which action.Action has no JSON field for", k, f)
			}
		}
	}
	for _, f := range fields {
		if !used[f] {
			t.Errorf("action.Action's field %s belongs to no kind (action.Fields)", f)
		}
	}

	rows := actionRows(t)
	for _, k := range action.Kinds {
		cell, ok := rows[string(k)]
		if !ok {
			t.Errorf("%s: the vocabulary's table has no row for %s", surface(docActions), k)
			continue
		}
		for _, f := range action.Fields(k) {
			if !strings.Contains(cell, "`"+f+"`") {
				t.Errorf("%s: the row of %s does not name its field %s", surface(docActions), k, f)
			}
		}
	}
	for k := range rows {
		if !slices.Contains(kinds, k) {
			t.Errorf("%s: a row for %s, which is no action kind", surface(docActions), k)
		}
	}

	drawn := switchCases(readSurface(t, drawScript))
	for _, k := range action.Kinds {
		_, exempt := notDrawn[k]
		switch has := slices.Contains(drawn, string(k)); {
		case !has && !exempt:
			t.Errorf("%s: no case for the action %s (draw it, or add it to notDrawn with the reason)", surface(drawScript), k)
		case has && exempt:
			t.Errorf("%s: draws %s, which notDrawn still lists", surface(drawScript), k)
		}
	}
	for _, c := range drawn {
		if !slices.Contains(kinds, c) {
			t.Errorf("%s: a case for %s, which is no action kind", surface(drawScript), c)
		}
	}
}

// TestContractEvents: session.EventKinds lists every Event constant; each
// kind is in openapi.json's Event.kind enum and has its case in the live
// page's script; api.Event carries every field of session.Event, apiEvent
// copies each, and openapi.json's Event schema has each.
func TestContractEvents(t *testing.T) {
	sameSet(t, surface(goEvents)+": session.EventKinds", listed(t, goEvents, "EventKinds"), constNames(t, goEvents, "Event"))
	sameSet(t, openAPIName+": Event.kind's enum", enumOf(t, "Event", "kind"), session.EventKinds)

	cases := switchCases(readSurface(t, liveScript))
	for _, k := range session.EventKinds {
		if _, exempt := notOnLivePage[k]; !exempt && !slices.Contains(cases, k) {
			t.Errorf("%s: no case for the event %s (show it, or add it to notOnLivePage with the reason)", surface(liveScript), k)
		}
	}

	// The events the trace records under the same name are spelled alike.
	for _, k := range [][2]string{{session.EventTakeover, trace.EventTakeover}, {session.EventHandBack, trace.EventHandBack},
		{session.EventNotApplied, trace.EventNotApplied}} {
		if k[0] != k[1] {
			t.Errorf("the session's event %q is the trace's %q: one spelling on every surface", k[0], k[1])
		}
	}

	// api.Event has every field of session.Event (the same JSON names).
	sessionFields := jsonFields(reflect.TypeFor[session.Event]())
	apiFields := jsonFields(reflect.TypeFor[api.Event]())
	sameSet(t, "serve/api: Event's fields", apiFields, sessionFields)
	sameSet(t, openAPIName+": Event's properties", propertiesOf(t, "Event"), apiFields)

	// apiEvent copies each: a session event with every field set comes out
	// with every field set.
	ev := session.Event{Seq: 1, Kind: session.EventHandBack, T: time.Second, Episode: 2, RunID: "r", Trace: "d",
		Stream: observe.Stdout, Text: "t", Dropped: 3, Change: "mapped", Window: &observe.Window{ID: 1},
		Exit: &observe.Exit{Code: 1}, Step: 4, Actor: "human", Action: &action.Action{Kind: action.Wait},
		Invalid: "no", Result: &action.Result{OK: true}, End: &session.End{Reason: "done"},
		By: "a person", Reason: "done", Steps: 5, Approval: &policy.Request{ID: "1", Rule: "r"}, Answer: "denied"}
	v := reflect.ValueOf(ev)
	for i := range v.NumField() {
		if f := v.Type().Field(i); f.IsExported() && v.Field(i).IsZero() {
			t.Fatalf("the test's session event leaves %s unset: set it", f.Name)
		}
	}
	b, err := json.Marshal(apiEvent(ev))
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]json.RawMessage
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	for _, f := range sessionFields {
		if _, ok := got[f]; !ok {
			t.Errorf("serve's apiEvent drops the session event's %s: %s", f, b)
		}
	}
}

// TestContractErrorCodes: api.Codes lists every Code constant; each is in
// openapi.json's Error.code enum and its description with its status; the
// Python client's classes are of codes that exist.
func TestContractErrorCodes(t *testing.T) {
	sameSet(t, surface(goAPI)+": api.Codes", listed(t, goAPI, "Codes"), constNames(t, goAPI, "Code"))
	sameSet(t, openAPIName+": Error.code's enum", enumOf(t, "Error", "code"), api.Codes)
	desc := loadOpenAPI(t).Components.Schemas["Error"].Value.Properties["code"].Value.Description
	for _, c := range api.Codes {
		if want := c + " (" + strconv.Itoa(api.Status(c)) + ")"; !strings.Contains(desc, want) {
			t.Errorf("%s: Error.code's description lacks %q", openAPIName, want)
		}
	}

	py := readSurface(t, pyErrors)
	block, ok := strings.CutPrefix(py[strings.Index(py, "_BY_CODE = {"):], "_BY_CODE = {")
	if !ok {
		t.Fatalf("%s: no _BY_CODE", surface(pyErrors))
	}
	block, _, _ = strings.Cut(block, "}")
	entries := regexp.MustCompile(`"([a-z_]+)":\s*(\w+)`).FindAllStringSubmatch(block, -1)
	if len(entries) == 0 {
		t.Fatalf("%s: cannot read _BY_CODE", surface(pyErrors))
	}
	for _, m := range entries {
		if !slices.Contains(api.Codes, m[1]) {
			t.Errorf("%s: _BY_CODE maps %s, which is no error code of the API", surface(pyErrors), m[1])
		}
		if doc := regexp.MustCompile(`class ` + m[2] + `\(APIError\):\n\s+"""(\d+) ([a-z_]+)`).FindStringSubmatch(py); doc == nil ||
			doc[1] != strconv.Itoa(api.Status(m[1])) || doc[2] != m[1] {
			t.Errorf("%s: the docstring of %s does not begin \"%d %s\"", surface(pyErrors), m[2], api.Status(m[1]), m[1])
		}
	}
}

// validateEvent checks one event stream's data against openapi.json's
// Event schema.
func validateEvent(t *testing.T, data []byte) { t.Helper(); validateSchema(t, "Event", data) }

// validateSchema checks a JSON document against a schema of openapi.json
// (what the harness cannot: an event stream's data, a WebSocket message).
func validateSchema(t *testing.T, schema string, data []byte) {
	t.Helper()
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatalf("%s %s: %v", schema, data, err)
	}
	if err := loadOpenAPI(t).Components.Schemas[schema].Value.VisitJSON(v); err != nil {
		t.Errorf("%.300s breaks %s's %s schema: %v", data, openAPIName, schema, err)
	}
}

// TestTakeoverOnTheEventStream: a client of the events stream sees who
// took control, the action of the remote client that was not performed,
// the person's step, and who handed control back, why and after how many
// steps — each event as the document describes it.
func TestTakeoverOnTheEventStream(t *testing.T) {
	h := newHarness(t, nil, nil)
	e := h.create("", `, "settle": "none"`)
	h.srv.mu.Lock()
	en := h.srv.envs[e.ID]
	h.srv.mu.Unlock()
	en.mu.Lock()
	sess := en.sess
	en.mu.Unlock()
	if sess == nil {
		t.Fatal("the environment has no session")
	}

	if err := sess.TakeOver("a tester"); err != nil {
		t.Fatal(err)
	}
	// The remote client's action waits for the hand-back and is not
	// performed (it was decided before the person's control).
	acted := make(chan error, 1)
	go func() {
		hr, _ := http.NewRequestWithContext(t.Context(), "POST", h.url+"/v1/envs/"+e.ID+"/act", strings.NewReader(`{"action":"key","keys":"a"}`))
		hr.Header.Set("Authorization", "Bearer "+testToken)
		hr.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(hr)
		if err != nil {
			acted <- err
			return
		}
		defer resp.Body.Close()
		var st api.StepResponse
		if err := json.NewDecoder(resp.Body).Decode(&st); err != nil || resp.StatusCode != 200 || st.Result.OK {
			acted <- fmt.Errorf("the remote action during the takeover: %s %+v %v", resp.Status, st, err)
			return
		}
		acted <- nil
	}()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if res, err := sess.Act(ctx, session.Step{Actor: trace.ActorHuman, Action: action.Action{Kind: action.Key, Keys: "Return"}}); err != nil || !res.Result.OK {
		t.Fatalf("the person's step: %+v %v", res, err)
	}
	if err := sess.HandBack("the tester left"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-acted:
		if err != nil {
			t.Fatal(err)
		}
	case <-ctx.Done():
		t.Fatal("the remote action did not come back after the hand-back")
	}

	hr, _ := http.NewRequestWithContext(ctx, "GET", h.url+"/v1/envs/"+e.ID+"/events", nil)
	hr.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var takeover, handBack, notApplied *api.Event
	for _, ev := range readEvents(t, resp.Body, 6) {
		switch ev.Kind {
		case session.EventTakeover:
			takeover = &ev
		case session.EventHandBack:
			handBack = &ev
		case session.EventNotApplied:
			notApplied = &ev
		}
	}
	if takeover == nil || takeover.By != "a tester" {
		t.Errorf("takeover: %+v", takeover)
	}
	if handBack == nil || handBack.By != "a tester" || handBack.Reason != "the tester left" || handBack.Steps != 1 {
		t.Errorf("hand_back: %+v", handBack)
	}
	if notApplied == nil || notApplied.Actor != trace.ActorRemote || notApplied.Action == nil || notApplied.Action.Keys != "a" {
		t.Errorf("action_not_applied: %+v", notApplied)
	}
}
