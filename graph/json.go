package graph

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// MarshalFile renders a parsed graph file as JSON: the form theloop embeds
// for its shipped graphs, so that loading them costs a JSON decode instead of
// a YAML parse and a schema validation (package graphfile) on every start of
// loop-gate. The YAML stays the source of truth; the JSON is generated from
// it (go generate ./loop) and a test keeps the two identical.
func MarshalFile(f *File) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", " ")
	if err := enc.Encode(f); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// ParseJSON decodes a graph file written by MarshalFile. It trusts its input
// to have been validated as YAML already (it does not run the schema); it
// still refuses unknown keys, and Compile still checks every rule.
func ParseJSON(source string, data []byte) (*File, error) {
	var f File
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, &LoadError{Source: source, Problems: []Problem{{Where: source, Message: fmt.Sprintf("not a graph in JSON form: %v", err)}}}
	}
	f.Source = source
	return &f, nil
}
