package ingress

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/integrations/githubsim"
)

// TestPollCoverIsWhatThePollerSynthesises drives the poller and its
// reconcile pass over every shape they cover — an issue's comment, a
// labelled pull request's reviews and inline comments, the PR/CI facts, a
// close — and holds the table's Poll bits to the kinds they produced.
func TestPollCoverIsWhatThePollerSynthesises(t *testing.T) {
	w := newPRCIWorld(t, 0, 15, 16)
	issue := w.gh.open("alice", autoLabel) // #15
	pr, err := w.gh.sim.OpenPullRequestWith(simRepo, githubsim.PullRequest{Author: "alice", Title: "X", Body: "Fixes #15", Head: "feature"})
	require.NoError(t, err)
	require.NoError(t, w.gh.sim.AddLabel(simRepo, pr.Number, "alice", autoLabel))
	w.cycle(t)
	w.clock.advance(time.Second)
	w.gh.comment(issue, "alice", "a comment")
	w.clock.advance(time.Second)
	_, err = w.gh.sim.AddReview(simRepo, pr.Number, githubsim.Review{Author: "alice", Body: "no", State: "CHANGES_REQUESTED"})
	require.NoError(t, err)
	w.clock.advance(time.Second)
	_, err = w.gh.sim.AddReviewComment(simRepo, pr.Number, githubsim.ReviewComment{Author: "alice", Body: "nit", Path: "a.go", Line: 3})
	require.NoError(t, err)
	_, err = w.gh.sim.SetCheckRun(simRepo, pr.Number, githubsim.CheckRun{Name: "lint", Conclusion: "failure"}, false)
	require.NoError(t, err)
	require.NoError(t, w.gh.sim.SetStatus(simRepo, pr.Number, githubsim.Status{Context: "ci/build", State: "error"}, false))
	w.cycle(t)
	require.NoError(t, w.gh.sim.CloseIssue(simRepo, issue, "alice"))
	require.NoError(t, w.gh.sim.MergePullRequest(simRepo, pr.Number, "alice"))
	w.cycle(t)

	got := map[string]PollCover{}
	for _, ev := range w.sink.all() {
		switch {
		case ev.Action == "labeled":
			got[ev.Event] |= PollPresence
		case ev.Action == "closed":
			got[ev.Event] |= PollClose
		case len(ev.Comments) > 0:
			got[ev.Event] |= PollThread
		default:
			t.Errorf("the poller queued %s/%s, which the test does not classify", ev.Event, ev.Action)
		}
	}
	for _, ev := range w.take() {
		got[ev.Event] |= PollPRCI
	}
	want := map[string]PollCover{}
	for _, k := range Kinds() {
		if k.Poll != 0 {
			want[k.Name] = k.Poll
		}
	}
	require.Equal(t, want, got)
}
