package integrations

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/ops"
)

const testToken = "ghp_test_token_0123456789"

func fixtureServer(t *testing.T, prefix string) *fakeGitHub {
	fg := newFakeGitHub(t, prefix, testToken)
	seedFixture(fg)
	return fg
}

// The fixture's web URLs, by the ids GitHub gave.
func commentURL(id int64) string {
	return fmt.Sprintf("https://github.com/octo/repo/issues/7#issuecomment-%d", id)
}
func reviewURL(id int64) string {
	return fmt.Sprintf("https://github.com/octo/repo/pull/8#pullrequestreview-%d", id)
}
func discussionURL(id int64) string {
	return fmt.Sprintf("https://github.com/octo/repo/pull/8#discussion_r%d", id)
}

func TestGitHubReadOperations(t *testing.T) {
	fg := fixtureServer(t, "")
	s := apiSet(t, fg, newWorld(mapEnv{"GH_TOKEN": testToken}))
	c, r, rc := fg.fx.c, fg.fx.r, fg.fx.rc
	comment := func(i int, author, updated string) map[string]any {
		return map[string]any{"id": int(c[i]), "author": author, "body": fmt.Sprintf("comment %d", i), "url": commentURL(c[i]),
			"createdAt": fmt.Sprintf("2026-01-%02dT10:00:00Z", i), "updatedAt": updated}
	}
	tests := []struct {
		name string
		op   graph.Operation
		args map[string]any
		want map[string]any
	}{
		{"get-issue", ops.GitHubGetIssue, map[string]any{"ref": "github:octo/repo#7"}, map[string]any{
			"number": 7, "title": "Add the thing", "body": "Please add it.", "state": "open", "author": "dana",
			"labels": []any{"bug", "loop:requirements", "the-loop: auto-execute", "Loop:Old"},
			"url":    "https://github.com/octo/repo/issues/7", "isPullRequest": false, "merged": false,
		}},
		{"get-issue of a PR, null body", ops.GitHubGetIssue, map[string]any{"ref": "github:octo/repo#9"}, map[string]any{
			"number": 9, "title": "Old", "body": "", "state": "closed", "author": "dana",
			"labels": []any{"the-loop: auto-execute"}, "url": "https://github.com/octo/repo/issues/9", "isPullRequest": false, "merged": false,
		}},
		{"get-labels", ops.GitHubGetLabels, map[string]any{"ref": "github:octo/repo#7"}, map[string]any{
			"labels": []any{"bug", "loop:requirements", "the-loop: auto-execute", "Loop:Old"},
		}},
		{"list-comments reads every page", ops.GitHubListComments, map[string]any{"ref": "github:octo/repo#7"}, map[string]any{"comments": []any{
			comment(1, "user1", "2026-01-01T10:00:00Z"),
			comment(2, "user0", "2026-01-02T10:00:00Z"),
			comment(3, "user1", "2026-01-08T09:30:00Z"), // edited
			comment(4, "user0", "2026-01-04T10:00:00Z"),
			comment(5, "user1", "2026-01-05T10:00:00Z"),
		}}},
		{"list-comments of an issue without comments", ops.GitHubListComments, map[string]any{"ref": "github:octo/repo#9"}, map[string]any{"comments": []any{}}},
		{"list-reviews keeps every state", ops.GitHubListReviews, map[string]any{"ref": "github:octo/repo#8"}, map[string]any{"reviews": []any{
			map[string]any{"id": int(r[1]), "author": "dana", "body": "LGTM", "state": "APPROVED", "url": reviewURL(r[1]), "submittedAt": "2026-01-05T00:00:00Z"},
			map[string]any{"id": int(r[2]), "author": "", "body": "", "state": "PENDING", "url": reviewURL(r[2]), "submittedAt": ""},
			map[string]any{"id": int(r[3]), "author": "lee", "body": "nit: naming", "state": "COMMENTED", "url": reviewURL(r[3]), "submittedAt": "2026-01-06T00:00:00Z"},
		}}},
		{"list-review-comments falls back to original_line", ops.GitHubListReviewComments, map[string]any{"ref": "github:octo/repo#8"}, map[string]any{"comments": []any{
			map[string]any{"id": int(rc[1]), "author": "lee", "body": "rename", "url": discussionURL(rc[1]), "path": "main.go", "line": 12, "createdAt": "2026-01-06T00:00:00Z", "updatedAt": "2026-01-06T00:00:00Z"},
			map[string]any{"id": int(rc[2]), "author": "lee", "body": "outdated", "url": discussionURL(rc[2]), "path": "old.go", "line": 4, "createdAt": "2026-01-06T00:01:00Z", "updatedAt": "2026-01-06T00:01:00Z"},
		}}},
		{"list-items-by-label, open by default", ops.GitHubListItemsByLabel, map[string]any{"repo": "octo/repo", "label": "the-loop: auto-execute"}, map[string]any{"items": []any{
			map[string]any{"number": 8, "title": "Implement the thing", "url": "https://github.com/octo/repo/pull/8", "isPullRequest": true, "labels": []any{"the-loop: auto-execute"}, "ref": "github:octo/repo#8"},
			map[string]any{"number": 7, "title": "Add the thing", "url": "https://github.com/octo/repo/issues/7", "isPullRequest": false, "labels": []any{"bug", "loop:requirements", "the-loop: auto-execute", "Loop:Old"}, "ref": "github:octo/repo#7"},
		}}},
		{"list-items-by-label, closed", ops.GitHubListItemsByLabel, map[string]any{"repo": "github.com/octo/repo", "label": "the-loop: auto-execute", "state": "closed"}, map[string]any{"items": []any{
			map[string]any{"number": 9, "title": "Old", "url": "https://github.com/octo/repo/issues/9", "isPullRequest": false, "labels": []any{"the-loop: auto-execute"}, "ref": "github:octo/repo#9"},
		}}},
		{"get-comment reads one comment with the item GitHub says it is on", ops.GitHubGetComment, map[string]any{"ref": "github:octo/repo#7", "commentId": int(c[3])}, map[string]any{
			"id": int(c[3]), "author": "user1", "body": "comment 3", "url": commentURL(c[3]), "state": "",
			"createdAt": "2026-01-03T10:00:00Z", "updatedAt": "2026-01-08T09:30:00Z", "submittedAt": "", "ref": "github:octo/repo#7",
		}},
		{"get-comment names the comment's own item, not the ref asked with", ops.GitHubGetComment, map[string]any{"ref": "github:octo/repo#9", "commentId": fmt.Sprint(c[1])}, map[string]any{
			"id": int(c[1]), "author": "user1", "body": "comment 1", "url": commentURL(c[1]), "state": "",
			"createdAt": "2026-01-01T10:00:00Z", "updatedAt": "2026-01-01T10:00:00Z", "submittedAt": "", "ref": "github:octo/repo#7",
		}},
		{"get-comment of a review comment", ops.GitHubGetComment, map[string]any{"ref": "github:octo/repo#8", "commentId": int(rc[1]), "commentType": "review-comment"}, map[string]any{
			"id": int(rc[1]), "author": "lee", "body": "rename", "url": discussionURL(rc[1]), "state": "",
			"createdAt": "2026-01-06T00:00:00Z", "updatedAt": "2026-01-06T00:00:00Z", "submittedAt": "", "ref": "github:octo/repo#8",
		}},
		{"get-comment of a review", ops.GitHubGetComment, map[string]any{"ref": "github:octo/repo#8", "commentId": int(r[1]), "commentType": "review"}, map[string]any{
			"id": int(r[1]), "author": "dana", "body": "LGTM", "url": reviewURL(r[1]), "state": "APPROVED",
			"createdAt": "", "updatedAt": "", "submittedAt": "2026-01-05T00:00:00Z", "ref": "github:octo/repo#8",
		}},
		{"closing-issues via GraphQL", ops.GitHubClosingIssues, map[string]any{"ref": "github:octo/repo#8"}, map[string]any{
			"issues": []any{7}, "refs": []any{"github:octo/repo#7", "github:octo/other#3"}, "source": "graphql",
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.Call(context.Background(), tc.op, tc.args)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
	t.Run("pagination made one request per page", func(t *testing.T) {
		reqs := fg.requestsTo("/issues/7/comments")
		require.Len(t, reqs, 3)
		for _, r := range reqs {
			assert.True(t, r.Authenticated, "the token was sent")
			assert.Contains(t, r.Query, "per_page=100")
		}
	})
}

// A comment that does not exist is ErrNotFound (the daemon reads that as a
// forged claim); a 5xx is retried and then a server error (the daemon
// retries later); a missing or malformed id is refused before any request.
func TestGetCommentFailures(t *testing.T) {
	fg := fixtureServer(t, "")
	s := apiSet(t, fg, newWorld(mapEnv{"GH_TOKEN": testToken}))
	ctx := context.Background()
	_, err := s.Call(ctx, ops.GitHubGetComment, map[string]any{"ref": "github:octo/repo#7", "commentId": 990000001})
	requireKind(t, err, ErrNotFound)
	_, err = s.Call(ctx, ops.GitHubGetComment, map[string]any{"ref": "github:octo/repo#7", "commentId": int(fg.fx.r[2]), "commentType": "review"})
	requireKind(t, err, ErrNotFound) // the review is PR 8's, not issue 7's
	fg.fault(fault{path: fmt.Sprintf("/issues/comments/%d", fg.fx.c[1]), status: 500})
	_, err = s.Call(ctx, ops.GitHubGetComment, map[string]any{"ref": "github:octo/repo#7", "commentId": int(fg.fx.c[1])})
	requireKind(t, err, ErrServer)
	before := fg.requestCount()
	for _, args := range []map[string]any{
		{"ref": "github:octo/repo#7"},
		{"ref": "github:octo/repo#7", "commentId": 0},
		{"ref": "github:octo/repo#7", "commentId": "12x"},
		{"ref": "github:octo/repo#7", "commentId": 5, "commentType": "discussion"},
	} {
		_, err := s.Call(ctx, ops.GitHubGetComment, args)
		requireKind(t, err, ErrInvalidArgument)
	}
	require.Equal(t, before, fg.requestCount(), "refused before any request")
}

func TestClosingIssuesFallsBackToTheBody(t *testing.T) {
	fg := fixtureServer(t, "")
	fg.noGraphQLClosingIssues()
	s := apiSet(t, fg, newWorld(mapEnv{"GH_TOKEN": testToken}))
	got, err := s.Call(context.Background(), ops.GitHubClosingIssues, map[string]any{"ref": "github:octo/repo#8"})
	require.NoError(t, err)
	assert.Equal(t, map[string]any{"issues": []any{7}, "refs": []any{"github:octo/repo#7", "github:octo/other#3"}, "source": "body"}, got)

	_, err = s.Call(context.Background(), ops.GitHubClosingIssues, map[string]any{"ref": "github:octo/repo#7"})
	requireKind(t, err, ErrNotFound)
}

func TestSetLabelsKeepsEveryOtherLabel(t *testing.T) {
	tests := []struct {
		name        string
		labels      any
		prefix      any
		want        []any
		wantDeletes int
		wantPosts   int
	}{
		{"moves the phase label", []string{"loop:design"}, "loop:",
			[]any{"bug", "the-loop: auto-execute", "loop:design"}, 2, 1},
		{"keeps a wanted label, removes other loop: labels case-insensitively", []any{"loop:requirements"}, "loop:",
			[]any{"bug", "loop:requirements", "the-loop: auto-execute"}, 1, 0},
		{"without a prefix only adds", []string{"loop:design"}, nil,
			[]any{"bug", "loop:requirements", "the-loop: auto-execute", "Loop:Old", "loop:design"}, 0, 1},
		{"an empty list clears the prefix", []string{}, "loop:",
			[]any{"bug", "the-loop: auto-execute"}, 2, 0},
		{"nothing to do changes nothing", []string{"bug"}, "nomatch:",
			[]any{"bug", "loop:requirements", "the-loop: auto-execute", "Loop:Old"}, 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fg := fixtureServer(t, "")
			s := apiSet(t, fg, newWorld(mapEnv{"GH_TOKEN": testToken}))
			args := map[string]any{"ref": "github:octo/repo#7", "labels": tc.labels}
			if tc.prefix != nil {
				args["replacePrefix"] = tc.prefix
			}
			got, err := s.Call(context.Background(), ops.GitHubSetLabels, args)
			require.NoError(t, err)
			assert.Equal(t, map[string]any{"labels": tc.want}, got)
			assert.Equal(t, tc.want, toAnyStrings(fg.labelsOf("octo/repo", 7)), "server state")
			var deletes, posts int
			for _, r := range fg.requestsTo("/issues/7/labels") {
				switch r.Method {
				case http.MethodDelete:
					deletes++
				case http.MethodPost:
					posts++
				case http.MethodPut:
					t.Errorf("set-labels must never replace the whole label set")
				}
			}
			assert.Equal(t, tc.wantDeletes, deletes)
			assert.Equal(t, tc.wantPosts, posts)
		})
	}
	t.Run("a label removed meanwhile is not an error", func(t *testing.T) {
		fg := fixtureServer(t, "")
		fg.fault(fault{method: http.MethodDelete, path: "/labels/Loop:Old", status: 404, body: `{"message":"Label does not exist"}`, times: 1})
		s := apiSet(t, fg, newWorld(mapEnv{"GH_TOKEN": testToken}))
		got, err := s.Call(context.Background(), ops.GitHubSetLabels, map[string]any{"ref": "github:octo/repo#7", "labels": []string{"loop:design"}, "replacePrefix": "loop:"})
		require.NoError(t, err)
		assert.Equal(t, map[string]any{"labels": []any{"bug", "the-loop: auto-execute", "Loop:Old", "loop:design"}}, got)
	})
	t.Run("a label with a space is escaped in the path", func(t *testing.T) {
		fg := fixtureServer(t, "")
		fg.openAt("octo/repo", 20, "dana", "Spaces", "loop:needs review", "x")
		s := apiSet(t, fg, newWorld(mapEnv{"GH_TOKEN": testToken}))
		got, err := s.Call(context.Background(), ops.GitHubSetLabels, map[string]any{"ref": "github:octo/repo#20", "labels": []string{"loop:done"}, "replacePrefix": "loop:"})
		require.NoError(t, err)
		assert.Equal(t, map[string]any{"labels": []any{"x", "loop:done"}}, got)
	})
}

func TestAddCommentAndReaction(t *testing.T) {
	fg := fixtureServer(t, "")
	s := apiSet(t, fg, newWorld(mapEnv{"GH_TOKEN": testToken}))
	body := "Review please.\n\n`$(rm -rf /)` \"quoted\" 'single' --flag\n<!-- the-loop:agent-comment -->\n"
	got, err := s.Call(context.Background(), ops.GitHubAddComment, map[string]any{"ref": "github:octo/repo#7", "body": body})
	require.NoError(t, err)
	cs := fg.comments("octo/repo", 7)
	posted := cs[len(cs)-1]
	assert.Equal(t, map[string]any{"id": int(posted.ID), "url": commentURL(posted.ID)}, got)
	assert.Equal(t, body, posted.Body)
	assert.Equal(t, "theloop-bot", posted.Author, "posted as the token's user")

	reactions := []struct {
		name string
		args map[string]any
		path string
	}{
		{"on a conversation comment", map[string]any{"commentId": int(fg.fx.c[1])}, fmt.Sprintf("/repos/octo/repo/issues/comments/%d/reactions", fg.fx.c[1])},
		{"id from JSON", map[string]any{"commentId": float64(fg.fx.c[2])}, fmt.Sprintf("/repos/octo/repo/issues/comments/%d/reactions", fg.fx.c[2])},
		{"on a review comment", map[string]any{"commentId": fmt.Sprint(fg.fx.rc[1]), "commentType": "review-comment"}, fmt.Sprintf("/repos/octo/repo/pulls/comments/%d/reactions", fg.fx.rc[1])},
		{"on the issue itself", map[string]any{}, "/repos/octo/repo/issues/7/reactions"},
	}
	for _, tc := range reactions {
		t.Run(tc.name, func(t *testing.T) {
			args := map[string]any{"ref": "github:octo/repo#7", "content": "eyes"}
			for k, v := range tc.args {
				args[k] = v
			}
			got, err := s.Call(context.Background(), ops.GitHubAddReaction, args)
			require.NoError(t, err)
			assert.Equal(t, map[string]any{}, got)
			reqs := fg.requestsTo(tc.path)
			require.Len(t, reqs, 1)
			assert.JSONEq(t, `{"content":"eyes"}`, reqs[0].Body)
		})
	}
}

func TestInvalidArgumentsFailBeforeAnyRequest(t *testing.T) {
	fg := fixtureServer(t, "")
	w := newWorld(mapEnv{"GH_TOKEN": testToken})
	s := apiSet(t, fg, w)
	badRefs := []any{nil, 7, "", "octo/repo#7", "github:octo#7", "github:octo/repo#0", "github:octo/repo#-1",
		"github:octo/re po#1", "github:../repo#1", "github:octo/..#1", "jira:octo/repo#1", "github:not_a_host/octo/repo#1",
		"github:a/b/c/d#1", "github:octo/repo#99999999999", "GitHub:octo/repo#1",
		// The api transport serves one host: a ref on another is refused, never sent.
		"github:ghe.corp.example/octo/repo#7"}
	for _, op := range githubOperations {
		if op == ops.GitHubListItemsByLabel {
			continue
		}
		for _, ref := range badRefs {
			t.Run(fmt.Sprintf("%s %v", op, ref), func(t *testing.T) {
				args := map[string]any{"ref": ref, "body": "x", "labels": []string{"a"}, "content": "eyes"}
				_, err := s.Call(context.Background(), op, args)
				require.Error(t, err)
				assert.True(t, errors.Is(err, ErrInvalidRef) || errors.Is(err, ErrInvalidArgument), "%v", err)
			})
		}
	}
	others := []struct {
		op   graph.Operation
		args map[string]any
	}{
		{ops.GitHubAddComment, map[string]any{"ref": "github:octo/repo#7", "body": "  "}},
		{ops.GitHubAddComment, map[string]any{"ref": "github:octo/repo#7", "body": 3}},
		{ops.GitHubSetLabels, map[string]any{"ref": "github:octo/repo#7"}},
		{ops.GitHubSetLabels, map[string]any{"ref": "github:octo/repo#7", "labels": []any{"ok", 3}}},
		{ops.GitHubSetLabels, map[string]any{"ref": "github:octo/repo#7", "labels": []string{"bad\nlabel"}}},
		{ops.GitHubSetLabels, map[string]any{"ref": "github:octo/repo#7", "labels": "loop:x"}},
		{ops.GitHubAddReaction, map[string]any{"ref": "github:octo/repo#7", "content": "thumbsup"}},
		{ops.GitHubAddReaction, map[string]any{"ref": "github:octo/repo#7", "content": "eyes", "commentId": 1.5}},
		{ops.GitHubAddReaction, map[string]any{"ref": "github:octo/repo#7", "content": "eyes", "commentId": 1, "commentType": "commit"}},
		{ops.GitHubListItemsByLabel, map[string]any{"repo": "octo", "label": "x"}},
		{ops.GitHubListItemsByLabel, map[string]any{"repo": "octo/repo", "label": "a,b"}},
		{ops.GitHubListItemsByLabel, map[string]any{"repo": "octo/repo", "label": "x", "state": "merged"}},
		{ops.GitHubListItemsByLabel, map[string]any{"repo": "octo/repo"}},
	}
	for _, tc := range others {
		t.Run(fmt.Sprintf("%s %v", tc.op, tc.args), func(t *testing.T) {
			_, err := s.Call(context.Background(), tc.op, tc.args)
			requireKind(t, err, ErrInvalidArgument)
		})
	}
	assert.Zero(t, fg.requestCount(), "no request may be made for invalid arguments")
	assert.Equal(t, w.sink.Count(EventCallFailed), len(w.sink.Events()), "only call_failed events")
}

func TestRetriesAndRateLimits(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name       string
		faults     []fault
		op         graph.Operation
		kind       error // nil: success
		status     int
		attempts   int
		wantWaits  []time.Duration
		wantEvents int
	}{
		{name: "502 twice then an answer", op: ops.GitHubGetIssue,
			faults:   []fault{{path: "/issues/7", status: 502, body: `{"message":"Server Error"}`, times: 2}},
			attempts: 3, wantWaits: []time.Duration{500 * time.Millisecond, time.Second}},
		{name: "500 every time: bounded, then ErrServer", op: ops.GitHubGetLabels,
			faults: []fault{{path: "/labels", status: 500}},
			kind:   ErrServer, status: 500, attempts: 3, wantWaits: []time.Duration{500 * time.Millisecond, time.Second}, wantEvents: 1},
		{name: "a comment is not reposted after a 5xx", op: ops.GitHubAddComment,
			faults: []fault{{path: "/comments", status: 502}},
			kind:   ErrServer, status: 502, attempts: 1, wantEvents: 1},
		{name: "503 Retry-After is honoured", op: ops.GitHubGetIssue,
			faults:   []fault{{path: "/issues/7", status: 503, header: map[string]string{"Retry-After": "3"}, times: 1}},
			attempts: 2, wantWaits: []time.Duration{3 * time.Second}},
		{name: "403 primary rate limit waits for the reset", op: ops.GitHubGetIssue,
			faults: []fault{{path: "/issues/7", status: 403, times: 1, body: `{"message":"API rate limit exceeded"}`,
				header: map[string]string{"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": strconv.FormatInt(now.Add(4*time.Second).Unix(), 10)}}},
			attempts: 2, wantWaits: []time.Duration{5 * time.Second}},
		{name: "429 Retry-After waits, even for a comment", op: ops.GitHubAddComment,
			faults:   []fault{{path: "/comments", status: 429, times: 1, header: map[string]string{"Retry-After": "2"}}},
			attempts: 2, wantWaits: []time.Duration{2 * time.Second}},
		{name: "a reset beyond the deadline fails at once", op: ops.GitHubGetIssue,
			faults: []fault{{path: "/issues/7", status: 403, body: `{"message":"API rate limit exceeded"}`,
				header: map[string]string{"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": strconv.FormatInt(now.Add(time.Hour).Unix(), 10)}}},
			kind: ErrRateLimited, status: 403, attempts: 1, wantEvents: 1},
		{name: "secondary rate limit with Retry-After beyond the deadline", op: ops.GitHubGetIssue,
			faults: []fault{{path: "/issues/7", status: 403, header: map[string]string{"Retry-After": "60"}, body: `{"message":"You have exceeded a secondary rate limit"}`}},
			kind:   ErrRateLimited, status: 403, attempts: 1, wantEvents: 1},
		{name: "rate limited on every attempt", op: ops.GitHubGetIssue,
			faults: []fault{{path: "/issues/7", status: 429}},
			kind:   ErrRateLimited, status: 429, attempts: 3, wantWaits: []time.Duration{500 * time.Millisecond, time.Second}, wantEvents: 1},
		{name: "403 without rate-limit headers is a permission error", op: ops.GitHubGetIssue,
			faults: []fault{{path: "/issues/7", status: 403, body: `{"message":"Resource not accessible by integration"}`}},
			kind:   ErrForbidden, status: 403, attempts: 1, wantEvents: 1},
		{name: "401", op: ops.GitHubGetIssue,
			faults: []fault{{path: "/issues/7", status: 401, body: `{"message":"Bad credentials"}`}},
			kind:   ErrUnauthorized, status: 401, attempts: 1, wantEvents: 1},
		{name: "422", op: ops.GitHubAddComment,
			faults: []fault{{path: "/comments", status: 422, body: `{"message":"Validation Failed"}`}},
			kind:   ErrRejected, status: 422, attempts: 1, wantEvents: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fg := fixtureServer(t, "")
			for _, f := range tc.faults {
				fg.fault(f)
			}
			w := newWorld(mapEnv{"GH_TOKEN": testToken})
			require.Equal(t, now, w.clock.Now())
			s := apiSet(t, fg, w)
			args := map[string]any{"ref": "github:octo/repo#7", "body": "hello"}
			got, err := s.Call(context.Background(), tc.op, args)
			if tc.kind == nil {
				require.NoError(t, err)
				assert.NotEmpty(t, got)
			} else {
				e := requireKind(t, err, tc.kind)
				assert.Equal(t, tc.status, e.Status)
				assert.Equal(t, tc.attempts, e.Attempts)
				assert.Contains(t, e.Error(), string(tc.op))
			}
			assert.Equal(t, tc.wantWaits, w.sleep.recorded())
			assert.Len(t, fg.requestsTo("/issues/7"), tc.attempts, "requests made")
			assert.Equal(t, tc.wantEvents, w.sink.Count(EventCallFailed))
		})
	}
}

// TestOutageFailsPromptly: a GitHub that answers 500 to everything costs
// each call a bounded number of attempts, fails it with ErrServer, and
// emits exactly one event per failed call.
func TestOutageFailsPromptly(t *testing.T) {
	fg := fixtureServer(t, "")
	fg.fault(fault{path: "/", status: 500, body: `{"message":"Server Error"}`})
	w := newWorld(mapEnv{"GH_TOKEN": testToken})
	s := apiSet(t, fg, w)
	calls := []struct {
		op       graph.Operation
		args     map[string]any
		attempts int
	}{
		{ops.GitHubSetLabels, map[string]any{"ref": "github:octo/repo#7", "labels": []string{"loop:design"}, "replacePrefix": "loop:"}, 3},
		{ops.GitHubAddComment, map[string]any{"ref": "github:octo/repo#7", "body": "ready for review"}, 1},
		{ops.GitHubListComments, map[string]any{"ref": "github:octo/repo#7"}, 3},
		{ops.GitHubClosingIssues, map[string]any{"ref": "github:octo/repo#8"}, 3},
	}
	for i, c := range calls {
		_, err := s.Call(context.Background(), c.op, c.args)
		e := requireKind(t, err, ErrServer)
		assert.Equal(t, c.attempts, e.Attempts)
		require.Equal(t, i+1, w.sink.Count(EventCallFailed), "one event per failed call")
		ev := w.sink.Events()[i]
		assert.Equal(t, graph.LevelWarning, ev.Level)
		for key, want := range map[string]any{"provider": "github", "operation": string(c.op), "transport": "api", "attempts": c.attempts, "status": 500} {
			v, ok := ev.Get(key)
			require.True(t, ok, key)
			assert.Equal(t, want, v, key)
		}
		wi, _ := ev.Get("work_item")
		assert.Equal(t, c.args["ref"], wi)
		msg, _ := ev.Get("error")
		assert.Equal(t, e.Error(), msg)
	}
	assert.Equal(t, 3+1+3+3, fg.requestCount())
}

func TestSlowGitHubTimesOut(t *testing.T) {
	fg := fixtureServer(t, "")
	fg.fault(fault{path: "/issues/7", slow: true})
	w := newWorld(mapEnv{"GH_TOKEN": testToken})
	s := w.set(t, Config{GitHub: &GitHubConfig{Transport: TransportAPI, TimeoutSeconds: 0.2, API: GitHubAPIConfig{BaseURL: fg.URL()}}})
	_, err := s.Call(context.Background(), ops.GitHubGetIssue, map[string]any{"ref": "github:octo/repo#7"})
	e := requireKind(t, err, ErrTimeout)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Equal(t, 1, e.Attempts)
	assert.Contains(t, e.Error(), "timeoutSeconds")
	assert.Equal(t, 1, w.sink.Count(EventCallFailed))
}

func TestCallerDeadlineBoundsTheCall(t *testing.T) {
	fg := fixtureServer(t, "")
	fg.fault(fault{path: "/issues/7", slow: true})
	s := apiSet(t, fg, newWorld(mapEnv{"GH_TOKEN": testToken}))
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := s.Call(ctx, ops.GitHubGetIssue, map[string]any{"ref": "github:octo/repo#7"})
	requireKind(t, err, ErrTimeout)
}

func TestPaginationNeverLeavesTheAPIHost(t *testing.T) {
	fg := fixtureServer(t, "")
	fg.fault(fault{path: "/issues/7/comments", status: 200, body: `[]`,
		header: map[string]string{"Link": `<https://evil.example/repos/octo/repo/issues/7/comments?page=2>; rel="next"`}})
	s := apiSet(t, fg, newWorld(mapEnv{"GH_TOKEN": testToken}))
	_, err := s.Call(context.Background(), ops.GitHubListComments, map[string]any{"ref": "github:octo/repo#7"})
	e := requireKind(t, err, ErrTransport)
	assert.Contains(t, e.Error(), "refusing to follow")
}

func TestPaginationIsBounded(t *testing.T) {
	fg := fixtureServer(t, "")
	fg.fault(fault{path: "/issues/7/comments", status: 200, body: `[]`,
		header: map[string]string{"Link": fmt.Sprintf(`<%s/repos/octo/repo/issues/7/comments?page=2>; rel="next"`, fg.URL())}})
	s := apiSet(t, fg, newWorld(mapEnv{"GH_TOKEN": testToken}))
	_, err := s.Call(context.Background(), ops.GitHubListComments, map[string]any{"ref": "github:octo/repo#7"})
	requireKind(t, err, ErrRejected)
	assert.Len(t, fg.requestsTo("/comments"), maxPages)
}

func TestGitHubEnterpriseBaseURL(t *testing.T) {
	fg := fixtureServer(t, "/api/v3")
	s := apiSet(t, fg, newWorld(mapEnv{"GH_TOKEN": testToken}))
	got, err := s.Call(context.Background(), ops.GitHubListComments, map[string]any{"ref": "github:octo/repo#7"})
	require.NoError(t, err)
	assert.Len(t, got["comments"], 5)
	got, err = s.Call(context.Background(), ops.GitHubClosingIssues, map[string]any{"ref": "github:octo/repo#8"})
	require.NoError(t, err)
	assert.Equal(t, "graphql", got["source"])
	assert.Len(t, fg.requestsTo("/graphql"), 1, "GraphQL at /api/graphql (githubsim answers 404 under /api/v3)")
	// A ref naming the host the base URL serves is accepted.
	host := strings.TrimSuffix(strings.TrimPrefix(fg.URL(), "http://"), "/api/v3")
	_, err = s.Call(context.Background(), ops.GitHubGetIssue, map[string]any{"ref": "github:" + host + "/octo/repo#7"})
	require.NoError(t, err)
}

// TestConcurrentCalls: a Set serves hooks running in parallel (run with
// -race).
func TestConcurrentCalls(t *testing.T) {
	fg := fixtureServer(t, "")
	w := newWorld(mapEnv{"GH_TOKEN": testToken})
	s := apiSet(t, fg, w)
	errs := make(chan error, 16)
	for i := range 16 {
		go func() {
			op, args := ops.GitHubListComments, map[string]any{"ref": "github:octo/repo#7"}
			if i%4 == 0 {
				op, args = ops.GitHubGetIssue, map[string]any{"ref": "github:octo/repo#404"}
			}
			_, err := s.Call(context.Background(), op, args)
			if i%4 == 0 && err != nil {
				err = nil
			}
			errs <- err
		}()
	}
	for range 16 {
		require.NoError(t, <-errs)
	}
	assert.Equal(t, 4, w.sink.Count(EventCallFailed))
}
