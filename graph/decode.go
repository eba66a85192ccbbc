package graph

import (
	_ "embed"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
	"github.com/xeipuuv/gojsonschema"
)

// SchemaJSON is the JSON Schema (draft-07) every graph file is validated
// against. The same bytes ship as graph/graph.schema.json for editors.
//
//go:embed graph.schema.json
var SchemaJSON []byte

// Problem is one thing wrong with a graph file.
type Problem struct {
	// Where is "<file>:<line>:<col>" (or just the file when the position is
	// unknown).
	Where string
	// Path locates the offending element, e.g. "nodes[3].exit[0]".
	Path string
	// Message says what is wrong and, where it can, how to fix it.
	Message string
}

func (p Problem) String() string {
	if p.Where == "" {
		return p.Message
	}
	return p.Where + ": " + p.Message
}

// LoadError reports every problem found while parsing or compiling a graph.
type LoadError struct {
	Source   string
	Problems []Problem
}

func (e *LoadError) Error() string {
	var b strings.Builder
	src := e.Source
	if src == "" {
		src = "graph"
	}
	if len(e.Problems) == 1 {
		fmt.Fprintf(&b, "invalid graph %s: %s", src, e.Problems[0])
		return b.String()
	}
	fmt.Fprintf(&b, "invalid graph %s: %d problems:", src, len(e.Problems))
	for _, p := range e.Problems {
		b.WriteString("\n  - ")
		b.WriteString(p.String())
	}
	return b.String()
}

// ErrInvalidGraph is matched (errors.Is) by every *LoadError.
var ErrInvalidGraph = errors.New("invalid graph")

// Is lets errors.Is(err, ErrInvalidGraph) match.
func (e *LoadError) Is(target error) bool { return target == ErrInvalidGraph }

var (
	schemaOnce sync.Once
	schema     *gojsonschema.Schema
	schemaErr  error
)

func compiledSchema() (*gojsonschema.Schema, error) {
	schemaOnce.Do(func() {
		schema, schemaErr = gojsonschema.NewSchema(gojsonschema.NewBytesLoader(SchemaJSON))
	})
	return schema, schemaErr
}

// Parse decodes a graph file and validates it against the JSON Schema. The
// source name is used in error messages. Every schema violation is reported
// (with line and column) in one *LoadError; Parse never panics on any input.
func Parse(source string, src []byte) (f *File, err error) {
	defer func() {
		// The YAML library is third-party code fed outside input: a panic in
		// it must become an error, never a crash.
		if r := recover(); r != nil {
			f, err = nil, &LoadError{Source: source, Problems: []Problem{{Where: source, Message: fmt.Sprintf("the YAML parser failed on this file: %v", r)}}}
		}
	}()
	file := &File{Source: source}
	astFile, err := parser.ParseBytes(src, 0)
	if err != nil {
		return nil, &LoadError{Source: source, Problems: []Problem{{Where: source, Message: "not valid YAML: " + yaml.FormatError(err, false, true)}}}
	}
	file.ast = astFile
	if len(astFile.Docs) == 0 || astFile.Docs[0].Body == nil {
		return nil, &LoadError{Source: source, Problems: []Problem{{Where: source, Message: "the file is empty; a graph needs at least `nodes:`"}}}
	}
	if len(astFile.Docs) > 1 {
		return nil, &LoadError{Source: source, Problems: []Problem{{Where: file.where(""), Message: "the file holds more than one YAML document; a graph file holds exactly one"}}}
	}
	body := astFile.Docs[0].Body
	if expandedSize(body) > maxExpandedNodes {
		return nil, &LoadError{Source: source, Problems: []Problem{{Where: source, Message: fmt.Sprintf("the file expands to more than %d YAML nodes (through anchors and aliases); a graph file is far smaller — remove the alias chains", maxExpandedNodes)}}}
	}

	var generic any
	if err := yaml.NodeToValue(body, &generic); err != nil {
		return nil, &LoadError{Source: source, Problems: []Problem{{Where: source, Message: yaml.FormatError(err, false, true)}}}
	}
	generic, err = jsonShaped(generic)
	if err != nil {
		return nil, &LoadError{Source: source, Problems: []Problem{{Where: source, Message: err.Error()}}}
	}
	if probs := file.validateSchema(generic); len(probs) > 0 {
		return nil, &LoadError{Source: source, Problems: probs}
	}
	if err := yaml.NodeToValue(body, file, yaml.DisallowUnknownField()); err != nil {
		return nil, &LoadError{Source: source, Problems: []Problem{{Where: source, Message: yaml.FormatError(err, false, true)}}}
	}
	file.skipSetOrder = mappingKeys(body, "skipSets")
	return file, nil
}

// validateSchema checks v against the embedded schema and converts each
// violation into a Problem with a source position.
func (f *File) validateSchema(v any) []Problem {
	s, err := compiledSchema()
	if err != nil {
		return []Problem{{Where: f.Source, Message: "the embedded graph schema does not compile: " + err.Error()}}
	}
	res, err := s.Validate(gojsonschema.NewGoLoader(v))
	if err != nil {
		return []Problem{{Where: f.Source, Message: "schema validation failed: " + err.Error()}}
	}
	if res.Valid() {
		return nil
	}
	var probs []Problem
	seen := map[string]bool{}
	for _, e := range res.Errors() {
		path := schemaFieldToPath(e.Field())
		msg := schemaMessage(e)
		key := path + "\x00" + msg
		if seen[key] {
			continue
		}
		seen[key] = true
		at := path
		if prop, ok := e.Details()["property"].(string); ok && e.Type() == "additional_property_not_allowed" {
			// Point at the offending key itself when it can be found.
			if p := strings.TrimPrefix(path+"."+prop, "."); f.positionOf(p).Line > 0 {
				at = p
			}
		}
		probs = append(probs, Problem{Where: f.where(at), Path: path, Message: msg})
	}
	sort.SliceStable(probs, func(i, j int) bool {
		pi, pj := f.positionOf(probs[i].Path), f.positionOf(probs[j].Path)
		if pi.Line != pj.Line {
			return pi.Line < pj.Line
		}
		return pi.Column < pj.Column
	})
	return probs
}

// schemaFieldToPath turns gojsonschema's "nodes.3.exit.0" into
// "nodes[3].exit[0]" ("(root)" becomes "").
func schemaFieldToPath(field string) string {
	if field == "(root)" || field == "" {
		return ""
	}
	var b strings.Builder
	for i, part := range strings.Split(field, ".") {
		if _, err := strconv.Atoi(part); err == nil {
			b.WriteString("[" + part + "]")
			continue
		}
		if i > 0 {
			b.WriteString(".")
		}
		b.WriteString(part)
	}
	return b.String()
}

func schemaMessage(e gojsonschema.ResultError) string {
	path := schemaFieldToPath(e.Field())
	label := path
	if label == "" {
		label = "the graph"
	}
	d := e.Details()
	switch e.Type() {
	case "additional_property_not_allowed":
		return fmt.Sprintf("unknown key %q in %s; check the spelling against graph.schema.json", d["property"], label)
	case "required":
		return fmt.Sprintf("%s is missing the required key %q", label, d["property"])
	case "invalid_type":
		return fmt.Sprintf("%s must be %v, not %v", label, d["expected"], d["given"])
	case "enum":
		return fmt.Sprintf("%s must be one of %v", label, d["allowed"])
	case "number_one_of", "number_any_of":
		if strings.Contains(path, "entry[") || strings.Contains(path, "exit[") || strings.Contains(path, "onEscalation[") {
			return fmt.Sprintf("malformed hook reference at %s: write a hook name, or a mapping with `hook:` and optional `with:`, `blocking:`, `timeout:`", label)
		}
		if strings.HasSuffix(path, ".produces") {
			return fmt.Sprintf("%s must be a file name or a list of file names", label)
		}
		return fmt.Sprintf("%s has the wrong shape", label)
	case "array_min_items":
		if path == "nodes" {
			return "the graph declares no nodes"
		}
	case "string_gte":
		return fmt.Sprintf("%s must not be empty", label)
	case "pattern":
		return fmt.Sprintf("%s must not be blank", label)
	}
	return label + ": " + e.Description()
}

// jsonShaped converts YAML-decoded values into JSON-compatible ones (string
// map keys), so the schema validator can read them.
func jsonShaped(v any) (any, error) {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			c, err := jsonShaped(e)
			if err != nil {
				return nil, err
			}
			out[k] = c
		}
		return out, nil
	case map[any]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			c, err := jsonShaped(e)
			if err != nil {
				return nil, err
			}
			out[fmt.Sprint(k)] = c
		}
		return out, nil
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			c, err := jsonShaped(e)
			if err != nil {
				return nil, err
			}
			out[i] = c
		}
		return out, nil
	default:
		return v, nil
	}
}

// maxExpandedNodes bounds a graph file's size after alias expansion, so a
// hostile file ("billion laughs") cannot exhaust memory or time.
const maxExpandedNodes = 100_000

// expandedSize counts the YAML nodes of n with every alias expanded,
// stopping early past maxExpandedNodes.
func expandedSize(n ast.Node) int {
	total := 0
	ast.Walk(&sizer{n: &total, anchors: map[string]int{}}, n)
	return total
}

type sizer struct {
	n       *int
	anchors map[string]int
}

func (s *sizer) add(k int) {
	if *s.n += k; *s.n > maxExpandedNodes {
		*s.n = maxExpandedNodes + 1
	}
}

func (s *sizer) Visit(node ast.Node) ast.Visitor {
	if *s.n > maxExpandedNodes {
		return nil
	}
	switch t := node.(type) {
	case *ast.AliasNode:
		if t.Value != nil {
			s.add(s.anchors[t.Value.String()])
		}
		return nil
	case *ast.AnchorNode:
		sub := 0
		if t.Value != nil {
			ast.Walk(&sizer{n: &sub, anchors: s.anchors}, t.Value)
		}
		if t.Name != nil {
			s.anchors[t.Name.String()] = sub
		}
		s.add(sub)
		return nil
	}
	s.add(1)
	return s
}

// mappingKeys returns the keys of the mapping at body.<key>, in source order.
func mappingKeys(body ast.Node, key string) []string {
	for _, kv := range mappingPairs(body) {
		if kv.Key == nil || kv.Key.String() != key {
			continue
		}
		var out []string
		for _, e := range mappingPairs(kv.Value) {
			if e.Key != nil {
				out = append(out, e.Key.String())
			}
		}
		return out
	}
	return nil
}

// mappingPairs returns the key/value pairs of a mapping node (a one-pair
// mapping parses as a lone MappingValueNode).
func mappingPairs(n ast.Node) []*ast.MappingValueNode {
	switch m := n.(type) {
	case *ast.MappingNode:
		return m.Values
	case *ast.MappingValueNode:
		return []*ast.MappingValueNode{m}
	}
	return nil
}
