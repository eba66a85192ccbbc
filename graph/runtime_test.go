package graph_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/graph/graphfile"
	"github.com/theloop-dev/theloop/graph/graphtest"
)

// fixture is a small PDLC-shaped graph with test hooks that behave like the
// real ones: an artifact gate, a feedback classifier reading only the event,
// a phase selection that declares skips.
type fixture struct {
	t       *testing.T
	store   *graphtest.Store
	items   *graphtest.Items
	sink    *graphtest.Sink
	clock   *graphtest.Clock
	calls   *graphtest.Counter
	audit   *recordingAuditor
	rt      *graph.Runtime
	g       *graph.Graph
	entries []string // "<node>@<pointer seen in the store>" per entry probe
	mu      sync.Mutex
}

const fixtureGraph = `
name: mini-loop
start: phase-selection
skipSets:
  spec: [brainstorming, requirements, requirements-approval]
onEscalation: [escalation-notice]
nodes:
  - id: phase-selection
    actor: human
    required: true
    entry: [probe]
    exit: [select]
  - id: brainstorming
    skippable: true
    produces: brainstorm.md
    entry: [probe]
    exit: [{hook: needs-file, with: {file: brainstorm.md}}]
  - id: requirements
    skippable: true
    produces: requirements.md
    entry: [probe]
    exit: [{hook: needs-file, with: {file: requirements.md}}, {hook: needs-file, with: {file: extra.md, when: strict}}]
  - id: requirements-approval
    actor: human
    skippable: true
    entry: [probe]
    exit: [classify, record]
  - id: critic
    optIn: true
    entry: [probe]
    exit: [ok]
  - id: design
    maxAttempts: 2
    entry: [probe]
    exit: [{hook: needs-file, with: {file: design.md}}]
  - id: done
    terminal: true
    entry: [probe]
edges:
  - {from: phase-selection, on: selected, to: brainstorming}
  - {from: brainstorming, on: pass, to: requirements}
  - {from: brainstorming, on: skipped, to: requirements}
  - {from: requirements, on: pass, to: requirements-approval}
  - {from: requirements, on: skipped, to: requirements-approval}
  - {from: requirements-approval, on: approved, to: critic}
  - {from: requirements-approval, on: changes-requested, to: requirements}
  - {from: requirements-approval, on: skipped, to: critic}
  - {from: critic, on: pass, to: design}
  - {from: critic, on: skipped, to: design}
  - {from: design, on: pass, to: done}
`

type recordingAuditor struct {
	mu     sync.Mutex
	forces []graph.ForceRecord
	skips  [][]string
	fail   error
}

func (a *recordingAuditor) Forced(_ context.Context, _ graph.WorkItem, rec graph.ForceRecord) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.forces = append(a.forces, rec)
	return a.fail
}

func (a *recordingAuditor) SkipsDeclared(_ context.Context, _ graph.WorkItem, nodes []string, _, _ string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.skips = append(a.skips, nodes)
	return a.fail
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{t: t, store: graphtest.NewStore(), items: graphtest.NewItems(), sink: &graphtest.Sink{}, clock: &graphtest.Clock{}, calls: &graphtest.Counter{}, audit: &recordingAuditor{}}
	hooks := map[string]graph.Hook{
		"probe": func(ctx context.Context, hc *graph.HookContext) graph.HookResult {
			// Reads the saved pointer from inside the entry chain: state must
			// already be persisted.
			st := f.store.State(hc.WorkItem.ID)
			seen := "<none>"
			if st != nil {
				seen = st.CurrentNode
			}
			f.mu.Lock()
			f.entries = append(f.entries, hc.Node.ID+"@"+seen)
			f.mu.Unlock()
			return graph.Pass(nil)
		},
		"ok": graphtest.Returning(graph.Pass(nil)),
		"needs-file": func(ctx context.Context, hc *graph.HookContext) graph.HookResult {
			name := hc.Params.String("file")
			if hc.Params.String("when") == "strict" && hc.Config.String("strict") != "yes" {
				return graph.Skip("not strict")
			}
			if _, err := fs.Stat(hc.Artifacts, name); err != nil {
				return graph.Block(graph.Finding("required artifact is missing", hc.Artifacts.Path(name)))
			}
			return graph.Pass(nil)
		},
		"select": func(ctx context.Context, hc *graph.HookContext) graph.HookResult {
			if hc.Event == nil {
				return graph.Wait("waiting for an authorized user to choose the phases")
			}
			for _, c := range hc.Event.Comments {
				if !strings.Contains(c.Body, "execute") {
					continue
				}
				skips := map[string]graph.SkipDecl{}
				for _, w := range strings.Fields(c.Body) {
					if n, ok := strings.CutPrefix(w, "skip:"); ok {
						skips[n] = graph.SkipDecl{Via: "selection", Token: n, By: "@" + c.Author}
					}
				}
				optIns := map[string]graph.OptInSelection{}
				if strings.Contains(c.Body, "+critic") {
					optIns["critic"] = graph.OptInSelection{By: "@" + c.Author}
				}
				res := graph.PassWith("selected", nil)
				res.Decision = &graph.DecisionFact{Key: "phase-selection", Skips: skips, OptIns: optIns, Surface: "work-item"}
				return res
			}
			return graph.Wait("waiting for an authorized user to choose the phases")
		},
		"classify": func(ctx context.Context, hc *graph.HookContext) graph.HookResult {
			if hc.Event == nil {
				return graph.Wait("no authorized feedback yet")
			}
			for _, c := range hc.Event.Comments {
				if c.Author != "dana" {
					continue
				}
				switch {
				case strings.Contains(c.Body, "changes"):
					return graph.PassWith("changes-requested", map[string]any{"comments": []graph.Comment{c}})
				case strings.Contains(c.Body, "approved"):
					res := graph.PassWith("approved", map[string]any{"comments": []graph.Comment{c}})
					res.Decision = &graph.DecisionFact{By: "@" + c.Author}
					return res
				}
			}
			return graph.Wait("feedback so far is not decisive; the gate stays open")
		},
		"record":            graphtest.Returning(graph.Pass(map[string]any{"recorded": 1})),
		"escalation-notice": graphtest.Returning(graph.Pass(nil)),
	}
	for name, h := range hooks {
		hooks[name] = f.calls.Wrap(name, h)
	}
	reg := graphtest.Registry(hooks)
	g, err := graphfile.Load("mini.yaml", []byte(fixtureGraph), reg)
	require.NoError(t, err)
	f.g = g
	f.rt, err = graph.New(g, graph.Options{Store: f.store, Items: f.items, Sink: f.sink, Clock: f.clock, Auditor: f.audit, LockTimeout: 200 * time.Millisecond})
	require.NoError(t, err)
	return f
}

func (f *fixture) arts(id string) *graphtest.Artifacts { return f.items.Artifacts(id) }

func comment(author, body string) *graph.Event {
	return &graph.Event{ID: "delivery-1", Kind: "issue_comment", Comments: []graph.Comment{{ID: "c1", Author: author, Body: body}}}
}

// startAndSelect walks phase-selection with an execute comment.
func (f *fixture) startAndSelect(id, body string) *graph.StepReport {
	ctx := context.Background()
	_, err := f.rt.Start(ctx, id)
	require.NoError(f.t, err)
	rep, err := f.rt.Advance(ctx, id, comment("dana", body))
	require.NoError(f.t, err)
	return rep
}

func TestStartIsIdempotent(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	rep, err := f.rt.Start(ctx, "issue-1")
	require.NoError(t, err)
	require.Equal(t, "phase-selection", rep.CurrentNode)
	again, err := f.rt.Start(ctx, "issue-1")
	require.NoError(t, err)
	require.Nil(t, again, "a second start is a no-op")
	require.Equal(t, 1, f.calls.Calls("probe"), "the entry chain ran once")
	st := f.store.State("issue-1")
	require.Equal(t, "phase-selection", st.CurrentNode)
	require.Equal(t, "mini-loop", st.Loop)
	require.Equal(t, 1, st.Record("phase-selection").Attempts)
	require.Equal(t, 1, f.sink.Count("graph.started"))
}

func TestStateIsSavedBeforeTheEntryChainRuns(t *testing.T) {
	f := newFixture(t)
	f.startAndSelect("issue-1", "the-loop execute")
	require.Equal(t, []string{"phase-selection@phase-selection", "brainstorming@brainstorming"}, f.entries,
		"each entry hook saw its own node already saved as the pointer")
}

func TestClaimOnANonCurrentNodeIsRefused(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	c, err := f.rt.Complete(ctx, "issue-1", "", "cli")
	require.NoError(t, err)
	require.Equal(t, graph.StepRefused, c.Status)
	require.Equal(t, "not-started", c.Reason)

	f.startAndSelect("issue-1", "the-loop execute")
	c, err = f.rt.Complete(ctx, "issue-1", "design", "agent")
	require.NoError(t, err)
	require.Equal(t, graph.StepRefused, c.Status)
	require.Equal(t, "not-current", c.Reason)
	require.Equal(t, "brainstorming", c.CurrentNode)

	c, err = f.rt.Complete(ctx, "issue-1", "phase-selection", "agent")
	require.NoError(t, err)
	require.Equal(t, graph.StepNoop, c.Status, "a claim behind the pointer is a no-op")
	require.Equal(t, "already-past", c.Reason)

	c, err = f.rt.Complete(ctx, "issue-1", "nonsense", "agent")
	require.NoError(t, err)
	require.Equal(t, "not-current", c.Reason)
	require.Contains(t, strings.Join(c.Messages, "\n"), "declared nodes are: phase-selection, brainstorming")
	require.False(t, f.store.State("issue-1").Completions.Has("design"), "a refused claim writes nothing")
}

func TestClaimRecordsClaimantAndMoves(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.startAndSelect("issue-1", "the-loop execute")
	f.arts("issue-1").Set("brainstorm.md", "# idea\n")
	c, err := f.rt.Complete(ctx, "issue-1", "", "claude")
	require.NoError(t, err)
	require.Equal(t, graph.StatusPass, c.Status)
	require.True(t, c.Moved)
	require.Equal(t, "requirements", c.CurrentNode)
	require.Contains(t, c.Messages, "advanced to requirements")
	comp, ok := f.store.State("issue-1").Completions.Get("brainstorming")
	require.True(t, ok)
	require.Equal(t, "claude", comp.By)
}

func TestHumanGateWaitsOnTheCLIPath(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.startAndSelect("issue-1", "the-loop execute skip:brainstorming")
	f.arts("issue-1").Set("requirements.md", "# r\n")
	c, err := f.rt.Complete(ctx, "issue-1", "", "agent")
	require.NoError(t, err)
	require.Equal(t, "requirements-approval", c.CurrentNode)

	// The agent claims the gate: a claim carries no event, so the gate waits.
	c, err = f.rt.Complete(ctx, "issue-1", "", "agent")
	require.NoError(t, err)
	require.Equal(t, graph.StatusWait, c.Status)
	require.False(t, c.Moved)
	require.Equal(t, "requirements-approval", c.CurrentNode)
	st := f.store.State("issue-1")
	require.NotNil(t, st.Parked)
	require.Equal(t, "requirements-approval", st.Parked.Node)
	require.Contains(t, st.Parked.Reason, "no authorized feedback yet")
	require.False(t, st.Parked.Escalated)

	// A stranger's "approved" does not open it either.
	rep, err := f.rt.Advance(ctx, "issue-1", comment("mallory", "approved"))
	require.NoError(t, err)
	require.Equal(t, graph.StatusWait, rep.Status)
}

func TestApprovalIsARecordedDecisionThatRecomputeHonours(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.startAndSelect("issue-1", "the-loop execute skip:brainstorming")
	f.arts("issue-1").Set("requirements.md", "# r\n")
	_, err := f.rt.Complete(ctx, "issue-1", "", "agent")
	require.NoError(t, err)

	rep, err := f.rt.Advance(ctx, "issue-1", comment("dana", "approved"))
	require.NoError(t, err)
	require.Equal(t, graph.StatusPass, rep.Status)
	require.Equal(t, "approved", rep.Outcome)
	require.Equal(t, "design", rep.CurrentNode, "critic is an unselected opt-in and is routed around")

	st := f.store.State("issue-1")
	d, ok := st.Decisions.Get("requirements-approval")
	require.True(t, ok)
	require.Equal(t, "approved", d.Outcome)
	require.Equal(t, "@dana", d.By)
	require.Equal(t, "delivery-1", d.Event)
	require.Equal(t, "c1", d.Comment)
	require.NotEmpty(t, d.At)

	// A Stop hook or CI run after the approval sees design, not the gate.
	status, err := f.rt.Status(ctx, "issue-1", true)
	require.NoError(t, err)
	require.Equal(t, "design", status.CurrentNode)
	gate, _ := status.Node("requirements-approval")
	require.Equal(t, graph.StatusPass, gate.Status)
	require.Equal(t, "approved", gate.Outcome)
	critic, _ := status.Node("critic")
	require.Equal(t, graph.StatusSkip, critic.Status)
	require.Contains(t, critic.Messages[0], "not selected")
}

func TestChangesRequestedRoutesBack(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.startAndSelect("issue-1", "the-loop execute skip:brainstorming")
	f.arts("issue-1").Set("requirements.md", "# r\n")
	_, err := f.rt.Complete(ctx, "issue-1", "", "agent")
	require.NoError(t, err)

	rep, err := f.rt.Advance(ctx, "issue-1", comment("dana", "changes please"))
	require.NoError(t, err)
	require.Equal(t, "changes-requested", rep.Outcome)
	require.Equal(t, "requirements", rep.CurrentNode)
	st := f.store.State("issue-1")
	require.Equal(t, 2, st.Record("requirements").Attempts, "re-entering counts an attempt")

	// The verdict that sent it back does not satisfy the gate for recompute.
	status, err := f.rt.Status(ctx, "issue-1", true)
	require.NoError(t, err)
	require.Equal(t, "requirements-approval", status.CurrentNode)

	// The revised requirements go back to the gate, which is reviewed anew.
	c, err := f.rt.Complete(ctx, "issue-1", "", "agent")
	require.NoError(t, err)
	require.Equal(t, "requirements-approval", c.CurrentNode)
	require.False(t, f.store.State("issue-1").Decisions.Has("requirements-approval"), "the stale verdict is cleared on re-entry")
	c, err = f.rt.Complete(ctx, "issue-1", "", "agent")
	require.NoError(t, err)
	require.Equal(t, graph.StatusWait, c.Status)
}

func TestDeclaredSkipsRouteAroundNodesWithoutRunningTheirHooks(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	_, err := f.rt.Start(ctx, "issue-1")
	require.NoError(t, err)
	res, err := f.rt.DeclareSkips(ctx, "issue-1", []string{"spec", "design", "bogus"}, "tiny fix", "@ops")
	require.NoError(t, err)
	require.Equal(t, []string{"brainstorming", "requirements", "requirements-approval"}, res.Declared)
	require.Equal(t, []graph.SkipRejection{
		{Token: "design", Why: "not a skippable node or shipped skip set"},
		{Token: "bogus", Why: "not a skippable node or shipped skip set"},
	}, res.Rejected)
	require.Len(t, f.audit.skips, 1)

	rep, err := f.rt.Advance(ctx, "issue-1", comment("dana", "the-loop execute"))
	require.NoError(t, err)
	require.Equal(t, "design", rep.CurrentNode)
	require.Equal(t, 0, f.calls.Calls("needs-file"), "no exit hook of a skipped node ran")
	require.Equal(t, []string{"phase-selection@phase-selection", "design@design"}, f.entries, "no entry hook of a skipped node ran")
	st := f.store.State("issue-1")
	for _, id := range []string{"brainstorming", "requirements", "requirements-approval", "critic"} {
		require.Equal(t, "skipped", st.Record(id).Outcome, id)
		require.Equal(t, 0, st.Record(id).Attempts, id)
	}
	require.Equal(t, 4, f.sink.Count("graph.node_skipped"))

	// A skip of a node already behind the pointer is rejected.
	res, err = f.rt.DeclareSkips(ctx, "issue-1", []string{"brainstorming"}, "late", "@ops")
	require.NoError(t, err)
	require.Empty(t, res.Declared)
	require.Contains(t, res.Rejected[0].Why, "a skip is a plan, not an amnesty")
}

func TestSkipsNeedAReason(t *testing.T) {
	f := newFixture(t)
	_, err := f.rt.DeclareSkips(context.Background(), "issue-1", []string{"brainstorming"}, "  ", "")
	require.ErrorIs(t, err, graph.ErrReasonRequired)
}

func TestSelectionDeclaresSkipsAndOptIns(t *testing.T) {
	f := newFixture(t)
	rep := f.startAndSelect("issue-1", "the-loop execute skip:brainstorming skip:design +critic")
	require.Equal(t, "requirements", rep.CurrentNode)
	st := f.store.State("issue-1")
	require.True(t, st.Skips.Has("brainstorming"))
	require.False(t, st.Skips.Has("design"), "a non-skippable node cannot be declared skipped by selection")
	require.True(t, st.OptIns.Has("critic"))
	d, ok := st.Decisions.Get("phase-selection")
	require.True(t, ok)
	require.Equal(t, "selected", d.Outcome)
	require.Equal(t, "work-item", st.Surface)
	require.Equal(t, 1, f.sink.Count("graph.skips_declared"))
	require.Equal(t, 1, f.sink.Count("graph.opt_ins_selected"))

	// Recompute honours the recorded selection: phase-selection passes.
	status, err := f.rt.Status(context.Background(), "issue-1", true)
	require.NoError(t, err)
	ps, _ := status.Node("phase-selection")
	require.Equal(t, graph.StatusPass, ps.Status)
	require.Equal(t, "requirements", status.CurrentNode)
}

func TestRepeatedIdenticalBlockEscalates(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.startAndSelect("issue-1", "the-loop execute")

	c, err := f.rt.Complete(ctx, "issue-1", "", "agent")
	require.NoError(t, err)
	require.Equal(t, graph.StatusBlock, c.Status)
	require.Contains(t, c.Messages, "required artifact is missing (docs/specs/issue-1/brainstorm.md)")
	require.Equal(t, 1, f.sink.Count("graph.blocked"))

	c, err = f.rt.Complete(ctx, "issue-1", "", "agent")
	require.NoError(t, err)
	require.Equal(t, graph.StepEscalated, c.Status)
	require.Contains(t, strings.Join(c.Messages, "\n"), "the same block twice in a row")
	st := f.store.State("issue-1")
	require.NotNil(t, st.Parked)
	require.True(t, st.Parked.Escalated)
	require.Equal(t, "brainstorming", st.CurrentNode, "escalation never moves the pointer")
	require.Equal(t, 1, f.sink.Count("graph.escalated"))
	require.Equal(t, 1, f.calls.Calls("escalation-notice"), "the escalation chain notified a human")

	// Parked: a further claim without a fix stays escalated, counts no
	// attempt and does not escalate again.
	attempts := f.store.State("issue-1").Record("brainstorming").Attempts
	c, err = f.rt.Complete(ctx, "issue-1", "", "agent")
	require.NoError(t, err)
	require.Equal(t, graph.StepEscalated, c.Status)
	require.Contains(t, strings.Join(c.Messages, "\n"), "parked until its block is fixed or a human acts")
	require.Equal(t, attempts, f.store.State("issue-1").Record("brainstorming").Attempts)
	require.Equal(t, 1, f.sink.Count("graph.escalated"))

	// Once the fix lands, the parking is lifted and the walk moves on
	// (issue 10, item 6: no stale reason, no force needed).
	f.arts("issue-1").Set("brainstorm.md", "x")
	c, err = f.rt.Complete(ctx, "issue-1", "", "agent")
	require.NoError(t, err)
	require.Equal(t, graph.StatusPass, c.Status)
	require.Equal(t, "requirements", c.CurrentNode)
	require.Contains(t, c.Messages, "brainstorming no longer blocks: the escalation is lifted")
	require.Nil(t, f.store.State("issue-1").Parked)
}

func TestEscalatedNodeCanBeEventMovedAndSelfForcedWithoutWarning(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.startAndSelect("issue-1", "the-loop execute")
	for range 2 {
		_, err := f.rt.Complete(ctx, "issue-1", "", "agent")
		require.NoError(t, err)
	}
	require.True(t, f.store.State("issue-1").Parked.Escalated)

	// Forcing the current node is a reset, not a walk outside the model.
	res, err := f.rt.Force(ctx, "issue-1", graph.ForceRequest{To: "brainstorming", Reason: "retry after the outage", Actor: "@ops"})
	require.NoError(t, err)
	require.Empty(t, res.Warnings)
	require.Nil(t, f.store.State("issue-1").Parked)

	// A new event still moves an escalated node on.
	for range 2 {
		_, err := f.rt.Complete(ctx, "issue-1", "", "agent")
		require.NoError(t, err)
	}
	require.True(t, f.store.State("issue-1").Parked.Escalated)
	f.arts("issue-1").Set("brainstorm.md", "x")
	rep, err := f.rt.Advance(ctx, "issue-1", comment("dana", "please retry"))
	require.NoError(t, err)
	require.Equal(t, "requirements", rep.CurrentNode)
}

func TestAttemptsReachingMaxAttemptsEscalate(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	_, err := f.rt.Start(ctx, "issue-1")
	require.NoError(t, err)
	_, err = f.rt.Force(ctx, "issue-1", graph.ForceRequest{To: "design", Reason: "testing escalation", Actor: "@ops"})
	require.NoError(t, err)
	// design has maxAttempts 2: entry (1) + one block (2) reaches it.
	c, err := f.rt.Complete(ctx, "issue-1", "", "agent")
	require.NoError(t, err)
	require.Equal(t, graph.StepEscalated, c.Status)
	require.Contains(t, strings.Join(c.Messages, "\n"), "2 attempts reached this node's limit of 2")
}

func TestForce(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	_, err := f.rt.Start(ctx, "issue-1")
	require.NoError(t, err)

	_, err = f.rt.Force(ctx, "issue-1", graph.ForceRequest{To: "design", Reason: "", Actor: "@ops"})
	require.ErrorIs(t, err, graph.ErrReasonRequired)
	require.Contains(t, err.Error(), "an unexplained override is refused")

	_, err = f.rt.Force(ctx, "issue-1", graph.ForceRequest{To: "desing", Reason: "typo", Actor: "@ops"})
	require.ErrorIs(t, err, graph.ErrUnknownNode)
	require.Contains(t, err.Error(), "declared nodes are: phase-selection, brainstorming, requirements")

	res, err := f.rt.Force(ctx, "issue-1", graph.ForceRequest{To: "design", Reason: "the spec lives elsewhere", Actor: "@ops"})
	require.NoError(t, err)
	require.Equal(t, "phase-selection", res.FromNode)
	require.Equal(t, []string{
		"phase-selection → design is not a declared edge; you are deliberately outside the model",
		"node 'phase-selection' is marked required — this force bypasses a guarantee the process treats as mandatory",
		"human gate 'phase-selection' is bypassed — no recorded human decision lets the work item past it",
		"human gate 'requirements-approval' is bypassed — no recorded human decision lets the work item past it",
	}, res.Warnings)
	st := f.store.State("issue-1")
	require.Equal(t, "design", st.CurrentNode)
	require.True(t, st.Record("design").Forced)
	require.Len(t, st.Forced, 1)
	require.Equal(t, "@ops", st.Forced[0].Actor)
	require.Contains(t, f.entries, "design@design", "force enters the target and runs its entry chain")
	require.Len(t, f.audit.forces, 1, "force is recorded in the execution log and on the ticket")
	require.Equal(t, 1, f.sink.Count("graph.forced"))

	// Force never forges a verdict.
	status, err := f.rt.Status(ctx, "issue-1", true)
	require.NoError(t, err)
	require.Equal(t, "phase-selection", status.CurrentNode)
	for _, n := range status.Nodes {
		require.False(t, n.Forced, "recompute ignores forced flags")
	}
	plain, err := f.rt.Status(ctx, "issue-1", false)
	require.NoError(t, err)
	d, _ := plain.Node("design")
	require.True(t, d.Forced)

	// Backwards force re-enters and re-runs the entry chain.
	_, err = f.rt.Force(ctx, "issue-1", graph.ForceRequest{To: "phase-selection", Reason: "redo selection", Actor: "@ops"})
	require.NoError(t, err)
	require.Equal(t, 2, f.store.State("issue-1").Record("phase-selection").Attempts)
	require.Equal(t, "phase-selection@phase-selection", f.entries[len(f.entries)-1])
}

// R10.9: forcing past any human gate — not only a required one — warns,
// naming each gate, and the warning reaches the audit trail (the force
// comment and the execution log are written from the record).
func TestForcePastAnyHumanGateWarnsNamingEachGate(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name, from, to string
		skip           []string
		gates          []string
	}{
		{"from a non-required gate forward", "requirements-approval", "design", nil, []string{"requirements-approval"}},
		{"over a gate from an agent node", "brainstorming", "critic", nil, []string{"requirements-approval"}},
		{"a declared-skipped gate is not bypassed", "brainstorming", "design", []string{"requirements-approval"}, nil},
		{"backwards bypasses nothing", "design", "requirements", nil, nil},
		{"in place bypasses nothing", "requirements-approval", "requirements-approval", nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			_, err := f.rt.Start(ctx, "issue-1")
			require.NoError(t, err)
			st := f.store.State("issue-1")
			st.CurrentNode = tc.from
			for _, n := range tc.skip {
				st.Skips.Set(n, graph.SkipDecl{Via: "cli", Token: n})
			}
			f.store.Put("issue-1", st)

			res, err := f.rt.Force(ctx, "issue-1", graph.ForceRequest{To: tc.to, Reason: "the reviewer is away", Actor: "@ops"})
			require.NoError(t, err)
			var gateWarnings []string
			for _, w := range res.Warnings {
				if strings.HasPrefix(w, "human gate ") {
					gateWarnings = append(gateWarnings, w)
				}
			}
			var want []string
			for _, g := range tc.gates {
				want = append(want, "human gate '"+g+"' is bypassed — no recorded human decision lets the work item past it")
			}
			require.Equal(t, want, gateWarnings)
			require.Len(t, f.audit.forces, 1)
			for _, w := range want {
				require.Contains(t, f.audit.forces[0].Warnings, w, "the force comment carries the warning")
				require.Contains(t, f.store.State("issue-1").Forced[0].Warnings, w, "state records it")
			}
		})
	}
}

func TestForceAuditFailureIsAWarning(t *testing.T) {
	f := newFixture(t)
	f.audit.fail = errors.New("ticket unreachable")
	res, err := f.rt.Force(context.Background(), "issue-1", graph.ForceRequest{To: "design", Reason: "why not", Actor: ""})
	require.NoError(t, err)
	require.Contains(t, res.Warnings[len(res.Warnings)-1], "could not record the audit trail: ticket unreachable")
	require.Equal(t, "design", f.store.State("issue-1").CurrentNode, "the override stands")
	require.Equal(t, "(shell)", f.store.State("issue-1").Forced[0].Actor)
}

func TestRecomputeIgnoresAHandEditedPointer(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.startAndSelect("issue-1", "the-loop execute skip:brainstorming")
	st := f.store.State("issue-1")
	st.CurrentNode = "design"
	st.Skips.Set("design", graph.SkipDecl{Via: "cli", Token: "design"}) // design is not skippable
	f.store.Put("issue-1", st)

	rep, err := f.rt.Status(ctx, "issue-1", true)
	require.NoError(t, err)
	require.Equal(t, "requirements", rep.CurrentNode)
	require.False(t, rep.OK)
	require.Nil(t, rep.Parked)
	d, _ := rep.Node("design")
	require.Equal(t, graph.StatusBlock, d.Status)
	require.Contains(t, d.Messages, "graph state declares a skip on this node, which is not skippable — the declaration is refused and has no effect")

	plain, err := f.rt.Status(ctx, "issue-1", false)
	require.NoError(t, err)
	require.Equal(t, "design", plain.CurrentNode)
}

func TestStatusRecomputeOnACompleteWalkReportsTheLastNode(t *testing.T) {
	reg := graphtest.Registry(map[string]graph.Hook{"ok": graphtest.Returning(graph.Pass(nil))})
	g := graphtest.NewGraph("two").
		Node(graph.NodeSpec{ID: "a", Exit: graphtest.Hooks("ok")}).
		Node(graph.NodeSpec{ID: "b", Terminal: true}).
		Edge("a", "pass", "b").MustCompile(reg)
	rt, err := graph.New(g, graph.Options{Store: graphtest.NewStore(), Items: graphtest.NewItems()})
	require.NoError(t, err)
	rep, err := rt.Status(context.Background(), "x-1", true)
	require.NoError(t, err)
	require.Equal(t, "b", rep.CurrentNode)
	require.True(t, rep.OK)
}

func TestTerminalNodeCompletesTheWalk(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	_, err := f.rt.Force(ctx, "issue-1", graph.ForceRequest{To: "done", Reason: "jump", Actor: "@ops"})
	require.NoError(t, err)
	c, err := f.rt.Complete(ctx, "issue-1", "", "agent")
	require.NoError(t, err)
	require.Equal(t, graph.StatusPass, c.Status)
	require.False(t, c.Moved)
	require.Equal(t, 1, f.sink.Count("graph.completed"))
}

func TestNoDeclaredEdgeEscalates(t *testing.T) {
	reg := graphtest.Registry(map[string]graph.Hook{"odd": graphtest.Returning(graph.PassWith("sideways", nil))})
	g := graphtest.NewGraph("x").
		Node(graph.NodeSpec{ID: "a", Exit: graphtest.Hooks("odd")}).
		Node(graph.NodeSpec{ID: "b"}).Edge("a", "pass", "b").MustCompile(reg)
	store := graphtest.NewStore()
	sink := &graphtest.Sink{}
	rt, err := graph.New(g, graph.Options{Store: store, Items: graphtest.NewItems(), Sink: sink})
	require.NoError(t, err)
	ctx := context.Background()
	_, err = rt.Start(ctx, "w")
	require.NoError(t, err)
	rep, err := rt.Advance(ctx, "w", nil)
	require.NoError(t, err)
	require.Equal(t, graph.StepEscalated, rep.Status)
	require.Contains(t, rep.Messages, "no declared edge from a on outcome 'sideways'")
	require.Equal(t, "no declared edge from a on 'sideways'", store.State("w").Parked.Reason)
	require.Equal(t, 1, sink.Count("graph.no_edge"))
}

func TestAdvanceOnANeverStartedItemIsRefused(t *testing.T) {
	f := newFixture(t)
	_, err := f.rt.Advance(context.Background(), "issue-9", nil)
	require.ErrorIs(t, err, graph.ErrNotStarted)
}

// The kernel's errors state facts an embedder can branch on; the commands
// that get past them are the caller's (loop.ExplainGraphError names
// loopctl's).
func TestKernelErrorsAreTypedFactsWithoutProductCommands(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	_, err := f.rt.Advance(ctx, "issue-9", nil)
	require.ErrorIs(t, err, graph.ErrNotStarted)
	require.Equal(t, "issue-9: work item has not entered the graph", err.Error())

	st := graph.NewState("issue-2")
	st.CurrentNode = "retired-node"
	f.store.Put("issue-2", st)
	_, err = f.rt.Advance(ctx, "issue-2", nil)
	require.ErrorIs(t, err, graph.ErrUnknownNode)
	var une *graph.UnknownNodeError
	require.ErrorAs(t, err, &une)
	require.Equal(t, graph.UnknownNodeError{WorkItem: "issue-2", Node: "retired-node", Graph: f.rt.Graph().Name, Declared: f.rt.Graph().IDs(), Current: true}, *une)
	require.Contains(t, err.Error(), "the current node 'retired-node' is not declared in graph")

	_, err = f.rt.Force(ctx, "issue-2", graph.ForceRequest{To: "nowhere", Reason: "r"})
	require.ErrorAs(t, err, &une)
	require.False(t, une.Current)
	require.Equal(t, "nowhere", une.Node)

	_, err = f.rt.Force(ctx, "issue-2", graph.ForceRequest{To: "design"})
	require.ErrorIs(t, err, graph.ErrReasonRequired)
	_, skipErr := f.rt.DeclareSkips(ctx, "issue-2", []string{"design"}, " ", "")
	require.ErrorIs(t, skipErr, graph.ErrReasonRequired)
	for _, e := range []error{err, skipErr} {
		require.NotContains(t, e.Error(), "loopctl")
		require.NotContains(t, e.Error(), "--reason")
	}
}

func TestFailingHooksBlockNeverPass(t *testing.T) {
	cases := []struct {
		name string
		hook graph.Hook
		ref  graph.HookRef
		want string
	}{
		{"panic", func(context.Context, *graph.HookContext) graph.HookResult { panic("boom") }, graph.HookRef{Hook: "h"}, "the h hook failed to run: boom"},
		{"nil map write panic", func(context.Context, *graph.HookContext) graph.HookResult {
			var m map[string]int
			//lint:ignore SA5000 the panic is the point of this case
			m["x"] = 1
			return graph.Pass(nil)
		}, graph.HookRef{Hook: "h"}, "the h hook failed to run: assignment to entry in nil map"},
		{"overrun", func(ctx context.Context, _ *graph.HookContext) graph.HookResult {
			time.Sleep(2 * time.Second) // ignores ctx on purpose
			return graph.Pass(nil)
		}, graph.HookRef{Hook: "h", Timeout: "20ms"}, "the h hook did not finish within 20ms"},
		{"invalid status", graphtest.Returning(graph.HookResult{Status: "maybe"}), graph.HookRef{Hook: "h"}, `the h hook returned an invalid status "maybe"`},
		{"blocking integration failure", graphtest.Returning(graph.HookResult{Status: graph.StatusPass, Degraded: "github: 502", Retriable: true}), graph.HookRef{Hook: "h", Blocking: true}, "declared blocking"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			reg := graphtest.Registry(map[string]graph.Hook{"h": tc.hook})
			g := graphtest.NewGraph("x").
				Node(graph.NodeSpec{ID: "a", Exit: []graph.HookRef{tc.ref}}).
				Node(graph.NodeSpec{ID: "b"}).Edge("a", "pass", "b").MustCompile(reg)
			rt, err := graph.New(g, graph.Options{Store: graphtest.NewStore(), Items: graphtest.NewItems()})
			require.NoError(t, err)
			ctx := context.Background()
			_, err = rt.Start(ctx, "w")
			require.NoError(t, err)
			rep, err := rt.Advance(ctx, "w", nil)
			require.NoError(t, err)
			require.Equal(t, graph.StatusBlock, rep.Status)
			require.Equal(t, "a", rep.CurrentNode)
			require.Contains(t, strings.Join(rep.Messages, "\n"), tc.want)
		})
	}
}

func TestDegradedSideEffectIsReportedNotBlocking(t *testing.T) {
	reg := graphtest.Registry(map[string]graph.Hook{
		"label": graphtest.Returning(graph.HookResult{Status: graph.StatusPass, Data: map[string]any{"applied": false}, Degraded: "github: 500 Internal Server Error", Retriable: true}),
	})
	g := graphtest.NewGraph("x").
		Node(graph.NodeSpec{ID: "a", Entry: graphtest.Hooks("label")}).
		Node(graph.NodeSpec{ID: "b", Entry: graphtest.Hooks("label")}).Edge("a", "pass", "b").MustCompile(reg)
	sink := &graphtest.Sink{}
	rt, err := graph.New(g, graph.Options{Store: graphtest.NewStore(), Items: graphtest.NewItems(), Sink: sink})
	require.NoError(t, err)
	ctx := context.Background()
	rep, err := rt.Start(ctx, "w")
	require.NoError(t, err)
	require.Contains(t, rep.Messages, "warning: label did not complete: github: 500 Internal Server Error")
	rep, err = rt.Advance(ctx, "w", nil)
	require.NoError(t, err)
	require.Equal(t, "b", rep.CurrentNode, "an outage never wedges the graph")
	require.Equal(t, 2, sink.Count("graph.hook_degraded"))
}

func TestCheckModeIsReadOnly(t *testing.T) {
	var sawMode graph.Mode
	var writeErr error
	var integ graph.Integrations = fakeIntegrations{}
	reg := graphtest.Registry(map[string]graph.Hook{
		"writer": func(_ context.Context, hc *graph.HookContext) graph.HookResult {
			sawMode = hc.Mode
			writeErr = hc.Artifacts.WriteFile("x.md", []byte("x"))
			if hc.Integrations != nil {
				return graph.Block(graph.Finding("integrations reachable under check", ""))
			}
			return graph.Pass(nil)
		},
	})
	g := graphtest.NewGraph("x").Node(graph.NodeSpec{ID: "a", Exit: graphtest.Hooks("writer")}).MustCompile(reg)
	items := graphtest.NewItems()
	rt, err := graph.New(g, graph.Options{Store: graphtest.NewStore(), Items: items, Integrations: integ})
	require.NoError(t, err)
	rep, err := rt.Status(context.Background(), "w", true)
	require.NoError(t, err)
	require.Equal(t, graph.ModeCheck, sawMode)
	require.Error(t, writeErr)
	require.Equal(t, "", items.Artifacts("w").Get("x.md"))
	require.Equal(t, graph.StatusPass, rep.Nodes[0].Status)
}

type fakeIntegrations struct{}

func (fakeIntegrations) Call(context.Context, graph.Operation, map[string]any) (map[string]any, error) {
	return nil, nil
}

func TestCorruptStateIsReconstructedAndPreserved(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.arts("issue-1").Set("brainstorm.md", "b")
	f.store.PutRaw("issue-1", []byte(`{"version": 1, "currentNode": "des`))

	rep, err := f.rt.Status(ctx, "issue-1", false)
	require.NoError(t, err)
	require.Equal(t, "phase-selection", rep.CurrentNode, "reconstructed by recompute")
	require.Contains(t, rep.Warnings[0], "graph-state.json could not be parsed")
	require.Empty(t, f.store.Corrupt("issue-1"), "a read never rewrites the file")

	// The next save preserves the unparseable bytes beside the new state.
	_, err = f.rt.Force(ctx, "issue-1", graph.ForceRequest{To: "requirements", Reason: "recover", Actor: "@ops"})
	require.NoError(t, err)
	require.Len(t, f.store.Corrupt("issue-1"), 1)
	require.Equal(t, `{"version": 1, "currentNode": "des`, string(f.store.Corrupt("issue-1")[0]))
	require.Equal(t, "requirements", f.store.State("issue-1").CurrentNode)
}

func TestFiftyConcurrentClaimsMakeExactlyOneTransition(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.startAndSelect("issue-1", "the-loop execute")
	f.arts("issue-1").Set("brainstorm.md", "b")
	rt, err := graph.New(f.g, graph.Options{Store: f.store, Items: f.items, Sink: f.sink, Clock: f.clock, LockTimeout: 10 * time.Second})
	require.NoError(t, err)
	var moved atomic.Int32
	var wg sync.WaitGroup
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			c, err := rt.Complete(ctx, "issue-1", "brainstorming", fmt.Sprintf("agent-%d", i))
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
	require.Equal(t, 1, f.sink.Count("graph.advanced")-1) // minus the selection's advance
	require.Equal(t, "requirements", f.store.State("issue-1").CurrentNode)
}

// Every verb that takes the lock reports a lock that stays held the same
// way: an error wrapping ErrBusy, and nothing changed.
func TestBusyLockIsErrBusyForEveryVerb(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.startAndSelect("issue-1", "the-loop execute")
	before := f.store.State("issue-1").Clone()
	unlock, err := f.store.Lock(ctx, "issue-1", time.Second)
	require.NoError(t, err)
	defer unlock()
	verbs := map[string]func() error{
		"Complete": func() error { _, err := f.rt.Complete(ctx, "issue-1", "", "agent"); return err },
		"Advance":  func() error { _, err := f.rt.Advance(ctx, "issue-1", nil); return err },
		"Start":    func() error { _, err := f.rt.Start(ctx, "issue-1"); return err },
		"Force": func() error {
			_, err := f.rt.Force(ctx, "issue-1", graph.ForceRequest{To: "design", Reason: "r"})
			return err
		},
		"DeclareSkips": func() error { _, err := f.rt.DeclareSkips(ctx, "issue-1", []string{"design"}, "r", ""); return err },
		"BindSession":  func() error { return f.rt.BindSession(ctx, "issue-1", graph.SessionBinding{ID: "s"}) },
	}
	for name, verb := range verbs {
		t.Run(name, func(t *testing.T) {
			require.ErrorIs(t, verb(), graph.ErrBusy)
		})
	}
	require.Equal(t, before, f.store.State("issue-1"), "a busy verb changes nothing")
}

func TestEventOrderForASelectionWithSkips(t *testing.T) {
	f := newFixture(t)
	f.startAndSelect("issue-1", "the-loop execute skip:brainstorming")
	require.Equal(t, []string{"graph.started", "graph.skips_declared", "graph.node_skipped", "graph.advanced"}, f.sink.Names())
	ev := f.sink.Events()[3]
	v, _ := ev.Get("to")
	require.Equal(t, "requirements", v)
	wi, _ := ev.Get("work_item")
	require.Equal(t, "test:issue-1", wi)
}

func TestGateSessionResolution(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.startAndSelect("issue-1", "the-loop execute skip:brainstorming")
	alive := true
	require.NoError(t, f.rt.BindSession(ctx, "issue-1", graph.SessionBinding{ID: "s-1", Runner: "tmux", Alive: &alive}))
	f.arts("issue-1").Set("requirements.md", "r")
	_, err := f.rt.Complete(ctx, "issue-1", "", "agent")
	require.NoError(t, err)
	var found bool
	for _, e := range f.sink.Events() {
		if e.Name == "graph.gate_session" {
			found = true
			res, _ := e.Get("resolution")
			require.Equal(t, "new", res) // the fixture gate declares no session: inherit
		}
	}
	require.True(t, found)
	require.Equal(t, "s-1", f.store.State("issue-1").Session.ID)
}

// R8.3: a missing graph-state.json for a work item whose spec directory
// holds artifacts is reconstructed by recompute with a warning, not read as
// "not started"; without artifacts the item has simply not started.
func TestMissingStateWithArtifactsIsReconstructed(t *testing.T) {
	has := func(_ context.Context, hc *graph.HookContext) graph.HookResult {
		if _, err := fs.Stat(hc.Artifacts, hc.Node.Produces[0]); err != nil {
			return graph.Block(graph.Finding("required artifact is missing", hc.Node.Produces[0]))
		}
		return graph.Pass(nil)
	}
	reg := graphtest.Registry(map[string]graph.Hook{"has": has})
	g := graphtest.NewGraph("r83").
		Node(graph.NodeSpec{ID: "a", Produces: []string{"a.md"}, Exit: graphtest.Hooks("has")}).
		Node(graph.NodeSpec{ID: "b", Produces: []string{"b.md"}, Exit: graphtest.Hooks("has")}).
		Node(graph.NodeSpec{ID: "c", Terminal: true}).
		Edge("a", "pass", "b").Edge("b", "pass", "c").MustCompile(reg)
	items, sink, store := graphtest.NewItems(), &graphtest.Sink{}, graphtest.NewStore()
	rt, err := graph.New(g, graph.Options{Store: store, Items: items, Sink: sink})
	require.NoError(t, err)
	ctx := context.Background()

	fresh, err := rt.Status(ctx, "empty", false)
	require.NoError(t, err)
	require.Empty(t, fresh.Warnings, "no artifacts: not started, nothing to reconstruct")
	require.Zero(t, sink.Count("graph.state_reconstructed"))

	items.Artifacts("w").Set("a.md", "done")
	rep, err := rt.Status(ctx, "w", false)
	require.NoError(t, err)
	require.Equal(t, "b", rep.CurrentNode, "the pointer goes where the artifacts put it")
	require.Equal(t, []string{"graph-state.json is missing although the spec directory holds a.md; the state was reconstructed from the artifacts (current node: b)"}, rep.Warnings)
	require.Equal(t, 1, sink.Count("graph.state_reconstructed"))
	recomputed, err := rt.Status(ctx, "w", true)
	require.NoError(t, err)
	require.Equal(t, "b", recomputed.CurrentNode)
	require.Equal(t, rep.Warnings, recomputed.Warnings, "recompute warns the same way without evaluating twice")
	_, err = store.Load(ctx, "w")
	require.ErrorIs(t, err, graph.ErrNoState, "a read never writes the state")

	// The live verbs do not reconstruct: a claim on an item that never
	// started is refused, and Start begins the walk at the start node.
	claim, err := rt.Complete(ctx, "w", "a", "@agent")
	require.NoError(t, err)
	require.Equal(t, graph.StepRefused, claim.Status)
	require.Equal(t, "not-started", claim.Reason)
	_, err = rt.Start(ctx, "w")
	require.NoError(t, err)
	require.Equal(t, "a", store.State("w").CurrentNode)
}

// R2.5 / R8.7: a hook's skip is recorded — in the node's record and in the
// event log — and graph.parked names the hook that waits.
func TestHookSkipsAreRecordedAndParkedNamesTheWaitingHook(t *testing.T) {
	reg := graphtest.Registry(map[string]graph.Hook{
		"nothing-to-do": graphtest.Returning(graph.Skip("no artifact declared")),
		"approve":       graphtest.Returning(graph.Wait("no authorized feedback yet")),
		"entry-skip":    graphtest.Returning(graph.Skip("")),
	})
	g := graphtest.NewGraph("r25").
		Node(graph.NodeSpec{ID: "a", Entry: graphtest.Hooks("entry-skip"), Exit: graphtest.Hooks("nothing-to-do", "approve")}).
		Node(graph.NodeSpec{ID: "b", Terminal: true}).
		Edge("a", "pass", "b").MustCompile(reg)
	sink, store := &graphtest.Sink{}, graphtest.NewStore()
	rt, err := graph.New(g, graph.Options{Store: store, Items: graphtest.NewItems(), Sink: sink})
	require.NoError(t, err)
	ctx := context.Background()
	_, err = rt.Start(ctx, "w")
	require.NoError(t, err)
	rep, err := rt.Advance(ctx, "w", nil)
	require.NoError(t, err)
	require.Equal(t, graph.StatusWait, rep.Status)

	st := store.State("w")
	require.Equal(t, []string{"nothing-to-do"}, st.Record("a").SkippedHooks)
	require.NotNil(t, st.Parked)
	require.Equal(t, "approve", st.Parked.Hook)

	fieldsOf := func(e graph.LogEvent) map[string]any {
		m := map[string]any{}
		for _, f := range e.Fields {
			if f.Key != "work_item" && f.Key != "seq" {
				m[f.Key] = f.Value
			}
		}
		return m
	}
	var skipped []map[string]any
	var parked map[string]any
	for _, e := range sink.Events() {
		switch e.Name {
		case "graph.hook_skipped":
			skipped = append(skipped, fieldsOf(e))
		case "graph.parked":
			parked = fieldsOf(e)
		}
	}
	require.Equal(t, []map[string]any{
		{"node": "a", "boundary": "entry", "hook": "entry-skip"},
		{"node": "a", "boundary": "exit", "hook": "nothing-to-do"},
	}, skipped)
	require.Equal(t, map[string]any{"node": "a", "hook": "approve"}, parked)
}

// Options.Deliver reaches live hooks as HookContext.Deliver, the same
// function with the same shape; check chains get none.
func TestDeliverReachesLiveHooksOnly(t *testing.T) {
	var delivered []string
	deliver := func(_ context.Context, workItem, text string) (bool, error) {
		delivered = append(delivered, workItem+": "+text)
		return true, nil
	}
	var checkSaw []bool
	reg := graphtest.Registry(map[string]graph.Hook{
		"assign": func(ctx context.Context, hc *graph.HookContext) graph.HookResult {
			if hc.Deliver == nil {
				return graph.Block(graph.Finding("no deliverer", ""))
			}
			ok, err := hc.Deliver(ctx, hc.WorkItem.ID, "work on "+hc.Node.ID)
			if err != nil || !ok {
				return graph.Block(graph.Finding("not delivered", ""))
			}
			return graph.Pass(nil)
		},
		"look": func(_ context.Context, hc *graph.HookContext) graph.HookResult {
			checkSaw = append(checkSaw, hc.Deliver != nil)
			return graph.Pass(nil)
		},
	})
	g := graphtest.NewGraph("x").
		Node(graph.NodeSpec{ID: "a", Entry: graphtest.Hooks("assign"), Exit: graphtest.Hooks("look")}).
		Node(graph.NodeSpec{ID: "b"}).Edge("a", "pass", "b").MustCompile(reg)
	rt, err := graph.New(g, graph.Options{Store: graphtest.NewStore(), Items: graphtest.NewItems(), Deliver: deliver})
	require.NoError(t, err)
	ctx := context.Background()
	_, err = rt.Start(ctx, "w-1")
	require.NoError(t, err)
	_, err = rt.Status(ctx, "w-1", true)
	require.NoError(t, err)
	require.Equal(t, []string{"w-1: work on a"}, delivered)
	require.Equal(t, []bool{false}, checkSaw, "a check chain never delivers")
}

// The runtime reads typed facts only: the old magic Data keys are plain
// data for later hooks, and route, degrade and record nothing.
func TestDataKeysAreNotFacts(t *testing.T) {
	reg := graphtest.Registry(map[string]graph.Hook{"h": graphtest.Returning(graph.Pass(map[string]any{
		"outcome": "sideways", "error": "boom", "decision": "phase-selection", "by": "@mallory",
		"declaredSkips": map[string]any{"b": map[string]any{}},
	}))})
	g := graphtest.NewGraph("x").
		Node(graph.NodeSpec{ID: "a", Exit: graphtest.Hooks("h")}).
		Node(graph.NodeSpec{ID: "b", Skippable: true}).Node(graph.NodeSpec{ID: "c"}).
		Edge("a", "pass", "b").Edge("b", "pass", "c").Edge("b", "skipped", "c").MustCompile(reg)
	store := graphtest.NewStore()
	sink := &graphtest.Sink{}
	rt, err := graph.New(g, graph.Options{Store: store, Items: graphtest.NewItems(), Sink: sink})
	require.NoError(t, err)
	ctx := context.Background()
	_, err = rt.Start(ctx, "w")
	require.NoError(t, err)
	rep, err := rt.Advance(ctx, "w", nil)
	require.NoError(t, err)
	require.Equal(t, graph.StatusPass, rep.Status)
	require.Equal(t, "pass", rep.Outcome)
	require.Equal(t, "b", rep.CurrentNode)
	st := store.State("w")
	require.Zero(t, st.Decisions.Len())
	require.Zero(t, st.Skips.Len())
	require.Zero(t, sink.Count("graph.hook_degraded"))
}
