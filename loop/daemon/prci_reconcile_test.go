package daemon_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/integrations/githubsim"
	"github.com/theloop-dev/theloop/loop/daemon"
)

// A check run fails while loopd is down, so its webhook is lost (GitHub
// does not redeliver): the reconcile pass at start finds the work item's
// pull request, reads its head's check runs and combined status, and the
// failing check appears on the item's row.
func TestReconcileShowsAFailingCheckNoWebhookReported(t *testing.T) {
	w := newWorld(t, func(cfg *daemon.Config) {
		cfg.Dashboard.Listen = "127.0.0.1:0"
		cfg.Dashboard.Operator = human
	})
	n := w.openLabeled()
	w.waitIdle()
	w.pushBranch("feature-widget")
	pr, err := w.sim.OpenPullRequestWith(repoFull, githubsim.PullRequest{Author: human, Title: "Add the widget", Body: fmt.Sprintf("Fixes #%d", n), Head: "feature-widget"})
	require.NoError(t, err)
	w.waitIdle()
	ref := fmt.Sprintf("github:%s#%d", repoFull, n)

	board := func() string {
		t.Helper()
		jar, _ := cookiejar.New(nil)
		c := &http.Client{Jar: jar, Timeout: 10 * time.Second, Transport: pageOrigin{w.d.DashboardURL()}}
		res, err := c.Get(w.d.DashboardLoginURL())
		require.NoError(t, err)
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		require.Equal(t, http.StatusOK, res.StatusCode, "%s", b)
		return string(b)
	}
	row := func() string {
		b := board()
		i := strings.Index(b, fmt.Sprintf(`data-ref="%s"`, ref))
		require.GreaterOrEqual(t, i, 0, "the item's row")
		end := strings.Index(b[i:], "</tr>")
		require.Greater(t, end, 0)
		return b[i : i+end]
	}

	w.stop()
	run, err := w.sim.SetCheckRun(repoFull, pr.Number, githubsim.CheckRun{Name: "lint", Status: "completed", Conclusion: "failure"}, true)
	require.NoError(t, err)
	require.NoError(t, w.sim.SetStatus(repoFull, pr.Number, githubsim.Status{Context: "ci/build", State: "success"}, true))
	w.sim.WaitDeliveries(t.Context()) //nolint:errcheck // the deliveries fail: loopd is down
	for _, d := range w.sim.Deliveries() {
		if d.Event == "check_run" {
			require.NotEqual(t, http.StatusOK, d.Status, "the check_run webhook must not have reached loopd")
		}
	}

	w.cfg.ReconcileInterval = 0 // once, at start
	w.start()
	// The lost check_run delivery may also come back through redelivery
	// (loopd asks GitHub for the deliveries it missed) before the reconcile
	// pass has read the pull request and its combined status; the row is
	// whole once both have landed.
	want := fmt.Sprintf("#%d open · checks 1 passing, 1 failing (lint)", pr.Number)
	w.eventually("the failing check on the item's row", func() bool { return strings.Contains(row(), want) })
	r := row()
	require.Contains(t, r, want)
	require.Contains(t, r, fmt.Sprintf(`class="cifail" href="https://github.com/%s/runs/%d"`, repoFull, run.ID))
}
