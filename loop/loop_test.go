package loop_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/graph/graphfile"
	"github.com/theloop-dev/theloop/graph/graphtest"
	"github.com/theloop-dev/theloop/loop"
)

func TestShippedGraphsCompileAndEveryNodeIsReachable(t *testing.T) {
	for _, name := range loop.ShippedLoopNames() {
		t.Run(name, func(t *testing.T) {
			g, err := loop.ShippedGraph(name)
			require.NoError(t, err)
			require.Equal(t, name, g.Name)
			require.Empty(t, g.Warnings(), "no unreachable node, no shadowed edge")
			// Every hook named is a shipped hook, and every opt-in/skippable
			// node routes on skipped (compile proves it; this documents it).
			for _, n := range g.Nodes() {
				if n.Skippable {
					_, ok := g.Next(n.ID, graph.OutcomeSkipped)
					require.True(t, ok, n.ID)
				}
			}
		})
	}
	_, err := loop.ShippedGraph("pdlc-nonsense-loop")
	require.ErrorContains(t, err, "shipped loops are: pdlc-work-item-loop, pdlc-pr-loop, pdlc-adhoc-loop, pdlc-contribution-loop")
}

// The lock is written at the gate (docs/decisions.md §1): producing nodes
// of theloop's graphs never require status: approved.
func TestShippedProducingNodesDoNotGateOnTheLock(t *testing.T) {
	for _, name := range loop.ShippedLoopNames() {
		g, err := loop.ShippedGraph(name)
		require.NoError(t, err)
		for _, n := range g.Nodes() {
			for _, h := range n.Exit {
				require.False(t, h.Params.Bool("locked"), "%s/%s gates on the lock", name, n.ID)
			}
			if n.IsHuman() && len(n.Exit) > 0 && n.Exit[0].Name == "classify-feedback" {
				for i, h := range n.Exit {
					if h.Name == "lock-artifacts" {
						require.Equal(t, 1, i, "%s/%s: lock-artifacts follows classify-feedback", name, n.ID)
					}
				}
			}
		}
	}
}

func writeFile(t testing.TB, root, rel, content string) {
	t.Helper()
	p := filepath.Join(root, filepath.FromSlash(rel))
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
}

const harnessConfig = `version: "0.2.0"
ticketing:
  github: {owner: acme, repo: widgets}
workflow:
  specDir: docs/specs
  phaseLabelPrefix: "loop:"
notifications:
  events:
    phase-approval-pending: [approver]
`

// A work item walked through the shipped work-item loop with loop.Open: the
// real filesystem store and artifacts, the ticket stand-in for GitHub.
func TestWalkTheWorkItemLoop(t *testing.T) {
	repo := t.TempDir()
	writeFile(t, repo, ".the-loop/harness-config.yaml", harnessConfig)
	writeFile(t, repo, ".the-loop/collaborators.yaml", "collaborators:\n  - {login: dana, roles: [approver]}\n")
	writeFile(t, repo, "docs/specs/issue-42/execution-log.md", "# Execution log\n")
	tickets := graphtest.NewTickets()
	ref := "github:acme/widgets#42"
	rt, err := loop.Open(repo, loop.Options{Integrations: tickets, AuthorizedUsers: []string{"dana"}, Clock: graphtest.NewClock(time.Date(2026, 5, 4, 9, 0, 0, 0, time.UTC))})
	require.NoError(t, err)
	ctx := context.Background()
	id := "issue-42"

	rep, err := rt.Start(ctx, id)
	require.NoError(t, err)
	require.Equal(t, "phase-selection", rep.CurrentNode)
	require.Equal(t, []string{"loop:phase-selection"}, tickets.Labels(ref))
	require.Contains(t, tickets.Comments(ref)[0], "which phases does this work item need?")

	// The human keeps the defaults but skips brainstorming, in the reply.
	step, err := rt.Advance(ctx, id, &graph.Event{ID: "d1", Comments: []graph.Comment{tickets.Comment(ref, "dana", "the-loop execute\n- [ ] brainstorming")}})
	require.NoError(t, err)
	require.Equal(t, "requirements-definition", step.CurrentNode)
	require.Equal(t, []string{"loop:requirements-definition"}, tickets.Labels(ref))

	spec := filepath.Join(repo, "docs", "specs", id)
	writeFile(t, repo, "docs/specs/issue-42/requirements.md", "# R\n\n## Requirements\n\n1. x\n\n## Security considerations\n\nA trust boundary: input.\n")
	claim, err := rt.Complete(ctx, id, "", "agent")
	require.NoError(t, err)
	require.Equal(t, "requirements-approval", claim.CurrentNode)
	require.Contains(t, tickets.Comments(ref)[len(tickets.Comments(ref))-1], "**requirements-approval** is ready for review")

	step, err = rt.Advance(ctx, id, &graph.Event{ID: "d2", Comments: []graph.Comment{tickets.Comment(ref, "dana", "Approved, but mind the limits")}})
	require.NoError(t, err)
	require.Equal(t, "design", step.CurrentNode)
	req, err := os.ReadFile(filepath.Join(spec, "requirements.md"))
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(string(req), "---\nstatus: approved\napprovedBy: [\"@dana\"]\ndecision: \"requirements-approval/5\"\n---\n"), string(req))
	require.Contains(t, string(req), "## Review comments\n\n### 2026-05-04 — approved-with-comments\n\n**@dana** wrote:\n\nApproved, but mind the limits\n")

	// Recompute (the Stop hook, CI) agrees: the approval is a recorded decision.
	status, err := rt.Status(ctx, id, true)
	require.NoError(t, err)
	require.Equal(t, "design", status.CurrentNode)

	log, err := os.ReadFile(filepath.Join(spec, "execution-log.md"))
	require.NoError(t, err)
	require.Contains(t, string(log), "### 2026-05-04 — entry design")

	st, err := os.ReadFile(filepath.Join(spec, "graph-state.json"))
	require.NoError(t, err)
	require.Contains(t, string(st), `"currentNode": "design"`)
	require.Contains(t, string(st), `"loop": "pdlc-work-item-loop"`)
}

// Fifty goroutines claim the same node of the same work item on the real
// filesystem store: exactly one transition happens.
func TestConcurrentClaimsMakeOneTransition(t *testing.T) {
	repo := t.TempDir()
	writeFile(t, repo, "docs/specs/issue-7/brainstorm.md", "# B\n\n## Problem / opportunity\n\nx\n\n## Open questions\n\nnone\n")
	rt, err := loop.Open(repo, loop.Options{LockTimeout: 30 * time.Second})
	require.NoError(t, err)
	ctx := context.Background()
	_, err = rt.Start(ctx, "issue-7")
	require.NoError(t, err)
	_, err = rt.Force(ctx, "issue-7", graph.ForceRequest{To: "brainstorming", Reason: "test setup", Actor: "test"})
	require.NoError(t, err)

	var moved atomic.Int32
	var wg sync.WaitGroup
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			c, err := rt.Complete(ctx, "issue-7", "brainstorming", fmt.Sprintf("agent-%d", i))
			if err != nil {
				t.Error(err)
				return
			}
			if c.Moved {
				moved.Add(1)
			}
		}(i)
	}
	wg.Wait()
	require.Equal(t, int32(1), moved.Load())
	rep, err := rt.Status(ctx, "issue-7", false)
	require.NoError(t, err)
	require.Equal(t, "requirements-definition", rep.CurrentNode)
}

func TestOpenRefusesWhatItCannotUse(t *testing.T) {
	_, err := loop.Open(filepath.Join(t.TempDir(), "nope"), loop.Options{})
	require.ErrorIs(t, err, loop.ErrRepoNotFound)

	repo := t.TempDir()
	writeFile(t, repo, ".the-loop/graph.yaml", "nodes: [{id: evil}]\n")
	var warnings []string
	rt, err := loop.Open(repo, loop.Options{Warn: func(s string) { warnings = append(warnings, s) }})
	require.NoError(t, err)
	require.Equal(t, loop.WorkItemLoop, rt.Graph().Name, "a repository graph is ignored")
	require.NotEmpty(t, warnings)
	require.Contains(t, warnings[0], ".the-loop/graph.yaml")

	_, err = rt.Status(context.Background(), "../../etc", true)
	require.Error(t, err)
}

// The generated form of each shipped graph is exactly what parsing and
// validating its YAML yields (regenerate with go generate ./loop).
func TestShippedGo(t *testing.T) {
	for _, name := range loop.ShippedLoopNames() {
		src, err := loop.ShippedGraphSource(name)
		require.NoError(t, err)
		want, err := graphfile.Parse("loop/graphs/"+name+".yaml", src)
		require.NoError(t, err, "the YAML validates against graph.schema.json")
		want.Positions = nil
		got := loop.ShippedFile(name)
		require.NotNil(t, got, name)
		require.Equal(t, want, got, "shipped_graphs.go is stale: run go generate ./loop")
	}
}

// R4.2: a human gate carries its producer's phase — the phase the work
// item is in when it reaches the gate — and its entry chain syncs it. No
// gate introduces a label of its own (R9.2).
func TestGatesCarryTheirProducersPhase(t *testing.T) {
	want := map[string]map[string]string{
		loop.WorkItemLoop:     {"phase-selection": "phase-selection", "requirements-approval": "requirements-definition", "design-approval": "test-planning", "human-approval": "needs-review"},
		loop.ContributionLoop: {"goal-definition": "", "phase-selection": "phase-selection", "plan-approval": "", "human-approval": "needs-review"},
		loop.AdhocLoop:        {"review": "implementation"},
		loop.PRLoop:           {"pr-approval": ""}, // the PR loop never touches the ticket's phase
	}
	for _, name := range loop.ShippedLoopNames() {
		g, err := loop.ShippedGraph(name)
		require.NoError(t, err)
		agentPhases := map[string]bool{}
		for _, n := range g.Nodes() {
			if !n.IsHuman() {
				agentPhases[n.Phase] = true
			}
		}
		for _, n := range g.Nodes() {
			if !n.IsHuman() {
				continue
			}
			phase, ok := want[name][n.ID]
			require.True(t, ok, "%s/%s: a gate this test does not know", name, n.ID)
			require.Equal(t, phase, n.Phase, "%s/%s", name, n.ID)
			if phase == "" {
				continue
			}
			require.Equal(t, "set-phase-label", n.Entry[0].Name, "%s/%s: entering the gate syncs the label first", name, n.ID)
			if n.ID != "phase-selection" {
				require.True(t, agentPhases[phase], "%s/%s: phase %s is a producer's, not a new label", name, n.ID, phase)
			}
		}
	}

	// Entering the gate puts the label back where the work is, whatever
	// happened to it meanwhile.
	repo := t.TempDir()
	writeFile(t, repo, ".the-loop/harness-config.yaml", harnessConfig)
	tickets := graphtest.NewTickets()
	ref := "github:acme/widgets#42"
	rt, err := loop.Open(repo, loop.Options{Integrations: tickets, AuthorizedUsers: []string{"dana"}})
	require.NoError(t, err)
	ctx := context.Background()
	_, err = rt.Start(ctx, "issue-42")
	require.NoError(t, err)
	_, err = rt.Advance(ctx, "issue-42", &graph.Event{ID: "d1", Comments: []graph.Comment{tickets.Comment(ref, "dana", "the-loop execute\n- [ ] brainstorming")}})
	require.NoError(t, err)
	writeFile(t, repo, "docs/specs/issue-42/requirements.md", "# R\n\n## Requirements\n\n1. x\n\n## Security considerations\n\nnone\n")
	tickets.SetLabels(ref, "bug", "loop:design") // relabelled by hand meanwhile
	claim, err := rt.Complete(ctx, "issue-42", "", "agent")
	require.NoError(t, err)
	require.Equal(t, "requirements-approval", claim.CurrentNode)
	require.ElementsMatch(t, []string{"bug", "loop:requirements-definition"}, tickets.Labels(ref))
}
