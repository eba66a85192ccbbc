package loop_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/loop"
)

// the-loop v11's own list (its harness config), less cleanup: the phases
// the shipped work-item loop declares, in its order.
var v11Phases = []string{"not-started", "phase-selection", "brainstorming", "requirements-definition", "design", "test-planning", "tasks-breakdown", "implementation", "verification", "needs-review", "complete"}

// R9.3: workflow.phases is derived from the graph; where it differs, a
// warning names the differing phases.
func TestPhaseWarningsNameTheDifference(t *testing.T) {
	g, err := loop.ShippedGraph(loop.WorkItemLoop)
	require.NoError(t, err)
	const head = ".the-loop/harness-config.yaml: workflow.phases differs from the phases of graph pdlc-work-item-loop, which is authoritative (the list is derived from it): "
	const tail = " — remove workflow.phases or make it match the graph"
	swapped := append([]string{}, v11Phases...)
	swapped[3], swapped[4] = swapped[4], swapped[3]
	cases := []struct {
		name   string
		phases []string
		want   []string
	}{
		{"no list, nothing to compare", nil, nil},
		{"the-loop's list matches (not-started is no node's phase)", v11Phases, nil},
		{"a phase no node declares", append(append([]string{}, v11Phases...), "cleanup"), []string{head + "listed but declared by no node: cleanup" + tail}},
		{"phases the list forgot", v11Phases[:9], []string{head + "declared by the graph but not listed: needs-review, complete" + tail}},
		{"both ways", []string{"phase-selection", "requirements-definition", "design", "test-planning", "tasks-breakdown", "implementation", "verification", "needs-review", "complete", "deploy"},
			[]string{head + "listed but declared by no node: deploy; declared by the graph but not listed: brainstorming" + tail}},
		{"another order", swapped, []string{head + "listed in another order than the graph declares them (phase-selection, brainstorming, requirements-definition, design, test-planning, tasks-breakdown, implementation, verification, needs-review, complete)" + tail}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := loop.DefaultHarnessConfig()
			h.Path = loop.HarnessConfigFile
			h.Phases = tc.phases
			require.Equal(t, tc.want, h.PhaseWarnings(g))
		})
	}
	for _, name := range []string{loop.PRLoop, loop.AdhocLoop, loop.ContributionLoop} {
		sg, err := loop.ShippedGraph(name)
		require.NoError(t, err)
		require.False(t, loop.PhaseGraph(sg), "%s declares a subset of the phases on purpose", name)
	}
	require.True(t, loop.PhaseGraph(g))
}

// The warning reaches whoever opens a runtime with Warn (the daemon logs
// it for each checkout it opens; loopctl's live verbs print it).
func TestOpenWarnsOfDivergingPhases(t *testing.T) {
	repo := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(repo, ".the-loop"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(repo, ".the-loop", "harness-config.yaml"),
		[]byte("workflow:\n  phases: [not-started, phase-selection, requirements-definition, design, cleanup]\n"), 0o644))
	var warns []string
	_, err := loop.Open(repo, loop.Options{Warn: func(w string) { warns = append(warns, w) }})
	require.NoError(t, err)
	require.Len(t, warns, 1, "%q", warns)
	require.Contains(t, warns[0], "listed but declared by no node: cleanup; declared by the graph but not listed: brainstorming, test-planning, tasks-breakdown, implementation, verification, needs-review, complete")
	// Nobody listening, nothing computed or said.
	_, err = loop.Open(repo, loop.Options{})
	require.NoError(t, err)
}
