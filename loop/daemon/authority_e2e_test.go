package daemon_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/loop/api"
	"github.com/theloop-dev/theloop/loop/daemon"
)

// The operator's verbs — over the control socket and on the dashboard —
// are held to the rules a ticket's keyword is: a person only a team rule
// of routing.authorized names may start a session and see the gate's
// actions; taken off the team, the right is gone within the cache's TTL;
// and a reload of routing.authorized applies at once, without a restart.
func TestOperatorVerbsFollowRoutingAuthorized(t *testing.T) {
	const member = "erin"
	w := newWorld(t, func(c *daemon.Config) {
		c.Routing.SpawnOnUnmatched = daemon.SpawnAlways
		c.Routing.RequireStartCommand = true
		c.Dashboard.Operator = member // the socket's and the dashboard's operator is github:erin
		c.Dashboard.Listen = "127.0.0.1:0"
		c.Routing.Authorized = []string{"team:octo/approvers"}
		c.Routing.AuthorizedCache = time.Millisecond // GitHub is asked every time
	})
	w.sim.SetTeam("octo", "approvers", member)
	ctx := context.Background()
	cl := api.NewSocketClient(w.d.ControlSocket())
	var ae *api.APIError

	is, err := w.sim.OpenIssue(repoFull, human, "Add a widget", "Please add a widget.")
	require.NoError(t, err)
	ref := w.item(is.Number).String()
	w.waitIdle()
	require.Zero(t, w.spawns(), "armed but awaiting a start command")

	itemPage := func() string {
		t.Helper()
		jar, _ := cookiejar.New(nil)
		c := &http.Client{Jar: jar, Timeout: 10 * time.Second, Transport: pageOrigin{w.d.DashboardURL()}}
		res, err := c.Get(w.d.DashboardLoginURL())
		require.NoError(t, err)
		_ = res.Body.Close()
		res, err = c.Get(w.d.DashboardURL() + "/item?ref=" + url.QueryEscape(ref))
		require.NoError(t, err)
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		require.Equal(t, http.StatusOK, res.StatusCode, "%s", b)
		return string(b)
	}
	const refused = "whom theloop would not let decide here"
	require.NotContains(t, itemPage(), refused, "a team member is offered the actions")

	// The team member, on no list of logins, starts the session from the
	// socket as the ticket's keyword would.
	var started api.ControlResult
	require.NoError(t, cl.Do(ctx, "POST", api.SessionPath(ref, "start"), nil, api.OperatorRequest{}, &started))
	require.Equal(t, "queued", started.Effect)
	w.eventually("the session", func() bool { return w.spawns() == 1 })
	w.waitIdle()

	// Off the team: the next question to GitHub says no.
	w.sim.RemoveTeamMember("octo", "approvers", member)
	time.Sleep(5 * time.Millisecond) // past the 1 ms TTL
	err = cl.Do(ctx, "POST", api.SessionPath(ref, "reply"), nil, api.ReplyRequest{Message: "hello"}, nil)
	require.True(t, errors.As(err, &ae), "%v", err)
	require.Equal(t, http.StatusForbidden, ae.Status, ae.Detail)
	require.Contains(t, ae.Detail, "routing.authorized")
	page := itemPage()
	require.Contains(t, page, refused, "the dashboard withdraws the actions")

	// A reload naming the login applies without a restart.
	next := w.cfg
	next.Routing.Authorized = []string{"team:octo/approvers", member}
	res, err := w.d.Reload(next)
	require.NoError(t, err)
	require.Contains(t, res.Applied, "routing.authorized, routing.authorizedCacheSeconds")
	require.NotContains(t, res.NeedRestart, "routing.authorized, routing.authorizedCacheSeconds", "applied without a restart")
	require.NotContains(t, itemPage(), refused)
	var replied api.ReplyResult
	require.NoError(t, cl.Do(ctx, "POST", api.SessionPath(ref, "reply"), nil, api.ReplyRequest{Message: "hello"}, &replied))
	require.True(t, strings.HasSuffix(replied.Actor, member), replied.Actor)

	// A rule that does not parse changes nothing.
	bad := next
	bad.Routing.Authorized = []string{"team:"}
	_, err = w.d.Reload(bad)
	require.ErrorContains(t, err, "routing.authorized")
	require.NoError(t, cl.Do(ctx, "POST", api.SessionPath(ref, "reply"), nil, api.ReplyRequest{Message: "still here"}, nil))
}
