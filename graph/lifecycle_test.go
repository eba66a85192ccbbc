package graph_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/graph/graphtest"
)

// A daemon opens a Runtime per work item and `check --all` one per item:
// Runtimes must not accumulate goroutines. 1,000 Runtimes, each having run
// a check and an advance, leave at most the shared pool's parked workers.
func TestThousandRuntimesLeaveNoGoroutinePerRuntime(t *testing.T) {
	reg := graphtest.Registry(map[string]graph.Hook{
		"pass": graphtest.Returning(graph.Pass(nil)),
	})
	g := graphtest.NewGraph("leak").
		Node(graph.NodeSpec{ID: "a", Exit: graphtest.Hooks("pass")}).
		Node(graph.NodeSpec{ID: "b", Exit: graphtest.Hooks("pass")}).
		Edge("a", "pass", "b").MustCompile(reg)
	ctx := context.Background()

	// Warm the pool so the baseline already counts its parked workers.
	warm, err := graph.New(g, graph.Options{Store: graphtest.NewStore(), Items: graphtest.NewItems()})
	require.NoError(t, err)
	_, err = warm.Status(ctx, "w", true)
	require.NoError(t, err)
	before := runtime.NumGoroutine()

	rts := make([]*graph.Runtime, 0, 1000)
	for i := range 1000 {
		rt, err := graph.New(g, graph.Options{Store: graphtest.NewStore(), Items: graphtest.NewItems()})
		require.NoError(t, err)
		id := fmt.Sprintf("w%d", i)
		_, err = rt.Start(ctx, id)
		require.NoError(t, err)
		_, err = rt.Status(ctx, id, true)
		require.NoError(t, err)
		rep, err := rt.Advance(ctx, id, nil)
		require.NoError(t, err)
		require.True(t, rep.Moved)
		rts = append(rts, rt)
	}
	after := runtime.NumGoroutine()
	// Every Runtime is still reachable, so nothing was reclaimed by the GC:
	// the bound is the shared pool's size (4 parked workers), not 1,000.
	require.LessOrEqual(t, after-before, 4, "goroutines grew from %d to %d across 1,000 Runtimes", before, after)
	runtime.KeepAlive(rts)
}
