package daemon_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/loop"
	"github.com/theloop-dev/theloop/loop/daemon"
)

// One stream (docs/decisions.md §24): the item page's timeline is loopd's
// own event log — the agent's claims appear there as loopd's recompute bore
// them out — and never the log in the work item's checkout, which is the
// agent's to write: a line planted there, for its own item or another,
// reaches no page.
func TestDashboardTimelineReadsLoopdsLogNotTheCheckouts(t *testing.T) {
	w, n, ref := dashboardItem(t)

	claims := loop.CheckoutEventLogPath(w.checkout(n))
	require.NoError(t, os.MkdirAll(filepath.Dir(claims), 0o755))
	at := time.Now().UTC()
	line := func(name, item string) []byte {
		return loop.FormatEventLine("cli", 7, graph.LogEvent{Time: at, Name: name, Fields: []graph.Field{{Key: "work_item", Value: item}, {Key: "node", Value: "brainstorming"}}})
	}
	body := append(line("graph.claimed_in_checkout", ref), line("graph.forged_for_another", fmt.Sprintf("github:%s#%d", repoFull, n+100))...)
	require.NoError(t, os.WriteFile(claims, body, 0o644))

	get := dashboardPages(t, w)
	page := get(w.d.DashboardURL() + "/item?ref=" + url.QueryEscape(ref))
	require.NotContains(t, page, "graph.claimed_in_checkout", "the checkout's log is the agent's word")
	require.Contains(t, page, `data-event="dispatch.spawned"`, "loopd's own events are there")
	require.NotContains(t, page, "graph.forged_for_another")
}

// dashboardItem is a world serving the dashboard (its operator dana) with
// one labeled work item, n, settled.
func dashboardItem(t *testing.T) (w *world, n int, ref string) {
	t.Helper()
	w = newWorld(t, func(cfg *daemon.Config) {
		cfg.Dashboard.Listen = "127.0.0.1:0"
		cfg.Dashboard.Operator = human
	})
	n = w.openLabeled()
	w.waitIdle()
	return w, n, fmt.Sprintf("github:%s#%d", repoFull, n)
}

// dashboardPages logs a client in to w's dashboard and returns a getter of
// its pages (each must answer 200).
func dashboardPages(t *testing.T, w *world) func(u string) string {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Timeout: 10 * time.Second, Transport: pageOrigin{w.d.DashboardURL()}}
	get := func(u string) string {
		t.Helper()
		res, err := c.Get(u)
		require.NoError(t, err)
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		require.Equal(t, http.StatusOK, res.StatusCode, "%s: %s", u, b)
		return string(b)
	}
	get(w.d.DashboardLoginURL())
	return get
}
