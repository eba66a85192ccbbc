package loop_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/loop"
)

// TestShippedGraphsNeverAskForALockedArtifact holds docs/decisions.md §21
// over the shipped graphs: once a gate has locked an artifact (and signed
// its hash), no agent node the item can reach from that gate's approval —
// without being sent back by a `changes-requested` verdict, which reopens
// the work — produces that artifact or requires boxes ticked in it. Either
// would have the agent edit what the gate approved, and the trusted check
// would refuse the gate's decision (issue 20, part E: verification ticked
// testing-plan.md after design-approval).
func TestShippedGraphsNeverAskForALockedArtifact(t *testing.T) {
	for _, name := range []string{loop.WorkItemLoop, loop.PRLoop, loop.AdhocLoop, loop.ContributionLoop} {
		t.Run(name, func(t *testing.T) {
			f := loop.ShippedFile(name)
			require.NotNil(t, f)
			nodes := map[string]graph.NodeSpec{}
			for _, n := range f.Nodes {
				nodes[n.ID] = n
			}
			gates := 0
			for _, gate := range f.Nodes {
				locked := lockedBy(gate)
				if len(locked) == 0 {
					continue
				}
				gates++
				// Every node reachable from the gate's approval, not through
				// a changes-requested edge.
				seen := map[string]bool{}
				var queue []string
				for _, e := range f.Edges {
					if e.From == gate.ID && strings.HasPrefix(e.On, "approved") {
						queue = append(queue, e.To)
					}
				}
				for len(queue) > 0 {
					id := queue[0]
					queue = queue[1:]
					if seen[id] {
						continue
					}
					seen[id] = true
					n := nodes[id]
					if n.Actor != "human" {
						for _, a := range locked {
							require.False(t, slices.Contains(n.Produces, a), "%s: node %s produces %s, which %s locked — the agent would edit an approved artifact", name, id, a, gate.ID)
							require.False(t, ticksIn(n, a), "%s: node %s requires boxes ticked in %s, which %s locked", name, id, a, gate.ID)
						}
					}
					for _, e := range f.Edges {
						if e.From == id && e.On != "changes-requested" {
							queue = append(queue, e.To)
						}
					}
				}
			}
			if name == loop.WorkItemLoop || name == loop.ContributionLoop {
				require.NotZero(t, gates, "the test found the gates that lock artifacts")
			}
		})
	}
}

// lockedBy lists the artifacts a node's exit chain locks (lock-artifacts'
// artifacts/artifact parameters; alternatives stay one entry, as produces
// writes them).
func lockedBy(n graph.NodeSpec) []string {
	var out []string
	for _, h := range n.Exit {
		if h.Hook == "lock-artifacts" {
			out = append(out, graph.AsStrings(h.With["artifacts"])...)
			out = append(out, graph.AsStrings(h.With["artifact"])...)
		}
	}
	return out
}

// ticksIn reports whether a validate-artifacts entry of n demands ticked
// checkboxes in artifact a (through produces or validates).
func ticksIn(n graph.NodeSpec, a string) bool {
	for _, h := range n.Exit {
		if h.Hook != "validate-artifacts" || graph.AsStrings(h.With["checkmarks"]) == nil {
			continue
		}
		if slices.Contains(graph.AsStrings(h.With["validates"]), a) || slices.Contains(n.Produces, a) {
			return true
		}
	}
	return false
}
