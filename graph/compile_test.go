package graph_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/graph/graphfile"
	"github.com/theloop-dev/theloop/graph/graphtest"
)

func testRegistry() *graph.Registry {
	return graphtest.Registry(map[string]graph.Hook{
		"ok":   graphtest.Returning(graph.Pass(nil)),
		"gate": graphtest.Returning(graph.Wait("no authorized feedback yet")),
	})
}

const validGraph = `
version: 1
name: tiny
start: a
skipSets:
  both: [b, c]
nodes:
  - id: a
    actor: human
    required: true
    exit: [gate]
  - id: b
    skippable: true
    produces: [x.md|y.md]
    exit:
      - hook: ok
        with: {sections: [One]}
  - id: c
    skippable: true
    entry: [ok]
  - id: d
    terminal: true
edges:
  - {from: a, on: pass, to: b}
  - {from: b, on: pass, to: c}
  - {from: b, on: skipped, to: c}
  - {from: c, on: pass, to: d}
  - {from: c, on: skipped, to: d}
`

func TestCompileValidGraph(t *testing.T) {
	g, err := graphfile.Load("tiny.yaml", []byte(validGraph), testRegistry())
	require.NoError(t, err)
	require.Equal(t, "a", g.Start)
	require.Equal(t, []string{"a", "b", "c", "d"}, g.IDs())
	b, ok := g.Node("b")
	require.True(t, ok)
	require.Equal(t, []string{"x.md|y.md"}, b.Produces, "produces entries stay verbatim")
	require.Equal(t, []string{"x.md", "y.md"}, b.ProducedNames())
	require.Equal(t, graph.Values{"sections": []any{"One"}}, b.Exit[0].Params)
	require.Equal(t, graph.DefaultHookTimeout, b.Exit[0].Timeout)
	to, ok := g.Next("b", "skipped")
	require.True(t, ok)
	require.Equal(t, "c", to)
	members, ok := g.SkipSet("both")
	require.True(t, ok)
	require.Equal(t, []string{"b", "c"}, members)
	require.Empty(t, g.Warnings())
}

// Each compile rule of docs/graph.md §2.8 (plus theloop's schema checks): bad
// input → an error naming the exact offending element, with its position.
func TestCompileRules(t *testing.T) {
	cases := []struct {
		name string
		yaml string
		want []string // every substring must appear in the error
	}{
		{"no nodes", "name: x\nnodes: []\n", []string{"the graph declares no nodes"}},
		{"nodes missing", "name: x\n", []string{`missing the required key "nodes"`}},
		{"node without id", "nodes:\n  - phase: p\n", []string{`nodes[0] is missing the required key "id"`, "tiny.yaml:2:"}},
		{"blank id", "nodes:\n  - id: '  '\n", []string{"nodes[0].id must not be blank"}},
		{"bad actor", "nodes:\n  - id: a\n    actor: robot\n", []string{"nodes[0].actor must be one of", "tiny.yaml:3:"}},
		{"bad session", "nodes:\n  - id: a\n    session: reuse\n", []string{"nodes[0].session must be one of"}},
		{"empty alternative", "nodes:\n  - id: a\n    produces: [a.md||b.md]\n", []string{"node 'a': produces entry 'a.md||b.md' has an empty alternative"}},
		{"trailing alternative", "nodes:\n  - id: a\n    produces: 'a.md|'\n", []string{"has an empty alternative"}},
		{"required and optIn", "nodes:\n  - id: a\n    required: true\n    optIn: true\n", []string{"node 'a' is both required and optIn"}},
		{"required and skippable", "nodes:\n  - id: a\n    required: true\n    skippable: true\n", []string{"node 'a' is both required and skippable"}},
		{"unknown hook", "nodes:\n  - id: a\n    exit: [validate-artefacts]\n", []string{"node 'a': exit references unknown hook 'validate-artefacts'", "registered hooks are: gate, ok", "tiny.yaml:3:"}},
		{"unknown entry hook", "nodes:\n  - id: a\n    entry: [ok, {hook: nope}]\n", []string{"node 'a': entry references unknown hook 'nope'"}},
		{"malformed hook ref", "nodes:\n  - id: a\n    exit: [[ok]]\n", []string{"malformed hook reference at nodes[0].exit[0]"}},
		{"hook ref unknown key", "nodes:\n  - id: a\n    exit: [{hook: ok, whith: {}}]\n", []string{"malformed hook reference at nodes[0].exit[0]"}},
		{"bad timeout", "nodes:\n  - id: a\n    exit: [{hook: ok, timeout: soon}]\n", []string{"hook 'ok' has an invalid timeout 'soon'"}},
		{"duplicate id", "nodes:\n  - id: a\n  - id: a\n", []string{"duplicate node id 'a'", "tiny.yaml:3:"}},
		{"edge to undeclared", "nodes:\n  - id: a\nedges:\n  - {from: a, on: pass, to: zz}\n", []string{"edge to names undeclared node 'zz'; declared nodes are: a"}},
		{"edge from undeclared", "nodes:\n  - id: a\nedges:\n  - {from: q, on: pass, to: a}\n", []string{"edge from names undeclared node 'q'"}},
		{"edge missing on", "nodes:\n  - id: a\nedges:\n  - {from: a, to: a}\n", []string{`edges[0] is missing the required key "on"`}},
		{"start undeclared", "start: zz\nnodes:\n  - id: a\n", []string{"start node 'zz' is not declared"}},
		{"skippable without skipped edge", "nodes:\n  - id: a\n    skippable: true\n", []string{"node 'a' is skippable but declares no edge for the outcome 'skipped'"}},
		{"optIn without skipped edge", "nodes:\n  - id: a\n    optIn: true\n", []string{"node 'a' is skippable but declares no edge for the outcome 'skipped'"}},
		{"skip set non-skippable", "skipSets:\n  s: [a]\nnodes:\n  - id: a\n", []string{"skip set 's' names 'a', which is not a declared skippable node"}},
		{"skip set undeclared", "skipSets:\n  s: [zz]\nnodes:\n  - id: a\n", []string{"skip set 's' names 'zz', which is not a declared skippable node"}},
		{"skip set opt-in", "skipSets:\n  s: [b]\nnodes:\n  - id: a\n  - id: b\n    optIn: true\nedges:\n  - {from: b, on: skipped, to: a}\n", []string{"skip set 's' names 'b', which is an opt-in node"}},
		{"skip set as string", "skipSets:\n  s: a\nnodes:\n  - id: a\n", []string{"skipSets.s must be array"}},
		{"unknown top-level key", "nodez: []\nnodes:\n  - id: a\n", []string{`unknown key "nodez"`, "tiny.yaml:1:"}},
		{"unknown node key", "nodes:\n  - id: a\n    requried: true\n", []string{`unknown key "requried" in nodes[0]`}},
		{"type error", "nodes:\n  - id: a\n    maxAttempts: many\n", []string{"nodes[0].maxAttempts must be integer, not string"}},
		{"not yaml", "nodes: [\n", []string{"not valid YAML"}},
		{"empty file", "", []string{"the file is empty"}},
		{"two documents", "nodes: [{id: a}]\n---\nnodes: [{id: b}]\n", []string{"more than one YAML document"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := graphfile.Load("tiny.yaml", []byte(tc.yaml), testRegistry())
			require.Error(t, err)
			require.True(t, errors.Is(err, graph.ErrInvalidGraph), "error %v should match ErrInvalidGraph", err)
			for _, w := range tc.want {
				require.Contains(t, err.Error(), w)
			}
		})
	}
}

func TestCompileReportsAllProblemsTogether(t *testing.T) {
	src := `
nodes:
  - id: a
    exit: [nope]
  - id: b
    required: true
    skippable: true
edges:
  - {from: a, on: pass, to: zz}
`
	_, err := graphfile.Load("multi.yaml", []byte(src), testRegistry())
	require.Error(t, err)
	var le *graph.LoadError
	require.True(t, errors.As(err, &le))
	require.Len(t, le.Problems, 4, err.Error()) // unknown hook, required+skippable, undeclared edge target, skippable without skipped edge
	msg := err.Error()
	for _, w := range []string{"unknown hook 'nope'", "both required and skippable", "undeclared node 'zz'", "declares no edge for the outcome 'skipped'"} {
		require.Contains(t, msg, w)
	}
}

func TestCompileSchemaProblemsAllReported(t *testing.T) {
	src := "nodes:\n  - id: a\n    actor: robot\n  - id: b\n    sesion: new\n"
	_, err := graphfile.Load("s.yaml", []byte(src), testRegistry())
	require.Error(t, err)
	require.Contains(t, err.Error(), "2 problems")
	require.Contains(t, err.Error(), "s.yaml:3:")
	require.Contains(t, err.Error(), `unknown key "sesion"`)
}

func TestCompileWarnings(t *testing.T) {
	src := `
nodes:
  - id: a
  - id: b
  - id: island
edges:
  - {from: a, on: pass, to: b}
  - {from: a, on: pass, to: island}
  - {from: b, on: pass, to: a}
`
	g, err := graphfile.Load("w.yaml", []byte(src), testRegistry())
	require.NoError(t, err, "cycles are accepted")
	ws := g.Warnings()
	require.Len(t, ws, 2)
	require.Contains(t, ws[0].Message, "duplicate edge from 'a' on 'pass'")
	require.Contains(t, ws[0].Where, "w.yaml:8:")
	require.Contains(t, ws[1].Message, "node 'island' is unreachable")
	to, _ := g.Next("a", "pass")
	require.Equal(t, "b", to, "the first declared edge wins")
}

func TestEdgeOnAcceptsBooleanAndHookRefForms(t *testing.T) {
	src := `
nodes:
  - id: a
    exit:
      - ok
      - {hook: ok, with: {k: v}, blocking: true, timeout: 2m}
      - {hook: ok, timeout: 5}
  - id: b
edges:
  - {from: a, on: true, to: b}
`
	g, err := graphfile.Load("b.yaml", []byte(src), testRegistry())
	require.NoError(t, err)
	a, _ := g.Node("a")
	require.True(t, a.Exit[1].Blocking)
	require.Equal(t, "2m0s", a.Exit[1].Timeout.String())
	require.Equal(t, "5s", a.Exit[2].Timeout.String())
	_, ok := g.Next("a", "true")
	require.True(t, ok)
}

func TestRegistryPanicsOnBadRegistration(t *testing.T) {
	reg := graph.NewRegistry()
	ok := graphtest.Returning(graph.Pass(nil))
	require.PanicsWithValue(t, "graph: hook registered with an empty name", func() { reg.Register(graph.HookSpec{Run: ok}) })
	require.Panics(t, func() { reg.Register(graph.HookSpec{Name: "x"}) })
	reg.Register(graph.HookSpec{Name: "x", Run: ok, Needs: []graph.Operation{"github.add-comment"}})
	require.PanicsWithValue(t, `graph: hook "x" registered twice`, func() { reg.Register(graph.HookSpec{Name: "x", Run: ok}) })
	spec, found := reg.Lookup("x")
	require.True(t, found)
	require.Equal(t, "github", spec.Needs[0].Provider())
}

// The schema and the Go model accept the same keys: a key added to one and
// not the other would be refused by the schema or silently dropped.
func TestSchemaAndModelAgree(t *testing.T) {
	var schema struct {
		Schema      string `json:"$schema"`
		Properties  map[string]any
		Definitions map[string]struct {
			Properties map[string]any
			OneOf      []struct{ Properties map[string]any } `json:"oneOf"`
		}
	}
	require.NoError(t, json.Unmarshal(graphfile.SchemaJSON, &schema))
	require.Equal(t, "http://json-schema.org/draft-07/schema#", schema.Schema)
	yamlKeys := func(v any) []string {
		var keys []string
		rt := reflect.TypeOf(v)
		for i := 0; i < rt.NumField(); i++ {
			if tag := rt.Field(i).Tag.Get("yaml"); tag != "" && tag != "-" {
				keys = append(keys, tag)
			}
		}
		sort.Strings(keys)
		return keys
	}
	keysOf := func(m map[string]any) []string {
		var keys []string
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		return keys
	}
	require.Equal(t, yamlKeys(graph.File{}), keysOf(schema.Properties), "top-level keys")
	require.Equal(t, yamlKeys(graph.NodeSpec{}), keysOf(schema.Definitions["node"].Properties), "node keys")
	require.Equal(t, yamlKeys(graph.HookRef{}), keysOf(schema.Definitions["hookRef"].OneOf[1].Properties), "hook reference keys")
	edge := keysOf(schema.Definitions["edge"].Properties)
	require.Equal(t, append(yamlKeys(graph.EdgeSpec{}), "true"), edge, "edge keys (plus YAML 1.1's `true` for `on`)")
}
