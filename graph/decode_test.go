package graph_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/graph/graphfile"
)

func TestAliasBombIsRefused(t *testing.T) {
	src := "a: &a [x,x,x,x,x,x,x,x,x,x]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c,*c]\ne: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d,*d]\nf: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e,*e]\ng: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f,*f]\nnodes: [{id: a}]\n"
	_, err := graphfile.Load("l.yaml", []byte(src), testRegistry())
	require.ErrorContains(t, err, "expands to more than 100000 YAML nodes")
	// Ordinary anchors for reuse are fine.
	ok := "nodes:\n  - id: a\n    exit: &chain [ok, gate]\n  - id: b\n    exit: *chain\nedges: [{from: a, on: pass, to: b}]\n"
	g, err := graphfile.Load("ok.yaml", []byte(ok), testRegistry())
	require.NoError(t, err)
	b, _ := g.Node("b")
	require.Len(t, b.Exit, 2)
}
