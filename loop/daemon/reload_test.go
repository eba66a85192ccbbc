package daemon_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/loop/daemon"
	"github.com/theloop-dev/theloop/sessions"
)

// SIGHUP's reload, at the daemon: a newly authorized user's control command
// works after the reload (receiver and intake agree), a removed one's no
// longer does, hard keys are reported as needing a restart, and a config
// that does not validate changes nothing.
func TestReloadAppliesSoftPolicyAndRefusesBadConfig(t *testing.T) {
	w := newWorld(t, nil)
	n := w.openLabeled()
	w.eventually("the session", func() bool { return w.spawns() == 1 })
	w.waitIdle()

	_, err := w.sim.Comment(repoFull, n, stranger, "the-loop pause")
	require.NoError(t, err)
	w.waitIdle()
	require.Equal(t, sessions.StatusActive, w.status(n), "not authorized yet")

	next := w.cfg
	next.Routing.AuthorizedUsers = []string{stranger}
	next.Webhook.Host, next.Webhook.Port = "127.0.0.1", 1
	res, err := w.d.Reload(next)
	require.NoError(t, err)
	require.Equal(t, []string{"routing.authorizedUsers"}, res.Applied)
	require.Equal(t, []string{"webhooks.ghWebhook.host/port"}, res.NeedRestart)

	_, err = w.sim.Comment(repoFull, n, stranger, "the-loop pause")
	require.NoError(t, err)
	w.waitIdle()
	require.Equal(t, sessions.StatusPaused, w.status(n), "authorized by the reload")
	_, err = w.sim.Comment(repoFull, n, human, "the-loop resume")
	require.NoError(t, err)
	w.waitIdle()
	require.Equal(t, sessions.StatusPaused, w.status(n), "no longer authorized")

	bad := next
	bad.Routing.SpawnOnUnmatched = "sometimes"
	bad.Routing.AuthorizedUsers = []string{human}
	_, err = w.d.Reload(bad)
	require.Error(t, err)
	_, err = w.sim.Comment(repoFull, n, stranger, "the-loop resume")
	require.NoError(t, err)
	w.waitIdle()
	require.Equal(t, sessions.StatusActive, w.status(n), "the failed reload kept the running policy")
	require.Equal(t, 1, w.count("config.reloaded"))
	_ = daemon.ReloadResult{}
}
