// Package yamlwalk is the one strict reader of agentbox's YAML files
// (suites, scripts): it walks yaml.Node trees so that every error names the
// file and the line, and refuses what a plain Unmarshal lets through: keys
// it does not know (with a "did you mean"), keys given twice, values of the
// wrong type, an empty file.
package yamlwalk

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/codegirl-games/agentbox/internal/suggest"
)

// Walker makes the errors for one file: "CLASS: FILE:LINE: CONTEXT: MSG".
type Walker struct {
	File  string // names the file in errors
	Class error  // every error wraps it (the caller's ErrInvalid)
	in    string // "task 2: " while inside a part of the file
}

// In is w for a part of the file: its messages start with context and a
// colon ("task 2: field ...").
func (w Walker) In(context string) Walker {
	w.in += context + ": "
	return w
}

// Errorf is an error at line.
func (w Walker) Errorf(line int, format string, args ...any) error {
	return fmt.Errorf("%w: %s:%d: %s%s", w.Class, w.File, line, w.in, fmt.Sprintf(format, args...))
}

// Field is an error about the value v of field k, at v's line.
func (w Walker) Field(k, v *yaml.Node, format string, args ...any) error {
	return w.Errorf(v.Line, "field %q: %s", k.Value, fmt.Sprintf(format, args...))
}

// Root decodes the first document of data and returns its top node, which
// must be a mapping; shape says what the file is ("a suite is a mapping
// with tasks"), for the errors about an empty file or another node. A YAML
// syntax error is "CLASS: FILE: yaml: line N: ...".
func (w Walker) Root(data []byte, shape string) (*yaml.Node, error) {
	var doc yaml.Node
	switch err := yaml.NewDecoder(bytes.NewReader(data)).Decode(&doc); {
	case errors.Is(err, io.EOF):
		return nil, w.Errorf(1, "the file is empty (%s)", shape)
	case err != nil:
		return nil, fmt.Errorf("%w: %s: %v", w.Class, w.File, err)
	}
	if len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		line := max(doc.Line, 1)
		if len(doc.Content) > 0 {
			line = max(doc.Content[0].Line, 1)
		}
		return nil, w.Errorf(line, "%s", shape)
	}
	return doc.Content[0], nil
}

// Mapping calls each for the key/value pairs of the mapping n, in order,
// once all its keys are checked: a key given twice is an error at its
// second line (`field "x" appears twice`), and so is a key that is not one
// of known, unless known is nil (the caller checks the keys): `unknown
// field "x" (did you mean y?) (OF has a, b, c)`. An error from each is
// returned as it is. n must be a mapping (the caller says what else it
// wanted).
func (w Walker) Mapping(n *yaml.Node, of string, known []string, each func(k, v *yaml.Node) error) error {
	seen := make(map[string]bool, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		if seen[k.Value] {
			return w.Errorf(k.Line, "field %q appears twice", k.Value)
		}
		seen[k.Value] = true
		if known != nil && !slices.Contains(known, k.Value) {
			return w.Errorf(k.Line, "unknown field %q%s (%s has %s)", k.Value, suggest.Hint(k.Value, known), of, strings.Join(known, ", "))
		}
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if err := each(n.Content[i], n.Content[i+1]); err != nil {
			return err
		}
	}
	return nil
}

// Text is the value v of field k as text: a scalar that is not null (an
// unquoted # starts a YAML comment, leaving a null).
func (w Walker) Text(k, v *yaml.Node) (string, error) {
	if v.Kind != yaml.ScalarNode || v.Tag == "!!null" {
		return "", w.Field(k, v, "must be text")
	}
	return v.Value, nil
}

// JSON is the value v of field k as JSON (for a reader of JSON values,
// such as a task's file parts).
func (w Walker) JSON(k, v *yaml.Node) (json.RawMessage, error) {
	var val any
	if err := v.Decode(&val); err != nil {
		return nil, w.Field(k, v, "%v", err)
	}
	b, err := json.Marshal(val)
	if err != nil {
		return nil, w.Field(k, v, "%v", err)
	}
	return b, nil
}

// ItemLine is the line of item i of the sequence v, or v's own line.
func ItemLine(v *yaml.Node, i int) int {
	if v.Kind == yaml.SequenceNode && i >= 0 && i < len(v.Content) {
		return v.Content[i].Line
	}
	return v.Line
}

// Value reads the value v of field k as JSON and hands it to set. An
// error of set is placed at v's line, or at the line of the list item it
// is about when it has a method Item() int (-1: the field as a whole).
func (w Walker) Value(k, v *yaml.Node, set func(field string, raw json.RawMessage) error) error {
	raw, err := w.JSON(k, v)
	if err != nil {
		return err
	}
	if err := set(k.Value, raw); err != nil {
		line := v.Line
		var it interface{ Item() int }
		if errors.As(err, &it) {
			line = ItemLine(v, it.Item())
		}
		return w.Errorf(line, "%v", err)
	}
	return nil
}
