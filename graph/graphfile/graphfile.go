// Package graphfile reads process-graph files: YAML decoding with
// goccy/go-yaml, validation against the JSON Schema that ships beside it
// (graph.schema.json, draft-07, checked by this package's own validator of
// the keywords it uses — validate.go), and problems
// reported with file, line and column. It is kept apart from package graph
// so that a program that only runs graphs — the loop-gate Stop hook, which
// compiles theloop's shipped graphs from generated Go literals — links
// neither the YAML parser nor the schema validator and pays none of their
// start-up cost.
package graphfile

import (
	"crypto/sha256"
	_ "embed"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/internal/yamlguard"
)

// SchemaJSON is the JSON Schema (draft-07) every graph file is validated
// against. The same bytes ship as graph/graphfile/graph.schema.json for
// editors.
//
//go:embed graph.schema.json
var SchemaJSON []byte

// Load parses and compiles a graph file in one step. A graph compiles once
// per process: a later Load of the same bytes under the same source name
// against the same registry returns the graph compiled the first time (a
// Graph is immutable, so sharing it is safe). Only graphs that compiled are
// remembered, and a registry only grows, so the remembered graph is the one
// compiling again would give.
func Load(source string, src []byte, reg *graph.Registry) (*graph.Graph, error) {
	key := compiledKey{source: source, sum: sha256.Sum256(src), reg: reg}
	if g := compiled.get(key); g != nil {
		return g, nil
	}
	f, err := Parse(source, src)
	if err != nil {
		return nil, err
	}
	g, err := graph.Compile(f, reg)
	if err != nil {
		return nil, err
	}
	compiled.put(key, g)
	return g, nil
}

// compiledKey identifies a compiled graph: the file's name (the graph
// carries it into messages), its bytes by hash, and the registry.
type compiledKey struct {
	source string
	sum    [sha256.Size]byte
	reg    *graph.Registry
}

// compiledCache remembers the last few compiled graphs. It is small: a
// process runs one graph or a handful, and an entry keeps its registry
// alive.
type compiledCache struct {
	mu      sync.Mutex
	entries []compiledEntry // most recently used last
}

type compiledEntry struct {
	key compiledKey
	g   *graph.Graph
}

const maxCompiledGraphs = 8

var compiled compiledCache

func (c *compiledCache) get(k compiledKey) *graph.Graph {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, e := range c.entries {
		if e.key == k {
			c.entries = append(append(c.entries[:i:i], c.entries[i+1:]...), e)
			return e.g
		}
	}
	return nil
}

func (c *compiledCache) put(k compiledKey, g *graph.Graph) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range c.entries {
		if e.key == k {
			return
		}
	}
	if len(c.entries) >= maxCompiledGraphs {
		c.entries = append(c.entries[:0:0], c.entries[1:]...)
	}
	c.entries = append(c.entries, compiledEntry{k, g})
}

// positions resolves element paths against the parsed YAML.
type positions struct {
	source string
	ast    *ast.File
}

// position is a 1-based line and column.
type position struct{ line, col int }

// positionOf finds the source position of a path such as "nodes[3].exit[0]"
// (empty = the document); the zero position when unknown.
func (p *positions) positionOf(path string) position {
	if p == nil || p.ast == nil {
		return position{}
	}
	ps := "$"
	if path != "" {
		ps = "$." + path
	}
	yp, err := yaml.PathString(ps)
	if err != nil {
		return position{}
	}
	n, err := yp.FilterFile(p.ast)
	if err != nil || n == nil {
		return position{}
	}
	tk := n.GetToken()
	if tk == nil || tk.Position == nil {
		return position{}
	}
	return position{line: tk.Position.Line, col: tk.Position.Column}
}

// where renders "<source>:<line>:<col>" for path, or the source alone.
func (p *positions) where(path string) string {
	pos := p.positionOf(path)
	if pos.line == 0 {
		return p.source
	}
	return fmt.Sprintf("%s:%d:%d", p.source, pos.line, pos.col)
}

// Parse decodes a graph file and validates it against the JSON Schema. The
// source name is used in error messages. Every schema violation is reported
// (with line and column) in one *LoadError; Parse never panics on any input.
func Parse(source string, src []byte) (f *graph.File, err error) {
	defer func() {
		// The YAML library is third-party code fed outside input: a panic in
		// it must become an error, never a crash.
		if r := recover(); r != nil {
			f, err = nil, &graph.LoadError{Source: source, Problems: []graph.Problem{{Where: source, Message: fmt.Sprintf("the YAML parser failed on this file: %v", r)}}}
		}
	}()
	if err := yamlguard.Check(src, yamlguard.Limits{MaxBytes: MaxGraphBytes, MaxDepth: yamlguard.Default.MaxDepth, MaxIndent: yamlguard.Default.MaxIndent}); err != nil {
		return nil, &graph.LoadError{Source: source, Problems: []graph.Problem{{Where: source, Message: err.Error() + "; a graph file is a few kilobytes of plain YAML — it is refused before parsing"}}}
	}
	file := &graph.File{Source: source}
	pos := &positions{source: source}
	astFile, err := parser.ParseBytes(src, 0)
	if err != nil {
		return nil, &graph.LoadError{Source: source, Problems: []graph.Problem{{Where: source, Message: "not valid YAML: " + yaml.FormatError(err, false, true)}}}
	}
	pos.ast = astFile
	file.Positions = pos.where
	if len(astFile.Docs) == 0 || astFile.Docs[0].Body == nil {
		return nil, &graph.LoadError{Source: source, Problems: []graph.Problem{{Where: source, Message: "the file is empty; a graph needs at least `nodes:`"}}}
	}
	if len(astFile.Docs) > 1 {
		return nil, &graph.LoadError{Source: source, Problems: []graph.Problem{{Where: pos.where(""), Message: "the file holds more than one YAML document; a graph file holds exactly one"}}}
	}
	body := astFile.Docs[0].Body
	if expandedSize(body) > maxExpandedNodes {
		return nil, &graph.LoadError{Source: source, Problems: []graph.Problem{{Where: source, Message: fmt.Sprintf("the file holds or expands to more than %d YAML nodes (by its size or through anchors and aliases); a graph file is far smaller", maxExpandedNodes)}}}
	}

	var generic any
	if err := yaml.NodeToValue(body, &generic); err != nil {
		return nil, &graph.LoadError{Source: source, Problems: []graph.Problem{{Where: source, Message: yaml.FormatError(err, false, true)}}}
	}
	generic, err = jsonShaped(generic)
	if err != nil {
		return nil, &graph.LoadError{Source: source, Problems: []graph.Problem{{Where: source, Message: err.Error()}}}
	}
	if probs := pos.validateSchema(generic); len(probs) > 0 {
		return nil, &graph.LoadError{Source: source, Problems: probs}
	}
	if err := yaml.NodeToValue(body, file, yaml.DisallowUnknownField()); err != nil {
		return nil, &graph.LoadError{Source: source, Problems: []graph.Problem{{Where: source, Message: yaml.FormatError(err, false, true)}}}
	}
	file.SkipSetOrder = mappingKeys(body, "skipSets")
	return file, nil
}

// validateSchema checks v against the embedded schema and converts each
// violation into a Problem with a source position.
func (f *positions) validateSchema(v any) []graph.Problem {
	s, err := compiledSchema()
	if err != nil {
		return []graph.Problem{{Where: f.source, Message: "the embedded graph schema does not compile: " + err.Error()}}
	}
	var found []violation
	s.validate(v, "", &found)
	if len(found) == 0 {
		return nil
	}
	var probs []graph.Problem
	seen := map[string]bool{}
	for _, e := range found {
		msg := schemaMessage(e)
		key := e.path + "\x00" + msg
		if seen[key] {
			continue
		}
		seen[key] = true
		at := e.path
		if e.kind == unknownKey {
			// Point at the offending key itself when it can be found.
			if p := strings.TrimPrefix(e.path+"."+e.property, "."); f.positionOf(p).line > 0 {
				at = p
			}
		}
		probs = append(probs, graph.Problem{Where: f.where(at), Path: e.path, Message: msg})
	}
	sort.SliceStable(probs, func(i, j int) bool {
		pi, pj := f.positionOf(probs[i].Path), f.positionOf(probs[j].Path)
		if pi.line != pj.line {
			return pi.line < pj.line
		}
		return pi.col < pj.col
	})
	return probs
}

func schemaMessage(e violation) string {
	path := e.path
	label := path
	if label == "" {
		label = "the graph"
	}
	switch e.kind {
	case unknownKey:
		return fmt.Sprintf("unknown key %q in %s; check the spelling against graph.schema.json", e.property, label)
	case missingKey:
		return fmt.Sprintf("%s is missing the required key %q", label, e.property)
	case wrongType:
		return fmt.Sprintf("%s must be %s, not %s", label, strings.Join(e.expected, " or "), e.given)
	case notInEnum:
		allowed := make([]string, len(e.allowed))
		for i, a := range e.allowed {
			allowed[i] = fmt.Sprint(a)
		}
		return fmt.Sprintf("%s must be one of [%s]", label, strings.Join(allowed, " "))
	case noAlternative:
		if strings.Contains(path, "entry[") || strings.Contains(path, "exit[") || strings.Contains(path, "onEscalation[") {
			return fmt.Sprintf("malformed hook reference at %s: write a hook name, or a mapping with `hook:` and optional `with:`, `blocking:`, `timeout:`", label)
		}
		if strings.HasSuffix(path, ".produces") {
			return fmt.Sprintf("%s must be a file name or a list of file names", label)
		}
		return fmt.Sprintf("%s has the wrong shape", label)
	case tooFewItems:
		if path == "nodes" {
			return "the graph declares no nodes"
		}
		return fmt.Sprintf("%s needs at least %g entries", label, e.limit)
	case tooShort:
		return fmt.Sprintf("%s must not be empty", label)
	case noMatch:
		return fmt.Sprintf("%s must not be blank", label)
	case tooSmall:
		return fmt.Sprintf("%s must be at least %g", label, e.limit)
	}
	return label + " breaks a rule of graph.schema.json"
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

// MaxGraphBytes bounds a graph file; the shipped graphs are under 10 KB.
const MaxGraphBytes = 1 << 20

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
