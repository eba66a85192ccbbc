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

// The item page's timeline shows the agent's claims, which its loopctl
// logs in the work item's checkout, beside loopd's own events — and takes
// from that checkout only the lines of its own work item (the agent writes
// the file).
func TestDashboardTimelineShowsTheClaimsFromTheCheckout(t *testing.T) {
	w := newWorld(t, func(cfg *daemon.Config) {
		cfg.Dashboard.Listen = "127.0.0.1:0"
		cfg.Dashboard.Operator = human
	})
	n := w.openLabeled()
	w.waitIdle()
	ref := fmt.Sprintf("github:%s#%d", repoFull, n)

	claims := loop.CheckoutEventLogPath(w.checkout(n))
	require.NoError(t, os.MkdirAll(filepath.Dir(claims), 0o755))
	at := time.Now().UTC()
	line := func(name, item string) []byte {
		return loop.FormatEventLine("cli", 7, graph.LogEvent{Time: at, Name: name, Fields: []graph.Field{{Key: "work_item", Value: item}, {Key: "node", Value: "brainstorming"}}})
	}
	body := append(line("graph.claimed_in_checkout", ref), line("graph.forged_for_another", fmt.Sprintf("github:%s#%d", repoFull, n+100))...)
	require.NoError(t, os.WriteFile(claims, body, 0o644))

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
	page := get(w.d.DashboardURL() + "/item?ref=" + url.QueryEscape(ref))
	require.Contains(t, page, "graph.claimed_in_checkout", "the claim in the checkout's log is on the timeline")
	require.Contains(t, page, "dispatch.spawned", "loopd's own events are still there")
	require.NotContains(t, page, "graph.forged_for_another")
}
