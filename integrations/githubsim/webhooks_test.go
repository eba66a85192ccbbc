package githubsim_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/integrations/githubsim"
	"github.com/theloop-dev/theloop/ops"
)

// receiver is a webhook endpoint that verifies signatures the way a
// GitHub receiver must (HMAC-SHA256 over the raw body, constant-time
// compare) and keeps what it accepted.
type receiver struct {
	secret string
	srv    *httptest.Server

	mu       sync.Mutex
	accepted []received
	rejected int
}

type received struct {
	event, delivery, agent string
	body                   []byte
	payload                map[string]any
}

func newReceiver(t testing.TB, secret string) *receiver {
	rc := &receiver{secret: secret}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mac := hmac.New(sha256.New, []byte(rc.secret))
		mac.Write(body)
		want := "sha256=" + hex.EncodeToString(mac.Sum(nil))
		rc.mu.Lock()
		defer rc.mu.Unlock()
		if !hmac.Equal([]byte(want), []byte(r.Header.Get("X-Hub-Signature-256"))) {
			rc.rejected++
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		var p map[string]any
		if err := json.Unmarshal(body, &p); err != nil {
			http.Error(w, "bad json", http.StatusBadRequest)
			return
		}
		rc.accepted = append(rc.accepted, received{event: r.Header.Get("X-GitHub-Event"), delivery: r.Header.Get("X-GitHub-Delivery"),
			agent: r.Header.Get("User-Agent"), body: body, payload: p})
		w.WriteHeader(http.StatusAccepted)
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *receiver) got() []received {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]received(nil), rc.accepted...)
}

func wait(t testing.TB, s *githubsim.Server) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, s.WaitDeliveries(ctx))
}

func str(m map[string]any, path ...string) string {
	var v any = m
	for _, p := range path {
		mm, ok := v.(map[string]any)
		if !ok {
			return ""
		}
		v = mm[p]
	}
	switch x := v.(type) {
	case string:
		return x
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	}
	return ""
}

var uuidRE = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

func TestWebhooksForHumanAndBotChanges(t *testing.T) {
	rc := newReceiver(t, "s3cret")
	var observed []githubsim.Delivery
	var mu sync.Mutex
	s := startSim(t, githubsim.Config{BotLogin: "loop-bot", Hooks: []githubsim.Hook{{URL: rc.srv.URL, Secret: "s3cret"}},
		OnDelivery: func(d githubsim.Delivery) { mu.Lock(); observed = append(observed, d); mu.Unlock() }})

	_, err := s.OpenIssue("demo/widgets", "dana", "Export CSV", "body")
	require.NoError(t, err)
	require.NoError(t, s.AddLabel("demo/widgets", 1, "dana", "the-loop"))
	require.NoError(t, s.AddLabel("demo/widgets", 1, "dana", "the-loop")) // no change, no webhook
	c, err := s.Comment("demo/widgets", 1, "dana", "the-loop start")
	require.NoError(t, err)
	_, err = s.EditComment("demo/widgets", c.ID, "dana", "the-loop execute")
	require.NoError(t, err)
	// theloop's own changes through the API produce webhooks too.
	set := client(t, s, testToken)
	call(t, set, ops.GitHubAddComment, map[string]any{"ref": "github:demo/widgets#1", "body": "<!-- the-loop -->\nstarted"})
	call(t, set, ops.GitHubSetLabels, map[string]any{"ref": "github:demo/widgets#1", "labels": []string{"loop:requirements"}, "replacePrefix": "loop:"})
	call(t, set, ops.GitHubAddReaction, map[string]any{"ref": "github:demo/widgets#1", "content": "eyes"}) // no webhook
	require.NoError(t, s.CloseIssue("demo/widgets", 1, "dana"))
	wait(t, s)

	got := rc.got()
	var seq []string
	for _, g := range got {
		seq = append(seq, g.event+"."+str(g.payload, "action")+" by "+str(g.payload, "sender", "login"))
		require.Regexp(t, uuidRE, g.delivery)
		require.True(t, strings.HasPrefix(g.agent, "GitHub-Hookshot/"), g.agent)
		require.Equal(t, "demo/widgets", str(g.payload, "repository", "full_name"))
		require.Equal(t, "1", str(g.payload, "issue", "number"))
	}
	require.Equal(t, []string{
		"issues.opened by dana",
		"issues.labeled by dana",
		"issue_comment.created by dana",
		"issue_comment.edited by dana",
		"issue_comment.created by loop-bot",
		"issues.labeled by loop-bot",
		"issues.closed by dana",
	}, seq)
	require.Equal(t, "the-loop", str(got[1].payload, "label", "name"))
	require.Equal(t, "the-loop start", str(got[2].payload, "comment", "body"))
	require.Equal(t, "the-loop execute", str(got[3].payload, "comment", "body"))
	require.Equal(t, "the-loop start", str(got[3].payload, "changes", "body", "from"))
	require.Equal(t, str(got[2].payload, "comment", "id"), str(got[3].payload, "comment", "id"))
	require.NotEqual(t, str(got[2].payload, "comment", "updated_at"), str(got[3].payload, "comment", "updated_at"), "an edit has its own content identity")
	require.Equal(t, "closed", str(got[6].payload, "issue", "state"))
	require.NotEmpty(t, str(got[6].payload, "issue", "closed_at"))

	ds := s.Deliveries()
	require.Len(t, ds, 7)
	mu.Lock()
	require.Len(t, observed, 7)
	mu.Unlock()
	for i, d := range ds {
		require.True(t, d.OK(), "delivery %d: %+v", i, d)
		require.Equal(t, got[i].delivery, d.ID)
		require.Equal(t, got[i].body, d.Body)
		require.Equal(t, githubsim.Signature256("s3cret", d.Body), d.Header.Get("X-Hub-Signature-256"))
	}
	require.Equal(t, c.ID, ds[2].CommentID)
	require.Zero(t, rc.rejected)
}

func TestWebhooksTwoHooksRedeliverAndBadSecret(t *testing.T) {
	good := newReceiver(t, "right")
	wrong := newReceiver(t, "right")
	s := startSim(t, githubsim.Config{Hooks: []githubsim.Hook{
		{URL: good.srv.URL, Secret: "right"}, // the repository hook
		{URL: good.srv.URL, Secret: "right"}, // an app hook: the same change again
		{URL: wrong.srv.URL, Secret: "not-the-receivers"},
	}})
	_, err := s.OpenIssue("demo/widgets", "dana", "t", "")
	require.NoError(t, err)
	wait(t, s)
	g := good.got()
	require.Len(t, g, 2)
	require.NotEqual(t, g[0].delivery, g[1].delivery, "each hook has its own delivery id")
	require.Equal(t, g[0].body, g[1].body, "for the same change")
	require.Empty(t, wrong.got())
	require.Equal(t, 1, wrong.rejected)
	ds := s.Deliveries()
	require.Equal(t, http.StatusUnauthorized, ds[2].Status)
	require.False(t, ds[2].OK())

	require.NoError(t, s.Redeliver(g[0].delivery))
	wait(t, s)
	g = good.got()
	require.Len(t, g, 3)
	require.Equal(t, g[0].delivery, g[2].delivery, "a redelivery keeps its id")
	require.Equal(t, g[0].body, g[2].body)
	require.ErrorIs(t, s.Redeliver("nope"), githubsim.ErrNotFound)

	require.NoError(t, s.Ping("demo/widgets"))
	wait(t, s)
	require.Equal(t, "ping", good.got()[3].event)
}

func TestWebhookToADeadReceiverIsRecordedNotRetried(t *testing.T) {
	dead := httptest.NewServer(http.NotFoundHandler())
	url := dead.URL
	dead.Close()
	s := startSim(t, githubsim.Config{Hooks: []githubsim.Hook{{URL: url, Secret: "x"}}})
	_, err := s.OpenIssue("demo/widgets", "dana", "t", "")
	require.NoError(t, err)
	wait(t, s)
	ds := s.Deliveries()
	require.Len(t, ds, 1)
	require.NotEmpty(t, ds[0].Err)
	require.Zero(t, ds[0].Status)
}

// TestPayloadsHaveTheFixturesShape checks that every field GitHub's real
// payloads carry (octokit's recorded fixtures) is present in ours, at the
// top level and in issue, comment, label, repository and sender.
func TestPayloadsHaveTheFixturesShape(t *testing.T) {
	dir := filepath.Join("..", "..", "..", "shared", "fixtures", "github-webhooks")
	if _, err := os.Stat(dir); err != nil {
		t.Skipf("webhook fixtures not found at %s (they live beside the repository, in ../shared/fixtures/github-webhooks)", dir)
	}
	rc := newReceiver(t, "k")
	s := startSim(t, githubsim.Config{Hooks: []githubsim.Hook{{URL: rc.srv.URL, Secret: "k"}}})
	_, err := s.OpenIssue("demo/widgets", "dana", "t", "b")
	require.NoError(t, err)
	require.NoError(t, s.AddLabel("demo/widgets", 1, "dana", "x"))
	c, err := s.Comment("demo/widgets", 1, "dana", "hi")
	require.NoError(t, err)
	_, err = s.EditComment("demo/widgets", c.ID, "dana", "hello")
	require.NoError(t, err)
	wait(t, s)
	got := rc.got()
	require.Len(t, got, 4)
	for i, fx := range []string{"issues/opened.payload.json", "issues/labeled.payload.json", "issue_comment/created.payload.json", "issue_comment/edited.payload.json"} {
		raw, err := os.ReadFile(filepath.Join(dir, fx))
		require.NoError(t, err)
		var want map[string]any
		require.NoError(t, json.Unmarshal(raw, &want))
		ours := got[i].payload
		require.Subset(t, keys(ours), keys(want), fx)
		for _, k := range []string{"issue", "comment", "label", "repository", "sender", "changes"} {
			w, ok := want[k].(map[string]any)
			if !ok {
				continue
			}
			require.Subset(t, keys(ours[k].(map[string]any)), keys(w), "%s: %s", fx, k)
		}
		require.Subset(t, keys(ours["issue"].(map[string]any)["user"].(map[string]any)), keys(want["sender"].(map[string]any)), fx)
	}
}

func keys(m map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func TestAddHookReceivesLaterChangesOnly(t *testing.T) {
	s := startSim(t, githubsim.Config{})
	_, err := s.OpenIssue("demo/widgets", "dana", "before the hook", "")
	require.NoError(t, err)
	rc := newReceiver(t, "late")
	_, err = s.AddHook(githubsim.Hook{URL: rc.srv.URL, Secret: "late"})
	require.NoError(t, err)
	_, err = s.AddHook(githubsim.Hook{})
	require.ErrorIs(t, err, githubsim.ErrInvalid)
	require.NoError(t, s.AddLabel("demo/widgets", 1, "dana", "the-loop: auto-execute"))
	wait(t, s)
	got := rc.got()
	require.Len(t, got, 1)
	require.Equal(t, "issues", got[0].event)
	require.Equal(t, "the-loop: auto-execute", str(got[0].payload, "label", "name"))
}

func githubsimConfigWithHook(url, secret string) githubsim.Config {
	return githubsim.Config{Hooks: []githubsim.Hook{{URL: url, Secret: secret}}}
}

// TestPullRequestPayloadsHaveTheFixturesShape is the same check for the
// pull-request events: opened, labeled, closed (merged), review submitted,
// review comment created.
func TestPullRequestPayloadsHaveTheFixturesShape(t *testing.T) {
	dir := filepath.Join("..", "..", "..", "shared", "fixtures", "github-webhooks")
	if _, err := os.Stat(dir); err != nil {
		t.Skipf("webhook fixtures not found at %s (they live beside the repository, in ../shared/fixtures/github-webhooks)", dir)
	}
	rc := newReceiver(t, "k")
	s := startSim(t, githubsim.Config{Hooks: []githubsim.Hook{{URL: rc.srv.URL, Secret: "k"}}})
	_, err := s.OpenIssue("demo/widgets", "dana", "t", "")
	require.NoError(t, err)
	pr, err := s.OpenPullRequestWith("demo/widgets", githubsim.PullRequest{Author: "erin", Title: "CSV", Body: "Fixes #1", Head: "issue-1"})
	require.NoError(t, err)
	require.NoError(t, s.AddLabel("demo/widgets", pr.Number, "erin", "x"))
	_, err = s.AddReview("demo/widgets", pr.Number, githubsim.Review{Author: "dana", Body: "LGTM", State: "APPROVED"})
	require.NoError(t, err)
	_, err = s.AddReviewComment("demo/widgets", pr.Number, githubsim.ReviewComment{Author: "dana", Body: "nit", Path: "a.go", Line: 3})
	require.NoError(t, err)
	require.NoError(t, s.MergePullRequest("demo/widgets", pr.Number, "dana"))
	require.ErrorIs(t, s.MergePullRequest("demo/widgets", pr.Number, "dana"), githubsim.ErrInvalid)
	wait(t, s)
	got := rc.got()[1:] // after issues.opened
	var seq []string
	for _, g := range got {
		seq = append(seq, g.event+"."+str(g.payload, "action"))
	}
	require.Equal(t, []string{"pull_request.opened", "pull_request.labeled", "pull_request_review.submitted", "pull_request_review_comment.created", "pull_request.closed"}, seq)
	require.Equal(t, "issue-1", str(got[0].payload, "pull_request", "head", "ref"))
	require.Equal(t, "approved", str(got[2].payload, "review", "state"), "webhooks carry the review state in lower case")
	require.Equal(t, "true", fmt.Sprint(got[4].payload["pull_request"].(map[string]any)["merged"]))
	for i, fx := range []string{"pull_request/opened.payload.json", "pull_request/labeled.payload.json", "pull_request_review/submitted.payload.json",
		"pull_request_review_comment/created.payload.json", "pull_request/closed.payload.json"} {
		raw, err := os.ReadFile(filepath.Join(dir, fx))
		require.NoError(t, err)
		var want map[string]any
		require.NoError(t, json.Unmarshal(raw, &want))
		delete(want, "installation") // only app hooks carry it
		ours := got[i].payload
		require.Subset(t, keys(ours), keys(want), fx)
		for _, k := range []string{"pull_request", "review", "comment", "label", "repository", "sender"} {
			w, ok := want[k].(map[string]any)
			if !ok {
				continue
			}
			require.Subset(t, keys(ours[k].(map[string]any)), keys(w), "%s: %s", fx, k)
		}
		prw := want["pull_request"].(map[string]any)
		pro := ours["pull_request"].(map[string]any)
		require.Subset(t, keys(pro["head"].(map[string]any)), keys(prw["head"].(map[string]any)), fx)
		require.Subset(t, keys(pro["_links"].(map[string]any)), keys(prw["_links"].(map[string]any)), fx)
	}
}

// A pull request from a fork names the fork as its head's repository.
func TestPullRequestFromAForkNamesTheFork(t *testing.T) {
	rc := newReceiver(t, "k")
	s := startSim(t, githubsim.Config{Hooks: []githubsim.Hook{{URL: rc.srv.URL, Secret: "k"}}})
	require.NoError(t, s.AddRepo("demo/widgets", githubsim.RepoOptions{}))
	_, err := s.OpenPullRequestWith("demo/widgets", githubsim.PullRequest{Author: "erin", Title: "CSV", Head: "main", HeadRepo: "erin/widgets"})
	require.NoError(t, err)
	_, err = s.OpenPullRequestWith("demo/widgets", githubsim.PullRequest{Author: "erin", Title: "CSV", HeadRepo: "not a repo"})
	require.ErrorIs(t, err, githubsim.ErrInvalid)
	wait(t, s)
	got := rc.got()
	require.Len(t, got, 1)
	require.Equal(t, "erin/widgets", str(got[0].payload, "pull_request", "head", "repo", "full_name"))
	require.Equal(t, "erin:main", str(got[0].payload, "pull_request", "head", "label"))
	require.Equal(t, "demo/widgets", str(got[0].payload, "pull_request", "base", "repo", "full_name"))
	require.Equal(t, "demo/widgets", str(got[0].payload, "repository", "full_name"))
}
