package daemon_test

import (
	"context"
	"net/url"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/loop/api"
)

// Done is done: a work item whose session an operator stopped before its
// walk finished reads "closed" on the board and its page, with the time it
// finished and no running clock (no data-since for the page's ticker).
func TestDashboardShowsAStoppedItemClosedWithItsTime(t *testing.T) {
	w, _, ref := dashboardItem(t)
	before := time.Now().UTC().Add(-time.Minute)
	cl := api.NewSocketClient(w.d.ControlSocket())
	require.NoError(t, cl.Do(context.Background(), "POST", "/sessions/control", nil, api.ControlRequest{Ref: ref, Verb: "stop"}, nil))

	get := dashboardPages(t, w)
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
