// Package openapigen writes serve/openapi.json's component schemas from
// the Go types of serve's API, so the contract is written once, in Go:
// the fields and their JSON names come from the types (by reflection, so a
// type that moves to another package is followed), omitempty makes a field
// optional, enums come from Go's constant lists (or, for a named string
// type, from the constants of that type), and descriptions from the Go
// doc comments of the types, their fields and those constants. What the
// types cannot say (a request body refused with unknown fields, a minimum)
// is in the Spec beside the types (spec.go). The routes stay hand-written
// in serve/openapi_paths.json, which Generate merges with the schemas.
//
// Run it as `go generate ./serve/`; serve's TestOpenAPIGenerated fails
// while serve/openapi.json differs from what it writes.
package openapigen

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Root is a type whose schema the document holds, under Name (the Go
// name when empty). The types its fields use are added under their Go
// names (or Spec.Names').
type Root struct {
	Type reflect.Type
	Name string
}

// Field says what a field's Go type cannot: its key is "Schema.json_name".
type Field struct {
	// Enum replaces the enum found from the field's type.
	Enum []any
	// ConstsOf is a named type whose package declares the enum's
	// constants, their comments describing the values; when Enum is nil,
	// the enum is the constants of that type. Default: the field's own
	// named string type, else the struct that declares the field.
	ConstsOf reflect.Type
	// Describe renders one value of the enum, with the doc comment of the
	// constant that holds it ("" when none is found), for the field's
	// description ("" for none); nil: the value, then ": " and the
	// comment.
	Describe func(value any, comment string) string
	// Optional: a field without omitempty that a request may still leave
	// out (the server fills it in).
	Optional bool
	// Minimum is the least value the server accepts.
	Minimum *float64
	// Ref names the schema of a field whose Go type carries raw JSON.
	Ref string
}

// Spec is what the generator reads besides the types.
type Spec struct {
	Roots []Root
	// Names renames types (the WebSocket's api.Request is WSRequest).
	Names map[reflect.Type]string
	// As gives the JSON shape of a type that marshals itself (action.Path
	// is [[x, y], …]); a type mapped to itself marshals as its fields.
	As map[reflect.Type]reflect.Type
	// Fields holds what the types cannot say, by "Schema.json_name".
	Fields map[string]Field
	// Closed are request bodies the server decodes refusing unknown
	// fields: additionalProperties false.
	Closed []string
}

// Schema is one JSON schema of OpenAPI 3.0, its keys in a fixed order.
type Schema struct {
	Ref                  string      `json:"$ref,omitempty"`
	Type                 string      `json:"type,omitempty"`
	Format               string      `json:"format,omitempty"`
	Nullable             bool        `json:"nullable,omitempty"`
	Description          string      `json:"description,omitempty"`
	Enum                 []any       `json:"enum,omitempty"`
	Minimum              *float64    `json:"minimum,omitempty"`
	Items                *Schema     `json:"items,omitempty"`
	MinItems             *int        `json:"minItems,omitempty"`
	MaxItems             *int        `json:"maxItems,omitempty"`
	Properties           *Properties `json:"properties,omitempty"`
	Required             []string    `json:"required,omitempty"`
	AdditionalProperties *bool       `json:"additionalProperties,omitempty"`
}

// Property is one property of an object schema.
type Property struct {
	Name   string
	Schema *Schema
}

// Properties keeps an object's properties in the Go fields' order.
type Properties []Property

// MarshalJSON writes the properties as an object, in order.
func (ps Properties) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, p := range ps {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(p.Name)
		b.Write(k)
		b.WriteByte(':')
		v, err := marshal(p.Schema)
		if err != nil {
			return nil, err
		}
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// marshal encodes v without escaping <, > and & (descriptions are prose).
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// Generator turns Go types into schemas. Source is read from the module
// whose root directory is Root.
type Generator struct {
	Spec   Spec
	Root   string
	module string
	pkgs   map[string]*pkgDocs
	byName map[string]reflect.Type
	done   map[reflect.Type]string
	out    map[string]*Schema
	queue  []reflect.Type
}

// New is a generator of the module at root (the directory of go.mod).
func New(root string, spec Spec) (*Generator, error) {
	mod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		return nil, fmt.Errorf("openapigen: %w", err)
	}
	m := regexp.MustCompile(`(?m)^module\s+(\S+)`).FindSubmatch(mod)
	if m == nil {
		return nil, fmt.Errorf("openapigen: %s has no module line", filepath.Join(root, "go.mod"))
	}
	return &Generator{Spec: spec, Root: root, module: string(m[1]), pkgs: map[string]*pkgDocs{},
		byName: map[string]reflect.Type{}, done: map[reflect.Type]string{}, out: map[string]*Schema{}}, nil
}

// ModuleRoot is the directory holding go.mod at or above dir.
func ModuleRoot(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("openapigen: no go.mod at or above %s", dir)
		}
	}
}

// Schemas builds every schema: the roots and every type they use, by
// name.
func (g *Generator) Schemas() (map[string]*Schema, error) {
	for _, r := range g.Spec.Roots {
		if r.Name != "" {
			if g.Spec.Names == nil {
				g.Spec.Names = map[reflect.Type]string{}
			}
			g.Spec.Names[r.Type] = r.Name
		}
		if _, err := g.ref(r.Type); err != nil {
			return nil, err
		}
	}
	for len(g.queue) > 0 {
		t := g.queue[0]
		g.queue = g.queue[1:]
		s, err := g.object(t)
		if err != nil {
			return nil, err
		}
		g.out[g.done[t]] = s
	}
	for _, name := range g.Spec.Closed {
		s := g.out[name]
		if s == nil {
			return nil, fmt.Errorf("openapigen: Spec.Closed names %s, which is no schema", name)
		}
		f := false
		s.AdditionalProperties = &f
	}
	for key := range g.Spec.Fields {
		name, prop, _ := strings.Cut(key, ".")
		s := g.out[name]
		found := false
		if s != nil && s.Properties != nil {
			for _, p := range *s.Properties {
				found = found || p.Name == prop
			}
		}
		if !found {
			return nil, fmt.Errorf("openapigen: Spec.Fields names %s, which is no property of the schemas", key)
		}
	}
	return g.out, nil
}

// nameOf is the schema name of a struct type.
func (g *Generator) nameOf(t reflect.Type) string {
	if n, ok := g.Spec.Names[t]; ok {
		return n
	}
	return t.Name()
}

// ref is a reference to the schema of the struct type t, queued for
// building the first time.
func (g *Generator) ref(t reflect.Type) (*Schema, error) {
	if t.Kind() != reflect.Struct || t.Name() == "" {
		return nil, fmt.Errorf("openapigen: %v is not a named struct type", t)
	}
	name, ok := g.done[t]
	if !ok {
		name = g.nameOf(t)
		if other, clash := g.byName[name]; clash {
			return nil, fmt.Errorf("openapigen: %s and %s both make a schema %s: rename one in Spec.Names", other, t, name)
		}
		g.byName[name], g.done[t] = t, name
		g.queue = append(g.queue, t)
	}
	return &Schema{Ref: "#/components/schemas/" + name}, nil
}

var (
	timeType      = reflect.TypeFor[time.Time]()
	marshalerType = reflect.TypeFor[json.Marshaler]()
)

// jsonField is a struct field as encoding/json sees it.
type jsonField struct {
	name      string
	omitempty bool
	field     reflect.StructField
	owner     reflect.Type // the struct declaring it (an embedded one's)
}

// jsonFields lists t's fields as encoding/json encodes them, embedded
// structs' fields in place.
func jsonFields(t reflect.Type) []jsonField {
	var out []jsonField
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			et := f.Type
			if et.Kind() == reflect.Pointer {
				et = et.Elem()
			}
			if et.Kind() == reflect.Struct {
				out = append(out, jsonFields(et)...)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out = append(out, jsonField{name: name, omitempty: slicesContains(strings.Split(opts, ","), "omitempty"), field: f, owner: t})
	}
	return out
}

func slicesContains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// object is the schema of the struct type t.
func (g *Generator) object(t reflect.Type) (*Schema, error) {
	name := g.done[t]
	docs, err := g.docs(t)
	if err != nil {
		return nil, err
	}
	s := &Schema{Type: "object", Description: jsonNames(t, docs.types[t.Name()]), Properties: &Properties{}}
	for _, f := range jsonFields(t) {
		fs, err := g.field(name, f)
		if err != nil {
			return nil, err
		}
		*s.Properties = append(*s.Properties, Property{Name: f.name, Schema: fs})
		if !f.omitempty && !g.Spec.Fields[name+"."+f.name].Optional {
			s.Required = append(s.Required, f.name)
		}
	}
	return s, nil
}

// field is the schema of one property of the schema name.
func (g *Generator) field(name string, f jsonField) (*Schema, error) {
	spec := g.Spec.Fields[name+"."+f.name]
	var s *Schema
	var err error
	if spec.Ref != "" {
		s = &Schema{Ref: "#/components/schemas/" + spec.Ref}
	} else if s, err = g.schema(f.field.Type); err != nil {
		return nil, fmt.Errorf("%s.%s: %w", name, f.name, err)
	}
	ownerDocs, err := g.docs(f.owner)
	if err != nil {
		return nil, err
	}
	desc := jsonNames(f.owner, ownerDocs.fields[f.owner.Name()+"."+f.field.Name])

	enum, constType := spec.Enum, spec.ConstsOf
	et := f.field.Type
	for et.Kind() == reflect.Pointer || et.Kind() == reflect.Slice {
		et = et.Elem()
	}
	if constType == nil && et.Kind() == reflect.String && et.Name() != "" && g.inModule(et) {
		constType = et
	}
	if constType == nil && enum != nil {
		constType = f.owner
	}
	var consts *pkgDocs
	if constType != nil {
		if consts, err = g.docs(constType); err != nil {
			return nil, err
		}
		if enum == nil {
			for _, c := range consts.consts[constType.Name()] {
				enum = append(enum, c.value)
			}
		}
	}
	if len(enum) > 0 {
		target := s
		if target.Type == "array" && target.Items != nil {
			target = target.Items
		}
		target.Enum = enum
		var entries []string
		said := false // some value has more than its name to say
		for _, v := range enum {
			comment := consts.constComment(v)
			entry := fmt.Sprint(v)
			switch {
			case spec.Describe != nil:
				entry = spec.Describe(v, comment)
				said = said || entry != ""
			case comment != "":
				entry += ": " + strings.TrimSuffix(strings.ReplaceAll(comment, "\n\n", " "), ".")
				said = true
			}
			if entry != "" {
				entries = append(entries, entry)
			}
		}
		if said {
			desc = joinProse(desc, "Values: "+strings.Join(entries, "; ")+".")
		}
	}
	if spec.Minimum != nil {
		s.Minimum = spec.Minimum
	}
	s.Description = desc
	return s, nil
}

// joinProse joins two sentences.
func joinProse(a, b string) string {
	switch {
	case a == "":
		return b
	case strings.HasSuffix(a, "."):
		return a + " " + b
	}
	return a + ". " + b
}

// jsonNames writes the Go names of t's fields in a description as their
// JSON names (the document's reader knows those): "Exit is how the app
// ended" of Observation.exit reads "exit is how the app ended". Acronyms
// (ID, OK) stay: they are words of the prose too.
func jsonNames(t reflect.Type, desc string) string {
	if desc == "" || t.Kind() != reflect.Struct {
		return desc
	}
	for _, f := range jsonFields(t) {
		goName := f.field.Name
		if goName == f.name || strings.ToUpper(goName) == goName {
			continue
		}
		re := regexp.MustCompile(`\b` + goName + `\b`)
		var b strings.Builder
		last := 0
		for _, m := range re.FindAllStringIndex(desc, -1) {
			if m[0] == 0 {
				continue // the sentence's subject: "Exit is how the app ended"
			}
			b.WriteString(desc[last:m[0]])
			b.WriteString(f.name)
			last = m[1]
		}
		desc = b.String() + desc[last:]
	}
	return desc
}

func (g *Generator) inModule(t reflect.Type) bool {
	p := t.PkgPath()
	return p == g.module || strings.HasPrefix(p, g.module+"/")
}

// schema is the schema of a Go type (a reference for a named struct).
func (g *Generator) schema(t reflect.Type) (*Schema, error) {
	as, ok := g.Spec.As[t]
	if ok && as != t {
		return g.schema(as)
	}
	if t.Kind() == reflect.Pointer {
		return g.schema(t.Elem())
	}
	if t == timeType {
		return &Schema{Type: "string", Format: "date-time"}, nil
	}
	if !ok && (t.Implements(marshalerType) || reflect.PointerTo(t).Implements(marshalerType)) {
		return nil, fmt.Errorf("%v marshals itself: give its JSON shape in Spec.As (or the field's schema in Spec.Fields)", t)
	}
	switch t.Kind() {
	case reflect.Bool:
		return &Schema{Type: "boolean"}, nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32:
		return &Schema{Type: "integer"}, nil
	case reflect.Int64, reflect.Uint64:
		return &Schema{Type: "integer", Format: "int64"}, nil
	case reflect.Float32, reflect.Float64:
		return &Schema{Type: "number"}, nil
	case reflect.String:
		return &Schema{Type: "string"}, nil
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return &Schema{Type: "string", Format: "byte"}, nil
		}
		items, err := g.schema(t.Elem())
		if err != nil {
			return nil, err
		}
		return &Schema{Type: "array", Items: items}, nil
	case reflect.Array:
		items, err := g.schema(t.Elem())
		if err != nil {
			return nil, err
		}
		n := t.Len()
		return &Schema{Type: "array", Items: items, MinItems: &n, MaxItems: &n}, nil
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			return nil, fmt.Errorf("%v: a map's keys must be strings in JSON", t)
		}
		if t.Elem().Kind() == reflect.Interface {
			return &Schema{Type: "object"}, nil // any JSON object
		}
		return nil, fmt.Errorf("%v: no JSON schema for a map of %s yet", t, t.Elem().Kind())
	case reflect.Struct:
		if t.Name() == "" {
			return nil, fmt.Errorf("an anonymous struct: give it a name")
		}
		return g.ref(t)
	}
	return nil, fmt.Errorf("%v: no JSON schema for a %s", t, t.Kind())
}

// pkgDocs are the doc comments of one package's source.
type pkgDocs struct {
	types  map[string]string  // type name → doc
	fields map[string]string  // "Type.Field" → doc or line comment
	consts map[string][]konst // type name → its constants, in source order
	values map[string][]konst // a string constant's value → the constants holding it
}

type konst struct {
	name, value, comment string
}

// constComment is the comment of the one constant holding v ("" when
// none or several do).
func (d *pkgDocs) constComment(v any) string {
	if d == nil {
		return ""
	}
	s, ok := v.(string)
	if !ok {
		return ""
	}
	if cs := d.values[s]; len(cs) == 1 {
		return cs[0].comment
	}
	return ""
}

// docs parses the source of t's package (once).
func (g *Generator) docs(t reflect.Type) (*pkgDocs, error) {
	pkg := t.PkgPath()
	if d, ok := g.pkgs[pkg]; ok {
		return d, nil
	}
	d := &pkgDocs{types: map[string]string{}, fields: map[string]string{}, consts: map[string][]konst{}, values: map[string][]konst{}}
	g.pkgs[pkg] = d
	if !g.inModule(t) {
		return d, nil // the standard library's types are not schemas
	}
	dir := filepath.Join(g.Root, filepath.FromSlash(strings.TrimPrefix(strings.TrimPrefix(pkg, g.module), "/")))
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	fset := token.NewFileSet()
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return nil, fmt.Errorf("openapigen: %w", err)
		}
		d.add(f)
	}
	if len(d.types) == 0 {
		return nil, fmt.Errorf("openapigen: no types in %s, the source of %s", dir, pkg)
	}
	return d, nil
}

// add records one file's doc comments.
func (d *pkgDocs) add(f *ast.File) {
	for _, decl := range f.Decls {
		gd, ok := decl.(*ast.GenDecl)
		if !ok {
			continue
		}
		switch gd.Tok {
		case token.TYPE:
			for _, spec := range gd.Specs {
				ts := spec.(*ast.TypeSpec)
				doc := ts.Doc
				if doc == nil && len(gd.Specs) == 1 {
					doc = gd.Doc
				}
				d.types[ts.Name.Name] = prose(doc)
				st, ok := ts.Type.(*ast.StructType)
				if !ok {
					continue
				}
				for _, fl := range st.Fields.List {
					text := prose(fl.Doc)
					if text == "" {
						text = prose(fl.Comment)
					}
					for _, n := range fl.Names {
						d.fields[ts.Name.Name+"."+n.Name] = text
					}
				}
			}
		case token.CONST:
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				if len(vs.Names) != 1 || len(vs.Values) != 1 {
					continue
				}
				lit, ok := vs.Values[0].(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					continue
				}
				v, err := strconv.Unquote(lit.Value)
				if err != nil {
					continue
				}
				text := prose(vs.Comment)
				if text == "" {
					// A doc comment begins with the constant's name.
					text = strings.TrimPrefix(prose(vs.Doc), vs.Names[0].Name+" ")
				}
				k := konst{name: vs.Names[0].Name, value: v, comment: text}
				if id, ok := vs.Type.(*ast.Ident); ok {
					d.consts[id.Name] = append(d.consts[id.Name], k)
				}
				d.values[v] = append(d.values[v], k)
			}
		}
	}
}

// prose is a comment as one paragraph of text per paragraph of the
// comment, its lines joined.
func prose(c *ast.CommentGroup) string {
	if c == nil {
		return ""
	}
	var paras []string
	for _, p := range strings.Split(strings.TrimSpace(c.Text()), "\n\n") {
		if p = strings.Join(strings.Fields(p), " "); p != "" {
			paras = append(paras, p)
		}
	}
	return strings.Join(paras, "\n\n")
}

// Document is the whole document: paths (the hand-kept document without
// components.schemas, as JSON) with the schemas the Go types make, indented
// as serve/openapi.json is.
func (g *Generator) Document(paths []byte) ([]byte, error) {
	schemas, err := g.Schemas()
	if err != nil {
		return nil, err
	}
	top, err := orderedObject(paths)
	if err != nil {
		return nil, fmt.Errorf("openapigen: the paths document: %w", err)
	}
	ci := -1
	for i, kv := range top {
		if kv.key == "components" {
			ci = i
		}
	}
	if ci < 0 {
		top = append(top, keyValue{key: "components", value: json.RawMessage("{}")})
		ci = len(top) - 1
	}
	comps, err := orderedObject(top[ci].value)
	if err != nil {
		return nil, fmt.Errorf("openapigen: the paths document's components: %w", err)
	}
	for _, kv := range comps {
		if kv.key == "schemas" {
			return nil, fmt.Errorf("openapigen: the paths document has components.schemas: they are generated from the Go types")
		}
	}
	// encoding/json writes a map's keys sorted: the schemas by name.
	raw, err := marshal(schemas)
	if err != nil {
		return nil, err
	}
	comps = append(comps, keyValue{key: "schemas", value: raw})
	if top[ci].value, err = comps.marshal(); err != nil {
		return nil, err
	}
	whole, err := top.marshal()
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	if err := json.Indent(&out, whole, "", "  "); err != nil {
		return nil, err
	}
	out.WriteByte('\n')
	return out.Bytes(), nil
}

type keyValue struct {
	key   string
	value json.RawMessage
}

type object []keyValue

// orderedObject reads a JSON object's members in their order.
func orderedObject(data []byte) (object, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, fmt.Errorf("not a JSON object")
	}
	var o object
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		o = append(o, keyValue{key: tok.(string), value: v})
	}
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	return o, nil
}

func (o object) marshal() (json.RawMessage, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, kv := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(kv.key)
		b.Write(k)
		b.WriteByte(':')
		if err := json.Compact(&b, kv.value); err != nil {
			return nil, err
		}
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}
