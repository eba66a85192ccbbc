package daemon_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/integrations/githubsim"
	"github.com/theloop-dev/theloop/loop/daemon"
	"github.com/theloop-dev/theloop/sessions"
)

// With the hooks' deliveries refused to loopd (GitHub answers 403: no
// admin:repo_hook), what was sent while loopd was down still reaches the
// agent at the next start, through the poller's repository pass: a comment
// on a labelled item, a control command on an issue no label arms, a label
// and a pull request opened for the item — each once, and a further
// restart brings none of them again (issue 34).
func TestLostDeliveriesReachTheAgentWithoutRedelivery(t *testing.T) {
	w := newWorld(t, func(c *daemon.Config) { c.ReconcileInterval = 0 }) // one reconcile pass, at each start
	w.sim.InjectFault(githubsim.Fault{PathContains: "/hooks", Status: 403, Body: `{"message":"Resource not accessible by integration"}`})
	n := w.openLabeled()
	w.waitIdle()
	w.eventually("the session to start", func() bool { return w.spawns() == 1 })
	plain, err := w.sim.OpenIssue(repoFull, human, "A question", "Nothing arms this one.")
	require.NoError(t, err)
	w.waitIdle()

	w.stop()
	// The arming label goes: the item's thread is no longer the labelled
	// items' pass's to read, only the repository's.
	require.NoError(t, w.sim.RemoveLabel(repoFull, n, human, label))
	_, err = w.sim.Comment(repoFull, n, human, "written while loopd was down")
	require.NoError(t, err)
	_, err = w.sim.Comment(repoFull, plain.Number, human, "the-loop start")
	require.NoError(t, err)
	require.NoError(t, w.sim.AddLabel(repoFull, n, human, "needs-design-review"))
	pr, err := w.sim.OpenPullRequestWith(repoFull, githubsim.PullRequest{Author: human, Title: "The widget, drafted while loopd was down", Body: "Fixes #" + itoa(n), Head: "issue-" + itoa(n)})
	require.NoError(t, err)
	require.NoError(t, w.sim.WaitDeliveries(context.Background()))
	lost := 0
	for _, d := range w.sim.Deliveries() {
		if !d.OK() {
			lost++
		}
	}
	require.GreaterOrEqual(t, lost, 4, "the deliveries failed while loopd was down")

	w.start()
	w.eventually("the comment in the session", func() bool { return strings.Contains(w.received(), "written while loopd was down") })
	w.eventually("the label in the session", func() bool { return strings.Contains(w.received(), "needs-design-review") })
	w.eventually("the pull request in a session", func() bool { return strings.Contains(w.received(), "drafted while loopd was down") })
	w.waitIdle()
	require.Zero(t, w.sim.RedeliveryRequests(), "nothing could be redelivered")
	once := func() {
		t.Helper()
		got := w.received()
		for _, s := range []string{"written while loopd was down", "needs-design-review"} {
			require.Equal(t, 1, strings.Count(got, s), "%q reached the agent once\n%s", s, got)
		}
		require.Equal(t, 1, strings.Count(got, "drafted while loopd was down"), "the pull request reached the agent once\n%s", got)
		require.Equal(t, 1, w.spawns(), "one session: the pull request went to the item's")
		// The start on an issue nothing arms is refused as its webhook
		// would be: it came through intake, once.
		refused := 0
		for _, o := range w.observed(daemon.KindEvent, "control.rejected") {
			if o.WorkItem == "github:"+repoFull+"#"+itoa(plain.Number) {
				refused++
			}
		}
		require.Equal(t, 1, refused, "the start on the unarmed issue was handled once\n%s", w.eventNames())
		rec, ok := w.record("github:" + repoFull + "#" + itoa(n))
		require.True(t, ok)
		require.Equal(t, sessions.StatusActive, rec.Status)
		_ = pr
	}
	once()

	// Another start looks again and brings nothing twice.
	w.stop()
	w.start()
	w.waitIdle()
	once()
}
