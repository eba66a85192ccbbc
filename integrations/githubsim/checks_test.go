package githubsim_test

import (
	"context"
	"errors"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/integrations"
	"github.com/theloop-dev/theloop/integrations/githubsim"
	"github.com/theloop-dev/theloop/ops"
)

// The pulls list, a head's check runs and its combined status, read by the
// real client; a fault on one of them answers as GitHub's outage would.
func TestRealClientPullsAndChecks(t *testing.T) {
	s := startSim(t, githubsim.Config{})
	require.NoError(t, s.AddRepo("demo/widgets", githubsim.RepoOptions{}))
	_, err := s.OpenIssue("demo/widgets", "dana", "Export CSV", "")
	require.NoError(t, err)
	pr, err := s.OpenPullRequestWith("demo/widgets", githubsim.PullRequest{Author: "dana", Title: "CSV", Body: "Fixes #1", Head: "issue-1"})
	require.NoError(t, err)
	sha, err := s.HeadSHA("demo/widgets", pr.Number)
	require.NoError(t, err)
	_, err = s.SetCheckRun("demo/widgets", pr.Number, githubsim.CheckRun{Name: "lint", Status: "queued"}, false)
	require.NoError(t, err)
	run, err := s.SetCheckRun("demo/widgets", pr.Number, githubsim.CheckRun{Name: "lint", Conclusion: "failure"}, false)
	require.NoError(t, err)
	require.NoError(t, s.SetStatus("demo/widgets", pr.Number, githubsim.Status{Context: "ci/build", State: "success"}, false))
	require.NoError(t, s.SetStatus("demo/widgets", pr.Number, githubsim.Status{Context: "ci/deploy", State: "pending"}, false))
	_, err = s.SetCheckRun("demo/widgets", pr.Number, githubsim.CheckRun{Name: "x", Status: "completed"}, false)
	require.ErrorIs(t, err, githubsim.ErrInvalid, "a completed run needs a conclusion")

	c := client(t, s, testToken)
	pulls := call(t, c, ops.GitHubListPulls, map[string]any{"repo": "demo/widgets"})["pulls"].([]any)
	require.Len(t, pulls, 1)
	p := pulls[0].(map[string]any)
	require.Equal(t, pr.Number, p["number"])
	require.Equal(t, "issue-1", p["headRef"])
	require.Equal(t, sha, p["headSha"])
	require.Equal(t, "Fixes #1", p["body"])
	require.Equal(t, "open", p["state"])
	require.Equal(t, "github:demo/widgets#2", p["ref"])

	runs := call(t, c, ops.GitHubListCheckRuns, map[string]any{"ref": "github:demo/widgets#2", "sha": sha})["checkRuns"].([]any)
	require.Equal(t, []any{map[string]any{"id": int(run.ID), "name": "lint", "status": "completed", "conclusion": "failure",
		"url": "https://github.com/demo/widgets/runs/" + strconv.FormatInt(run.ID, 10)}}, runs, "the same name updates the run")

	st := call(t, c, ops.GitHubCombinedStatus, map[string]any{"ref": "github:demo/widgets#2", "sha": sha})
	require.Equal(t, "pending", st["state"])
	require.Len(t, st["statuses"], 2)

	_, err = c.Call(context.Background(), ops.GitHubListCheckRuns, map[string]any{"ref": "github:demo/widgets#2", "sha": "main; rm -rf"})
	require.ErrorIs(t, err, integrations.ErrInvalidArgument)
	s.InjectFault(githubsim.Fault{PathContains: "/status", Status: 404})
	_, err = c.Call(context.Background(), ops.GitHubCombinedStatus, map[string]any{"ref": "github:demo/widgets#2", "sha": sha})
	require.True(t, errors.Is(err, integrations.ErrNotFound), "%v", err)
}
