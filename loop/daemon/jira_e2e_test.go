package daemon_test

import (
	"bytes"
	"context"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/ingress"
	"github.com/theloop-dev/theloop/integrations"
	"github.com/theloop-dev/theloop/integrations/githubsim"
	"github.com/theloop-dev/theloop/integrations/jirasim"
	"github.com/theloop-dev/theloop/loop"
	"github.com/theloop-dev/theloop/loop/daemon"
	"github.com/theloop-dev/theloop/sessions"
	"github.com/theloop-dev/theloop/workitem"
)

// Jira heard end to end: the real daemon, its Jira endpoint, poll, queue
// and graph link against jirasim (signed webhooks, comments, JQL search)
// for a Jira work item whose repository is octo/jira.

const (
	jiraRepo     = "octo/jira"
	jiraKey      = "PROJ-1"
	jiraSecret   = "jira-s3cret"
	jiraApprover = "557058:dana"    // an authorized Jira Cloud account
	jiraStranger = "557058:mallory" // a Jira account nobody authorized
)

type jiraWorld struct {
	*world
	js   *jirasim.Server
	item workitem.Ref
}

func newJiraWorld(t *testing.T) *jiraWorld {
	t.Helper()
	requireTools(t)
	js := jirasim.Start(jirasim.Config{Email: "bot@example.com", Token: "jira-tok"})
	t.Cleanup(js.Close)
	gh, err := githubsim.Start(githubsim.Config{Token: "tok", BotLogin: "theloop-bot"})
	require.NoError(t, err)
	t.Cleanup(gh.Close)
	w := newWorldWith(t, gh, func(c *daemon.Config) {
		c.Repositories = append(c.Repositories, jiraRepo)
		c.Routing.AuthorizedUsers = append(c.Routing.AuthorizedUsers, ingress.JiraActorPrefix+jiraApprover)
		c.Routing.SpawnOnUnmatched = daemon.SpawnAlways
		c.Jira = &daemon.JiraIntake{Secret: []byte(jiraSecret), Projects: map[string]string{"PROJ": jiraRepo}, PollInterval: time.Hour}
	}, func(base string) integrations.Config {
		return integrations.Config{
			GitHub: &integrations.GitHubConfig{Transport: integrations.TransportAPI, MaxAttempts: 3, TimeoutSeconds: 10,
				API: integrations.GitHubAPIConfig{BaseURL: base}},
			Jira: &integrations.JiraConfig{MaxAttempts: 3, TimeoutSeconds: 10, API: integrations.JiraAPIConfig{BaseURL: js.URL()}},
		}
	}, map[string]string{"GH_TOKEN": "tok", integrations.DefaultJiraEmailEnv: "bot@example.com", integrations.DefaultJiraTokenEnv: "jira-tok"})

	// The Jira project's repository: a bare remote whose path ends in
	// octo/jira, so the checkout passes the repository-identity check.
	remote := filepath.Join(filepath.Dir(w.remote), "jira.git")
	git(t, filepath.Dir(w.remote), "clone", "-q", "--bare", w.remote, remote)
	w.remotes = map[string]string{jiraRepo: remote}
	require.NoError(t, gh.AddRepo(jiraRepo, githubsim.RepoOptions{CloneURL: "file://" + remote}))

	js.AddIssue(jiraKey)
	js.AddHook(jirasim.Hook{URL: w.d.JiraWebhookURL(), Secret: jiraSecret})
	item, err := workitem.Parse("jira:" + jiraRepo + "#1")
	require.NoError(t, err)
	return &jiraWorld{world: w, js: js, item: item}
}

// idle waits until Jira delivered everything and the queue is empty.
func (w *jiraWorld) idle() {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(w.t, w.js.WaitDeliveries(ctx))
	w.waitIdle()
}

func (w *jiraWorld) checkoutDir() string {
	reg, err := sessions.OpenRegistry(sessions.RegistryDir(w.cfg.StateRoot))
	require.NoError(w.t, err)
	rec, err := reg.Get(w.item)
	require.NoError(w.t, err)
	return rec.Cwd
}

func (w *jiraWorld) jiraState() *graph.State {
	st, err := loop.NewStore(w.checkoutDir(), "").Load(context.Background(), jiraKey)
	require.NoError(w.t, err)
	return st
}

// jiraClaim is the agent's `loopctl graph complete` for the Jira item.
func (w *jiraWorld) jiraClaim(node string, files map[string]string) *graph.Claim {
	w.t.Helper()
	return w.claimIn(w.checkoutDir(), jiraKey, node, files)
}

func (w *jiraWorld) postJira(id, sig string, body []byte) int {
	w.t.Helper()
	req, err := http.NewRequest(http.MethodPost, w.d.JiraWebhookURL(), bytes.NewReader(body))
	require.NoError(w.t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Atlassian-Webhook-Identifier", id)
	if sig != "" {
		req.Header.Set("X-Hub-Signature", sig)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(w.t, err)
	_ = resp.Body.Close()
	return resp.StatusCode
}

func (w *jiraWorld) requireAtGate(why string) {
	w.t.Helper()
	st := w.jiraState()
	require.Equal(w.t, "requirements-approval", st.CurrentNode, why)
	_, decided := st.Decisions.Get("requirements-approval")
	require.False(w.t, decided, "%s: no decision recorded", why)
}

func TestJiraCommentsDriveAJiraWorkItemThroughLoopd(t *testing.T) {
	w := newJiraWorld(t)

	// A Jira comment by an authorized account spawns the item's session
	// in a checkout of the project's repository; "the-loop execute" enters
	// its graph, as on GitHub.
	require.NotEmpty(t, w.js.AddComment(jiraKey, jiraApprover, "Please add a widget."))
	w.idle()
	w.eventually("the Jira item's session", func() bool { return w.count("dispatch.spawned") > 0 })
	require.NotEmpty(t, w.js.AddComment(jiraKey, jiraApprover, "the-loop execute"))
	w.idle()
	w.jiraClaim("brainstorming", map[string]string{"brainstorm.md": brainstormMD})
	c := w.jiraClaim("requirements-definition", map[string]string{"requirements.md": requirementsMD})
	require.Equal(t, "requirements-approval", c.CurrentNode, "claim: %+v", c)

	// An "Approved" by a Jira account nobody authorized: dropped by the
	// router; the gate stays.
	require.NotEmpty(t, w.js.AddComment(jiraKey, jiraStranger, "Approved"))
	w.idle()
	w.requireAtGate("an unauthorized Jira user decides nothing")
	require.NotEmpty(t, w.withField("routing.dropped", "actor", ingress.JiraActorPrefix+jiraStranger))

	// Unsigned and forged webhooks: 401. A webhook signed with the secret
	// for a comment Jira does not hold: kept, then refused by the re-read.
	forgedID := "999999"
	body := jirasim.CommentEvent(w.js.URL(), "comment_created", jiraKey,
		jirasim.Comment{ID: forgedID, Author: jiraApprover, Body: "Approved", Created: time.Now(), Updated: time.Now()}, time.Now())
	require.Equal(t, http.StatusUnauthorized, w.postJira("forged-1", "", body))
	require.Equal(t, http.StatusUnauthorized, w.postJira("forged-2", jirasim.Sign("not-the-secret", body), body))
	require.Equal(t, http.StatusAccepted, w.postJira("forged-3", jirasim.Sign(jiraSecret, body), body))
	w.idle()
	w.requireAtGate("a comment Jira does not hold decides nothing")
	require.Len(t, w.withField(ingress.EventForged, "comment_id", forgedID), 1)

	// loopd is down when dana approves: the webhook is missed; the poll at
	// start finds the comment, and the gate passes through loopd — re-read
	// at Jira, signed, recorded with who and which rule.
	w.stop()
	approved := w.js.AddComment(jiraKey, jiraApprover, "Approved")
	require.NotEmpty(t, approved)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, w.js.WaitDeliveries(ctx))
	missed := false
	for _, d := range w.js.Deliveries() {
		missed = missed || d.Status == 0
	}
	require.True(t, missed, "the webhook could not reach a stopped loopd")
	w.start()
	w.eventually("the gate to pass by the poll", func() bool { return w.jiraState().CurrentNode == "design" })
	dec, ok := w.jiraState().Decisions.Get("requirements-approval")
	require.True(t, ok)
	require.Equal(t, "@"+ingress.JiraActorPrefix+jiraApprover, dec.By)
	require.Equal(t, approved, dec.Comment)
	require.Equal(t, ingress.RuleAuthorizedUsers, dec.Rule)
	require.NotNil(t, dec.Signature, "signed with the daemon's key (docs/decisions.md §16)")
	polled := false
	for _, o := range w.observed(daemon.KindWebhook, ingress.JiraCommentEvent) {
		polled = polled || o.Fields["source"] == string(ingress.SourcePoll) && o.DeliveryID == "jira-poll-"+jiraKey+"-"+approved
	}
	require.True(t, polled, "the approval came by the poll")
	w.idle()
}
