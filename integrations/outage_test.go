package integrations

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/loop"
)

// A GitHub outage for a whole walk of the work-item loop: every call fails
// with 500, yet every node advances — the hooks record the failure and the
// graph never wedges — and each failed call is recorded exactly once.
func TestOutageNeverWedgesTheWorkItemLoop(t *testing.T) {
	fg := newFakeGitHub(t, "", testToken)
	fg.fault(fault{path: "/", status: 500})
	w := newWorld(mapEnv{"GH_TOKEN": testToken})
	set := apiSet(t, fg, w)

	repo := t.TempDir()
	put := func(rel, content string) {
		p := filepath.Join(repo, filepath.FromSlash(rel))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	}
	put(".the-loop/harness-config.yaml", "ticketing:\n  github: {owner: octo, repo: repo}\n")
	spec := "docs/specs/issue-7/"
	put(spec+"execution-log.md", "# Log\n\n## Verification results\n\n- [x] a — pass\n\n## Review cycles\n\nr1\n\n## Security review (gate)\n\nok\n\n## Final validation evidence\n\nok\n\n## Capability docs\n\nok\n\n## Documentation\n\nok\n\n## Pull requests\n\n- PR 8\n")
	put(spec+"brainstorm.md", "# B\n\n## Problem / opportunity\n\nx\n\n## Open questions\n\nnone\n")
	put(spec+"requirements.md", "# R\n\n## Requirements\n\n1. x\n\n## Security considerations\n\nnone\n")
	put(spec+"design.md", "# D\n\n## Architecture\n\nx\n\n## Security design\n\nx\n\n## Testing strategy\n\nx\n")
	put(spec+"testing-plan.md", "# T\n\n## Test matrix\n\n- a\n\n## Verification environment\n\nx\n\n## Evidence plan\n\nx\n")
	put(spec+"tasks.md", "# Tasks\n\n## Task list\n\n- [x] a\n")

	counted := &countingCalls{next: set}
	rt, err := loop.Open(repo, loop.Options{Integrations: counted, Sink: w.sink, Clock: w.clock, AuthorizedUsers: []string{"dana"}})
	require.NoError(t, err)
	ctx := context.Background()
	id := "issue-7"
	_, err = rt.Start(ctx, id)
	require.NoError(t, err)

	human := func(body string) {
		rep, err := rt.Advance(ctx, id, &graph.Event{ID: "d", Comments: []graph.Comment{{ID: "1", Author: "dana", Body: body}}})
		require.NoError(t, err)
		require.True(t, rep.Moved, "%s: %s %v", rep.Node, rep.Status, rep.Messages)
	}
	human("the-loop execute") // no checklist readable: the full default process
	visited := []string{"phase-selection"}
	for i := 0; i < 40; i++ {
		st, err := rt.Status(ctx, id, false)
		require.NoError(t, err)
		cur := st.CurrentNode
		if cur == "complete" {
			break
		}
		visited = append(visited, cur)
		if n, _ := rt.Graph().Node(cur); n.IsHuman() {
			human("approved")
			continue
		}
		c, err := rt.Complete(ctx, id, "", "agent")
		require.NoError(t, err)
		require.True(t, c.Moved, "%s did not advance during the outage: %s %v", cur, c.Status, c.Messages)
	}
	st, err := rt.Status(ctx, id, true)
	require.NoError(t, err)
	require.Equal(t, "complete", st.CurrentNode)
	require.True(t, st.OK)
	require.Contains(t, visited, "human-approval")

	// Every call failed, and each failure was recorded once: one
	// integration.call_failed event per failed call (whatever its retries),
	// and one graph.hook_degraded per hook that could not complete.
	calls := fg.requestCount()
	require.Equal(t, 0, counted.ok, "nothing succeeded during the outage")
	require.Greater(t, counted.failed, 10)
	failed := w.sink.Count(EventCallFailed)
	require.Equal(t, counted.failed, failed, "one event per failed call")
	degraded := w.sink.Count("graph.hook_degraded")
	require.Greater(t, degraded, 10)
	seen := map[string]bool{}
	for _, e := range w.sink.Events() {
		if e.Name != "graph.hook_degraded" {
			continue
		}
		node, _ := e.Get("node")
		hook, _ := e.Get("hook")
		key := node.(string) + "/" + hook.(string)
		// A node entered twice would legitimately degrade twice; this walk
		// enters each node once.
		require.False(t, seen[key], "%s degraded twice", key)
		seen[key] = true
	}
	for _, e := range w.sink.Events() {
		if e.Name == EventCallFailed {
			v, _ := e.Get("error")
			require.False(t, strings.Contains(v.(string), testToken))
		}
	}
	t.Logf("outage walk: %d nodes visited, %d HTTP requests, %d failed calls recorded once each", len(visited), calls, failed)
}

// countingCalls counts the integration calls that fail and succeed.
type countingCalls struct {
	next       graph.Integrations
	ok, failed int
}

func (c *countingCalls) Call(ctx context.Context, op graph.Operation, args map[string]any) (map[string]any, error) {
	res, err := c.next.Call(ctx, op, args)
	if err != nil {
		c.failed++
	} else {
		c.ok++
	}
	return res, err
}
