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
// each stay's entry, duration and attempts; newest first. A row is typed
// and worded (no key=value dump); an event about a node goes to that
// node's stay even when logged after the next node was entered.
func TestGroupTimeline(t *testing.T) {
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	evs := []Event{
		{Time: at(0), Name: "dispatch.spawned", Fields: map[string]any{"gh_event": "issues", "action": "labeled"}},
		{Time: at(1), Name: "graph.started", Fields: map[string]any{"node": "phase-selection"}},
		{Time: at(2), Name: "graph.parked", Fields: map[string]any{"node": "phase-selection"}},
		{Time: at(60), Name: "graph.advanced", Fields: map[string]any{"node": "phase-selection", "to": "brainstorming", "outcome": "selected"}},
		{Time: at(70), Name: "graph.advanced", Fields: map[string]any{"node": "brainstorming", "to": "requirements-definition", "outcome": "pass", "basis": "recompute"}},
		{Time: at(70), Name: "graph.blocked", Fields: map[string]any{"node": "brainstorming", "hook": "validate-artifacts", "verified": true, "message": "missing ## Goals"}},
		{Time: at(71), Name: "graph.hook_skipped", Fields: map[string]any{"node": "requirements-definition"}},
		{Time: at(72), Name: "session.delivered", Fields: map[string]any{"bytes": 300, "tmux_target": "loop-x"}},
	}
	st := &graph.State{CurrentNode: "requirements-definition"}
	st.Nodes.Set("brainstorming", graph.NodeRecord{Attempts: 2})
	st.Decisions.Set("phase-selection", graph.Decision{Outcome: "selected", By: "@dana", Comment: "1007"})
	g, err := loop.ShippedGraph(loop.WorkItemLoop)
	require.NoError(t, err)
	gs := groupTimeline(evs, timelineInput{State: st, Graph: g, Now: at(130)})
	require.Len(t, gs, 4)
	require.Equal(t, "requirements-definition", gs[0].Node)
	require.True(t, gs[0].Current)
	require.Equal(t, "1m", gs[0].Duration)
	require.Equal(t, []string{rowPaste}, kinds(gs[0].Events), "bookkeeping (hook_skipped) is not a step")

	require.Equal(t, "brainstorming", gs[1].Node)
	require.Equal(t, 2, gs[1].Attempts)
	require.Equal(t, []string{rowBlock, rowMove}, kinds(gs[1].Events), "the block logged with the advance reads in the node it blocked")
	require.Equal(t, "brainstorming blocked by validate-artifacts: missing ## Goals", gs[1].Events[0].Text)
	require.Equal(t, "brainstorming passed → requirements-definition — loopd's recompute bore the agent's claim out", gs[1].Events[1].Text)

	require.Equal(t, "phase-selection", gs[2].Node)
	require.Equal(t, "59s", gs[2].Duration)
	require.Equal(t, []string{rowDecision, rowMove, rowMove}, kinds(gs[2].Events))
	require.Equal(t, "phase-selection: selected by @dana (comment 1007) → brainstorming", gs[2].Events[0].Text)
	require.Equal(t, "", gs[3].Node, "before the graph")
	for _, g := range gs {
		for _, r := range g.Events {
			require.NotContains(t, r.Text, "=", "no key=value dump: %q", r.Text)
			require.Contains(t, r.Raw, `"event": "`+r.Name+`"`, "the raw record is one click away")
		}
	}

	done := groupTimeline(evs, timelineInput{State: st, Graph: g, Now: at(130), Done: true})
	require.False(t, done[0].Current, "a finished item has no current stay")
	require.True(t, done[0].Finished)
	require.Empty(t, done[0].Duration, "and no running clock")
}

func kinds(rows []timelineRow) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = r.Kind
	}
	return out
}
