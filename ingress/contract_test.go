package ingress

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/internal/octokit"
	"github.com/theloop-dev/theloop/internal/required"
)

// Every example payload of @octokit/webhooks-examples for the events loopd
// handles goes through the real receiver, signed as GitHub signs, and the
// real router; the work item, actor and action are read from the payload
// independently and asserted, as is every drop's reason.
func TestContractWebhookExamplesThroughReceiverAndRouter(t *testing.T) {
	path, ok := octokit.WebhooksFile()
	if !ok {
		required.Skip(t, "octokit-webhooks", octokit.SkipReason("@octokit/webhooks-examples", octokit.WebhooksEnv))
	}
	examples, err := octokit.LoadExamples(path, DefaultEvents()...)
	require.NoError(t, err)
	require.NotEmpty(t, examples)
	byEvent := map[string]int{}
	secret := []byte("contract-secret")
	for i, ex := range examples {
		t.Run(fmt.Sprintf("%s.%s#%d", ex.Event, ex.Action, i), func(t *testing.T) {
			want := expectFromPayload(t, ex)
			cfg := DefaultConfig()
			cfg.Secret = secret
			cfg.Repositories = []string{want.repo}
			// A rule only GitHub answers: every named actor is admitted,
			// as loopd admits them before asking its Authority.
			cfg.Authorized = []string{"permission:write"}
			var got []*Event
			var drops []string
			r, err := NewReceiver(cfg, ReceiverDeps{
				Sink: SinkFunc(func(_ context.Context, ev *Event) error { got = append(got, ev); return nil }),
				Log: graph.SinkFunc(func(e graph.LogEvent) {
					if e.Name == EventDropped {
						for _, f := range e.Fields {
							if f.Key == "reason" {
								drops = append(drops, fmt.Sprint(f.Value))
							}
						}
					}
				}),
			})
			require.NoError(t, err)
			req := httptest.NewRequest(http.MethodPost, "/gh-webhook", strings.NewReader(string(ex.Payload)))
			req.Header.Set("X-GitHub-Event", ex.Event)
			req.Header.Set("X-GitHub-Delivery", fmt.Sprintf("example-%d", i))
			req.Header.Set("X-Hub-Signature-256", Sign(secret, ex.Payload))
			req.Header.Set("Content-Type", "application/json")
			rec := httptest.NewRecorder()
			r.ServeHTTP(rec, req)
			require.Less(t, rec.Code, 300, "a signed GitHub example is accepted: %d %s", rec.Code, rec.Body.String())

			switch {
			case want.dropReason != "":
				require.Empty(t, got, "dropped")
				require.Equal(t, []string{want.dropReason}, drops)
			default:
				require.Len(t, got, 1, "routed (drops: %v)", drops)
				ev := got[0]
				require.Equal(t, ex.Event, ev.Event)
				require.Equal(t, want.action, ev.Action)
				require.Equal(t, want.actor, ev.Actor)
				var refs []string
				for _, w := range ev.WorkItems {
					refs = append(refs, w.String())
				}
				for _, w := range want.items {
					require.Contains(t, refs, w)
				}
				if want.comment {
					require.Len(t, ev.Comments, 1)
					require.Equal(t, want.actor, ev.Comments[0].Author)
				}
			}
			byEvent[ex.Event]++
		})
	}
	for _, e := range []string{"issues", "issue_comment", "pull_request", "pull_request_review", "pull_request_review_comment", "check_run", "check_suite"} {
		require.Positive(t, byEvent[e], "examples of %s were run", e)
	}
}

// issueBranch is the branch convention (issue-<n>, issue/<n>), as
// docs/daemon.md states it.
var issueBranch = regexp.MustCompile(`(?i)(?:^|[^a-z0-9])issue[-/]([0-9]{1,9})(?:[^0-9]|$)`)

func atoi(s string) int { n, _ := strconv.Atoi(s); return n }

type expectation struct {
	repo, action, actor string
	items               []string
	comment             bool
	dropReason          string
}

// expectFromPayload reads, with plain JSON and GitHub's documented
// shapes, what the router must extract.
func expectFromPayload(t *testing.T, ex octokit.Example) expectation {
	t.Helper()
	var p struct {
		Action     string `json:"action"`
		Repository struct {
			FullName string `json:"full_name"`
		} `json:"repository"`
		Sender  struct{ Login string } `json:"sender"`
		Issue   *struct{ Number int }  `json:"issue"`
		PR      *struct{ Number int }  `json:"pull_request"`
		Comment *struct {
			User struct{ Login string }
		} `json:"comment"`
		Review *struct {
			User struct{ Login string }
		} `json:"review"`
		CheckRun *struct {
			PullRequests []struct{ Number int } `json:"pull_requests"`
		} `json:"check_run"`
		CheckSuite *struct {
			PullRequests []struct{ Number int } `json:"pull_requests"`
		} `json:"check_suite"`
		WorkflowRun *struct {
			PullRequests []struct{ Number int } `json:"pull_requests"`
			HeadBranch   string                 `json:"head_branch"`
		} `json:"workflow_run"`
		Branches []struct{ Name string } `json:"branches"`
	}
	require.NoError(t, json.Unmarshal(ex.Payload, &p))
	w := expectation{repo: p.Repository.FullName, action: p.Action}
	ref := func(n int) string { return fmt.Sprintf("github:%s#%d", p.Repository.FullName, n) }
	switch ex.Event {
	case "issues":
		w.items, w.actor = []string{ref(p.Issue.Number)}, p.Sender.Login
	case "pull_request":
		w.items, w.actor = []string{ref(p.PR.Number)}, p.Sender.Login
	case "issue_comment":
		w.items, w.actor, w.comment = []string{ref(p.Issue.Number)}, p.Comment.User.Login, true
	case "pull_request_review_comment":
		w.items, w.actor, w.comment = []string{ref(p.PR.Number)}, p.Comment.User.Login, true
	case "pull_request_review":
		w.items, w.actor, w.comment = []string{ref(p.PR.Number)}, p.Review.User.Login, true
	case "check_run":
		for _, pr := range p.CheckRun.PullRequests {
			w.items = append(w.items, ref(pr.Number))
		}
	case "check_suite":
		for _, pr := range p.CheckSuite.PullRequests {
			w.items = append(w.items, ref(pr.Number))
		}
	case "workflow_run":
		for _, pr := range p.WorkflowRun.PullRequests {
			w.items = append(w.items, ref(pr.Number))
		}
		if m := issueBranch.FindStringSubmatch(p.WorkflowRun.HeadBranch); m != nil {
			w.items = append(w.items, ref(atoi(m[1])))
		}
	case "status":
		for _, b := range p.Branches {
			if m := issueBranch.FindStringSubmatch(b.Name); m != nil {
				w.items = append(w.items, ref(atoi(m[1])))
			}
		}
	}
	switch {
	case len(w.items) == 0 && w.actor == "":
		w.dropReason = string(DropNoWorkItem)
	case w.comment && w.actor != p.Sender.Login:
		w.dropReason = string(DropSenderNotAuthor)
	}
	return w
}
