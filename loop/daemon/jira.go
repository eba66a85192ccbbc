package daemon

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/ingress"
	"github.com/theloop-dev/theloop/integrations"
	"github.com/theloop-dev/theloop/loop"
	"github.com/theloop-dev/theloop/ops"
	"github.com/theloop-dev/theloop/workitem"
)

// Jira heard by loopd (docs/daemon.md §2.6): a Jira webhook endpoint on the
// webhook port and a poll of the served projects feed the same queue as
// GitHub's webhook, with Jira comments routed as GitHub's are — the
// allowlist (jira:<account> entries of routing.authorizedUsers), control
// keywords, the content dedup — and a Jira work item's gate decided as a
// GitHub one is: by a new comment of an authorized person, re-read at Jira
// by id before the decision is signed (docs/decisions.md §19).
//
// A Jira work item needs a repository for its session; each served Jira
// project names one (webhooks.jiraWebhook.projects), and the daemon's ref of
// PROJ-123 is jira:owner/repo#123 (workitem.JiraProjects). Its spec
// directory is PROJ-123, as the repository's own tools name it when the
// repository's harness config sets ticketing.jira.project.

// JiraIntake is webhooks.jiraWebhook.
type JiraIntake struct {
	// Path is the endpoint's POST path (default ingress.DefaultJiraPath).
	Path string
	// Secret is the webhook secret (webhooks.jiraWebhook.secretFile or the
	// variable secretEnv names). Required.
	Secret []byte
	// Projects maps each served Jira project key to its repository
	// (owner/repo). Required.
	Projects map[string]string
	// PollInterval is how often the poll runs (0: ingress.DefaultPollInterval;
	// negative: never, webhook only).
	PollInterval time.Duration
}

// DefaultJiraSecretEnv is webhooks.jiraWebhook.secretEnv's default.
const DefaultJiraSecretEnv = "THE_LOOP_JIRA_WEBHOOK_SECRET"

// jiraIntake maps webhooks.jiraWebhook onto JiraIntake (nil: no project
// named, the endpoint is off), reading the secret from secretFile, else
// the variable secretEnv names. A project without a secret is refused.
func jiraIntake(js loop.JiraWebhookSettings, getenv func(string) string) (*JiraIntake, error) {
	if len(js.Projects) == 0 {
		return nil, nil
	}
	if _, err := workitem.NewJiraProjects(js.Projects); err != nil {
		return nil, fmt.Errorf("webhooks.jiraWebhook.projects: %w: %w", err, loop.ErrInvalidConfig)
	}
	var secret string
	if js.SecretFile != "" {
		b, err := os.ReadFile(js.SecretFile)
		if err != nil {
			return nil, fmt.Errorf("webhooks.jiraWebhook.secretFile: %w: %w", err, loop.ErrInvalidConfig)
		}
		secret = strings.TrimRight(string(b), "\r\n")
	} else {
		env := js.SecretEnv
		if env == "" {
			env = DefaultJiraSecretEnv
		}
		secret = getenv(env)
	}
	if secret == "" {
		return nil, fmt.Errorf("webhooks.jiraWebhook: no secret: set the webhook's secret in Jira (System → WebHooks) and give loopd the same in the file webhooks.jiraWebhook.secretFile names or in %s (webhooks.jiraWebhook.secretEnv): %w",
			orDefaultString(js.SecretEnv, DefaultJiraSecretEnv), loop.ErrInvalidConfig)
	}
	poll := js.Poll
	if poll <= 0 {
		poll = -1 // pollSeconds 0: never
	}
	return &JiraIntake{Path: js.Path, Secret: []byte(secret), Projects: js.Projects, PollInterval: poll}, nil
}

func orDefaultString(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// jiraIngress is the daemon's Jira part (nil projects: off).
type jiraIngress struct {
	projects *workitem.JiraProjects
	poll     *ingress.JiraPoller
}

// newJiraIngress checks webhooks.jiraWebhook (nil: Jira is off).
func newJiraIngress(c *JiraIntake) (jiraIngress, error) {
	if c == nil {
		return jiraIngress{}, nil
	}
	p, err := workitem.NewJiraProjects(c.Projects)
	if err != nil {
		return jiraIngress{}, fmt.Errorf("daemon: webhooks.jiraWebhook.projects: %w: %w", err, loop.ErrInvalidConfig)
	}
	return jiraIngress{projects: p}, nil
}

// verifier puts the Jira re-read in front of next (next itself when Jira
// is off).
func (j *jiraIngress) verifier(next CommentVerifier, integ graph.Integrations) CommentVerifier {
	if j.projects == nil {
		return next
	}
	return jiraCommentVerifier{next: next, integ: integ, projects: j.projects}
}

// jiraKey is the Jira issue key of a Jira work item's daemon ref.
func (j *jiraIngress) jiraKey(item workitem.Ref) (string, bool) { return j.projects.Key(item) }

// handler serves the Jira endpoint beside next on the webhook listener,
// or is next itself when Jira is off (c nil). Its events go through the
// receiver in force (recv) to sink, as GitHub's do.
func (j *jiraIngress) handler(c *JiraIntake, stateRoot string, recv func() *ingress.Receiver, integ graph.Integrations, sink ingress.Sink, log graph.Sink, next http.Handler) (http.Handler, error) {
	if c == nil {
		return next, nil
	}
	jr, err := ingress.NewJiraReceiver(ingress.JiraConfig{Path: c.Path, Secret: c.Secret, Projects: j.projects}, recv)
	if err != nil {
		return nil, fmt.Errorf("daemon: %w", err)
	}
	if c.PollInterval >= 0 {
		j.poll, err = ingress.NewJiraPoller(ingress.JiraPollConfig{Projects: j.projects, Interval: c.PollInterval, StateRoot: stateRoot},
			ingress.JiraPollDeps{Jira: integ, Router: func() *ingress.Router { return recv().Router() }, Sink: sink, Log: log})
		if err != nil {
			return nil, fmt.Errorf("daemon: %w", err)
		}
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if jr.Handles(r) {
			jr.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r)
	}), nil
}

// start runs the poll until the returned stop (or ctx) ends it.
func (j *jiraIngress) start(ctx context.Context) func() {
	if j.poll == nil {
		return func() {}
	}
	pctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); j.poll.Run(pctx) }()
	return func() { cancel(); <-done }
}

// JiraPoll runs one pass of the Jira poll now (valid while running; tests
// and `loopctl` use it rather than wait for the interval).
func (d *Daemon) JiraPoll(ctx context.Context) (ingress.JiraPollStats, error) {
	if d.jira.poll == nil {
		return ingress.JiraPollStats{}, errors.New("daemon: the Jira poll is off (webhooks.jiraWebhook)")
	}
	return d.jira.poll.Poll(ctx)
}

// JiraWebhookURL is the Jira endpoint's URL (valid after Ready).
func (d *Daemon) JiraWebhookURL() string {
	if d.cfg.Jira == nil {
		return ""
	}
	p := d.cfg.Jira.Path
	if p == "" {
		p = ingress.DefaultJiraPath
	}
	return "http://" + d.addr + p
}

// jiraCloneURLs clones a Jira work item's session from its repository:
// inner asked about the repository's GitHub ref, else GitHub's https URL.
func jiraCloneURLs(inner func(workitem.Ref, *ingress.Event) string) func(workitem.Ref, *ingress.Event) string {
	return func(item workitem.Ref, ev *ingress.Event) string {
		if item.Provider != workitem.JiraProvider {
			return inner(item, ev)
		}
		repo := item.Repository()
		if u := inner(repo, ev); u != "" {
			return u
		}
		return "https://" + repo.HostOrDefault() + "/" + repo.Owner + "/" + repo.Repo + ".git"
	}
}

// jiraCommentVerifier re-reads a Jira comment at Jira (jira.get-comment)
// before it may decide a gate; every other claim goes to next.
type jiraCommentVerifier struct {
	next     CommentVerifier
	integ    graph.Integrations
	projects *workitem.JiraProjects
}

// CommentTypeJira is the CommentClaim.Kind of a Jira comment.
const CommentTypeJira = ingress.CommentTypeJira

func (v jiraCommentVerifier) VerifyComment(ctx context.Context, c CommentClaim) error {
	if c.Item.Provider != workitem.JiraProvider {
		return v.next.VerifyComment(ctx, c)
	}
	if c.ID == "" {
		return forged(ForgedNoID)
	}
	key, ok := v.projects.Key(c.Item)
	if !ok {
		return forged(ForgedOtherItem)
	}
	res, err := v.integ.Call(ctx, ops.JiraGetComment, map[string]any{"issue": key, "commentId": c.ID})
	switch {
	case errors.Is(err, integrations.ErrNotFound):
		return forged(ForgedNotFound) // not on that issue, or gone
	case errors.Is(err, integrations.ErrInvalidArgument):
		return forged(ForgedNoID)
	case err != nil:
		return fmt.Errorf("re-reading Jira comment %s on %s: %w", c.ID, key, err)
	}
	got := graph.Values(res)
	if got.String("issue") != key || got.String("id") != c.ID {
		return forged(ForgedOtherItem)
	}
	if ingress.JiraActorPrefix+got.String("author") != c.Author {
		return forged(ForgedOtherAuthor)
	}
	if got.String("body") != c.Body {
		return forged(ForgedOtherBody)
	}
	created, err := ingress.ParseJiraTime(got.String("createdAt"))
	if err != nil {
		return forged(ForgedEdited) // fail closed: no creation time to hold it to
	}
	if updated, err := ingress.ParseJiraTime(got.String("updatedAt")); err != nil || !updated.Equal(created) {
		return forged(ForgedEdited)
	}
	if !c.NotBefore.IsZero() && created.Before(c.NotBefore) {
		return forged(ForgedStale)
	}
	return nil
}

var _ CommentVerifier = jiraCommentVerifier{}
