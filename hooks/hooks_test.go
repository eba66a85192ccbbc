package hooks_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/graph/graphtest"
	"github.com/theloop-dev/theloop/hooks"
	"github.com/theloop-dev/theloop/ops"
)

// specFolder loads testdata/specs/<name> into an in-memory spec directory.
func specFolder(t *testing.T, name string) *graphtest.Artifacts {
	t.Helper()
	a := graphtest.NewArtifacts("docs/specs/issue-9")
	root := filepath.Join("testdata", "specs", name)
	if name == "" {
		return a
	}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		a.Set(filepath.ToSlash(rel), string(b))
		return nil
	})
	require.NoError(t, err)
	return a
}

var shipped = hooks.NewRegistry()

// runAfter runs hook in a chain after a stub that returned prior (the way a
// gate's bookkeeping hooks follow classify-feedback).
func runAfter(t *testing.T, prior graph.HookResult, hook string, hc *graph.HookContext, params graph.Values) graph.HookResult {
	t.Helper()
	spec, ok := shipped.Lookup(hook)
	require.True(t, ok, hook)
	if params == nil {
		params = graph.Values{}
	}
	stub := graph.BoundHook{Name: "classify-feedback", Params: graph.Values{}, Spec: graph.HookSpec{Name: "classify-feedback", Run: graphtest.Returning(prior)}}
	out := graph.RunChain(context.Background(), []graph.BoundHook{stub, {Name: hook, Params: params, Spec: spec}}, hc)
	require.Len(t, out.Results, 2, out.Render())
	return out.Results[1]
}

// run calls one registered hook with the given node and params.
func run(t *testing.T, hook string, hc *graph.HookContext, params graph.Values) graph.HookResult {
	t.Helper()
	spec, ok := shipped.Lookup(hook)
	require.True(t, ok, hook)
	if params == nil {
		params = graph.Values{}
	}
	out := graph.RunChain(context.Background(), []graph.BoundHook{{Name: hook, Params: params, Spec: spec, Timeout: 5 * time.Second}}, hc)
	return out.Results[0]
}

func ctxFor(a graph.Artifacts, node *graph.Node) *graph.HookContext {
	return &graph.HookContext{
		WorkItem: graph.WorkItem{ID: "issue-9", Ref: "github:acme/widgets#9", SpecDir: "docs/specs/issue-9"},
		Node:     node, Boundary: graph.Exit, Mode: graph.ModeLive, Artifacts: a,
		Config: graph.Values{"authorizedUsers": []any{"dana", "lee"}}, Now: time.Date(2026, 5, 4, 10, 0, 0, 0, time.UTC),
		SkippedArtifacts: map[string]bool{}, SkippedNodes: map[string]bool{}, Decisions: map[string]graph.Decision{},
	}
}

func texts(r graph.HookResult) []string {
	out := make([]string, len(r.Messages))
	for i, m := range r.Messages {
		out[i] = m.String()
	}
	return out
}

func TestValidateArtifacts(t *testing.T) {
	cases := []struct {
		name     string
		folder   string
		produces []string
		optional bool
		params   graph.Values
		skipped  []string
		status   graph.Status
		want     []string
	}{
		{"complete requirements pass", "complete", []string{"requirements.md|bugfix.md"}, false, graph.Values{"locked": true, "sections": []any{"Requirements", "Security considerations"}}, nil, graph.StatusPass, nil},
		{"draft: every finding in one block", "draft", []string{"requirements.md|bugfix.md"}, false, graph.Values{"locked": true, "sections": []any{"Requirements", "Security considerations", "Glossary"}}, nil, graph.StatusBlock, []string{
			"artifact is not locked — front-matter says status: draft, expected status: approved (docs/specs/issue-9/requirements.md)",
			"required section is empty: Requirements (docs/specs/issue-9/requirements.md)",
			"required section is empty: Security considerations (docs/specs/issue-9/requirements.md)",
			"required section is missing: Glossary (docs/specs/issue-9/requirements.md)",
		}},
		{"missing single artifact", "draft", []string{"brainstorm.md"}, false, graph.Values{"sections": []any{"Problem"}}, nil, graph.StatusBlock, []string{"required artifact is missing (docs/specs/issue-9/brainstorm.md)"}},
		{"missing alternatives", "", []string{"requirements.md|bugfix.md"}, false, nil, nil, graph.StatusBlock, []string{"required artifact is missing — write one of: requirements.md, bugfix.md (docs/specs/issue-9)"}},
		{"two alternatives present", "both", []string{"requirements.md|bugfix.md"}, false, nil, nil, graph.StatusBlock, []string{"2 artifacts present where one is expected — keep one of: requirements.md, bugfix.md (docs/specs/issue-9)"}},
		{"heading inside a fence does not count", "draft", []string{"design.md"}, false, graph.Values{"sections": []any{"Architecture", "Security design"}}, nil, graph.StatusBlock, []string{"required section is missing: Security design (docs/specs/issue-9/design.md)"}},
		{"an issue number is not a heading", "", []string{"log.md"}, false, graph.Values{"sections": []any{"Pull requests"}}, nil, graph.StatusPass, nil},
		{"unticked tasks", "draft", []string{"tasks.md"}, false, graph.Values{"checkmarks": "complete"}, nil, graph.StatusBlock, []string{"2 task(s) still unticked (docs/specs/issue-9/tasks.md)"}},
		{"all ticked", "complete", []string{"tasks.md"}, false, graph.Values{"checkmarks": "complete"}, nil, graph.StatusPass, nil},
		// docs/decisions.md §21: checkmarks scoped to a heading ignore boxes elsewhere.
		{"checkmarks under a heading: ticked there, open elsewhere", "", []string{"results.md"}, false, graph.Values{"checkmarks": "Verification results", "sections": []any{"Verification results"}}, nil, graph.StatusPass, nil},
		{"checkmarks under a heading: every section of that title counts", "", []string{"results-open.md"}, false, graph.Values{"checkmarks": "Verification results"}, nil, graph.StatusBlock, []string{"2 box(es) still unticked under ## Verification results (docs/specs/issue-9/results-open.md)"}},
		{"checkmarks under a heading that is missing", "", []string{"log.md"}, false, graph.Values{"checkmarks": "Verification results"}, nil, graph.StatusBlock, []string{"required section is missing: Verification results (its checkboxes must all be ticked) (docs/specs/issue-9/log.md)"}},
		{"checkmarks and sections name the missing heading once", "", []string{"log.md"}, false, graph.Values{"checkmarks": "Verification results", "sections": []any{"Verification results"}}, nil, graph.StatusBlock, []string{"required section is missing: Verification results (docs/specs/issue-9/log.md)"}},
		{"validates the execution log", "complete", nil, false, graph.Values{"validates": "execution-log.md", "sections": []any{"Review cycles", "Security review (gate)"}}, nil, graph.StatusPass, nil},
		{"validated artifact missing blocks", "draft", nil, false, graph.Values{"validates": "execution-log.md", "sections": []any{"Review cycles"}}, nil, graph.StatusBlock, []string{"required artifact is missing (docs/specs/issue-9/execution-log.md)"}},
		{"content gate with no artifact is misdeclared", "complete", nil, false, graph.Values{"sections": []any{"X"}}, nil, graph.StatusBlock, []string{"this node gates on artifact content but names no artifact to read it from — the graph must declare `produces:` on the node or `validates:` on this hook entry (docs/specs/issue-9)"}},
		{"no artifacts, nothing to check", "complete", nil, false, nil, nil, graph.StatusSkip, []string{"this node declares no artifacts"}},
		{"optional node that produced nothing", "draft", []string{"brainstorm.md"}, true, graph.Values{"sections": []any{"Problem"}}, nil, graph.StatusSkip, []string{"optional node; no artifact was produced"}},
		{"planned absence of a skipped node's artifact", "draft", nil, false, graph.Values{"validates": "testing-plan.md", "sections": []any{"Verification results"}}, []string{"testing-plan.md"}, graph.StatusSkip, []string{"artifact(s) authored by a declared-skipped node; absence is planned"}},
		{"onlyWhenSkipped dormant when not skipped", "complete", nil, false, graph.Values{"onlyWhenSkipped": "testing-plan.md", "validates": "execution-log.md", "sections": []any{"Verification results"}}, nil, graph.StatusSkip, []string{"testing-plan.md was not declared skipped"}},
		{"onlyWhenSkipped applies when skipped and absent", "complete", nil, false, graph.Values{"onlyWhenSkipped": "testing-plan.md", "validates": "execution-log.md", "sections": []any{"Verification results"}}, []string{"testing-plan.md"}, graph.StatusBlock, []string{"required section is missing: Verification results (docs/specs/issue-9/execution-log.md)"}},
		// R5.2: an artifact that passed its gate carries its review.
		{"reviewed: locked at a gate without review comments blocks", "", []string{"gate-locked.md"}, false, graph.Values{"reviewed": true}, nil, graph.StatusBlock, []string{"artifact passed its gate but has no ## Review comments section — the review that approved it was lost (docs/specs/issue-9/gate-locked.md)"}},
		{"reviewed: a v11 lock (no decision:) needs no review section", "complete", []string{"design.md"}, false, graph.Values{"reviewed": true}, nil, graph.StatusPass, nil},
		{"reviewed: empty review comments blocks", "", []string{"empty-review.md"}, false, graph.Values{"reviewed": true}, nil, graph.StatusBlock, []string{"artifact passed its gate but its ## Review comments section is empty — the review that approved it was lost (docs/specs/issue-9/empty-review.md)"}},
		{"reviewed: approved with its review passes", "", []string{"reviewed.md"}, false, graph.Values{"reviewed": true}, nil, graph.StatusPass, nil},
		{"reviewed: a draft has not passed a gate yet", "draft", []string{"design.md"}, false, graph.Values{"reviewed": true}, nil, graph.StatusPass, nil},
		{"without reviewed an approved artifact needs no review (v11)", "complete", []string{"design.md"}, false, nil, nil, graph.StatusPass, nil},
		{"front matter values", "complete", []string{"requirements.md"}, false, graph.Values{"frontMatter": map[string]any{"riskTier": 2, "status": "draft"}}, nil, graph.StatusBlock, []string{`front-matter status: expected "draft", found "approved" (docs/specs/issue-9/requirements.md)`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			node := &graph.Node{ID: "n", Produces: tc.produces, Optional: tc.optional}
			a := specFolder(t, tc.folder)
			a.Set("log.md", "# Log\n\n## Pull requests\n\n#7 — CSV export\n")
			a.Set("results.md", "# Log\n\n## Verification results\n\n- [x] empty report\n\n### 2026-01-02 — entry self-review\n\n- [x] noted\n\n## Follow-ups\n\n- [ ] later\n")
			a.Set("results-open.md", "# Log\n\n## Verification results\n\n- [ ] empty report\n\n## Review cycles\n\nok\n\n## Verification results\n\n- [x] empty report\n- [ ] quotes\n")
			a.Set("reviewed.md", "---\nstatus: approved\ndecision: \"design-approval/1@2026-01-02T00:00:00Z\"\n---\n# R\n\n## Review comments\n\n### 2026-01-02 — approved\n\n**@dana** wrote:\n\nship it\n")
			a.Set("empty-review.md", "---\nstatus: approved\ndecision: \"design-approval/1@2026-01-02T00:00:00Z\"\n---\n# R\n\n## Review comments\n\n")
			a.Set("gate-locked.md", "---\nstatus: approved\napprovedBy: [\"@dana\"]\ndecision: \"design-approval/1@2026-01-02T00:00:00Z\"\n---\n# R\n\n## Architecture\n\nx\n")
			hc := ctxFor(a, node)
			for _, s := range tc.skipped {
				hc.SkippedArtifacts[s] = true
			}
			r := run(t, "validate-artifacts", hc, tc.params)
			require.Equal(t, tc.status, r.Status, texts(r))
			if tc.status == graph.StatusBlock {
				require.Equal(t, tc.want, texts(r))
			} else {
				for _, w := range tc.want {
					require.Contains(t, texts(r), w)
				}
			}
		})
	}
}

func TestEnforcesBoundariesFrom(t *testing.T) {
	params := graph.Values{"upstream": "requirements.md|bugfix.md", "markers": []any{"trust boundary", "abuse case"}}
	r := run(t, "enforces-boundaries-from", ctxFor(specFolder(t, "complete"), &graph.Node{ID: "design", Produces: []string{"design.md"}}), params)
	require.Equal(t, graph.StatusPass, r.Status, texts(r))

	a := specFolder(t, "complete")
	a.Set("design.md", "# Design\n\n## Architecture\n\nNo boundaries discussed.\n")
	r = run(t, "enforces-boundaries-from", ctxFor(a, &graph.Node{ID: "design", Produces: []string{"design.md"}}), params)
	require.Equal(t, graph.StatusBlock, r.Status)
	require.Equal(t, []string{"boundary named upstream is unanswered here: trust boundary (docs/specs/issue-9/design.md)"}, texts(r))

	r = run(t, "enforces-boundaries-from", ctxFor(specFolder(t, ""), &graph.Node{ID: "design", Produces: []string{"design.md"}}), params)
	require.Equal(t, graph.StatusSkip, r.Status)
}

func TestLintArtifacts(t *testing.T) {
	node := &graph.Node{ID: "design", Produces: []string{"design.md"}}
	r := run(t, "lint-artifacts", ctxFor(specFolder(t, "mermaid"), node), graph.Values{"maxLineLength": 60})
	require.Equal(t, graph.StatusBlock, r.Status)
	require.Equal(t, []string{
		"mermaid block 1 is empty (docs/specs/issue-9/design.md)",
		"mermaid block 2 line 2: a backtick inside a node label breaks rendering — use plain text (docs/specs/issue-9/design.md)",
		"mermaid block 3 line 3: node A: the label 'report (weekly)' holds a bracket or quote mermaid reads as syntax — put the label in double quotes (docs/specs/issue-9/design.md)",
		"line 22 exceeds 60 characters (docs/specs/issue-9/design.md)",
		"line 24 opens a code fence that is never closed — everything after it renders as code (docs/specs/issue-9/design.md)",
	}, texts(r))

	r = run(t, "lint-artifacts", ctxFor(specFolder(t, "complete"), node), nil)
	require.Equal(t, graph.StatusPass, r.Status, texts(r))
	r = run(t, "lint-artifacts", ctxFor(specFolder(t, ""), node), nil)
	require.Equal(t, graph.StatusSkip, r.Status)
}

func TestLintArtifactsExternalLinterOnlyOutsideCheck(t *testing.T) {
	node := &graph.Node{ID: "design", Produces: []string{"design.md"}}
	cmds := &fakeCommands{result: graph.CommandResult{ExitCode: 1, Stdout: []byte("design.md:3 MD001 heading levels\n")}}
	hc := ctxFor(specFolder(t, "complete"), node)
	hc.Commands = cmds
	r := run(t, "lint-artifacts", hc, graph.Values{"linter": []any{"markdownlint"}})
	require.Equal(t, graph.StatusBlock, r.Status)
	require.Equal(t, []string{"markdownlint", "docs/specs/issue-9/design.md"}, cmds.argv)

	cmds.argv = nil
	hc.Mode = graph.ModeCheck
	hc.Commands = nil
	r = run(t, "lint-artifacts", hc, graph.Values{"linter": []any{"markdownlint"}})
	require.Equal(t, graph.StatusPass, r.Status)
	require.Nil(t, cmds.argv, "check never starts a program")
	require.Equal(t, []string{"the markdown linter markdownlint is not run under check (check never starts a program)"}, texts(r))

	// A string is split into words, as verify-tests' command is.
	hc.Mode = graph.ModeLive
	hc.Commands = cmds
	cmds.result = graph.CommandResult{}
	r = run(t, "lint-artifacts", hc, graph.Values{"linter": "markdownlint --config '.markdownlint.json'"})
	require.Equal(t, graph.StatusPass, r.Status, texts(r))
	require.Equal(t, []string{"markdownlint", "--config", ".markdownlint.json", "docs/specs/issue-9/design.md"}, cmds.argv)

	// The built-in findings come first: the linter is not run over them.
	cmds.argv = nil
	bad := ctxFor(specFolder(t, "mermaid"), node)
	bad.Commands = cmds
	r = run(t, "lint-artifacts", bad, graph.Values{"linter": "markdownlint"})
	require.Equal(t, graph.StatusBlock, r.Status)
	require.Contains(t, texts(r)[0], "mermaid block 1 is empty")
	require.Nil(t, cmds.argv)
}

type fakeCommands struct {
	argv   []string
	result graph.CommandResult
	err    error
}

func (f *fakeCommands) Run(_ context.Context, argv []string, _ string) (graph.CommandResult, error) {
	f.argv = argv
	return f.result, f.err
}

func TestVerifyTests(t *testing.T) {
	node := &graph.Node{ID: "implementation"}
	hc := ctxFor(specFolder(t, ""), node)
	r := run(t, "verify-tests", hc, nil)
	require.Equal(t, graph.StatusSkip, r.Status)
	require.Equal(t, []string{"no test command: set verification.testCommand in .the-loop/harness-config.yaml"}, texts(r))

	params := graph.Values{"command": "go test './...'"}
	hc.Mode = graph.ModeCheck
	cmds := &fakeCommands{}
	hc.RepoCommands = cmds
	r = run(t, "verify-tests", hc, params)
	require.Equal(t, graph.StatusSkip, r.Status, "check never runs tests")
	require.Nil(t, cmds.argv)

	hc.Mode = graph.ModeLive
	r = run(t, "verify-tests", hc, params)
	require.Equal(t, graph.StatusPass, r.Status)
	require.Equal(t, []string{"go", "test", "./..."}, cmds.argv)

	cmds.result = graph.CommandResult{ExitCode: 2, Stdout: []byte("ok a\n\nFAIL b\n")}
	r = run(t, "verify-tests", hc, params)
	require.Equal(t, []string{"tests failed (go test ./...), exit 2", "ok a", "FAIL b"}, texts(r))

	// The harness config's command, when the reference declares none.
	hc.Config = graph.Values{"testCommand": []any{"make", "check"}}
	r = run(t, "verify-tests", hc, nil)
	require.Equal(t, []string{"make", "check"}, cmds.argv)
	require.Equal(t, graph.StatusBlock, r.Status)

	cmds.err = graph.ErrCommandNotFound
	r = run(t, "verify-tests", hc, params)
	require.Equal(t, []string{"test command not found: go; install it or fix verification.testCommand in .the-loop/harness-config.yaml"}, texts(r))
	require.False(t, r.Retriable)

	// A command that cannot be parsed names the key.
	r = run(t, "verify-tests", hc, graph.Values{"command": "sh -c 'exit 1"})
	require.Equal(t, graph.StatusBlock, r.Status)
	require.Contains(t, texts(r)[0], "verify-tests at implementation: with.command cannot be parsed (unterminated quote)")
}

func TestAwaitInnerLoops(t *testing.T) {
	hc := ctxFor(specFolder(t, "inner"), &graph.Node{ID: "implementation"})
	hc.Config["originRepo"] = "acme/widgets"
	r := run(t, "await-inner-loops", hc, nil)
	require.Equal(t, graph.StatusWait, r.Status)
	require.Equal(t, []string{"waiting for 1 inner loop(s) to finish: octo__infra/pr-7; 1 declared repository(ies) have no inner loop yet: octo/docs — each pull request completes its pdlc-pr-loop (docs/specs/issue-9/pr-loops/) before the work item moves past implementation"}, texts(r))

	r = run(t, "await-inner-loops", ctxFor(specFolder(t, "draft"), &graph.Node{ID: "implementation"}), nil)
	require.Equal(t, graph.StatusPass, r.Status, "no loops and no declaration is vacuously done")

	a := specFolder(t, "")
	a.Set("execution-log.md", "---\nrepos: [../evil]\n---\n")
	r = run(t, "await-inner-loops", ctxFor(a, &graph.Node{ID: "implementation"}), nil)
	require.Equal(t, graph.StatusBlock, r.Status)
	require.Contains(t, texts(r)[0], "execution-log.md declares a repository the-loop cannot use")
}

func TestRepoStateKey(t *testing.T) {
	for in, want := range map[string]string{"acme/widgets": "acme__widgets", "github.com/acme/widgets": "github.com__acme__widgets"} {
		got, err := hooks.RepoStateKey(in)
		require.NoError(t, err)
		require.Equal(t, want, got)
	}
	for _, bad := range []string{"acme", "acme/..", "./x", "acme/wid gets", "a/b;rm", "acme/-widgets"} {
		_, err := hooks.RepoStateKey(bad)
		require.Error(t, err, bad)
	}
}

func TestSideEffectsThroughTheTicketStandIn(t *testing.T) {
	tickets := graphtest.NewTickets()
	ref := "github:acme/widgets#9"
	tickets.SetLabels(ref, "bug", "loop:requirements-definition", "priority")
	hc := ctxFor(specFolder(t, "complete"), &graph.Node{ID: "design", Phase: "design"})
	hc.Boundary = graph.Entry
	hc.Integrations = tickets

	r := run(t, "set-phase-label", hc, nil)
	require.Equal(t, graph.StatusPass, r.Status)
	require.Equal(t, []string{"bug", "loop:design", "priority"}, tickets.Labels(ref), "other loop: labels go, every other label stays")

	r = run(t, "request-review", hc, nil)
	require.Equal(t, graph.StatusPass, r.Status)
	posted := tickets.Comments(ref)
	require.Len(t, posted, 1)
	require.True(t, hooks.SelfAuthored(posted[0]))
	require.Contains(t, posted[0], "**design** is ready for review")

	tickets.Fail(ops.GitHubSetLabels, errors.New("github: 502 Bad Gateway"))
	r = run(t, "set-phase-label", hc, nil)
	require.Equal(t, graph.StatusPass, r.Status, "an outage degrades, it does not block")
	require.Equal(t, "github: 502 Bad Gateway", r.Degraded)

	hc.Integrations = nil
	r = run(t, "set-phase-label", hc, nil)
	require.Equal(t, graph.StatusSkip, r.Status, "no integration configured is a deliberate absence")

	hc.Node = &graph.Node{ID: "critic"}
	r = run(t, "set-phase-label", hc, nil)
	require.Equal(t, []string{"node declares no phase label"}, texts(r))
}

func TestNotifyResolvesRecipientsOnlyThroughCollaborators(t *testing.T) {
	tickets := graphtest.NewTickets()
	hc := ctxFor(specFolder(t, ""), &graph.Node{ID: "requirements-approval"})
	hc.Integrations = tickets
	hc.Config["notifications"] = map[string]any{"enabled": true, "events": map[string]any{"phase-approval-pending": []any{"approver"}}}
	hc.Config["collaborators"] = []any{
		map[string]any{"login": "dana", "roles": []any{"approver"}, "slack": "U01"},
		map[string]any{"login": "lee", "roles": []any{"reviewer"}},
	}
	// A `roles:` or `to:` parameter cannot add anyone.
	r := run(t, "notify", hc, graph.Values{"event": "phase-approval-pending", "to": "mallory", "roles": []any{"reviewer"}})
	require.Equal(t, graph.StatusPass, r.Status)
	require.Equal(t, []string{"the-loop: issue-9 is at *requirements-approval* (phase-approval-pending). Roles: approver — <@U01>"}, tickets.Slack())

	r = run(t, "notify", hc, graph.Values{"event": "conflict-escalated"})
	require.Equal(t, graph.StatusSkip, r.Status)
	require.Equal(t, []string{"no roles configured for conflict-escalated"}, texts(r))

	hc.Config["collaborators"] = []any{}
	r = run(t, "notify", hc, graph.Values{"event": "phase-approval-pending"})
	require.Equal(t, graph.StatusPass, r.Status)
	require.Contains(t, r.Degraded, "no collaborator in .the-loop/collaborators.yaml holds the role(s) approver")
	require.Len(t, tickets.Slack(), 1, "nobody resolved, nothing sent")
}

func TestLogEntry(t *testing.T) {
	a := specFolder(t, "complete")
	before := a.Get("execution-log.md")
	hc := ctxFor(a, &graph.Node{ID: "design"})
	hc.Boundary = graph.Entry
	r := run(t, "log-entry", hc, nil)
	require.Equal(t, graph.StatusPass, r.Status)
	require.Equal(t, before+"\n### 2026-05-04 — entry design\n\n- **Node:** design\n- **Boundary:** entry\n", a.Get("execution-log.md"))

	r = run(t, "log-entry", ctxFor(specFolder(t, "draft"), &graph.Node{ID: "design"}), nil)
	require.Equal(t, graph.StatusSkip, r.Status)
}

func TestDeliverAssignment(t *testing.T) {
	node := &graph.Node{ID: "requirements-definition", Phase: "requirements-definition", Produces: []string{"requirements.md|bugfix.md"}, Command: "new-requirement"}
	hc := ctxFor(specFolder(t, ""), node)
	r := run(t, "deliver-assignment", hc, nil)
	require.Equal(t, graph.StatusSkip, r.Status)
	require.Equal(t, []string{"no delivery channel (CLI path — the claim envelope carries this)"}, texts(r))

	var got string
	hc.Deliver = func(_ context.Context, workItem, text string) (bool, error) {
		require.Equal(t, hc.WorkItem.ID, workItem)
		got = text
		return true, nil
	}
	r = run(t, "deliver-assignment", hc, nil)
	require.Equal(t, graph.StatusPass, r.Status)
	require.Equal(t, `the-loop assignment for issue-9:
  you are now at node: requirements-definition (phase: requirements-definition)
  produce: requirements.md|bugfix.md
  iterate it on: the work item itself (the default) — comment on the ticket, and do not open a pull request just to carry the spec chain
  work it with: `+"`/the-loop:new-requirement issue-9`"+`
  when this node's work is done, report back: `+"`loopctl graph complete issue-9`"+`
  never set `+"`status: approved`"+` in an artifact yourself — the approval gate writes it — and never edit one that carries it: its approval is signed with its content (record later work in execution-log.md).
  (assigned by the-loop's graph — not part of any event payload)
`, got)

	gate := hooks.RenderAssignment(hc.WorkItem, &graph.Node{ID: "design-approval", Actor: graph.ActorHuman}, "", 0, "")
	require.Contains(t, gate, "HUMAN gate")
	require.NotContains(t, gate, "graph complete")

	hc.Deliver = func(context.Context, string, string) (bool, error) { return false, nil }
	r = run(t, "deliver-assignment", hc, nil)
	require.Equal(t, []string{"no live session to deliver into"}, texts(r))
}

func TestPublishArtifactOnlyForUninitialisedRepositories(t *testing.T) {
	tickets := graphtest.NewTickets()
	a := specFolder(t, "")
	a.Set("contribution.md", "# Contribution\n\n## Goal\n\nFaster CI.\n")
	hc := ctxFor(a, &graph.Node{ID: "plan-approval"})
	hc.Integrations = tickets
	r := run(t, "publish-artifact", hc, graph.Values{"artifact": "contribution.md"})
	require.Equal(t, graph.StatusSkip, r.Status)
	hc.Config["repoInitialized"] = false
	r = run(t, "publish-artifact", hc, graph.Values{"artifact": "contribution.md"})
	require.Equal(t, graph.StatusPass, r.Status)
	require.Contains(t, tickets.Comments("github:acme/widgets#9")[0], "Faster CI.")
}

// containsLower relies on this: lowering a rune outside ASCII gives a rune
// outside ASCII, except for these two.
func TestOnlyTwoRunesLowerIntoASCII(t *testing.T) {
	var into []rune
	for r := rune(utf8.RuneSelf); r <= unicode.MaxRune; r++ {
		if unicode.ToLower(r) < utf8.RuneSelf {
			into = append(into, r)
		}
	}
	require.Equal(t, []rune{'\u0130', '\u212a'}, into)
}
