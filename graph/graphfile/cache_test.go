package graphfile

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/graph"
)

const cacheGraph = `
name: cached
nodes:
  - id: a
    exit:
      - hook: h
  - id: b
edges:
  - from: a
    on: pass
    to: b
`

func passHook(context.Context, *graph.HookContext) graph.HookResult { return graph.Pass(nil) }

// A graph compiles once per process: the same bytes under the same name
// against the same registry give the graph compiled the first time; other
// bytes, another name or another registry compile anew, and a graph that
// failed to compile is not remembered (the registry may gain its hook).
func TestLoadCompilesEachGraphOnce(t *testing.T) {
	reg := graph.NewRegistry()
	reg.Register(graph.HookSpec{Name: "h", Run: passHook})
	g1, err := Load("g.yaml", []byte(cacheGraph), reg)
	require.NoError(t, err)
	g2, err := Load("g.yaml", []byte(cacheGraph), reg)
	require.NoError(t, err)
	require.Same(t, g1, g2)

	g3, err := Load("other.yaml", []byte(cacheGraph), reg)
	require.NoError(t, err)
	require.NotSame(t, g1, g3)
	require.Equal(t, "other.yaml", g3.Source)

	g4, err := Load("g.yaml", []byte(cacheGraph+"\n# changed\n"), reg)
	require.NoError(t, err)
	require.NotSame(t, g1, g4)

	reg2 := graph.NewRegistry()
	_, err = Load("g.yaml", []byte(cacheGraph), reg2)
	require.ErrorContains(t, err, "h")
	reg2.Register(graph.HookSpec{Name: "h", Run: passHook})
	g5, err := Load("g.yaml", []byte(cacheGraph), reg2)
	require.NoError(t, err)
	require.NotSame(t, g1, g5)
	require.Equal(t, []string{"a", "b"}, g5.IDs())
}
