package graph_test

import (
	"testing"

	"github.com/theloop-dev/theloop/graph/graphfile"
)

// Decode + compile must never panic, whatever the bytes.
func FuzzLoad(f *testing.F) {
	f.Add([]byte(validGraph))
	f.Add([]byte(fixtureGraph))
	f.Add([]byte("nodes: [{id: a, exit: [{hook: ok, with: {x: [1, 2]}}]}]\nedges: [{from: a, on: yes, to: a}]\n"))
	f.Add([]byte("nodes:\n  - id: a\n    produces: 'a||b'\nskipSets: {s: a}\n"))
	f.Add([]byte("&a [*a]"))
	f.Add([]byte("nodes: !!binary aGVsbG8=\n"))
	f.Add([]byte("- - - -\n"))
	f.Add([]byte("{nodes: [{id: a}], start: 3}"))
	f.Add([]byte("nodes: [{id: a, exit: [{hook: typed, with: {need: x, d: 1e400, i: 1.5, ss: [a, 1], m: {k: v}}}]}]\n"))
	f.Add([]byte("nodes: [{id: a, exit: [{hook: none, with: {x: null}}]}]\n"))
	reg := testRegistry()
	params := paramRegistry()
	f.Fuzz(func(t *testing.T, data []byte) {
		// The hook-parameter checks see every value shape too.
		if _, err := graphfile.Load("fuzz.yaml", data, params); err != nil && err.Error() == "" {
			t.Fatal("errors must say something")
		}
		g, err := graphfile.Load("fuzz.yaml", data, reg)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("errors must say something")
			}
			return
		}
		if len(g.Nodes()) == 0 {
			t.Fatal("a compiled graph has nodes")
		}
		if _, ok := g.Node(g.Start); !ok {
			t.Fatalf("start %q is not a node", g.Start)
		}
		_ = g.Warnings()
	})
}
