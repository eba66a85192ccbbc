package graph_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/graph/graphfile"
	"github.com/theloop-dev/theloop/graph/graphtest"
)

// TestEachHookResultIsRecorded: graph-state.json keeps, per node, the
// result of every hook of the latest live exit-chain evaluation (R8.1) —
// status, the edge asked for, a failed side effect — as far as the chain
// ran, and replaces it on the next evaluation.
func TestEachHookResultIsRecorded(t *testing.T) {
	ready := false
	hooks := map[string]graph.Hook{
		"lint":    graphtest.Returning(graph.Skip("no linter configured")),
		"publish": graphtest.Returning(graph.HookResult{Status: graph.StatusPass, Degraded: "slack: 503", Retriable: true}),
		"check": func(context.Context, *graph.HookContext) graph.HookResult {
			if ready {
				return graph.PassWith("ok", nil)
			}
			return graph.Block(graph.Finding("design.md is missing", ""))
		},
		"after": graphtest.Returning(graph.Pass(nil)),
	}
	g, err := graphfile.Load("r.yaml", []byte(`
name: records
start: work
nodes:
  - {id: work, exit: [lint, publish, check, after]}
  - {id: done, terminal: true}
edges:
  - {from: work, on: ok, to: done}
`), graphtest.Registry(hooks))
	require.NoError(t, err)
	store := graphtest.NewStore()
	rt, err := graph.New(g, graph.Options{Store: store, Items: graphtest.NewItems(), Sink: &graphtest.Sink{}, Clock: &graphtest.Clock{}, LockTimeout: 200 * time.Millisecond})
	require.NoError(t, err)
	ctx := context.Background()
	_, err = rt.Start(ctx, "issue-1")
	require.NoError(t, err)

	_, err = rt.Complete(ctx, "issue-1", "", "agent")
	require.NoError(t, err)
	rec := store.State("issue-1").Record("work")
	require.Equal(t, []graph.HookRecord{
		{Hook: "lint", Status: graph.StatusSkip},
		{Hook: "publish", Status: graph.StatusPass, Degraded: "slack: 503"},
		{Hook: "check", Status: graph.StatusBlock},
	}, rec.Hooks, "the chain stopped at the block: after never ran")
	require.Equal(t, []string{"lint"}, rec.SkippedHooks)
	b, err := json.Marshal(rec)
	require.NoError(t, err)
	require.Contains(t, string(b), `"hooks":[{"hook":"lint","status":"skip"}`)

	ready = true
	_, err = rt.Complete(ctx, "issue-1", "", "agent")
	require.NoError(t, err)
	rec = store.State("issue-1").Record("work")
	require.Equal(t, []graph.HookRecord{
		{Hook: "lint", Status: graph.StatusSkip},
		{Hook: "publish", Status: graph.StatusPass, Degraded: "slack: 503"},
		{Hook: "check", Status: graph.StatusPass, Outcome: "ok"},
		{Hook: "after", Status: graph.StatusPass},
	}, rec.Hooks)
}
