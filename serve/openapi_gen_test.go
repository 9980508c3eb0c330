package serve

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/codegirl-games/agentbox/serve/internal/openapigen"
)

var update = flag.Bool("update", false, "TestOpenAPIGenerated writes openapi.json (as go generate ./serve/ does)")

const (
	openAPIFile  = "openapi.json"
	openAPIPaths = "openapi_paths.json"
)

// generated is the document the generator makes from the Go types and
// openapi_paths.json.
func generated(t *testing.T) []byte {
	t.Helper()
	paths, err := os.ReadFile(openAPIPaths)
	if err != nil {
		t.Fatal(err)
	}
	root, err := openapigen.ModuleRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	g, err := openapigen.New(root, openapigen.API())
	if err != nil {
		t.Fatal(err)
	}
	doc, err := g.Document(paths)
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

// TestOpenAPIGenerated: serve/openapi.json is what the generator writes
// from serve/api's types (and the types they use) and openapi_paths.json;
// a difference is named by its place in the document.
func TestOpenAPIGenerated(t *testing.T) {
	want := generated(t)
	if *update {
		if err := os.WriteFile(openAPIFile, want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(openAPIFile)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(got, want) {
		if !bytes.Equal(OpenAPI, got) {
			t.Errorf("the embedded OpenAPI differs from %s: rebuild", openAPIName)
		}
		return
	}
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("%s: %v (run go generate ./serve/)", openAPIName, err)
	}
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatal(err)
	}
	diffs := jsonDiff("", g, w, nil)
	// What a field is comes before what its prose says.
	sort.SliceStable(diffs, func(i, j int) bool {
		return !strings.Contains(diffs[i], ".description:") && strings.Contains(diffs[j], ".description:")
	})
	if len(diffs) == 0 {
		diffs = []string{"the same JSON, written differently"}
	}
	if len(diffs) > 20 {
		diffs = append(diffs[:20], fmt.Sprintf("… and %d more", len(diffs)-20))
	}
	t.Errorf("%s is not what the Go types make (run go generate ./serve/, or go test ./serve/ -run TestOpenAPIGenerated -update; routes are kept in serve/%s):\n%s",
		openAPIName, openAPIPaths, strings.Join(diffs, "\n"))
}

// jsonDiff lists where two JSON values differ, by path
// (components.schemas.Action.properties.mark: …).
func jsonDiff(path string, got, want any, out []string) []string {
	at := func(k string) string {
		if path == "" {
			return k
		}
		return path + "." + k
	}
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return append(out, fmt.Sprintf("%s: the file has %.80v, the Go types make an object", path, got))
		}
		keys := slices.Sorted(func(yield func(string) bool) {
			for k := range w {
				if !yield(k) {
					return
				}
			}
			for k := range g {
				if _, dup := w[k]; !dup && !yield(k) {
					return
				}
			}
		})
		for _, k := range keys {
			gv, gok := g[k]
			wv, wok := w[k]
			switch {
			case !gok:
				out = append(out, fmt.Sprintf("%s: missing from the file (the Go types make %.120s)", at(k), compact(wv)))
			case !wok:
				out = append(out, fmt.Sprintf("%s: in the file, not made by the Go types (%.120s)", at(k), compact(gv)))
			default:
				out = jsonDiff(at(k), gv, wv, out)
			}
		}
		return out
	case []any:
		if g, ok := got.([]any); ok && len(g) == len(w) {
			for i := range w {
				out = jsonDiff(at(strconv.Itoa(i)), g[i], w[i], out)
			}
			return out
		}
	}
	if !reflect.DeepEqual(got, want) {
		out = append(out, fmt.Sprintf("%s: the file has %.120s, the Go types make %.120s", path, compact(got), compact(want)))
	}
	return out
}

func compact(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestOpenAPIGeneratedNamesTheDifference: a schema field that differs
// from the Go type is named in the test's message.
func TestOpenAPIGeneratedNamesTheDifference(t *testing.T) {
	var doc map[string]any
	if err := json.Unmarshal(generated(t), &doc); err != nil {
		t.Fatal(err)
	}
	var edited map[string]any
	if err := json.Unmarshal(generated(t), &edited); err != nil {
		t.Fatal(err)
	}
	props := edited["components"].(map[string]any)["schemas"].(map[string]any)["Action"].(map[string]any)["properties"].(map[string]any)
	delete(props, "mark")
	diffs := jsonDiff("", edited, doc, nil)
	if len(diffs) != 1 || !strings.HasPrefix(diffs[0], "components.schemas.Action.properties.mark: missing from the file") {
		t.Errorf("diffs: %q", diffs)
	}
}

// jsonKind is the JSON type of a Go type, as a schema states it ("" for
// a reference to another schema).
func jsonKind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == reflect.TypeFor[time.Time]():
		return "string"
	case t == reflect.TypeFor[json.RawMessage]():
		return "" // a reference (WSRequest.action)
	}
	switch t.Kind() {
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "integer"
	case reflect.Float32, reflect.Float64:
		return "number"
	case reflect.String:
		return "string"
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return "string"
		}
		return "array"
	case reflect.Array:
		return "array"
	case reflect.Struct:
		return ""
	}
	return "?" + t.Kind().String()
}

// servedDocument is the document a running server serves.
func servedDocument(t *testing.T, h *harness) *openapi3.T {
	t.Helper()
	a := h.do(req{method: "GET", path: "/v1/openapi.json"})
	if a.status != 200 {
		t.Fatalf("GET /v1/openapi.json: %d %s", a.status, a.body)
	}
	doc, err := openapi3.NewLoader().LoadFromData(a.body)
	if err != nil {
		t.Fatalf("the served document: %v", err)
	}
	return doc
}

// TestOpenAPISchemasFollowTheTypes: in the served document, every schema
// made from a Go type has exactly that type's JSON fields, each of the
// JSON type its Go type encodes as, required unless omitempty (or the
// spec says a request may leave it out); and every schema is of a type.
func TestOpenAPISchemasFollowTheTypes(t *testing.T) {
	doc := servedDocument(t, newHarness(t, nil, nil))
	spec := openapigen.API()
	names := map[reflect.Type]string{}
	for _, r := range spec.Roots {
		if r.Name != "" {
			names[r.Type] = r.Name
		}
	}
	seen := map[string]bool{}
	var visit func(reflect.Type)
	visit = func(typ reflect.Type) {
		name := names[typ]
		if name == "" {
			name = typ.Name()
		}
		if seen[name] {
			return
		}
		seen[name] = true
		ref := doc.Components.Schemas[name]
		if ref == nil || ref.Value == nil {
			t.Errorf("%s: no schema %s for %v", openAPIName, name, typ)
			return
		}
		s := ref.Value
		var fields []string
		for _, f := range reflect.VisibleFields(typ) {
			tag := f.Tag.Get("json")
			jname, opts, _ := strings.Cut(tag, ",")
			if !f.IsExported() || tag == "-" || (f.Anonymous && jname == "") {
				continue
			}
			fields = append(fields, jname)
			key := name + "." + jname
			p := s.Properties[jname]
			if p == nil {
				t.Errorf("%s: %s lacks the field %s of %v", openAPIName, name, jname, typ)
				continue
			}
			ft := f.Type
			if as, ok := spec.As[ft]; ok {
				ft = as
			}
			want := jsonKind(ft)
			switch got := p.Value.Type; {
			case want == "" && p.Ref == "":
				t.Errorf("%s: %s is %v, not a reference to the schema of %v", openAPIName, key, got, f.Type)
			case want != "" && (got == nil || !got.Is(want)):
				t.Errorf("%s: %s is %v; the Go field (%v) encodes as %s", openAPIName, key, got, f.Type, want)
			}
			optional := strings.Contains(","+opts+",", ",omitempty,") || spec.Fields[key].Optional
			if required := slices.Contains(s.Required, jname); required == optional {
				t.Errorf("%s: %s required=%v, but the Go field says omitempty=%v", openAPIName, key, required, optional)
			}
			et := ft
			for et.Kind() == reflect.Pointer || et.Kind() == reflect.Slice || et.Kind() == reflect.Array {
				et = et.Elem()
			}
			if et.Kind() == reflect.Struct && et.Name() != "" && et != reflect.TypeFor[time.Time]() {
				visit(et)
			}
		}
		sameSet(t, openAPIName+": "+name+"'s properties", slices.Collect(func(yield func(string) bool) {
			for p := range s.Properties {
				if !yield(p) {
					return
				}
			}
		}), fields)
	}
	for _, r := range spec.Roots {
		visit(r.Type)
	}
	for name := range doc.Components.Schemas {
		if !seen[name] {
			t.Errorf("%s: the schema %s is of no Go type", openAPIName, name)
		}
	}
}

// TestRoutesAgree: the served document, the server's mux and the Go
// client agree on every route. Every route of the table is documented;
// every documented path is registered with exactly its documented methods
// (another method is answered 405 with those in Allow, where an unknown
// path is 404); and every request the client's source makes is of a
// documented route.
func TestRoutesAgree(t *testing.T) {
	h := newHarness(t, nil, nil)
	doc := servedDocument(t, h)
	documented := map[string][]string{}
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			documented[path] = append(documented[path], method)
		}
		sort.Strings(documented[path])
	}

	for _, r := range h.srv.routeTable() {
		if !slices.Contains(documented[r.pattern], r.method) {
			t.Errorf("the server answers %s %s, which %s does not document", r.method, r.pattern, openAPIName)
		}
	}

	probe := func(path string) (int, string) {
		hr, err := http.NewRequestWithContext(t.Context(), "PATCH", h.url+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		hr.Header.Set("Authorization", "Bearer "+testToken)
		resp, err := http.DefaultClient.Do(hr)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, resp.Header.Get("Allow")
	}
	if status, _ := probe("/v1/no-such-route"); status != 404 {
		t.Fatalf("PATCH of an unknown path: %d, want 404", status)
	}
	for path, methods := range documented {
		if slices.Contains(methods, "PATCH") {
			t.Fatalf("%s documents PATCH %s: the probe needs a method no route has", openAPIName, path)
		}
		status, allow := probe(strings.ReplaceAll(path, "{id}", "x"))
		if want := strings.Join(methods, ", "); status != 405 || allow != want {
			t.Errorf("%s documents %s %s; the server's mux answers PATCH with %d, Allow %q (want 405, Allow %q)", openAPIName, want, path, status, allow, want)
		}
	}

	calls := clientCalls(t)
	if len(calls) < 10 {
		t.Fatalf("found only %d requests in the client's source: %v", len(calls), calls)
	}
	for _, c := range calls {
		method, path, _ := strings.Cut(c.route, " ")
		if !slices.Contains(documented[path], method) {
			t.Errorf("%s: the Go client sends %s, which %s does not document", c.at, c.route, openAPIName)
		}
	}
}

// clientCall is one request in the Go client's source.
type clientCall struct{ route, at string }

// clientCalls reads the Go client's source for its requests: each call of
// its do and doJSON (method, path), and each URL whose path it extends
// (u.Path += …) for a request (http.NewRequestWithContext's method) or a
// WebSocket (GET). A path is made of literals, url.PathEscape(…) ({id})
// and the client's own path helpers, which are read and applied.
func clientCalls(t *testing.T) []clientCall {
	t.Helper()
	const dir = "../client"
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var parsed []*ast.File
	helpers := map[string]*ast.FuncDecl{} // one string parameter, one return
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		parsed = append(parsed, f)
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Type.Params.NumFields() == 1 && fd.Type.Results.NumFields() == 1 && len(fd.Body.List) == 1 {
				if _, ok := fd.Body.List[0].(*ast.ReturnStmt); ok {
					helpers[fd.Name.Name] = fd
				}
			}
		}
	}
	var eval func(e ast.Expr, env map[string]string) (string, bool)
	eval = func(e ast.Expr, env map[string]string) (string, bool) {
		switch e := e.(type) {
		case *ast.BasicLit:
			s, err := strconv.Unquote(e.Value)
			return s, err == nil && e.Kind == token.STRING
		case *ast.Ident:
			s, ok := env[e.Name]
			return s, ok
		case *ast.BinaryExpr:
			a, ok1 := eval(e.X, env)
			b, ok2 := eval(e.Y, env)
			return a + b, ok1 && ok2 && e.Op == token.ADD
		case *ast.CallExpr:
			sel, ok := e.Fun.(*ast.SelectorExpr)
			if !ok {
				return "", false
			}
			if x, ok := sel.X.(*ast.Ident); ok && x.Name == "url" && sel.Sel.Name == "PathEscape" {
				// A parameter named as the route names it ({approval}),
				// else an ID.
				if a, ok := e.Args[0].(*ast.Ident); ok && a.Name != "id" {
					return "{" + a.Name + "}", true
				}
				return "{id}", true
			}
			fd := helpers[sel.Sel.Name]
			if fd == nil || len(e.Args) != 1 || len(fd.Type.Params.List[0].Names) != 1 {
				return "", false
			}
			arg, ok := eval(e.Args[0], env)
			if !ok {
				return "", false
			}
			return eval(fd.Body.List[0].(*ast.ReturnStmt).Results[0], map[string]string{fd.Type.Params.List[0].Names[0].Name: arg})
		}
		return "", false
	}
	var calls []clientCall
	for _, f := range parsed {
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			// The method of a request this function builds by hand.
			method := ""
			ast.Inspect(fd.Body, func(n ast.Node) bool {
				if c, ok := n.(*ast.CallExpr); ok {
					if sel, ok := c.Fun.(*ast.SelectorExpr); ok {
						switch sel.Sel.Name {
						case "NewRequestWithContext":
							method, _ = eval(c.Args[1], nil)
						case "Dial":
							method = "GET"
						}
					}
				}
				return true
			})
			ast.Inspect(fd.Body, func(n ast.Node) bool {
				if n == nil {
					return false
				}
				at := fset.Position(n.Pos()).String()
				switch n := n.(type) {
				case *ast.CallExpr:
					sel, ok := n.Fun.(*ast.SelectorExpr)
					if !ok || (sel.Sel.Name != "do" && sel.Sel.Name != "doJSON") || len(n.Args) < 3 {
						return true
					}
					m, ok1 := eval(n.Args[1], nil)
					p, ok2 := eval(n.Args[2], nil)
					if !ok1 || !ok2 {
						if fd.Name.Name != "doJSON" { // doJSON passes its own parameters on
							t.Errorf("%s: cannot read the request's method and path", at)
						}
						return true
					}
					calls = append(calls, clientCall{m + " " + p, at})
				case *ast.AssignStmt:
					sel, ok := n.Lhs[0].(*ast.SelectorExpr)
					if !ok || sel.Sel.Name != "Path" || n.Tok != token.ADD_ASSIGN {
						return true
					}
					p, ok := eval(n.Rhs[0], nil)
					if !ok {
						if fd.Name.Name != "do" { // do adds its own parameter
							t.Errorf("%s: cannot read the request's path", at)
						}
						return true
					}
					if method == "" {
						t.Errorf("%s: a request to %s whose method cannot be read", at, p)
					}
					calls = append(calls, clientCall{method + " " + p, at})
				}
				return true
			})
		}
	}
	return calls
}
