package githubsim_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/integrations/githubsim"
	"github.com/theloop-dev/theloop/ops"
)

// The repository's activity through the real client: issue events newest
// first over pages, each at the time of its change (the issue's updated_at,
// or closed_at, in its webhook); comments and issues updated since a time,
// oldest update first; and a page asked again with its ETag is 304.
func TestRealClientRepositoryActivity(t *testing.T) {
	s := startSim(t, githubsim.Config{PageSize: 2, MaxPerPage: 2})
	set := client(t, s, testToken)
	const repo = "octo/demo"
	require.NoError(t, s.AddRepo(repo, githubsim.RepoOptions{}))
	is, err := s.OpenIssue(repo, "dana", "t", "b", "bug")
	require.NoError(t, err)
	require.NoError(t, s.AddLabel(repo, is.Number, "erin", "ready"))
	require.NoError(t, s.CloseIssue(repo, is.Number, "dana"))
	c, err := s.Comment(repo, is.Number, "dana", "after the close")
	require.NoError(t, err)

	// Events: three, newest first, two a page.
	first := call(t, set, ops.GitHubListRepoIssueEvents, map[string]any{"repo": repo})
	evs := first["events"].([]any)
	require.Len(t, evs, 2)
	require.Equal(t, true, first["more"])
	second := call(t, set, ops.GitHubListRepoIssueEvents, map[string]any{"repo": repo, "page": 2})
	evs = append(evs, second["events"].([]any)...)
	require.Equal(t, false, second["more"])
	var kinds []string
	for _, e := range evs {
		kinds = append(kinds, e.(map[string]any)["event"].(string))
	}
	require.Equal(t, []string{"closed", "labeled", "labeled"}, kinds)
	ready := evs[1].(map[string]any)
	require.Equal(t, "ready", ready["label"])
	require.Equal(t, "erin", ready["actor"])
	require.Equal(t, is.Number, ready["number"])
	snap, err := s.Issue(repo, is.Number)
	require.NoError(t, err)
	require.Equal(t, snap.ClosedAt.UTC().Format(time.RFC3339), evs[0].(map[string]any)["createdAt"], "the close event at closed_at")

	// Comments and issues since a time (inclusive), oldest update first.
	since := c.UpdatedAt.UTC().Format(time.RFC3339)
	cs := call(t, set, ops.GitHubListRepoComments, map[string]any{"repo": repo, "since": since})["comments"].([]any)
	require.Len(t, cs, 1)
	require.Equal(t, int(c.ID), cs[0].(map[string]any)["id"])
	require.Equal(t, is.Number, cs[0].(map[string]any)["number"])
	later := c.UpdatedAt.Add(time.Hour).UTC().Format(time.RFC3339)
	require.Empty(t, call(t, set, ops.GitHubListRepoComments, map[string]any{"repo": repo, "since": later})["comments"])
	items := call(t, set, ops.GitHubListRepoIssues, map[string]any{"repo": repo, "since": since})["items"].([]any)
	require.Len(t, items, 1)
	require.Equal(t, "closed", items[0].(map[string]any)["state"])
	require.NotEmpty(t, items[0].(map[string]any)["createdAt"])
	_, err = set.Call(t.Context(), ops.GitHubListRepoComments, map[string]any{"repo": repo, "since": "yesterday"})
	require.Error(t, err, "a since that is no time is refused before any request")

	// A conditional request: the same page, not modified.
	get := func(etag string) *http.Response {
		req, err := http.NewRequest("GET", s.URL()+"/repos/"+repo+"/issues/events", nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "token "+testToken)
		if etag != "" {
			req.Header.Set("If-None-Match", etag)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		_ = resp.Body.Close()
		return resp
	}
	resp := get("")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	etag := resp.Header.Get("ETag")
	require.NotEmpty(t, etag)
	require.Equal(t, http.StatusNotModified, get(etag).StatusCode)
	require.NoError(t, s.RemoveLabel(repo, is.Number, "dana", "bug"))
	require.Equal(t, http.StatusOK, get(etag).StatusCode, "a new event changes the page")
}
