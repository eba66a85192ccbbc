package dashboard

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/loop"
)

func TestMarksFor(t *testing.T) {
	g, err := loop.ShippedGraph(loop.WorkItemLoop)
	require.NoError(t, err)
	at := func(node string, edit func(*graph.State)) *graph.State {
		st := graph.NewState("issue-1")
		st.Enter("phase-selection", t0)
		st.Exit("phase-selection", "selected", t0)
		st.Enter("brainstorming", t0)
		st.Exit("brainstorming", graph.OutcomeSkipped, t0)
		if node != "" {
			st.Enter(node, t0.Add(time.Minute))
		}
		if edit != nil {
			edit(st)
		}
		return st
	}
	tests := []struct {
		name  string
		st    *graph.State
		node  string
		want  Mark
		check map[string]Mark
	}{
		{"working", at("requirements-definition", nil), "requirements-definition", MarkCurrent,
			map[string]Mark{"phase-selection": MarkPassed, "brainstorming": MarkSkipped, "design": ""}},
		{"blocked by a hook", at("requirements-definition", func(st *graph.State) { st.NoteBlock("requirements-definition", "missing ## Scope") }), "requirements-definition", MarkBlocked, nil},
		{"parked off a gate", at("design", func(st *graph.State) { st.Park("design", "escalated", false, t0) }), "design", MarkBlocked, nil},
		{"waiting at a gate", at("requirements-approval", func(st *graph.State) { st.Park("requirements-approval", "waiting", false, t0) }), "requirements-approval", MarkCurrent, nil},
		{"escalated at a gate", at("requirements-approval", func(st *graph.State) { st.Park("requirements-approval", "repeated", true, t0) }), "requirements-approval", MarkBlocked, nil},
		{"declared skip", at("design", func(st *graph.State) {
			st.Skips.Set("test-planning", graph.SkipDecl{Via: "cli", Token: "test-planning"})
		}), "test-planning", MarkSkipped, nil},
		{"complete", at("complete", func(st *graph.State) { st.Exit("complete", "pass", t0) }), "complete", MarkPassed, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := marksFor(g, tc.st)
			require.Equal(t, tc.want, m[tc.node])
			for n, want := range tc.check {
				require.Equal(t, want, m[n], n)
			}
		})
	}
	require.Empty(t, marksFor(g, nil))
}

// Every shipped loop's picture fits a 1400×900 window beside the page's
// margins (at most 1,360 × 760): the layers wrap into columns, so the
// current node is on screen at every gate.
func TestShippedGraphsFitTheWindow(t *testing.T) {
	for _, name := range []string{loop.WorkItemLoop, loop.PRLoop, loop.AdhocLoop, loop.ContributionLoop} {
		t.Run(name, func(t *testing.T) {
			g, err := loop.ShippedGraph(name)
			require.NoError(t, err)
			pic := layoutGraph(g, nil)
			t.Logf("%s: %d nodes, %d×%d", name, len(pic.Nodes), pic.Width, pic.Height)
			require.LessOrEqual(t, pic.Width, 1360)
			require.LessOrEqual(t, pic.Height, 760)
			for _, n := range pic.Nodes {
				require.True(t, n.X >= 0 && n.Y >= 0 && n.X+n.W <= pic.Width && n.Y+n.H <= pic.Height, "%s is inside the picture", n.ID)
			}
		})
	}
}

// The timeline groups events by the stay in a node they happened in, with
// each stay's entry, duration and attempts; newest first.
func TestGroupTimeline(t *testing.T) {
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	evs := []Event{
		{Time: at(0), Name: "dispatch.spawned"},
		{Time: at(1), Name: "graph.started", Fields: map[string]any{"node": "phase-selection"}},
		{Time: at(2), Name: "graph.parked", Fields: map[string]any{"node": "phase-selection"}},
		{Time: at(60), Name: "graph.advanced", Fields: map[string]any{"from": "phase-selection", "to": "brainstorming"}},
		{Time: at(70), Name: "graph.blocked", Fields: map[string]any{"node": "brainstorming"}},
	}
	st := &graph.State{CurrentNode: "brainstorming"}
	st.Nodes.Set("brainstorming", graph.NodeRecord{Attempts: 2})
	gs := groupTimeline(evs, st, at(130))
	require.Len(t, gs, 3)
	require.Equal(t, "brainstorming", gs[0].Node)
	require.True(t, gs[0].Current)
	require.Equal(t, "1m", gs[0].Duration)
	require.Equal(t, 2, gs[0].Attempts)
	require.Equal(t, []string{"graph.blocked", "graph.advanced"}, []string{gs[0].Events[0].Name, gs[0].Events[1].Name})
	require.Equal(t, "phase-selection", gs[1].Node)
	require.Equal(t, "59s", gs[1].Duration)
	require.Equal(t, "", gs[2].Node, "before the graph")
}
