package githubsim_test

import (
	"context"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/ingress"
	"github.com/theloop-dev/theloop/integrations/githubsim"
	"github.com/theloop-dev/theloop/ops"
)

// TestWebhooksThroughTheRealReceiver sends the stand-in's webhooks to
// theloop's own receiver (package ingress): signatures verify, and the
// routed events say what happened — the arming label, the human's comment
// with its author, the bot's marked comment dropped as self-authored.
func TestWebhooksThroughTheRealReceiver(t *testing.T) {
	var mu sync.Mutex
	var events []*ingress.Event
	cfg := ingress.DefaultConfig()
	cfg.Path = "/"
	cfg.Secret = []byte("k")
	cfg.Repositories = []string{"demo/widgets"}
	cfg.AuthorizedUsers = []string{"dana"}
	recv, err := ingress.NewReceiver(cfg, ingress.ReceiverDeps{Sink: ingress.SinkFunc(func(_ context.Context, ev *ingress.Event) error {
		mu.Lock()
		defer mu.Unlock()
		events = append(events, ev)
		return nil
	})})
	require.NoError(t, err)
	srv := httptest.NewServer(recv)
	t.Cleanup(srv.Close)

	s := startSim(t, githubsimConfigWithHook(srv.URL, "k"))
	_, err = s.OpenIssue("demo/widgets", "dana", "Export CSV", "")
	require.NoError(t, err)
	require.NoError(t, s.AddLabel("demo/widgets", 1, "dana", ingress.DefaultAutoExecuteLabel))
	_, err = s.Comment("demo/widgets", 1, "dana", "Approved")
	require.NoError(t, err)
	call(t, client(t, s, testToken), ops.GitHubAddComment, map[string]any{"ref": "github:demo/widgets#1", "body": "done\n\n<!-- the-loop:agent-comment -->\n"})
	pr, err := s.OpenPullRequestWith("demo/widgets", githubsim.PullRequest{Author: "dana", Title: "CSV", Body: "Fixes #1", Head: "issue-1"})
	require.NoError(t, err)
	_, err = s.AddReview("demo/widgets", pr.Number, githubsim.Review{Author: "dana", Body: "LGTM", State: "APPROVED"})
	require.NoError(t, err)
	_, err = s.SetCheckRun("demo/widgets", pr.Number, githubsim.CheckRun{Name: "lint", Conclusion: "failure"}, true)
	require.NoError(t, err)
	wait(t, s)

	for _, d := range s.Deliveries() {
		require.Equal(t, 202, d.Status, "%s.%s: %s", d.Event, d.Action, d.Response)
	}
	mu.Lock()
	defer mu.Unlock()
	var labeled, comment, review, check *ingress.Event
	for _, ev := range events {
		switch {
		case ev.Event == "check_run":
			check = ev
		case ev.Event == "pull_request_review":
			review = ev
		case ev.Event == "issues" && ev.Action == "labeled":
			labeled = ev
		case ev.Event == "issue_comment" && len(ev.Comments) > 0:
			require.Nil(t, comment, "only the human's comment carries a body: the bot's is self-authored")
			comment = ev
		}
	}
	require.NotNil(t, labeled)
	require.True(t, labeled.Labeled)
	require.Equal(t, "github:demo/widgets#1", labeled.WorkItems[0].String())
	require.NotNil(t, comment)
	require.Equal(t, "dana", comment.Actor)
	require.Equal(t, "Approved", comment.Comments[0].Body)
	require.NotEmpty(t, comment.DeliveryID)

	// A pull request's review reaches the work item its PR closes.
	require.NotNil(t, review, "pull_request_review.submitted is routed")
	refs := map[string]bool{}
	for _, r := range review.WorkItems {
		refs[r.String()] = true
	}
	require.True(t, refs["github:demo/widgets#1"], "the issue the PR closes (Fixes #1, head issue-1): %v", review.WorkItems)
	require.True(t, refs["github:demo/widgets#2"], "the PR itself: %v", review.WorkItems)
	require.Equal(t, "dana", review.Actor)
	require.Equal(t, "LGTM", review.Comments[0].Body)

	// A check run reaches the PR it lists (check_run.pull_requests) and the
	// issue of its issue-1 head branch.
	require.NotNil(t, check, "check_run.completed is routed")
	var checkRefs []string
	for _, r := range check.WorkItems {
		checkRefs = append(checkRefs, r.String())
	}
	require.Equal(t, []string{"github:demo/widgets#2", "github:demo/widgets#1"}, checkRefs)
}
