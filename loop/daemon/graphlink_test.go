package daemon

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/ingress"
	"github.com/theloop-dev/theloop/integrations"
	"github.com/theloop-dev/theloop/internal/shortdir"
	"github.com/theloop-dev/theloop/loop"
	"github.com/theloop-dev/theloop/ops"
	"github.com/theloop-dev/theloop/sessions"
	"github.com/theloop-dev/theloop/workitem"
)

// Seed 003's acceptance criteria, each a named test over the graph link
// with a real checkout, the real runtime and a recording integrations
// stand-in. (AC10 — webhook deployments move the graph — is the end-to-end
// TestGateApprovedByAuthorizedCommentLocksAndPastesNextAssignment.)

type recordingIntegrations struct {
	mu    sync.Mutex
	calls []graph.Operation
	// comments is GitHub's copy of the comments github.get-comment reads,
	// by id; getErr, when set, is its answer instead (an outage).
	comments map[string]map[string]any
	getErr   error
}

func (r *recordingIntegrations) Call(_ context.Context, op graph.Operation, args map[string]any) (map[string]any, error) {
	r.mu.Lock()
	r.calls = append(r.calls, op)
	defer r.mu.Unlock()
	switch op {
	case ops.GitHubGetComment:
		if r.getErr != nil {
			return nil, r.getErr
		}
		c, ok := r.comments[fmt.Sprint(args["commentId"])]
		if !ok {
			return nil, fmt.Errorf("comment %v: %w", args["commentId"], integrations.ErrNotFound)
		}
		return c, nil
	case "github.list-comments":
		return map[string]any{"comments": []any{}}, nil
	case "github.set-labels", "github.get-labels":
		return map[string]any{"labels": []any{}}, nil
	}
	return map[string]any{}, nil
}

func (r *recordingIntegrations) called(op graph.Operation) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.calls {
		if c == op {
			return true
		}
	}
	return false
}

type eventRecorder struct {
	mu  sync.Mutex
	evs []Observation
}

func (e *eventRecorder) Observe(o Observation) {
	e.mu.Lock()
	e.evs = append(e.evs, o)
	e.mu.Unlock()
}

func (e *eventRecorder) has(name, field, value string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, o := range e.evs {
		if o.Name == name && (field == "" || o.Fields[field] == value) {
			return true
		}
	}
	return false
}

type linkFixture struct {
	d     *Daemon
	integ *recordingIntegrations
	obs   *eventRecorder
	cwd   string
	item  workitem.Ref
}

func newLinkFixture(t *testing.T, origin string, edit func(*Config)) *linkFixture {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	base := shortdir.New(t) // holds the state root and its control socket
	cwd := filepath.Join(base, "checkout")
	require.NoError(t, os.MkdirAll(cwd, 0o755))
	for _, args := range [][]string{{"init", "-q"}, {"remote", "add", "origin", origin}} {
		out, err := exec.Command("git", append([]string{"-C", cwd}, args...)...).CombinedOutput()
		require.NoError(t, err, "%s", out)
	}
	cfg := DefaultConfig()
	cfg.StateRoot = filepath.Join(base, "state")
	cfg.InsecureAcceptUnsigned = true
	cfg.Routing.AuthorizedUsers = []string{"dana"}
	cfg.Tmux.Socket = "theloop-unit-unused"
	cfg.ClaudeEnv = &sessions.ClaudeEnvironment{}
	if edit != nil {
		edit(&cfg)
	}
	fx := &linkFixture{integ: &recordingIntegrations{}, obs: &eventRecorder{}, cwd: cwd}
	d, err := New(cfg, Deps{Clock: graph.SystemClock{}, Integrations: fx.integ, Observer: fx.obs, Log: os.Stderr})
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(cfg.StateRoot, 0o700))
	require.NoError(t, d.build())
	// Closed before the short directory goes: a log flushed after it would
	// make its directory again.
	t.Cleanup(d.closeBuilt)
	fx.d = d
	fx.item, err = workitem.Parse("github:octo/demo#7")
	require.NoError(t, err)
	d.link.adopt(context.Background(), fx.item, cwd)
	return fx
}

func (fx *linkFixture) arm(t *testing.T) {
	require.NoError(t, fx.d.ctl.Record(fx.item, ingress.CmdStart, "comment", "dana", "", time.Now()))
}

func (fx *linkFixture) state(t *testing.T) (*graph.State, error) {
	return loop.NewStore(fx.cwd, "").Load(context.Background(), "issue-7")
}

// comment is a comment author made on the work item: GitHub holds it (an
// unedited creation), and the returned event carries it.
func (fx *linkFixture) comment(author, body string) *ingress.Event {
	fx.integ.mu.Lock()
	if fx.integ.comments == nil {
		fx.integ.comments = map[string]map[string]any{}
	}
	id := strconv.Itoa(1000 + len(fx.integ.comments))
	now := time.Now().UTC().Format(time.RFC3339) // made now, after the gate was entered
	fx.integ.comments[id] = map[string]any{"id": id, "author": author, "body": body, "ref": fx.item.String(),
		"createdAt": now, "updatedAt": now}
	fx.integ.mu.Unlock()
	return &ingress.Event{Event: "issue_comment", Action: "created", DeliveryID: "d-" + id,
		Comments: []ingress.Comment{{ID: id, Author: author, Body: body, Item: fx.item.String()}}}
}

// advance is onEvent for a test that expects no retry.
func (fx *linkFixture) advance(t *testing.T, ev *ingress.Event) *graph.StepReport {
	t.Helper()
	rep, err := fx.d.link.onEvent(context.Background(), fx.item, workitem.Ref{}, fx.cwd, ev)
	require.NoError(t, err)
	return rep
}

func TestAC1SpawnEntersTheStartNode(t *testing.T) {
	fx := newLinkFixture(t, "https://github.com/octo/demo.git", nil)
	fx.arm(t)
	fx.d.link.onSpawn(context.Background(), fx.item, fx.cwd, "sess-1", &ingress.Event{Event: "issues", Action: "labeled", DeliveryID: "d1"})
	st, err := fx.state(t)
	require.NoError(t, err)
	require.Equal(t, "phase-selection", st.CurrentNode)
	require.Equal(t, "sess-1", st.Session.ID)
}

func TestAC2StartRunsTheEntryChain(t *testing.T) {
	fx := newLinkFixture(t, "git@github.com:octo/demo.git", nil)
	fx.arm(t)
	fx.d.link.onSpawn(context.Background(), fx.item, fx.cwd, "sess-1", nil)
	require.True(t, fx.integ.called("github.set-labels"), "set-phase-label ran")
}

func TestAC3StartIsIdempotent(t *testing.T) {
	fx := newLinkFixture(t, "https://github.com/octo/demo", nil)
	fx.arm(t)
	ctx := context.Background()
	fx.d.link.onSpawn(ctx, fx.item, fx.cwd, "sess-1", nil)
	fx.advance(t, fx.comment("dana", "the-loop execute"))
	st, err := fx.state(t)
	require.NoError(t, err)
	moved := st.CurrentNode
	require.NotEqual(t, "phase-selection", moved)
	fx.d.link.onSpawn(ctx, fx.item, fx.cwd, "sess-2", nil)
	st, err = fx.state(t)
	require.NoError(t, err)
	require.Equal(t, moved, st.CurrentNode, "a second start never resets")
}

func TestAC4UnstartedItemReachesNoHook(t *testing.T) {
	fx := newLinkFixture(t, "https://github.com/octo/demo.git", func(c *Config) { c.Routing.RequireStartCommand = true })
	fx.d.link.onSpawn(context.Background(), fx.item, fx.cwd, "sess-1", nil)
	_, err := fx.state(t)
	require.ErrorIs(t, err, graph.ErrNoState)
	require.False(t, fx.integ.called("github.set-labels"))
	require.True(t, fx.obs.has("graph.skipped", "reason", "start-not-requested"))
}

func TestAC5AuthorizedReplyResolvesTheWaitingGate(t *testing.T) {
	fx := newLinkFixture(t, "https://github.com/octo/demo.git", nil)
	fx.arm(t)
	ctx := context.Background()
	fx.d.link.onSpawn(ctx, fx.item, fx.cwd, "sess-1", nil)
	gc := fx.d.link.context(ctx, fx.item, workitem.Ref{}, fx.cwd)
	require.True(t, gc.atHumanGate(), "%+v", gc)
	rep := fx.advance(t, fx.comment("dana", "the-loop execute"))
	require.NotNil(t, rep)
	require.True(t, rep.Moved)
}

func TestAC6UnauthorizedReplyLeavesTheGateWaiting(t *testing.T) {
	fx := newLinkFixture(t, "https://github.com/octo/demo.git", nil)
	fx.arm(t)
	ctx := context.Background()
	fx.d.link.onSpawn(ctx, fx.item, fx.cwd, "sess-1", nil)
	rep := fx.advance(t, fx.comment("mallory", "the-loop execute"))
	require.NotNil(t, rep)
	require.False(t, rep.Moved)
	rep = fx.advance(t, fx.comment("dana", "the-loop execute\n\n<!-- the-loop:agent-comment -->"))
	require.False(t, rep.Moved, "a self-marked comment never decides")
	st, err := fx.state(t)
	require.NoError(t, err)
	require.Equal(t, "phase-selection", st.CurrentNode)
}

func TestAC7WaitParksAndIsNotRetried(t *testing.T) {
	fx := newLinkFixture(t, "https://github.com/octo/demo.git", nil)
	fx.arm(t)
	ctx := context.Background()
	fx.d.link.onSpawn(ctx, fx.item, fx.cwd, "sess-1", nil)
	rep := fx.advance(t, &ingress.Event{Event: "issues", Action: "edited", DeliveryID: "d2"})
	require.NotNil(t, rep)
	require.Equal(t, graph.StatusWait, rep.Status)
	st, err := fx.state(t)
	require.NoError(t, err)
	require.NotNil(t, st.Parked)
}

func TestAC8NonGitHubRefIsSkipped(t *testing.T) {
	fx := newLinkFixture(t, "https://github.com/octo/demo.git", nil)
	item, err := workitem.Parse("jira:octo/demo#7")
	require.NoError(t, err)
	fx.d.link.onSpawn(context.Background(), item, fx.cwd, "sess-1", nil)
	require.True(t, fx.obs.has("graph.skipped", "reason", "no-spec-id"))
	_, err = fx.state(t)
	require.ErrorIs(t, err, graph.ErrNoState)
}

func TestAC9MissingSpecDirIsSkipped(t *testing.T) {
	fx := newLinkFixture(t, "https://github.com/octo/demo.git", nil)
	fx.arm(t)
	require.Nil(t, fx.advance(t, fx.comment("dana", "hi")))
	require.True(t, fx.obs.has("graph.skipped", "reason", "no-spec-dir"))
	require.NoDirExists(t, filepath.Join(fx.cwd, "docs", "specs", "issue-7"), "the link never creates a spec dir on an event")
}

func TestAC11RuntimeFailureIsCaughtAndReported(t *testing.T) {
	fx := newLinkFixture(t, "https://github.com/octo/demo.git", nil)
	fx.arm(t)
	// graph-state.json is a directory: every load fails.
	require.NoError(t, os.MkdirAll(filepath.Join(fx.cwd, "docs", "specs", "issue-7", "graph-state.json"), 0o755))
	require.NotPanics(t, func() {
		require.Nil(t, fx.advance(t, fx.comment("dana", "the-loop execute")))
	})
	require.True(t, fx.obs.has("graph.link_failed", "action", "advance"))
}

func TestAC12DisabledLinkDoesNothing(t *testing.T) {
	fx := newLinkFixture(t, "https://github.com/octo/demo.git", func(c *Config) { c.Routing.GraphEnabled = false })
	fx.arm(t)
	fx.d.link.onSpawn(context.Background(), fx.item, fx.cwd, "sess-1", nil)
	_, err := fx.state(t)
	require.ErrorIs(t, err, graph.ErrNoState)
	require.Empty(t, fx.integ.calls)
}

func TestRepositoryIdentityMismatchIsSkipped(t *testing.T) {
	fx := newLinkFixture(t, "https://github.com/someone-else/demo.git", nil)
	fx.arm(t)
	fx.d.link.onSpawn(context.Background(), fx.item, fx.cwd, "sess-1", nil)
	_, err := fx.state(t)
	require.ErrorIs(t, err, graph.ErrNoState)
	require.NoFileExists(t, filepath.Join(fx.cwd, loop.HarnessConfigFile), "adoption refuses a checkout of another repository")
}

func TestGraphContextBeforeEntryIsNotEnteredYet(t *testing.T) {
	fx := newLinkFixture(t, "https://github.com/octo/demo.git", nil)
	fx.arm(t)
	gc := fx.d.link.context(context.Background(), fx.item, workitem.Ref{}, fx.cwd)
	require.NotNil(t, gc)
	require.Equal(t, "pending", gc.Status)
	require.Contains(t, renderGraphContext(gc, 0, ""), "NOT ENTERED YET")
}

// Ordinary comments while the agent works on a node do not evaluate its
// exit chain: no attempt is counted and nothing escalates (the node moves
// when the agent claims it).
func TestCommentsAtAnAgentNodeNeverEscalate(t *testing.T) {
	fx := newLinkFixture(t, "https://github.com/octo/demo.git", nil)
	fx.arm(t)
	ctx := context.Background()
	fx.d.link.onSpawn(ctx, fx.item, fx.cwd, "sess-1", nil)
	rep := fx.advance(t, fx.comment("dana", "the-loop execute"))
	require.NotNil(t, rep)
	require.True(t, rep.Moved)
	for range 3 {
		require.Nil(t, fx.advance(t, fx.comment("dana", "a note while you work")))
	}
	st, err := fx.state(t)
	require.NoError(t, err)
	require.Equal(t, rep.CurrentNode, st.CurrentNode)
	require.Nil(t, st.Parked, "nothing parked or escalated")
	require.True(t, fx.obs.has("graph.skipped", "reason", "agent-node"))
}

// R9.3 at loopd's start: a checkout whose workflow.phases differs from the
// work-item loop is reported, naming the phases.
func TestPhasesDivergenceIsWarnedAtStart(t *testing.T) {
	fx := newLinkFixture(t, "https://github.com/octo/demo.git", nil)
	cfg := filepath.Join(fx.cwd, ".the-loop", "harness-config.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte("workflow:\n  phases: [not-started, phase-selection, requirements-definition, design, cleanup]\n"), 0o644))
	fx.d.link.warnPhases([]string{fx.cwd, fx.cwd})
	var got []Observation
	for _, o := range fx.obs.evs {
		if o.Name == "harness.phases_diverge" {
			got = append(got, o)
		}
	}
	require.Len(t, got, 1, "once per checkout")
	require.Contains(t, got[0].Fields["warning"], "listed but declared by no node: cleanup; declared by the graph but not listed: brainstorming")

	require.NoError(t, os.WriteFile(cfg, []byte("workflow:\n  specDir: docs/specs\n"), 0o644))
	fx.obs.evs = nil
	fx.d.link.warnPhases([]string{fx.cwd})
	require.False(t, fx.obs.has("harness.phases_diverge", "", ""), "no list, nothing to say")
}

// docs/decisions.md §19 at the graph link: only a created comment (or submitted
// review) that GitHub holds as claimed — same item, author and body, never
// edited — reaches a human gate. Anything else leaves the gate where it is;
// a contradiction is reported as routing.forged, and a GitHub that cannot
// be asked makes the step fail so the queue asks again.
func TestOnlyAVerifiedNewCommentDecidesAGate(t *testing.T) {
	other, err := workitem.Parse("github:octo/demo#8")
	require.NoError(t, err)
	tests := []struct {
		name   string
		event  func(fx *linkFixture) *ingress.Event
		reason string // routing.forged reason; "" for a plain skip
		skip   string
	}{
		{"an edit, even by the author, never decides", func(fx *linkFixture) *ingress.Event {
			ev := fx.comment("dana", "the-loop execute")
			ev.Action = "edited"
			return ev
		}, "", "not-a-decision (issue_comment.edited)"},
		{"a comment GitHub does not have", func(fx *linkFixture) *ingress.Event {
			ev := fx.comment("dana", "the-loop execute")
			ev.Comments[0].ID = "990000001"
			return ev
		}, ForgedNotFound, ""},
		{"a body other than GitHub's", func(fx *linkFixture) *ingress.Event {
			ev := fx.comment("dana", "Reading the design now")
			ev.Comments[0].Body = "the-loop execute"
			return ev
		}, ForgedOtherBody, ""},
		{"an author other than GitHub's", func(fx *linkFixture) *ingress.Event {
			ev := fx.comment("mallory", "the-loop execute")
			ev.Comments[0].Author = "dana"
			return ev
		}, ForgedOtherAuthor, ""},
		{"edited since it was created", func(fx *linkFixture) *ingress.Event {
			ev := fx.comment("dana", "the-loop execute")
			fx.integ.comments[ev.Comments[0].ID]["updatedAt"] = "2026-01-02T00:00:00Z"
			return ev
		}, ForgedEdited, ""},
		{"a comment on another item", func(fx *linkFixture) *ingress.Event {
			ev := fx.comment("dana", "the-loop execute")
			fx.integ.comments[ev.Comments[0].ID]["ref"] = other.String()
			return ev
		}, ForgedOtherItem, ""},
		{"a real approval made before the gate was entered, replayed", func(fx *linkFixture) *ingress.Event {
			ev := fx.comment("dana", "the-loop execute")
			old := time.Now().Add(-24 * time.Hour).UTC().Format(time.RFC3339)
			fx.integ.comments[ev.Comments[0].ID]["createdAt"] = old
			fx.integ.comments[ev.Comments[0].ID]["updatedAt"] = old
			return ev
		}, ForgedStale, ""},
		{"a comment without an id", func(fx *linkFixture) *ingress.Event {
			ev := fx.comment("dana", "the-loop execute")
			ev.Comments[0].ID = ""
			return ev
		}, ForgedNoID, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fx := newLinkFixture(t, "https://github.com/octo/demo.git", nil)
			fx.arm(t)
			fx.d.link.onSpawn(context.Background(), fx.item, fx.cwd, "sess-1", nil)
			require.Nil(t, fx.advance(t, tc.event(fx)), "the gate was not consulted")
			st, err := fx.state(t)
			require.NoError(t, err)
			require.Equal(t, "phase-selection", st.CurrentNode)
			require.Empty(t, st.Decisions)
			if tc.reason != "" {
				require.True(t, fx.obs.has(ingress.EventForged, "reason", tc.reason), "routing.forged %s", tc.reason)
			} else {
				require.False(t, fx.obs.has(ingress.EventForged, "", ""))
				require.True(t, fx.obs.has("graph.skipped", "reason", tc.skip))
			}
			// The approver comments again: that moves it.
			rep := fx.advance(t, fx.comment("dana", "the-loop execute"))
			require.NotNil(t, rep)
			require.True(t, rep.Moved)
		})
	}
}

func TestAnUnconfirmableDecisionIsRetriedNotDropped(t *testing.T) {
	fx := newLinkFixture(t, "https://github.com/octo/demo.git", nil)
	fx.arm(t)
	ctx := context.Background()
	fx.d.link.onSpawn(ctx, fx.item, fx.cwd, "sess-1", nil)
	ev := fx.comment("dana", "the-loop execute")
	fx.integ.mu.Lock()
	fx.integ.getErr = fmt.Errorf("HTTP 500: %w", integrations.ErrServer)
	fx.integ.mu.Unlock()
	rep, err := fx.d.link.onEvent(ctx, fx.item, workitem.Ref{}, fx.cwd, ev)
	require.Error(t, err, "the dispatch fails so the queue redelivers")
	require.ErrorIs(t, err, integrations.ErrServer)
	require.Nil(t, rep)
	st, serr := fx.state(t)
	require.NoError(t, serr)
	require.Equal(t, "phase-selection", st.CurrentNode, "fail closed: nothing moved")
	require.True(t, fx.obs.has("graph.decision_unverified", "", ""))
	require.False(t, fx.obs.has(ingress.EventForged, "", ""), "an outage is not a forgery")

	fx.integ.mu.Lock()
	fx.integ.getErr = nil
	fx.integ.mu.Unlock()
	rep, err = fx.d.link.onEvent(ctx, fx.item, workitem.Ref{}, fx.cwd, ev) // the redelivery
	require.NoError(t, err)
	require.True(t, rep.Moved)
}

// A fresh session replacing a lost one is pointed at every artifact the
// item's graph declares (its nodes' produces and the files its hooks
// validate), not a fixed pair of requirements.md and design.md (issue 21).
func TestFreshSessionArtifactsComeFromTheGraph(t *testing.T) {
	fx := newLinkFixture(t, "https://github.com/octo/demo.git", nil)
	fx.arm(t)
	rec := sessions.Record{Item: fx.item, Cwd: fx.cwd}
	names := fx.d.link.artifactNames(rec)
	for _, want := range []string{"brainstorm.md", "requirements.md", "bugfix.md", "design.md", "testing-plan.md", "tasks.md", "execution-log.md"} {
		require.Contains(t, names, want)
	}
	require.Less(t, slices.Index(names, "brainstorm.md"), slices.Index(names, "requirements.md"), "the graph's order is the reading order")
	require.Less(t, slices.Index(names, "design.md"), slices.Index(names, "tasks.md"))
	got := fx.d.link.artifactNames(sessions.Record{Item: fx.item, Cwd: fx.cwd, Parent: fx.item})
	require.Nil(t, got, "a pull request's own session has the work item's artifacts, not its own")
}
