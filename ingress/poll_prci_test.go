package ingress

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/integrations"
	"github.com/theloop-dev/theloop/integrations/githubsim"
	"github.com/theloop-dev/theloop/workitem"
)

// prciWorld is a poller with PR/CI discovery on: its Observe records the
// webhook-shaped events it is handed, and Tracked names the items given.
type prciWorld struct {
	*pollWorld
	mu       sync.Mutex
	observed []*Event
}

func newPRCIWorld(t *testing.T, budget int, tracked ...int) *prciWorld {
	t.Helper()
	w := &prciWorld{pollWorld: newPollWorld(t)}
	set, err := integrations.New(integrations.Config{GitHub: &integrations.GitHubConfig{
		Transport: integrations.TransportAPI, MaxAttempts: 2, TimeoutSeconds: 5,
		API: integrations.GitHubAPIConfig{BaseURL: w.gh.sim.URL()},
	}}, integrations.Deps{
		Env:   func(k string) (string, bool) { return "tok", k == "GH_TOKEN" },
		Sleep: func(ctx context.Context, d time.Duration) error { return ctx.Err() },
	})
	require.NoError(t, err)
	router, err := NewRouter(testConfig(), RouterDeps{Clock: w.clock})
	require.NoError(t, err)
	p, err := NewPoller(PollerConfig{Sources: []PollSource{{Repos: []string{simRepo}}}, StateRoot: w.root, Interval: time.Minute, PRCICalls: budget},
		PollerDeps{GitHub: set, Sink: w.sink, Router: router, Store: w.store, Clock: w.clock,
			Tracked: func(context.Context) ([]workitem.Ref, error) {
				var out []workitem.Ref
				for _, n := range tracked {
					out = append(out, workitem.Ref{Provider: "github", Owner: "octo", Repo: "repo", Number: n})
				}
				return out, nil
			},
			Observe: func(ev *Event) {
				w.mu.Lock()
				w.observed = append(w.observed, ev)
				w.mu.Unlock()
			}})
	require.NoError(t, err)
	w.poller = p
	return w
}

// take returns and forgets what was observed.
func (w *prciWorld) take() []*Event {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.observed
	w.observed = nil
	return out
}

func (w *prciWorld) requestsTo(part string) int {
	n := 0
	for _, r := range w.gh.sim.Requests() {
		// A trailing NUL asks for the path to end there.
		if strings.Contains(r.Path+"\x00", part) {
			n++
		}
	}
	return n
}

// A failing check run and a commit status that no webhook reported are
// observed, shaped like the webhooks the dashboard reads, under the
// tracked issue and its pull request; nothing goes to the queue.
func TestPollerObservesPRAndChecksOfTrackedItems(t *testing.T) {
	w := newPRCIWorld(t, 0, 15)
	issue := w.gh.open("alice") // #15, tracked
	pr, err := w.gh.sim.OpenPullRequestWith(simRepo, githubsim.PullRequest{Author: "alice", Title: "X", Body: "Fixes #" + strconv.Itoa(issue), Head: "feature"})
	require.NoError(t, err)
	other, err := w.gh.sim.OpenPullRequestWith(simRepo, githubsim.PullRequest{Author: "alice", Title: "Unrelated", Head: "chore"})
	require.NoError(t, err)
	run, err := w.gh.sim.SetCheckRun(simRepo, pr.Number, githubsim.CheckRun{Name: "lint", Conclusion: "failure"}, false)
	require.NoError(t, err)
	pending, err := w.gh.sim.SetCheckRun(simRepo, pr.Number, githubsim.CheckRun{Name: "test", Status: "in_progress"}, false)
	require.NoError(t, err)
	require.NoError(t, w.gh.sim.SetStatus(simRepo, pr.Number, githubsim.Status{Context: "ci/build", State: "error", TargetURL: "https://ci.example.com/1"}, false))
	_, err = w.gh.sim.AddReview(simRepo, pr.Number, githubsim.Review{Author: "bob", Body: "no", State: "CHANGES_REQUESTED"})
	require.NoError(t, err)
	_, err = w.gh.sim.SetCheckRun(simRepo, other.Number, githubsim.CheckRun{Name: "lint", Conclusion: "failure"}, false)
	require.NoError(t, err)
	sinkBefore := len(w.sink.all())

	st := w.cycle(t)
	require.Zero(t, st.Failures)
	evs := w.take()
	require.Equal(t, st.PRCIObserved, len(evs))
	require.Equal(t, sinkBefore, len(w.sink.all()), "PR/CI state is observed, never queued")
	type fact struct{ event, action, detail string }
	var got []fact
	for _, ev := range evs {
		require.Equal(t, SourcePoll, ev.Source)
		require.True(t, strings.HasPrefix(ev.DeliveryID, PRCIDeliveryPrefix))
		var refs []string
		for _, r := range ev.WorkItems {
			refs = append(refs, r.String())
		}
		require.Equal(t, []string{"github:octo/repo#" + strconv.Itoa(issue), "github:octo/repo#" + strconv.Itoa(pr.Number)}, refs, "only the linked PR, under the item and itself")
		var p map[string]any
		require.NoError(t, json.Unmarshal(ev.Payload, &p))
		detail := ""
		switch ev.Event {
		case "pull_request":
			pj := p["pull_request"].(map[string]any)
			detail = fmt.Sprint(pj["number"], " ", pj["state"], " ", len(pj["head"].(map[string]any)["sha"].(string)))
		case "pull_request_review":
			detail = fmt.Sprint(p["review"].(map[string]any)["state"])
		case "check_run":
			cr := p["check_run"].(map[string]any)
			detail = fmt.Sprint(cr["name"], " ", cr["status"], " ", cr["conclusion"], " ", cr["html_url"])
		case "status":
			detail = fmt.Sprint(p["context"], " ", p["state"], " ", p["target_url"])
		}
		got = append(got, fact{ev.Event, ev.Action, detail})
	}
	require.Equal(t, []fact{
		{"pull_request", "reconciled", fmt.Sprintf("%d open 40", pr.Number)},
		{"pull_request_review", "submitted", "changes_requested"},
		{"check_run", "completed", fmt.Sprintf("lint completed failure https://github.com/%s/runs/%d", simRepo, run.ID)},
		{"check_run", "created", fmt.Sprintf("test in_progress  https://github.com/%s/runs/%d", simRepo, pending.ID)},
		{"status", "", "ci/build error https://ci.example.com/1"},
	}, got)
	// One listing, then three reads for the one linked pull request.
	require.Equal(t, 1, w.requestsTo("/repos/octo/repo/pulls\x00"), "one listing")
	require.Equal(t, 1, w.requestsTo("/check-runs"))
	require.Equal(t, 1, w.requestsTo("/status"))
}

// The pass stays within its per-cycle budget and picks up, next cycle,
// the pull requests it did not reach.
func TestPollerPRCIBudget(t *testing.T) {
	w := newPRCIWorld(t, 4, 15, 16)
	a := w.gh.open("alice") // #15
	b := w.gh.open("alice") // #16
	for _, n := range []int{a, b} {
		_, err := w.gh.sim.OpenPullRequestWith(simRepo, githubsim.PullRequest{Author: "alice", Title: "X", Head: "issue-" + strconv.Itoa(n) + "-x"})
		require.NoError(t, err)
	}
	prsOf := func(evs []*Event) []int {
		var out []int
		for _, ev := range evs {
			if ev.Event == "pull_request" {
				out = append(out, ev.WorkItems[len(ev.WorkItems)-1].Number)
			}
		}
		return out
	}
	before := len(w.gh.sim.Requests())
	w.cycle(t)
	first := prsOf(w.take())
	require.Len(t, first, 1, "a listing and three reads fill a budget of 4")
	spent := 0
	for _, r := range w.gh.sim.Requests()[before:] {
		if strings.Contains(r.Path, "/pulls") || strings.Contains(r.Path, "/commits/") {
			spent++
		}
	}
	require.Equal(t, 4, spent)
	w.cycle(t)
	second := prsOf(w.take())
	require.Len(t, second, 1)
	require.NotEqual(t, first, second, "the next cycle starts where the budget ran out")
}

// A rate limit on the checks stops the cycle and backs off, like any call.
func TestPollerPRCIRateLimited(t *testing.T) {
	w := newPRCIWorld(t, 0, 15)
	n := w.gh.open("alice")
	_, err := w.gh.sim.OpenPullRequestWith(simRepo, githubsim.PullRequest{Author: "alice", Title: "X", Head: "issue-" + strconv.Itoa(n)})
	require.NoError(t, err)
	reset := strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10)
	w.gh.sim.InjectFault(githubsim.Fault{PathContains: "/check-runs", Status: 403, Header: map[string]string{"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": reset}})
	w.clock.advance(time.Second)
	st, err := w.poller.Reconcile(context.Background())
	require.ErrorIs(t, err, errRateLimited)
	require.True(t, st.RateLimited)
	require.Positive(t, w.poller.Backoff())
	require.Zero(t, w.requestsTo("/status"), "nothing after the refusal")
	w.gh.sim.RemoveFaults()
	w.cycle(t)
	var checks int
	for _, ev := range w.take() {
		if ev.Event == "check_run" || ev.Event == "status" {
			checks++
		}
	}
	require.Zero(t, checks, "no check runs or statuses were set")
	require.Equal(t, 2, w.requestsTo("/check-runs"), "read again after the back-off")
}
