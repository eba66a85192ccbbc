package daemon_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/integrations"
	"github.com/theloop-dev/theloop/integrations/githubsim"
	"github.com/theloop-dev/theloop/loop/daemon"
)

// With GitHub's API refusing every call, 600 comments on one item reach the
// agent without waiting for the reactions nobody can post (issue 34). The
// integrations back off as they do in production (500 ms, 1 s, ...): the
// reactions awaited before each acknowledgement made this half an hour.
func TestReactionsNeverHoldTheQueue(t *testing.T) {
	if testing.Short() {
		t.Skip("600 comments through a live session")
	}
	// No graph: at a human gate every comment is a possible decision that
	// must be re-read at GitHub before it moves anything (fail closed), and
	// that is not what is measured here.
	w := newWorld(t, func(c *daemon.Config) { c.Routing.GraphEnabled = false })
	n := w.openLabeled()
	w.waitIdle()
	w.eventually("the session to start", func() bool { return w.spawns() == 1 })

	// Restart with the production back-off (newWorld caps it at 50 ms).
	w.stop()
	set, err := integrations.New(integrations.Config{GitHub: &integrations.GitHubConfig{
		Transport: integrations.TransportAPI, MaxAttempts: 3, TimeoutSeconds: 10,
		API: integrations.GitHubAPIConfig{BaseURL: w.sim.URL()},
	}}, integrations.Deps{Env: func(k string) (string, bool) { return "tok", k == "GH_TOKEN" }, Sleep: integrations.SleepContext})
	require.NoError(t, err)
	w.deps.Integrations = set
	w.start()

	w.sim.InjectFault(githubsim.Fault{Status: http.StatusInternalServerError})
	const comments = 600
	begin := time.Now()
	for i := range comments {
		_, err := w.sim.Comment(repoFull, n, human, fmt.Sprintf("outage note %d.", i))
		require.NoError(t, err)
	}
	require.NoError(t, w.sim.WaitDeliveries(context.Background()))
	last := fmt.Sprintf("outage note %d.", comments-1)
	// Generous for a busy machine (it takes about 2 s here); awaited
	// reactions took 3 s per comment, half an hour in all.
	deadline := begin.Add(3 * time.Minute)
	for !strings.Contains(w.received(), last) {
		require.False(t, time.Now().After(deadline), "the %d comments did not reach the agent in time (%d did)", comments, strings.Count(w.received(), "outage note "))
		time.Sleep(50 * time.Millisecond)
	}
	took := time.Since(begin)
	got := w.received()
	for i := range comments {
		require.Equal(t, 1, strings.Count(got, fmt.Sprintf("outage note %d.", i)), "note %d pasted once", i)
	}
	t.Logf("%d comments reached the agent in %s with GitHub answering 500 to every call (%d reactions failed, %d skipped)",
		comments, took.Round(time.Millisecond), w.count("reaction.failed"), w.count("reaction.skipped"))
}
