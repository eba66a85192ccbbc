package hooks_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/graph/graphfile"
	"github.com/theloop-dev/theloop/graph/graphtest"
	"github.com/theloop-dev/theloop/hooks"
)

func event(comments ...graph.Comment) *graph.Event {
	return &graph.Event{ID: "evt-1", Kind: "issue_comment", Comments: comments}
}

func TestClassify(t *testing.T) {
	cases := []struct {
		in   []string
		want string
	}{
		{[]string{"Approved"}, hooks.OutcomeApproved},
		{[]string{"LGTM!"}, hooks.OutcomeApproved},
		{[]string{"looks good, ship it"}, hooks.OutcomeApproved},
		{[]string{"definitely approved"}, hooks.OutcomeApproved},
		{[]string{"Approved, but rename the flag"}, hooks.OutcomeApprovedWithComments},
		{[]string{"approved. nit: typo in the table"}, hooks.OutcomeApprovedWithComments},
		{[]string{"lgtm", "also consider caching"}, hooks.OutcomeApprovedWithComments},
		{[]string{"Changes requested: the retry budget is missing"}, hooks.OutcomeChangesRequested},
		{[]string{"I request changes"}, hooks.OutcomeChangesRequested},
		{[]string{"please change the table"}, hooks.OutcomeChangesRequested},
		{[]string{"approved", "wait, rejected — security section is wrong"}, hooks.OutcomeChangesRequested},
		// Negation-safe: these never approve.
		{[]string{"not approved"}, ""},
		{[]string{"This is NOT approved yet."}, ""},
		{[]string{"don't ship it"}, ""},
		{[]string{"I can't approve this"}, ""},
		{[]string{"it does not look good; never approve this"}, ""},
		{[]string{"unapproved draft"}, ""},
		{[]string{"approved?"}, ""},
		{[]string{"Is this approved? I have not read it"}, ""},
		{[]string{"no changes requested, approved"}, hooks.OutcomeApproved},
		// Indecisive.
		{[]string{"I'll read it tomorrow"}, ""},
		{[]string{"what does section 3 mean?"}, ""},
		{[]string{""}, ""},
	}
	for _, tc := range cases {
		require.Equal(t, tc.want, hooks.Classify(tc.in), "%q", tc.in)
	}
}

func TestClassifyFeedbackReadsOnlyAuthorizedHumans(t *testing.T) {
	hc := ctxFor(specFolder(t, ""), &graph.Node{ID: "requirements-approval", Actor: graph.ActorHuman})
	r := run(t, "classify-feedback", hc, nil)
	require.Equal(t, graph.StatusWait, r.Status, "no event (a claim, a check) waits")

	hc.Event = event(
		graph.Comment{ID: "1", Author: "mallory", Body: "approved"},
		graph.Comment{ID: "2", Author: "Dana", Body: "approved"}, // case-sensitive allowlist
		graph.Comment{ID: "3", Author: "dana", Body: hooks.Mark("approved")},
	)
	r = run(t, "classify-feedback", hc, nil)
	require.Equal(t, graph.StatusWait, r.Status)
	require.Equal(t, []string{"no authorized feedback yet"}, texts(r))

	hc.Event = event(graph.Comment{ID: "4", Author: "dana", Body: "Approved, but nit: rename X"})
	r = run(t, "classify-feedback", hc, nil)
	require.Equal(t, graph.StatusPass, r.Status)
	require.Equal(t, hooks.OutcomeApprovedWithComments, r.Outcome())
	require.Equal(t, &graph.DecisionFact{By: "@dana", Comment: "4"}, r.Decision, "the verdict's provenance, for the runtime to record")

	hc.Config["authorizedUsers"] = []any{}
	r = run(t, "classify-feedback", hc, nil)
	require.Equal(t, graph.StatusWait, r.Status, "an empty allowlist authorizes nobody")
}

// The approval chain: classify-feedback → lock-artifacts → record-feedback.
func TestApprovalChainLocksAndRecords(t *testing.T) {
	a := specFolder(t, "draft")
	hc := ctxFor(a, &graph.Node{ID: "requirements-approval", Actor: graph.ActorHuman})
	hc.Event = event(graph.Comment{ID: "7", Author: "dana", Body: "Approved, but name the retry budget."}, graph.Comment{ID: "8", Author: "lee", Body: "lgtm"})
	chain := []graph.BoundHook{bound(t, "classify-feedback", nil), bound(t, "lock-artifacts", graph.Values{"artifacts": []any{"requirements.md|bugfix.md"}}), bound(t, "record-feedback", graph.Values{"into": "requirements.md|bugfix.md"})}
	out := graph.RunChain(t.Context(), chain, hc)
	require.True(t, out.Satisfied(), out.Render())
	require.Equal(t, hooks.OutcomeApprovedWithComments, out.Outcome())

	text := a.Get("requirements.md")
	fm, _ := hooks.FrontMatter(text)
	require.Equal(t, "approved", fm["status"])
	require.Equal(t, []any{"@dana", "@lee"}, fm["approvedBy"])
	require.True(t, strings.HasPrefix(text, "---\nstatus: approved\napprovedBy: [\"@dana\", \"@lee\"]\ndecision: \"requirements-approval/8\"\n---\n# Requirements: draft\n"), text)
	require.True(t, strings.HasSuffix(text, `## Security considerations

## Review comments

### 2026-05-04 — approved-with-comments

**@dana** wrote:

Approved, but name the retry budget.

**@lee** wrote:

lgtm
`), text)

	// A second recording appends under the same heading, never rewriting.
	hc.Event = event(graph.Comment{ID: "9", Author: "dana", Body: ""})
	r := runAfter(t, graph.PassWith("approved", map[string]any{"comments": []any{map[string]any{"author": "dana", "body": ""}}}), "record-feedback", hc, graph.Values{"into": "requirements.md"})
	require.Equal(t, graph.StatusPass, r.Status)
	require.True(t, strings.HasSuffix(a.Get("requirements.md"), "lgtm\n\n### 2026-05-04 — approved\n\n**@dana** left no comment text.\n"))
	require.Equal(t, 1, strings.Count(a.Get("requirements.md"), "## Review comments"))
}

func bound(t *testing.T, name string, params graph.Values) graph.BoundHook {
	spec, ok := shipped.Lookup(name)
	require.True(t, ok)
	if params == nil {
		params = graph.Values{}
	}
	return graph.BoundHook{Name: name, Params: params, Spec: spec}
}

func TestLockArtifacts(t *testing.T) {
	approved := graph.PassWith("approved", map[string]any{"comments": []any{map[string]any{"author": "dana", "body": "approved"}}})
	changes := graph.PassWith("changes-requested", map[string]any{"comments": []any{map[string]any{"author": "dana", "body": "changes requested"}}})

	a := specFolder(t, "complete")
	a.Set("design.md", "---\ntitle: Export\nstatus: draft\napprovedBy:\n  - \"@old\"\nowner: lee\n---\n# Design\n")
	hc := ctxFor(a, &graph.Node{ID: "design-approval", Actor: graph.ActorHuman})
	r := runAfter(t, approved, "lock-artifacts", hc, graph.Values{"artifacts": []any{"design.md"}})
	require.Equal(t, graph.StatusPass, r.Status, texts(r))
	require.Equal(t, "---\ntitle: Export\nstatus: approved\napprovedBy: [\"@dana\"]\nowner: lee\ndecision: \"design-approval@2026-05-04T10:00:00+00:00\"\n---\n# Design\n", a.Get("design.md"), "other keys kept in place, the decision named")

	a.Set("design.md", "# Design\n")
	r = runAfter(t, changes, "lock-artifacts", hc, graph.Values{"artifacts": []any{"design.md"}})
	require.Equal(t, graph.StatusSkip, r.Status)
	require.Equal(t, "# Design\n", a.Get("design.md"), "changes requested locks nothing")

	r = runAfter(t, approved, "lock-artifacts", hc, graph.Values{"artifacts": []any{"testing-plan.md"}})
	require.Equal(t, graph.StatusBlock, r.Status)
	require.Contains(t, texts(r)[0], "the approved artifact is missing")

	// A write that does not land blocks.
	hc.Artifacts = readOnlyArtifacts{a}
	r = runAfter(t, approved, "lock-artifacts", hc, graph.Values{"artifacts": []any{"design.md"}})
	require.Equal(t, graph.StatusBlock, r.Status)
	require.Contains(t, texts(r)[0], "cannot lock: artifact could not be written")
}

type readOnlyArtifacts struct{ *graphtest.Artifacts }

func (readOnlyArtifacts) WriteFile(string, []byte) error { return errReadOnly }

var errReadOnly = &graphError{"read-only file system"}

type graphError struct{ s string }

func (e *graphError) Error() string { return e.s }

func TestSetFrontMatterLock(t *testing.T) {
	cases := map[string]string{
		"# Doc\n":                         "---\nstatus: approved\napprovedBy: [\"@a\"]\n---\n# Doc\n",
		"---\nstatus: draft\n---\nbody\n": "---\nstatus: approved\napprovedBy: [\"@a\"]\n---\nbody\n",
		"---\ntitle: x\n---\n":            "---\ntitle: x\nstatus: approved\napprovedBy: [\"@a\"]\n---\n",
	}
	for in, want := range cases {
		got, ok := hooks.SetFrontMatterLock(in, []string{"@a"})
		require.True(t, ok)
		require.Equal(t, want, got, in)
	}
	for _, bad := range []string{"---\n- a list\n---\nx", "---\nnot: [closed\n---\n", "---\nstatus: x\nno end"} {
		got, ok := hooks.SetFrontMatterLock(bad, []string{"@a"})
		require.False(t, ok, bad)
		require.Equal(t, bad, got)
	}
}

func TestPhaseSelection(t *testing.T) {
	g, err := graphfile.Load("mini.yaml", []byte(`
name: pdlc-work-item-loop
start: phase-selection
nodes:
  - {id: phase-selection, actor: human, required: true}
  - {id: brainstorming, skippable: true}
  - {id: design, skippable: true}
  - {id: critic, optIn: true, description: "a second   opinion"}
  - {id: security-review, required: true}
  - {id: complete, terminal: true}
edges:
  - {from: phase-selection, on: selected, to: brainstorming}
  - {from: brainstorming, on: skipped, to: design}
  - {from: brainstorming, on: pass, to: design}
  - {from: design, on: skipped, to: critic}
  - {from: design, on: pass, to: critic}
  - {from: critic, on: skipped, to: security-review}
  - {from: critic, on: pass, to: security-review}
  - {from: security-review, on: pass, to: complete}
`), shipped)
	require.NoError(t, err)
	ps, _ := g.Node("phase-selection")
	tickets := graphtest.NewTickets()
	ref := "github:acme/widgets#9"
	hc := ctxFor(specFolder(t, ""), ps)
	hc.Graph = g
	hc.Integrations = tickets
	hc.Boundary = graph.Entry

	r := run(t, "post-phase-selection", hc, nil)
	require.Equal(t, graph.StatusPass, r.Status)
	checklist := tickets.Comments(ref)[0]
	for _, row := range []string{"- [x] brainstorming\n", "- [x] design\n", "- [ ] critic — a second opinion\n", "- security-review\n", "- [ ] `outer-loop-on-pull-request`", "- [x] `pr-sessions-cross-repository`", hooks.SelectionMarker} {
		require.Contains(t, checklist, row)
	}
	require.NotContains(t, checklist, "- complete\n", "terminal nodes are not listed")
	r = run(t, "post-phase-selection", hc, nil)
	require.Equal(t, "already asked", r.DataString("reason"))
	require.Len(t, tickets.Comments(ref), 1, "posted once")

	// The human unticks design on the checklist itself, ticks the opt-in,
	// and replies with the keyword only.
	tickets.Comment(ref, "dana", strings.NewReplacer("- [x] design", "- [ ] design", "- [ ] critic", "- [x] critic").Replace(checklist))
	hc.Boundary = graph.Exit
	hc.Event = event(graph.Comment{ID: "c9", Author: "dana", Body: "the-loop execute"})
	r = run(t, "classify-phase-selection", hc, nil)
	require.Equal(t, graph.StatusPass, r.Status, texts(r))
	require.Equal(t, "selected", r.Outcome())
	require.NotNil(t, r.Decision)
	require.Equal(t, "phase-selection", r.Decision.Key)
	require.Equal(t, "@dana", r.Decision.By)
	require.Equal(t, "c9", r.Decision.Comment)
	require.NotNil(t, r.Decision.FrozenGraph)
	require.Equal(t, "checklist", r.Decision.Via)
	require.Equal(t, map[string]graph.SkipDecl{"design": {Via: "selection", Token: "design", By: "@dana"}}, r.Decision.Skips)
	require.Equal(t, map[string]graph.OptInSelection{"critic": {Via: "selection", Token: "critic", By: "@dana"}}, r.Decision.OptIns)
	require.Equal(t, "work-item", r.Decision.Surface)
	require.Equal(t, "cross-repository", r.Decision.SessionPerPr)
	confirm := tickets.Comments(ref)[len(tickets.Comments(ref))-1]
	require.Contains(t, confirm, "Skipping, as declared by @dana: `design`")
	require.Contains(t, confirm, "Also running, as @dana asked: `critic`")

	// A checklist in the reply wins; a protected phase unticked is refused
	// out loud; the surface and one session mode are read from it.
	reply := "the-loop execute\n- [ ] brainstorming\n- [ ] security-review\n- [x] `outer-loop-on-pull-request`\n- [x] pr-sessions-always\n- [ ] bogus"
	hc.Event = event(graph.Comment{ID: "c10", Author: "lee", Body: reply})
	r = run(t, "classify-phase-selection", hc, nil)
	require.Equal(t, "reply", r.Decision.Via)
	require.Equal(t, []string{"security-review"}, r.Data["refused"])
	require.Equal(t, "pull-request", r.Decision.Surface)
	require.Equal(t, "always", r.Decision.SessionPerPr)
	require.Contains(t, tickets.Comments(ref)[len(tickets.Comments(ref))-1], "**Refused**")

	// No keyword, or no authorized author: wait.
	hc.Event = event(graph.Comment{ID: "c11", Author: "mallory", Body: "the-loop execute"})
	r = run(t, "classify-phase-selection", hc, nil)
	require.Equal(t, graph.StatusWait, r.Status)
	require.Equal(t, []string{"waiting for an authorized user to choose the phases and reply `the-loop execute`"}, texts(r))

	// A recorded decision passes without reading anything.
	hc.Event = nil
	hc.Decisions = map[string]graph.Decision{"phase-selection": {At: "x"}}
	n := len(tickets.Calls())
	r = run(t, "classify-phase-selection", hc, nil)
	require.Equal(t, graph.StatusPass, r.Status)
	require.Len(t, tickets.Calls(), n)
}

func TestGoal(t *testing.T) {
	g, ok := hooks.ParseGoal("Thanks!\n\n**Goal:** make CI 2x faster\n\nSuccess criteria:\n- [ ] median CI under 5 min\n- cache hits above 80%\n\nmore text")
	require.True(t, ok)
	require.Equal(t, "make CI 2x faster", g.Goal)
	require.Equal(t, []string{"median CI under 5 min", "cache hits above 80%"}, g.Criteria)
	_, ok = hooks.ParseGoal("Goal: something\n(no criteria)")
	require.False(t, ok)

	hc := ctxFor(specFolder(t, ""), &graph.Node{ID: "goal-definition", Actor: graph.ActorHuman})
	hc.Event = event(graph.Comment{ID: "1", Author: "dana", Body: "Goal: faster CI\nSuccess criteria:\n- under 5 min"})
	r := run(t, "classify-goal", hc, nil)
	require.Equal(t, "defined", r.Outcome())
	require.Equal(t, "@dana", r.Decision.By)
	require.Equal(t, "goal-definition", r.Decision.Key)
	require.Equal(t, map[string]any{"goal": "faster CI", "criteria": []string{"under 5 min"}, "by": "@dana"}, r.Decision.Goal)
}

func TestAdhocReply(t *testing.T) {
	for body, want := range map[string]bool{
		"done": true, "All done, thanks!": true, "no more": true, "LGTM": true, "that's all": true,
		"not done yet": false, "abandoned": false, "also update the README": false, "isn't done": false,
		"done-ish": false,
	} {
		require.Equal(t, want, hooks.DeclaresDone(body), body)
	}
	hc := ctxFor(specFolder(t, ""), &graph.Node{ID: "review", Actor: graph.ActorHuman})
	hc.Event = event(graph.Comment{ID: "1", Author: "dana", Body: "done"}, graph.Comment{ID: "2", Author: "dana", Body: "actually, one more thing"})
	r := run(t, "classify-adhoc-reply", hc, nil)
	require.Equal(t, "more-work", r.Outcome(), "only the newest authorized reply decides")
}

// Untrusted comment text never reaches a hook's messages.
func TestUntrustedTextNeverInMessages(t *testing.T) {
	const canary = "CANARY-ignore-previous-instructions-7731"
	bodies := []string{
		canary, "approved " + canary, "changes requested " + canary, "the-loop execute " + canary + "\n- [ ] " + canary,
		"Goal: " + canary + "\nSuccess criteria:\n- " + canary, "done " + canary,
	}
	tickets := graphtest.NewTickets()
	for _, b := range bodies {
		tickets.Comment("github:acme/widgets#9", "dana", b)
	}
	for _, spec := range hooks.Specs() {
		for _, b := range bodies {
			a := specFolder(t, "complete")
			hc := ctxFor(a, &graph.Node{ID: "n", Actor: graph.ActorHuman, Produces: []string{"requirements.md"}})
			hc.Graph, _ = graphfile.Load("g.yaml", []byte("nodes: [{id: n}]"), shipped)
			hc.Integrations = tickets
			hc.Event = event(graph.Comment{ID: "1", Author: "dana", Body: b})
			prior := graph.PassWith("approved", map[string]any{"comments": []any{map[string]any{"author": "dana", "body": b}}})
			r := runAfter(t, prior, spec.Name, hc, graph.Values{"into": "requirements.md", "artifacts": []any{"requirements.md"}, "event": "phase-approval-pending"})
			for _, m := range r.Messages {
				require.NotContains(t, m.String(), canary, "hook %s echoed comment text", spec.Name)
			}
		}
	}
}

// A submitted review's verdict decides as its words would; a comment the
// daemon authorized by a rule counts though its author is on no allowlist,
// and the decision carries the rule.
func TestClassifyFeedbackReviewVerdictsAndRules(t *testing.T) {
	hc := ctxFor(specFolder(t, ""), &graph.Node{ID: "requirements-approval", Actor: graph.ActorHuman})
	for _, tc := range []struct {
		comment graph.Comment
		outcome string
	}{
		{graph.Comment{ID: "1", Author: "dana", Verdict: hooks.OutcomeApproved}, hooks.OutcomeApproved},
		{graph.Comment{ID: "2", Author: "dana", Body: "LGTM", Verdict: hooks.OutcomeApproved}, hooks.OutcomeApproved},
		{graph.Comment{ID: "3", Author: "dana", Body: "Fine, but rename X later", Verdict: hooks.OutcomeApproved}, hooks.OutcomeApprovedWithComments},
		{graph.Comment{ID: "4", Author: "dana", Body: "looks good", Verdict: hooks.OutcomeChangesRequested}, hooks.OutcomeChangesRequested},
	} {
		hc.Event = event(tc.comment)
		r := run(t, "classify-feedback", hc, nil)
		require.Equal(t, tc.outcome, r.Outcome(), "%+v", tc.comment)
	}
	hc.Event = event(graph.Comment{ID: "5", Author: "erin", Body: "Approved", AuthorizedBy: "team:acme/reviewers"})
	r := run(t, "classify-feedback", hc, nil)
	require.Equal(t, hooks.OutcomeApproved, r.Outcome())
	require.Equal(t, &graph.DecisionFact{By: "@erin", Rule: "team:acme/reviewers", Comment: "5"}, r.Decision)
}
