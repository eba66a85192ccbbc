package graph_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/graph/graphfile"
	"github.com/theloop-dev/theloop/graph/graphtest"
)

// A node escalated on a block that only the live chain sees (a hook that
// runs a program skips under check) is not released by the pure check:
// each further claim stays escalated without a new attempt or a new
// escalation notice.
func TestEscalationOnALiveOnlyBlockIsNotRenotified(t *testing.T) {
	calls := &graphtest.Counter{}
	testsPass := false
	hooks := map[string]graph.Hook{
		"run-tests": func(_ context.Context, hc *graph.HookContext) graph.HookResult {
			if hc.Mode == graph.ModeCheck {
				return graph.Skip("check runs no program")
			}
			if testsPass {
				return graph.Pass(nil)
			}
			return graph.Block(graph.Finding("tests fail", "go test ./..."))
		},
		"notice": graphtest.Returning(graph.Pass(nil)),
	}
	for name, h := range hooks {
		hooks[name] = calls.Wrap(name, h)
	}
	g, err := graphfile.Load("live.yaml", []byte(`
name: live-only
start: build
onEscalation: [notice]
nodes:
  - {id: build, exit: [run-tests]}
  - {id: done, terminal: true}
edges:
  - {from: build, on: pass, to: done}
`), graphtest.Registry(hooks))
	require.NoError(t, err)
	store, sink := graphtest.NewStore(), &graphtest.Sink{}
	rt, err := graph.New(g, graph.Options{Store: store, Items: graphtest.NewItems(), Sink: sink, Clock: &graphtest.Clock{}, LockTimeout: 200 * time.Millisecond})
	require.NoError(t, err)
	ctx := context.Background()
	_, err = rt.Start(ctx, "issue-1")
	require.NoError(t, err)

	claim := func() *graph.Claim {
		c, err := rt.Complete(ctx, "issue-1", "", "agent")
		require.NoError(t, err)
		return c
	}
	require.Equal(t, graph.StatusBlock, claim().Status)
	require.Equal(t, graph.StepEscalated, claim().Status)
	require.Equal(t, 1, calls.Calls("notice"))
	attempts := store.State("issue-1").Record("build").Attempts

	for range 3 {
		c := claim()
		require.Equal(t, graph.StepEscalated, c.Status)
		require.Contains(t, strings.Join(c.Messages, "\n"), "still the same block")
		require.NotContains(t, strings.Join(c.Messages, "\n"), "escalation is lifted")
	}
	require.Equal(t, 1, calls.Calls("notice"), "no new escalation notice")
	require.Equal(t, 1, sink.Count("graph.escalated"))
	require.Equal(t, attempts, store.State("issue-1").Record("build").Attempts)
	require.True(t, store.State("issue-1").Parked.Escalated)

	// The fix lands: the walk moves on.
	testsPass = true
	c := claim()
	require.Equal(t, graph.StatusPass, c.Status)
	require.Equal(t, "done", c.CurrentNode)
}
