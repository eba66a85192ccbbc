package githubsim_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/integrations"
	"github.com/theloop-dev/theloop/integrations/githubsim"
	"github.com/theloop-dev/theloop/ops"
)

const testToken = "sim-token-123"

func startSim(t testing.TB, cfg githubsim.Config) *githubsim.Server {
	t.Helper()
	if cfg.Token == "" {
		cfg.Token = testToken
	}
	s, err := githubsim.Start(cfg)
	require.NoError(t, err)
	t.Cleanup(s.Close)
	return s
}

// client is the real integrations.Set on the api transport, pointed at the
// stand-in: what the daemon and loopctl use against GitHub.
func client(t testing.TB, s *githubsim.Server, token string) *integrations.Set {
	t.Helper()
	set, err := integrations.New(integrations.Config{GitHub: &integrations.GitHubConfig{
		Transport: integrations.TransportAPI, MaxAttempts: 3, TimeoutSeconds: 5,
		API: integrations.GitHubAPIConfig{BaseURL: s.URL()},
	}}, integrations.Deps{
		Env:   func(k string) (string, bool) { return token, k == "GH_TOKEN" },
		Sleep: func(ctx context.Context, d time.Duration) error { return ctx.Err() }, // no real backoff
	})
	require.NoError(t, err)
	return set
}

func call(t testing.TB, set *integrations.Set, op graph.Operation, args map[string]any) map[string]any {
	t.Helper()
	res, err := set.Call(context.Background(), op, args)
	require.NoError(t, err, "%s %v", op, args)
	return res
}

// TestRealClientEveryOperation drives every GitHub operation of the real
// client through the stand-in and checks the answers and the state.
func TestRealClientEveryOperation(t *testing.T) {
	for _, prefix := range []string{"", "/api/v3"} {
		t.Run("prefix="+prefix, func(t *testing.T) {
			s := startSim(t, githubsim.Config{APIPrefix: prefix, BotLogin: "loop-bot"})
			set := client(t, s, testToken)
			is, err := s.OpenIssue("demo/widgets", "dana", "Export CSV", "Please add CSV export.", "bug")
			require.NoError(t, err)
			require.Equal(t, 1, is.Number)
			ref := "github:demo/widgets#1"

			got := call(t, set, ops.GitHubGetIssue, map[string]any{"ref": ref})
			require.Equal(t, "Export CSV", got["title"])
			require.Equal(t, "dana", got["author"])
			require.Equal(t, "open", got["state"])
			require.Equal(t, []any{"bug"}, got["labels"])
			require.Equal(t, false, got["isPullRequest"])
			require.Equal(t, "https://github.com/demo/widgets/issues/1", got["url"])

			// Labels: add with the loop: prefix replaced, other labels kept.
			got = call(t, set, ops.GitHubSetLabels, map[string]any{"ref": ref, "labels": []string{"loop:requirements"}, "replacePrefix": "loop:"})
			require.Equal(t, []any{"bug", "loop:requirements"}, got["labels"])
			got = call(t, set, ops.GitHubSetLabels, map[string]any{"ref": ref, "labels": []string{"loop:design"}, "replacePrefix": "loop:"})
			require.Equal(t, []any{"bug", "loop:design"}, got["labels"])
			got = call(t, set, ops.GitHubGetLabels, map[string]any{"ref": ref})
			require.Equal(t, []any{"bug", "loop:design"}, got["labels"])

			// Comments: the bot's and a human's, oldest first, authors kept.
			posted := call(t, set, ops.GitHubAddComment, map[string]any{"ref": ref, "body": "<!-- the-loop -->\nhello"})
			require.NotZero(t, posted["id"])
			require.Contains(t, posted["url"], "#issuecomment-")
			_, err = s.Comment("demo/widgets", 1, "dana", "Approved")
			require.NoError(t, err)
			got = call(t, set, ops.GitHubListComments, map[string]any{"ref": ref})
			cs := got["comments"].([]any)
			require.Len(t, cs, 2)
			require.Equal(t, "loop-bot", cs[0].(map[string]any)["author"])
			require.Equal(t, "dana", cs[1].(map[string]any)["author"])
			require.Equal(t, "Approved", cs[1].(map[string]any)["body"])
			require.NotEmpty(t, cs[1].(map[string]any)["createdAt"])
			require.Equal(t, cs[1].(map[string]any)["createdAt"], cs[1].(map[string]any)["updatedAt"], "never edited")

			// An edit moves updatedAt (the poller's content identity of the
			// new version) and is listed with the new body.
			id := cs[1].(map[string]any)["id"].(int)
			_, err = s.EditComment("demo/widgets", int64(id), "dana", "Approved, with a nit")
			require.NoError(t, err)
			edited := call(t, set, ops.GitHubListComments, map[string]any{"ref": ref})["comments"].([]any)[1].(map[string]any)
			require.Equal(t, "Approved, with a nit", edited["body"])
			require.Equal(t, cs[1].(map[string]any)["createdAt"], edited["createdAt"])
			require.Greater(t, edited["updatedAt"], cs[1].(map[string]any)["updatedAt"])
			// Read by id: what the daemon re-reads before a comment decides.
			one := call(t, set, ops.GitHubGetComment, map[string]any{"ref": ref, "commentId": id})
			require.Equal(t, "Approved, with a nit", one["body"])
			require.Equal(t, "dana", one["author"])
			require.Equal(t, ref, one["ref"])
			require.Equal(t, edited["createdAt"], one["createdAt"])
			require.Equal(t, edited["updatedAt"], one["updatedAt"])
			_, err = set.Call(context.Background(), ops.GitHubGetComment, map[string]any{"ref": ref, "commentId": 990000001})
			require.ErrorIs(t, err, integrations.ErrNotFound)

			// Reactions on the issue and on a comment.
			call(t, set, ops.GitHubAddReaction, map[string]any{"ref": ref, "content": "eyes"})
			call(t, set, ops.GitHubAddReaction, map[string]any{"ref": ref, "content": "+1", "commentId": cs[1].(map[string]any)["id"]})
			call(t, set, ops.GitHubAddReaction, map[string]any{"ref": ref, "content": "+1", "commentId": cs[1].(map[string]any)["id"]}) // twice: one reaction
			is, err = s.Issue("demo/widgets", 1)
			require.NoError(t, err)
			require.Equal(t, []string{"loop-bot:eyes"}, is.Reactions)
			comments, err := s.Comments("demo/widgets", 1)
			require.NoError(t, err)
			require.Equal(t, []string{"loop-bot:+1"}, comments[1].Reactions)

			// Items by label, open and closed.
			_, err = s.OpenIssue("demo/widgets", "erin", "Second", "", "loop:design")
			require.NoError(t, err)
			got = call(t, set, ops.GitHubListItemsByLabel, map[string]any{"repo": "demo/widgets", "label": "loop:design"})
			items := got["items"].([]any)
			require.Len(t, items, 2)
			require.Equal(t, 2, items[0].(map[string]any)["number"], "newest first")
			require.Equal(t, "github:demo/widgets#2", items[0].(map[string]any)["ref"])
			require.NoError(t, s.CloseIssue("demo/widgets", 2, "erin"))
			got = call(t, set, ops.GitHubListItemsByLabel, map[string]any{"repo": "demo/widgets", "label": "loop:design"})
			require.Len(t, got["items"].([]any), 1)
			got = call(t, set, ops.GitHubListItemsByLabel, map[string]any{"repo": "demo/widgets", "label": "loop:design", "state": "closed"})
			require.Len(t, got["items"].([]any), 1)

			// A pull request: reviews, review comments, closing issues.
			pr, err := s.OpenPullRequest("demo/widgets", "erin", "CSV export", "Fixes #1, closes #2")
			require.NoError(t, err)
			prRef := fmt.Sprintf("github:demo/widgets#%d", pr.Number)
			rv, err := s.AddReview("demo/widgets", pr.Number, githubsim.Review{Author: "dana", Body: "LGTM", State: "APPROVED"})
			require.NoError(t, err)
			rc, err := s.AddReviewComment("demo/widgets", pr.Number, githubsim.ReviewComment{Author: "dana", Body: "nit", Path: "csv.go", Line: 12})
			require.NoError(t, err)
			got = call(t, set, ops.GitHubGetComment, map[string]any{"ref": prRef, "commentId": int(rv.ID), "commentType": "review"})
			require.Equal(t, map[string]any{"id": int(rv.ID), "author": "dana", "body": "LGTM", "state": "APPROVED", "ref": prRef,
				"url":       fmt.Sprintf("https://github.com/demo/widgets/pull/%d#pullrequestreview-%d", pr.Number, rv.ID),
				"createdAt": "", "updatedAt": "", "submittedAt": got["submittedAt"]}, got)
			require.NotEmpty(t, got["submittedAt"])
			_, err = set.Call(context.Background(), ops.GitHubGetComment, map[string]any{"ref": ref, "commentId": int(rv.ID), "commentType": "review"})
			require.ErrorIs(t, err, integrations.ErrNotFound, "a review is read on its own pull request only")
			got = call(t, set, ops.GitHubGetComment, map[string]any{"ref": prRef, "commentId": int(rc.ID), "commentType": "review-comment"})
			require.Equal(t, "nit", got["body"])
			require.Equal(t, prRef, got["ref"])
			require.Equal(t, got["createdAt"], got["updatedAt"])
			got = call(t, set, ops.GitHubListReviews, map[string]any{"ref": prRef})
			require.Equal(t, "APPROVED", got["reviews"].([]any)[0].(map[string]any)["state"])
			got = call(t, set, ops.GitHubListReviewComments, map[string]any{"ref": prRef})
			require.Equal(t, 12, got["comments"].([]any)[0].(map[string]any)["line"])
			call(t, set, ops.GitHubAddReaction, map[string]any{"ref": prRef, "content": "rocket", "commentId": int(rc.ID), "commentType": "review-comment"})
			got = call(t, set, ops.GitHubClosingIssues, map[string]any{"ref": prRef})
			require.Equal(t, "graphql", got["source"])
			require.Equal(t, []any{1, 2}, got["issues"])
			got = call(t, set, ops.GitHubGetIssue, map[string]any{"ref": prRef})
			require.Equal(t, true, got["isPullRequest"])

			// Every request carried the token, and the record has them all.
			for _, r := range s.Requests() {
				require.True(t, r.Authenticated, "%s %s", r.Method, r.Path)
				require.NotContains(t, r.Body, testToken)
			}
			require.NotEmpty(t, requestsTo(s, "POST", "/repos/demo/widgets/issues/1/comments"))
		})
	}
}

func requestsTo(s *githubsim.Server, method, path string) []githubsim.Request {
	var out []githubsim.Request
	for _, r := range s.Requests() {
		if r.Method == method && r.Path == path {
			out = append(out, r)
		}
	}
	return out
}

func TestRealClientErrors(t *testing.T) {
	s := startSim(t, githubsim.Config{})
	_, err := s.OpenIssue("demo/widgets", "dana", "t", "")
	require.NoError(t, err)

	t.Run("wrong token is ErrUnauthorized", func(t *testing.T) {
		_, err := client(t, s, "wrong").Call(context.Background(), ops.GitHubGetIssue, map[string]any{"ref": "github:demo/widgets#1"})
		require.ErrorIs(t, err, integrations.ErrUnauthorized)
		require.NotContains(t, err.Error(), "wrong")
	})
	t.Run("missing issue is ErrNotFound", func(t *testing.T) {
		_, err := client(t, s, testToken).Call(context.Background(), ops.GitHubGetIssue, map[string]any{"ref": "github:demo/widgets#99"})
		require.ErrorIs(t, err, integrations.ErrNotFound)
	})
	t.Run("a 5xx storm shorter than the retries is ridden out", func(t *testing.T) {
		s.InjectFault(githubsim.Fault{Method: "GET", PathContains: "/labels", Status: http.StatusBadGateway, Times: 2})
		res := call(t, client(t, s, testToken), ops.GitHubGetLabels, map[string]any{"ref": "github:demo/widgets#1"})
		require.Equal(t, []any{}, res["labels"])
		var faulted int
		for _, r := range s.Requests() {
			if r.Faulted {
				faulted++
			}
		}
		require.Equal(t, 2, faulted)
	})
	t.Run("a lasting outage fails the call", func(t *testing.T) {
		s.InjectFault(githubsim.Fault{PathContains: "/comments", Status: http.StatusServiceUnavailable})
		defer s.RemoveFaults()
		_, err := client(t, s, testToken).Call(context.Background(), ops.GitHubListComments, map[string]any{"ref": "github:demo/widgets#1"})
		require.ErrorIs(t, err, integrations.ErrServer)
	})
}

func TestPagination(t *testing.T) {
	s := startSim(t, githubsim.Config{APIPrefix: "/api/v3"})
	_, err := s.OpenIssue("demo/widgets", "dana", "many comments", "")
	require.NoError(t, err)
	for i := range 230 {
		_, err := s.Comment("demo/widgets", 1, "dana", fmt.Sprintf("comment %d", i))
		require.NoError(t, err)
	}
	res := call(t, client(t, s, testToken), ops.GitHubListComments, map[string]any{"ref": "github:demo/widgets#1"})
	cs := res["comments"].([]any)
	require.Len(t, cs, 230)
	require.Equal(t, "comment 229", cs[229].(map[string]any)["body"])
	require.Len(t, requestsTo(s, "GET", "/repos/demo/widgets/issues/1/comments"), 3, "100 + 100 + 30")
}

func TestUnknownRoutesAndBadBodies(t *testing.T) {
	s := startSim(t, githubsim.Config{})
	_, err := s.OpenIssue("demo/widgets", "dana", "t", "")
	require.NoError(t, err)
	for _, tc := range []struct {
		method, path, body string
		status             int
	}{
		{"GET", "/nope", "", 404},
		{"GET", "/repos/demo/widgets/issues/0", "", 404},
		{"GET", "/repos/demo/widgets/issues/abc", "", 404},
		{"GET", "/repos/demo/other/issues/1", "", 404},
		{"POST", "/repos/demo/widgets/issues/1/comments", "{", 400},
		{"POST", "/repos/demo/widgets/issues/1/comments", `{"body":""}`, 422},
		{"POST", "/repos/demo/widgets/issues/1/labels", `{"labels":[""]}`, 422},
		{"POST", "/repos/demo/widgets/issues/1/labels", `["a","b"]`, 200},
		{"DELETE", "/repos/demo/widgets/issues/1/labels/zzz", "", 404},
		{"POST", "/repos/demo/widgets/issues/1/reactions", `{"content":"smile"}`, 422},
		{"PATCH", "/repos/demo/widgets/issues/1", `{"state":"merged"}`, 422},
		{"PATCH", "/repos/demo/widgets/issues/1", `{"state":"closed"}`, 200},
		{"GET", "/repos/demo/widgets/pulls/1", "", 404},
		{"POST", "/graphql", `{"query":"{ viewer { login } }"}`, 200},
		{"GET", "/user", "", 200},
	} {
		req, err := http.NewRequest(tc.method, s.URL()+tc.path, strings.NewReader(tc.body))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+testToken)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, tc.status, resp.StatusCode, "%s %s %s", tc.method, tc.path, tc.body)
		require.Contains(t, resp.Header.Get("Content-Type"), "application/json")
	}
	is, err := s.Issue("demo/widgets", 1)
	require.NoError(t, err)
	require.Equal(t, "closed", is.State)
	require.Equal(t, []string{"a", "b"}, is.Labels)
}

// TestFaultOptionsAndFirstNumber: an intermittent fault (Every) answers
// every n-th matching request and serves the rest; an exact Path spares
// the items under a list; FirstNumber numbers a repository with history.
func TestFaultOptionsAndFirstNumber(t *testing.T) {
	s := startSim(t, githubsim.Config{})
	require.NoError(t, s.AddRepo("demo/widgets", githubsim.RepoOptions{FirstNumber: 15}))
	is, err := s.OpenIssue("demo/widgets", "dana", "first", "")
	require.NoError(t, err)
	require.Equal(t, 15, is.Number)
	require.NoError(t, s.AddRepo("demo/widgets", githubsim.RepoOptions{FirstNumber: 3}))
	is, err = s.OpenIssue("demo/widgets", "dana", "second", "")
	require.NoError(t, err)
	require.Equal(t, 16, is.Number, "numbers only move on")

	get := func(path string) int {
		req, err := http.NewRequest(http.MethodGet, s.URL()+path, nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+testToken)
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		res.Body.Close()
		return res.StatusCode
	}
	s.InjectFault(githubsim.Fault{Path: "/repos/demo/widgets/issues", Status: http.StatusBadGateway})
	require.Equal(t, http.StatusBadGateway, get("/repos/demo/widgets/issues"))
	require.Equal(t, http.StatusOK, get("/repos/demo/widgets/issues/15"), "an exact path spares what is under it")
	s.RemoveFaults()

	s.InjectFault(githubsim.Fault{PathContains: "/issues/15", Status: http.StatusInternalServerError, Every: 3})
	var got []int
	for range 6 {
		got = append(got, get("/repos/demo/widgets/issues/15"))
	}
	require.Equal(t, []int{200, 200, 500, 200, 200, 500}, got)
}
