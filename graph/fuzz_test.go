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
	reg := testRegistry()
	f.Fuzz(func(t *testing.T, data []byte) {
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
