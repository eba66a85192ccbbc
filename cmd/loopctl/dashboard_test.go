package main

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/loop/daemon/dashboard"
)

// oneItem is a dashboard.Source with one work item.
type oneItem struct{}

func (oneItem) Items(context.Context) ([]dashboard.Item, error) {
	return []dashboard.Item{{Ref: "github:o/r#1", Repo: "o/r", Title: "Export CSV", State: dashboard.StateWorking}}, nil
}
func (oneItem) Detail(context.Context, string) (*dashboard.Detail, error) {
	return nil, dashboard.ErrNotFound
}
func (oneItem) Events(context.Context, string, time.Time, int) ([]dashboard.Event, error) {
	return nil, nil
}

// TestDashboardPrintsAOneTimeLoginURL runs `loopctl dashboard` against a
// real dashboard serving on the config's state root.
func TestDashboardPrintsAOneTimeLoginURL(t *testing.T) {
	f, tio := testFactory(t, t.TempDir(), nil)
	require.Equal(t, exitFailed, Main([]string{"loopctl", "dashboard"}, f), "no loopd running")
	require.Contains(t, tio.err.String(), "no running loopd dashboard")

	cfg, err := f.cliConfig("", "")
	require.NoError(t, err)
	d, err := dashboard.New(dashboard.Config{StateRoot: cfg.StateRoot}, dashboard.Deps{Source: oneItem{}, Now: time.Now, Log: io.Discard})
	require.NoError(t, err)
	require.NoError(t, d.Start())
	defer d.Close()
	f.Clock = realClock{} // the login URL's expiry is checked against the real time

	tio.out.Reset()
	require.Equal(t, exitOK, Main([]string{"loopctl", "dashboard"}, f), tio.err.String())
	u := strings.TrimSpace(tio.out.String())
	require.True(t, strings.HasPrefix(u, d.URL()+"/login?token="), u)
	jar, _ := cookiejar.New(nil)
	res, err := (&http.Client{Jar: jar}).Get(u)
	require.NoError(t, err)
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Contains(t, string(b), "Export CSV")
	res, err = http.Get(u)
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusForbidden, res.StatusCode, "the URL works once")

	// --open hands a fresh URL to the browser opener.
	tio.out.Reset()
	var opened string
	require.NoError(t, runDashboard(&dashboardOptions{Factory: f, Open: true, Browser: func(u string) error { opened = u; return nil }}))
	require.Equal(t, strings.TrimSpace(tio.out.String()), opened)
	require.NotEqual(t, u, opened)

	// --state-root wins over the config.
	require.Equal(t, exitFailed, Main([]string{"loopctl", "dashboard", "--state-root", t.TempDir()}, f))
}

// TestDashboardRefusesInsideAnAgentSession: with either variable loopd
// sets in a session, `loopctl dashboard` mints nothing, even with a
// dashboard running, and says it is an agent session.
func TestDashboardRefusesInsideAnAgentSession(t *testing.T) {
	for _, name := range []string{"THE_LOOP_SESSION_ID", "THE_LOOP_WORK_ITEM"} {
		t.Run(name, func(t *testing.T) {
			f, tio := testFactory(t, t.TempDir(), nil)
			cfg, err := f.cliConfig("", "")
			require.NoError(t, err)
			d, err := dashboard.New(dashboard.Config{StateRoot: cfg.StateRoot}, dashboard.Deps{Source: oneItem{}, Now: time.Now, Log: io.Discard})
			require.NoError(t, err)
			require.NoError(t, d.Start())
			defer d.Close()
			getenv := f.Getenv
			f.Getenv = func(k string) string {
				if k == name {
					return "issue-42"
				}
				return getenv(k)
			}
			require.Equal(t, exitRefused, Main([]string{"loopctl", "dashboard"}, f))
			require.Empty(t, tio.out.String(), "no login URL printed")
			require.Contains(t, tio.err.String(), "refused inside an agent session ("+name+"=issue-42 is set)")
		})
	}
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }
