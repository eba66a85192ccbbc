package daemon_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/loop/api"
	"github.com/theloop-dev/theloop/loop/daemon"
)

// Done is done: a work item whose session an operator stopped before its
// walk finished reads "closed" on the board and its page, with the time it
// finished and no running clock (no data-since for the page's ticker).
func TestDashboardShowsAStoppedItemClosedWithItsTime(t *testing.T) {
	w := newWorld(t, func(cfg *daemon.Config) {
		cfg.Dashboard.Listen = "127.0.0.1:0"
		cfg.Dashboard.Operator = human
	})
	n := w.openLabeled()
	w.waitIdle()
	ref := fmt.Sprintf("github:%s#%d", repoFull, n)
	before := time.Now().UTC().Add(-time.Minute)
	cl := api.NewSocketClient(w.d.ControlSocket())
	require.NoError(t, cl.Do(context.Background(), "POST", "/sessions/control", nil, api.ControlRequest{Ref: ref, Verb: "stop"}, nil))

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
	board := get(w.d.DashboardURL() + "/")
	row := regexp.MustCompile(`(?s)<tr data-ref="` + regexp.QuoteMeta(ref) + `".*?</tr>`).FindString(board)
	require.NotEmpty(t, row, board)
	require.Contains(t, row, `data-state="closed"`)
	m := regexp.MustCompile(`data-f="age" data-since="">finished (\d{4}-\d\d-\d\d \d\d:\d\d) UTC</td>`).FindStringSubmatch(row)
	require.NotNil(t, m, "closed, with when, and no clock: %s", row)
	at, err := time.Parse("2006-01-02 15:04", m[1])
	require.NoError(t, err)
	require.False(t, at.Before(before.Truncate(time.Minute)), "finished when it was stopped: %s", m[1])

	page := get(w.d.DashboardURL() + "/item?ref=" + url.QueryEscape(ref))
	require.Contains(t, page, `data-state="closed"`)
	require.Contains(t, page, `id="item-finished"`)
	require.NotRegexp(t, `data-since="[^"]`, regexp.MustCompile(`(?s)<p class="facts">.*?</p>`).FindString(page), "no running clock on the page")
}
