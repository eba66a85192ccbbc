package daemon_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/integrations/githubsim"
	"github.com/theloop-dev/theloop/loop/daemon"
	"github.com/theloop-dev/theloop/sessions"
)

// A labeled issue spawns one session whose first message is the spawn
// prompt with the graph context: the graph is entered before the prompt is
// composed, so it names phase-selection and carries its assignment — no
// "NOT ENTERED YET" followed by the node in a second paste (issue 21). The
// session is announced on the issue with the tmux attach command.
func TestLabeledIssueSpawnsWithSpawnPromptAndGraphContext(t *testing.T) {
	w := newWorld(t, nil)
	n := w.openLabeled()
	// The fake logs what it reads line by line; wait for the whole prompt.
	w.eventually("the spawn prompt in the session", func() bool {
		got := w.received()
		return strings.Contains(got, "Start by running `/the-loop:work-on github:octo/demo#1`") && strings.Contains(got, "## Interaction: work-item") &&
			strings.Contains(got, "the-loop assignment for issue-1:") && strings.Contains(got, "you are now at node: phase-selection") // the prompt's last parts: it is all there
	})
	got := w.received()
	require.NotContains(t, got, "NOT ENTERED YET")
	require.Contains(t, got, "node: phase-selection")
	require.Contains(t, got, "the-loop assignment for issue-1:")
	require.Contains(t, got, "you are now at node: phase-selection")
	w.eventually("the announcement", func() bool { return len(w.observed("comment", "")) > 0 })
	w.waitIdle()
	require.Equal(t, 1, w.spawns())
	require.Empty(t, w.observed("paste", "graph.assignment"), "the start node's assignment is in the spawn prompt, not a second paste")
	spawned := w.observed("paste", "spawn-prompt")
	require.Len(t, spawned, 1)
	require.Contains(t, spawned[0].Text, "you are now at node: phase-selection", "the spawn prompt itself carries the assignment")
	st := w.state(n)
	require.Equal(t, "phase-selection", st.CurrentNode)
	comments, err := w.sim.Comments(repoFull, n)
	require.NoError(t, err)
	var announce string
	for _, c := range comments {
		if strings.Contains(c.Body, w.d.Sessions().AttachCommand("loop-github-octo-demo-1")) {
			announce = c.Body
		}
	}
	require.NotEmpty(t, announce, "announce comment with the attach command")
	require.Contains(t, announce, "<!-- the-loop:agent-comment -->")
	t.Log(w.eventNames())
}

const brainstormMD = `# Brainstorm

## Problem / opportunity

Widgets are missing.

## Open questions

- none
`

const requirementsMD = `# Requirements

## Requirements

- R1: the widget exists.

## Security considerations

- No new trust boundary.
`

// The main path: spawn → an authorized "the-loop execute" answers
// phase-selection (gate consulted before the event prompt) → the agent
// claims requirements-definition → the human gate waits → an unauthorized
// "Approved" and a self-marked "Approved" change nothing → the authorized
// "Approved" locks requirements.md and the design assignment is pasted.
func TestGateApprovedByAuthorizedCommentLocksAndPastesNextAssignment(t *testing.T) {
	w := newWorld(t, nil)
	n := w.openLabeled()
	w.waitIdle()
	require.Equal(t, "phase-selection", w.state(n).CurrentNode)

	_, err := w.sim.Comment(repoFull, n, human, "the-loop execute")
	require.NoError(t, err)
	w.waitIdle()
	st := w.state(n)
	require.Equal(t, "brainstorming", st.CurrentNode, "phase-selection answered by the gate")
	// The fake logs what it reads line by line, a little after the receipt.
	w.eventually("the event prompt with the gate's verdict", func() bool {
		return strings.Contains(w.received(), "the gate was consulted with this event first")
	})
	require.Contains(t, w.received(), "/the-loop:brainstorm issue-1", "the brainstorming assignment was pasted")

	c := w.claim(n, "brainstorming", map[string]string{"brainstorm.md": brainstormMD})
	require.Equal(t, "requirements-definition", c.CurrentNode, "claim: %+v", c)
	c = w.claim(n, "requirements-definition", map[string]string{"requirements.md": requirementsMD})
	require.Equal(t, "requirements-approval", c.CurrentNode, "claim: %+v", c)

	before := w.state(n)
	_, err = w.sim.Comment(repoFull, n, stranger, "Approved")
	require.NoError(t, err)
	_, err = w.sim.Comment(repoFull, n, human, "Approved\n\n<!-- the-loop:agent-comment -->\n")
	require.NoError(t, err)
	w.waitIdle()
	after := w.state(n)
	require.Equal(t, "requirements-approval", after.CurrentNode, "unauthorized and self-marked comments change nothing")
	require.Equal(t, before.Decisions.Len(), after.Decisions.Len())
	require.NotContains(t, readSpec(t, w, n, "requirements.md"), "status: approved")

	_, err = w.sim.Comment(repoFull, n, human, "Approved")
	require.NoError(t, err)
	w.waitIdle()
	st = w.state(n)
	require.Equal(t, "design", st.CurrentNode)
	require.Contains(t, readSpec(t, w, n, "requirements.md"), "status: approved")
	dec, ok := st.Decisions.Get("requirements-approval")
	require.True(t, ok, "the verdict is a recorded decision")
	require.Equal(t, "@"+human, dec.By)
	require.NotNil(t, dec.Signature, "signed with the daemon's key (docs/decisions.md §16)")
	w.eventually("the design assignment pasted", func() bool {
		return strings.Contains(w.received(), "/the-loop:create-design issue-1")
	})
	require.Equal(t, 1, w.spawns())
}

func readSpec(t *testing.T, w *world, n int, name string) string {
	b, err := os.ReadFile(filepath.Join(w.checkout(n), "docs", "specs", fmt.Sprintf("issue-%d", n), name))
	require.NoError(t, err)
	return string(b)
}

// The same delivery twice (GitHub's Redeliver) and the same comment under
// two delivery ids (a repository hook and an app hook) have one effect.
func TestDuplicateDeliveriesAndContentHaveOneEffect(t *testing.T) {
	w := newWorld(t, nil)
	// A second hook on the same receiver: every change arrives twice,
	// under two delivery ids.
	n := w.openLabeled()
	w.waitIdle()
	require.Equal(t, 1, w.spawns())

	for _, d := range w.sim.Deliveries() {
		if d.Action == "labeled" && d.Sender == human {
			require.NoError(t, w.sim.Redeliver(d.ID))
		}
	}
	w.waitIdle()
	require.Equal(t, 1, w.spawns(), "a redelivered spawn spawns nothing")

	cm, err := w.sim.Comment(repoFull, n, human, "please also consider gadgets")
	require.NoError(t, err)
	w.waitIdle()
	pastes := strings.Count(w.received(), "please also consider gadgets")
	require.Equal(t, 1, pastes)
	// Reactions are posted in the background (reactions.go).
	w.eventually("the started and completed reactions on the triggering comment", func() bool {
		cs, err := w.sim.Comments(repoFull, n)
		require.NoError(t, err)
		for _, c := range cs {
			if c.ID == cm.ID {
				return slices.Contains(c.Reactions, "theloop-bot:eyes") && slices.Contains(c.Reactions, "theloop-bot:hooray")
			}
		}
		return false
	})
	var id string
	for _, d := range w.sim.Deliveries() {
		if d.CommentID == cm.ID {
			id = d.ID
		}
	}
	require.NotEmpty(t, id)
	require.NoError(t, w.sim.Redeliver(id))
	w.waitIdle()
	require.Equal(t, 1, strings.Count(w.received(), "please also consider gadgets"), "a redelivered comment is pasted once")
}

// One change delivered by two hooks (two delivery ids, one content
// identity) is handled once.
func TestSameCommentUnderTwoDeliveryIDsHasOneEffect(t *testing.T) {
	w := newWorldHooks(t, 2, nil)
	sim := w.sim
	n := w.openLabeled()
	w.waitIdle()
	require.Equal(t, 1, w.spawns(), "two labeled deliveries, one spawn")
	_, err := sim.Comment(repoFull, n, human, "please also consider gizmos")
	require.NoError(t, err)
	w.waitIdle()
	require.Equal(t, 1, strings.Count(w.received(), "please also consider gizmos"))
	// The receiver's cache or, past it, the queue's content bucket caught
	// the second delivery.
	dups := w.count("dispatch.duplicate-content")
	for _, o := range w.observed("event", "routing.dropped") {
		if r, _ := o.Fields["reason"].(string); strings.Contains(r, "duplicate") {
			dups++
		}
	}
	require.GreaterOrEqual(t, dups, 1)
}

func (w *world) status(n int) sessions.Status {
	reg, err := sessions.OpenRegistry(sessions.RegistryDir(w.cfg.StateRoot))
	require.NoError(w.t, err)
	r, err := reg.Get(w.item(n))
	if err != nil {
		return ""
	}
	return r.Status
}

// Control keywords (docs/daemon.md §5, §6.3) with requireStartCommand: the
// label only arms; an unauthorized start does nothing; an authorized start
// spawns; pause holds events back; resume lets them through; stop closes.
// Consumed commands never reach the agent.
func TestControlKeywordsStartPauseResumeStop(t *testing.T) {
	w := newWorld(t, func(c *daemon.Config) { c.Routing.RequireStartCommand = true })
	n := w.openLabeled()
	w.waitIdle()
	require.Equal(t, 0, w.spawns(), "the label arms but does not start")

	_, err := w.sim.Comment(repoFull, n, stranger, "the-loop start")
	require.NoError(t, err)
	w.waitIdle()
	require.Equal(t, 0, w.spawns(), "an unauthorized start does nothing")

	_, err = w.sim.Comment(repoFull, n, human, "the-loop start")
	require.NoError(t, err)
	w.waitIdle()
	require.Equal(t, 1, w.spawns())
	require.Equal(t, sessions.StatusActive, w.status(n))
	require.Equal(t, "phase-selection", w.state(n).CurrentNode, "the graph starts once start was requested")

	_, err = w.sim.Comment(repoFull, n, human, "the-loop pause")
	require.NoError(t, err)
	w.waitIdle()
	require.Equal(t, sessions.StatusPaused, w.status(n))
	_, err = w.sim.Comment(repoFull, n, human, "note while paused: use blue")
	require.NoError(t, err)
	w.waitIdle()
	require.NotContains(t, w.received(), "use blue", "paused: nothing delivered")

	_, err = w.sim.Comment(repoFull, n, human, "the-loop resume")
	require.NoError(t, err)
	w.waitIdle()
	require.Equal(t, sessions.StatusActive, w.status(n))
	_, err = w.sim.Comment(repoFull, n, human, "note after resume: use green")
	require.NoError(t, err)
	w.waitIdle()
	w.eventually("the comment after resume pasted", func() bool { return strings.Contains(w.received(), "use green") })

	_, err = w.sim.Comment(repoFull, n, human, "the-loop stop")
	require.NoError(t, err)
	w.waitIdle()
	require.Equal(t, sessions.StatusClosed, w.status(n))
	// The start comment spawned the session, so its excerpt is in the
	// spawn prompt; the other commands were consumed, never forwarded.
	for _, kw := range []string{"the-loop pause", "the-loop resume", "the-loop stop"} {
		require.NotContains(t, w.received(), kw, "consumed commands are never forwarded")
	}
	require.Equal(t, 1, strings.Count(w.received(), `"body": "the-loop start"`))
	require.Equal(t, 1, w.spawns())
}

// Closing the issue ends the session and removes the worktree. By default
// (keepSessionOnClose, killHarnessOnClose) the tmux session is kept for a
// post-mortem — its last screen readable — and the harness inside it is
// terminated.
func TestCloseEventEndsSessionAndCleansWorktree(t *testing.T) {
	w := newWorld(t, landlockOnly)
	n := w.openLabeled()
	w.waitIdle()
	cwd := w.checkout(n)
	require.DirExists(t, cwd)
	pid := procOf(t, w.harnessPID(n))
	require.NoError(t, w.sim.CloseIssue(repoFull, n, human))
	w.waitIdle()
	require.Equal(t, sessions.StatusClosed, w.status(n))
	require.NoDirExists(t, cwd)
	name := sessions.TmuxName(w.item(n))
	require.NoError(t, exec.Command("tmux", "-S", w.socket, "has-session", "-t", "="+name).Run(), "the tmux session is retained")
	out, err := exec.Command("tmux", "-S", w.socket, "list-panes", "-t", "="+name+":", "-F", "#{pane_dead}").Output()
	require.NoError(t, err)
	require.Equal(t, "1", strings.TrimSpace(string(out)), "the pane is dead")
	w.eventually("the harness process to be gone", func() bool { return !pid.alive() })
	screen, err := exec.Command("tmux", "-S", w.socket, "capture-pane", "-p", "-S", "-", "-t", "="+name+":").Output()
	require.NoError(t, err)
	require.Contains(t, string(screen), "fake claude", "the transcript is still on the screen")
	require.Equal(t, 1, w.count("session.retained"))
	require.Equal(t, 1, w.count("session.harness_terminated"))
}

// keepSessionOnClose false kills the tmux session on close.
func TestCloseWithoutKeepSessionKillsTmux(t *testing.T) {
	w := newWorld(t, func(c *daemon.Config) { c.Routing.Tmux.KeepSessionOnClose = false })
	n := w.openLabeled()
	w.waitIdle()
	require.NoError(t, w.sim.CloseIssue(repoFull, n, human))
	w.waitIdle()
	require.Equal(t, sessions.StatusClosed, w.status(n))
	err := exec.Command("tmux", "-S", w.socket, "has-session", "-t", "="+sessions.TmuxName(w.item(n))).Run()
	require.Error(t, err, "the tmux session is gone")
}

// killHarnessOnClose false keeps the harness running in the kept session
// (the reference's pre-issue-94 behaviour).
func TestCloseWithoutKillHarnessKeepsItRunning(t *testing.T) {
	w := newWorld(t, func(c *daemon.Config) {
		landlockOnly(c)
		c.Routing.Tmux.KillHarnessOnClose = false
	})
	n := w.openLabeled()
	w.waitIdle()
	pid := procOf(t, w.harnessPID(n))
	require.NoError(t, w.sim.CloseIssue(repoFull, n, human))
	w.waitIdle()
	require.Equal(t, sessions.StatusClosed, w.status(n))
	require.True(t, pid.alive(), "the harness still runs")
	require.Equal(t, 0, w.count("session.harness_terminated"))
}

func (w *world) harnessPID(n int) int {
	w.t.Helper()
	out, err := exec.Command("tmux", "-S", w.socket, "list-panes", "-t", "="+sessions.TmuxName(w.item(n))+":", "-F", "#{pane_pid}").Output()
	require.NoError(w.t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	require.NoError(w.t, err)
	return pid
}

// A GitHub 5xx storm while events are dispatched loses nothing: the
// events are pasted, the announcement that failed is retried by the
// dispatcher until GitHub recovers, nothing is dead-lettered. (Hook side
// effects that fail during the storm are reported as graph.hook_degraded;
// they are not replayed.)
func TestGitHub5xxStormLosesNothing(t *testing.T) {
	w := newWorld(t, nil)
	is, err := w.sim.OpenIssue(repoFull, human, "Add a widget", "body")
	require.NoError(t, err)
	w.waitIdle()
	w.sim.InjectFault(githubsim.Fault{Status: 502})
	require.NoError(t, w.sim.AddLabel(repoFull, is.Number, human, label))
	_, err = w.sim.Comment(repoFull, is.Number, human, "storm note one")
	require.NoError(t, err)
	_, err = w.sim.Comment(repoFull, is.Number, human, "storm note two")
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, w.sim.WaitDeliveries(ctx))
	w.eventually("the announcement to fail at least once", func() bool { return w.count("session.announce_failed") > 0 })
	w.sim.RemoveFaults()
	w.waitIdle()
	got := w.received()
	require.Contains(t, got, "storm note one")
	require.Contains(t, got, "storm note two")
	require.Less(t, strings.Index(got, "storm note one"), strings.Index(got, "storm note two"), "per-item order kept")
	comments, err := w.sim.Comments(repoFull, is.Number)
	require.NoError(t, err)
	announced := 0
	for _, c := range comments {
		if strings.Contains(c.Body, "attach -t =loop-github-octo-demo-1") {
			announced++
		}
	}
	require.Equal(t, 1, announced)
	dead, err := w.d.DeadLetters(ctx)
	require.NoError(t, err)
	require.Empty(t, dead)
	require.Equal(t, 1, w.spawns())
}

func (w *world) killHarness(n int) {
	w.t.Helper()
	name := sessions.TmuxName(w.item(n))
	out, err := exec.Command("tmux", "-S", w.socket, "list-panes", "-t", "="+name+":", "-F", "#{pane_pid}").Output()
	require.NoError(w.t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	require.NoError(w.t, err)
	require.NoError(w.t, syscall.Kill(pid, syscall.SIGKILL))
	w.eventually("the pane to die", func() bool {
		out, _ := exec.Command("tmux", "-S", w.socket, "list-panes", "-t", "="+name+":", "-F", "#{pane_dead}").Output()
		return strings.TrimSpace(string(out)) != "0"
	})
}

// A dead session is resumed on the next event; when its conversation cannot
// be resumed, a fresh one starts, seeded with the work item's artifacts.
func TestDeadSessionResumesElseFreshWithArtifacts(t *testing.T) {
	w := newWorld(t, landlockOnly)
	n := w.openLabeled()
	w.waitIdle()
	w.killHarness(n)
	_, err := w.sim.Comment(repoFull, n, human, "first note after the crash")
	require.NoError(t, err)
	w.waitIdle()
	w.eventually("the note pasted into the resumed session", func() bool { return strings.Contains(w.received(), "first note after the crash") })
	argv, _ := os.ReadFile(filepath.Join(w.claude, "argv.log"))
	require.Contains(t, string(argv), "\tresume\t", "the conversation was resumed")

	// The conversation is gone (as when Claude Code lost it): fresh start.
	require.NoError(t, os.RemoveAll(filepath.Join(w.claude, "conversations")))
	w.killHarness(n)
	_, err = w.sim.Comment(repoFull, n, human, "second note after the crash")
	require.NoError(t, err)
	w.waitIdle()
	w.eventually("the note pasted into the fresh session", func() bool { return strings.Contains(w.received(), "second note after the crash") })
	require.Equal(t, 2, w.spawns(), "one fresh conversation after the failed resume")
	reg, err := sessions.OpenRegistry(sessions.RegistryDir(w.cfg.StateRoot))
	require.NoError(t, err)
	rec, err := reg.Get(w.item(n))
	require.NoError(t, err)
	require.Len(t, rec.Fallbacks, 1, "the fresh-with-artifacts fallback is recorded")
	var fresh bool
	for _, o := range w.observed("event", "dispatch.respawned") {
		if o.Fields["fresh_with_artifacts"] == true {
			fresh = true
		}
	}
	require.True(t, fresh)
}

// A webhook missed while loopd was down (GitHub does not redeliver) is
// caught by the reconcile pass at start: the issue closed meanwhile ends
// its session.
func TestReconcileAtStartCatchesWhatWasMissedWhileDown(t *testing.T) {
	w := newWorld(t, nil)
	n := w.openLabeled()
	w.waitIdle()
	require.Equal(t, sessions.StatusActive, w.status(n))
	w.stop()
	require.NoError(t, w.sim.CloseIssue(repoFull, n, human))
	require.NoError(t, w.sim.WaitDeliveries(context.Background()))
	last := w.sim.Deliveries()[len(w.sim.Deliveries())-1]
	require.False(t, last.OK(), "the close webhook was missed")

	w.cfg.ReconcileInterval = 0 // once, at start
	w.start()
	w.eventually("the session closed by the reconcile pass", func() bool { return w.status(n) == sessions.StatusClosed })
}

// "the-loop do" starts the work item on the ad-hoc loop; "the-loop
// cleanup" ends the session and removes its record and worktree.
func TestDoSelectsTheAdhocLoopAndCleanupTearsDown(t *testing.T) {
	w := newWorld(t, func(c *daemon.Config) { c.Routing.RequireStartCommand = true })
	n := w.openLabeled()
	_, err := w.sim.Comment(repoFull, n, human, "the-loop do")
	require.NoError(t, err)
	w.waitIdle()
	require.Equal(t, 1, w.spawns())
	require.Equal(t, "pdlc-adhoc-loop", w.state(n).Loop)
	cwd := w.checkout(n)

	_, err = w.sim.Comment(repoFull, n, human, "the-loop cleanup")
	require.NoError(t, err)
	w.waitIdle()
	require.Equal(t, sessions.Status(""), w.status(n), "the session record is gone")
	require.NoDirExists(t, cwd)
	err = exec.Command("tmux", "-S", w.socket, "has-session", "-t", "="+sessions.TmuxName(w.item(n))).Run()
	require.Error(t, err, "the tmux session is gone")
}

// A comment edited while loopd was down (GitHub does not redeliver) is
// caught by the reconcile pass at start and pasted once; an edit the
// webhook delivered is not pasted again when the next pass lists it (the
// content identity, id and updated_at, is the same on both ingresses).
func TestReconcileCatchesACommentEditedWhileDown(t *testing.T) {
	w := newWorld(t, nil)
	n := w.openLabeled()
	cm, err := w.sim.Comment(repoFull, n, human, "first note")
	require.NoError(t, err)
	w.waitIdle()
	w.eventually("the first note pasted", func() bool { return strings.Contains(w.received(), "first note") })

	// restart runs loopd again with one reconcile pass at start and waits
	// for that pass and what it queued.
	restart := func() {
		w.stop()
		passes := w.count("reconcile.done")
		w.cfg.ReconcileInterval = 0
		w.start()
		w.eventually("the reconcile pass", func() bool { return w.count("reconcile.done") > passes })
		w.waitIdle()
	}
	restart() // the poller's first sight of the thread: its history is baselined
	require.Equal(t, 1, strings.Count(w.received(), "first note"))

	w.stop()
	_, err = w.sim.EditComment(repoFull, cm.ID, human, "first note, edited while down")
	require.NoError(t, err)
	require.NoError(t, w.sim.WaitDeliveries(context.Background()))
	last := w.sim.Deliveries()[len(w.sim.Deliveries())-1]
	require.False(t, last.OK(), "the edit's webhook was missed")
	restart()
	w.eventually("the missed edit pasted", func() bool { return strings.Contains(w.received(), "edited while down") })

	// A live edit arrives by webhook; the next pass lists it and has no
	// second effect.
	_, err = w.sim.EditComment(repoFull, cm.ID, human, "second edit, live")
	require.NoError(t, err)
	w.waitIdle()
	w.eventually("the live edit pasted", func() bool { return strings.Contains(w.received(), "second edit, live") })
	dups := w.count("dispatch.duplicate-content")
	restart()
	require.Greater(t, w.count("dispatch.duplicate-content"), dups, "the pass offered the edit; the queue's content record caught it")
	require.Equal(t, 1, strings.Count(w.received(), "edited while down"))
	require.Equal(t, 1, strings.Count(w.received(), "second edit, live"), "the same edit by webhook and by poll is pasted once")
	require.Equal(t, 1, w.spawns())
}
