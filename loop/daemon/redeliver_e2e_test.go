package daemon_test

import (
	"context"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/integrations"
	"github.com/theloop-dev/theloop/integrations/githubsim"
	"github.com/theloop-dev/theloop/loop/daemon"
)

// A delivery sent while loopd was down reaches the agent through GitHub's
// redelivery, asked by the reconcile pass at start; the pass asks once: a
// second restart asks nothing again (issue 34).
func TestFailedDeliveryIsRedeliveredAtStart(t *testing.T) {
	w := newWorld(t, nil)
	n := w.openLabeled()
	w.waitIdle()
	w.eventually("the session to start", func() bool { return w.spawns() == 1 })

	w.stop()
	_, err := w.sim.Comment(repoFull, n, human, "written while loopd was down")
	require.NoError(t, err)
	require.NoError(t, w.sim.WaitDeliveries(context.Background()))
	var failed githubsim.Delivery
	for _, d := range w.sim.Deliveries() {
		if d.Event == "issue_comment" && !d.OK() {
			failed = d
		}
	}
	require.NotEmpty(t, failed.ID, "the comment's delivery failed while loopd was down")

	w.cfg.ReconcileInterval = 0 // the reconcile pass runs once, at start
	w.start()
	w.eventually("the redelivered comment in the session", func() bool { return strings.Contains(w.received(), "written while loopd was down") })
	w.waitIdle()
	require.Equal(t, 1, strings.Count(w.received(), "written while loopd was down"))
	require.Equal(t, 1, w.sim.RedeliveryRequests())
	redelivered := false
	for _, d := range w.sim.Deliveries() {
		if d.ID == failed.ID && d.Redelivery {
			redelivered = d.Status == 202
		}
	}
	require.True(t, redelivered, "GitHub redelivered the failed delivery and loopd answered 202")

	// Asked once: another start looks again and asks nothing.
	w.stop()
	w.start()
	w.waitIdle()
	require.Equal(t, 1, w.sim.RedeliveryRequests())
	require.Equal(t, 1, strings.Count(w.received(), "written while loopd was down"))
}

// An organization's hook is redelivered too: with the served repository's
// owner's hook (found by listing GET /orgs/{org}/hooks) beside the
// repository's, a comment written while loopd was down fails on both; at
// start each is asked for again, and the comment reaches the agent once.
func TestFailedOrganizationHookDeliveryIsRedelivered(t *testing.T) {
	w := newWorld(t, nil)
	owner, _, _ := strings.Cut(repoFull, "/")
	_, err := w.sim.AddHook(githubsim.Hook{URL: w.d.WebhookURL(), Secret: secret, Org: owner})
	require.NoError(t, err)
	n := w.openLabeled()
	w.waitIdle()
	w.eventually("the session to start", func() bool { return w.spawns() == 1 })

	w.stop()
	_, err = w.sim.Comment(repoFull, n, human, "written while both hooks failed")
	require.NoError(t, err)
	require.NoError(t, w.sim.WaitDeliveries(context.Background()))
	hooks := map[int64]bool{}
	for _, d := range w.sim.Deliveries() {
		if d.Event == "issue_comment" && !d.OK() {
			hooks[d.HookID] = true
		}
	}
	require.Len(t, hooks, 2, "the comment's delivery failed on the repository's and the organization's hook")

	w.cfg.ReconcileInterval = 0 // the reconcile pass runs once, at start
	w.start()
	w.eventually("both redeliveries", func() bool { return w.sim.RedeliveryRequests() == 2 })
	w.eventually("the comment in the session", func() bool { return strings.Contains(w.received(), "written while both hooks failed") })
	w.waitIdle()
	require.Equal(t, 1, strings.Count(w.received(), "written while both hooks failed"), "one comment, once, under two deliveries")
}

// loopd as a GitHub App whose only webhook is the App's own: a comment
// written while loopd was down is redelivered through GET /app/hook/
// deliveries and POST …/attempts (the App's JWT), once; with that hook
// covering the repository, the poller's repository pass stays off (it ran
// at the first start, before the hook was made).
func TestFailedAppHookDeliveryIsRedelivered(t *testing.T) {
	requireTools(t)
	const slug = "theloop-redeliver"
	sim, keyPEM := appSim(t, 78, slug)
	appCfg := integrations.Config{GitHub: &integrations.GitHubConfig{
		MaxAttempts: 3, TimeoutSeconds: 10,
		App: &integrations.GitHubAppConfig{AppID: 78, Slug: slug},
	}}
	w := buildWorld(t, sim, 0, func(c *daemon.Config) {
		c.Integrations = appCfg
		c.ReconcileInterval = 0 // one reconcile pass, at each start
	}, func(base string) integrations.Config {
		appCfg.GitHub.API.BaseURL = base
		return appCfg
	}, map[string]string{integrations.DefaultGitHubAppKeyEnv: keyPEM})
	_, err := sim.AddInstallation(repoFull)
	require.NoError(t, err)
	_, err = sim.AddHook(githubsim.Hook{URL: w.d.WebhookURL(), Secret: secret, App: true})
	require.NoError(t, err)
	n := w.openLabeled()
	w.waitIdle()
	w.eventually("the session to start", func() bool { return w.spawns() == 1 })

	w.stop()
	_, err = sim.Comment(repoFull, n, human, "written while the App's hook failed")
	require.NoError(t, err)
	require.NoError(t, sim.WaitDeliveries(context.Background()))
	before := len(sim.Requests())
	w.start()
	w.eventually("the redelivered comment in the session", func() bool { return strings.Contains(w.received(), "written while the App's hook failed") })
	w.waitIdle()
	require.Equal(t, 1, sim.RedeliveryRequests())
	require.Equal(t, 1, strings.Count(w.received(), "written while the App's hook failed"))
	for _, r := range sim.Requests()[before:] {
		require.NotContains(t, r.Path, "/issues/events", "the App's hook covers the repository: no repository pass")
	}
}

// Every kind the poller would otherwise have to find comes back the same
// way: a comment, a label and a pull request opened for the item, each sent
// while loopd was down, are redelivered by the first reconcile pass, reach
// the agent once each, and are asked for once (issue 34).
func TestFailedDeliveriesOfEachKindAreRedelivered(t *testing.T) {
	w := newWorld(t, nil)
	n := w.openLabeled()
	w.waitIdle()
	w.eventually("the session to start", func() bool { return w.spawns() == 1 })

	w.stop()
	_, err := w.sim.Comment(repoFull, n, human, "written while loopd was down")
	require.NoError(t, err)
	require.NoError(t, w.sim.AddLabel(repoFull, n, human, "needs-design-review"))
	_, err = w.sim.OpenPullRequestWith(repoFull, githubsim.PullRequest{Author: human, Title: "The widget, drafted while loopd was down", Body: "Fixes #" + itoa(n), Head: "issue-" + itoa(n)})
	require.NoError(t, err)
	require.NoError(t, w.sim.WaitDeliveries(context.Background()))
	failed := map[string]string{} // event kind → delivery id
	for _, d := range w.sim.Deliveries() {
		if !d.OK() {
			failed[d.Event] = d.ID
		}
	}
	for _, kind := range []string{"issue_comment", "issues", "pull_request"} {
		require.NotEmpty(t, failed[kind], "the %s delivery failed while loopd was down", kind)
	}

	w.cfg.ReconcileInterval = 0 // the reconcile pass runs once, at start
	w.start()
	for _, s := range []string{"written while loopd was down", "needs-design-review", "drafted while loopd was down"} {
		w.eventually("the redelivered "+s+" in a session", func() bool { return strings.Contains(w.received(), s) })
	}
	w.waitIdle()
	asked := w.sim.RedeliveryRequests()
	require.GreaterOrEqual(t, asked, 3, "one redelivery per failed delivery")
	for kind, id := range failed {
		ok := false
		for _, d := range w.sim.Deliveries() {
			if d.ID == id && d.Redelivery {
				ok = d.Status == 202
			}
		}
		require.True(t, ok, "GitHub redelivered the %s delivery and loopd answered 202", kind)
	}
	once := func() {
		t.Helper()
		got := w.received()
		for _, s := range []string{"written while loopd was down", "needs-design-review", "drafted while loopd was down"} {
			require.Equal(t, 1, strings.Count(got, s), "%q reached the agent once\n%s", s, got)
		}
		require.Equal(t, 1, w.spawns(), "one session: the pull request went to the item's")
	}
	once()

	// Asked once: another start looks again and asks nothing.
	w.stop()
	w.start()
	w.waitIdle()
	require.Equal(t, asked, w.sim.RedeliveryRequests())
	once()
}

// Deliveries answered 503 while loopd runs — by the reverse proxy in front
// of it, as while loopd restarts behind one — come back through the running
// loopd's periodic reconcile pass, not only the pass at start. The proxy
// still refuses when the first redeliveries arrive, so each of those fails
// too: each delivery is asked for again once the back-off has passed, a
// redelivery of each lands, and the comment, the label and the pull
// request reach the agent once each (issue 34: a 503 is not an event lost;
// the poller's pass over the tracked item may bring the comment first, and
// the redelivery is then a duplicate, answered 202 and dropped).
func TestDeliveriesAnswered503AreRedeliveredUntilOneLands(t *testing.T) {
	requireTools(t)
	sim, err := githubsim.Start(githubsim.Config{Token: "tok", BotLogin: "theloop-bot"})
	require.NoError(t, err)
	t.Cleanup(sim.Close)
	var refusing atomic.Bool
	var loopd atomic.Pointer[httputil.ReverseProxy]
	front := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		p := loopd.Load()
		if refusing.Load() || p == nil {
			rw.Header().Set("Retry-After", "1")
			http.Error(rw, "upstream restarting", http.StatusServiceUnavailable)
			return
		}
		p.ServeHTTP(rw, r)
	}))
	t.Cleanup(front.Close)

	const cycle = 500 * time.Millisecond
	w := buildWorld(t, sim, 0, func(c *daemon.Config) { c.ReconcileInterval = cycle }, apiIntegrations, map[string]string{"GH_TOKEN": "tok"})
	u, err := url.Parse(w.d.WebhookURL())
	require.NoError(t, err)
	loopd.Store(httputil.NewSingleHostReverseProxy(&url.URL{Scheme: u.Scheme, Host: u.Host}))
	_, err = sim.AddHook(githubsim.Hook{URL: front.URL + u.Path, Secret: secret})
	require.NoError(t, err)
	n := w.openLabeled()
	w.waitIdle()
	w.eventually("the session to start", func() bool { return w.spawns() == 1 })

	refusing.Store(true)
	texts := []string{"written while the proxy answered 503", "needs-design-review", "drafted while the proxy answered 503"}
	_, err = sim.Comment(repoFull, n, human, texts[0])
	require.NoError(t, err)
	require.NoError(t, sim.AddLabel(repoFull, n, human, texts[1]))
	_, err = sim.OpenPullRequestWith(repoFull, githubsim.PullRequest{Author: human, Title: "The widget, " + texts[2], Body: "Fixes #" + itoa(n), Head: "issue-" + itoa(n)})
	require.NoError(t, err)
	require.NoError(t, sim.WaitDeliveries(context.Background()))
	failed := map[string]string{} // guid → event kind
	for _, d := range sim.Deliveries() {
		if !d.OK() {
			require.Equal(t, http.StatusServiceUnavailable, d.Status)
			failed[d.ID] = d.Event
		}
	}
	require.ElementsMatch(t, []string{"issue_comment", "issues", "pull_request"}, slices.Collect(maps.Values(failed)))

	// The running loopd's passes ask for each, and GitHub's redeliveries
	// meet the proxy still refusing.
	w.eventually("a redelivery of each, refused", func() bool {
		refused := map[string]bool{}
		for _, d := range sim.Deliveries() {
			if d.Redelivery && !d.OK() {
				refused[d.ID] = true
			}
		}
		return len(refused) == len(failed)
	})

	refusing.Store(false)
	for _, s := range texts {
		w.eventually("the redelivered "+s+" in the session", func() bool { return strings.Contains(w.received(), s) })
	}
	w.waitIdle()
	landed := map[string]bool{}
	for _, d := range sim.Deliveries() {
		if d.Redelivery && d.Status == http.StatusAccepted {
			landed[d.ID] = true
		}
	}
	for id, kind := range failed {
		require.True(t, landed[id], "a redelivery of the %s delivery reached loopd and was answered 202", kind)
	}

	// Landed: later passes ask for nothing more, and each reached the
	// agent once.
	asked := sim.RedeliveryRequests()
	require.GreaterOrEqual(t, asked, 2*len(failed), "each asked for, refused, and asked for again")
	time.Sleep(4 * cycle)
	require.Equal(t, asked, sim.RedeliveryRequests(), "nothing asked for once every delivery landed")
	for _, s := range texts {
		require.Equal(t, 1, strings.Count(w.received(), s), "%q reached the agent once", s)
	}
	require.Equal(t, 1, w.spawns(), "one session: the pull request went to the item's")
}
