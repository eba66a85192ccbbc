package daemon

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/integrations"
	"github.com/theloop-dev/theloop/integrations/githubsim"
	"github.com/theloop-dev/theloop/loop/daemon/queue"
)

// A delivery whose every redelivery fails too (the hook's address refuses
// connections) is asked for again only once its back-off has passed — the
// reconcile interval, doubling with each ask — and at most
// redeliverAsksPerDelivery times; then the pass gives up on it, says so
// once, and asks nothing more of it. Every pass in between lists the hook
// again and asks nothing.
func TestRedeliveryOfAFailedRedeliveryBacksOffAndGivesUp(t *testing.T) {
	sim, err := githubsim.Start(githubsim.Config{Token: "tok", BotLogin: "theloop-bot"})
	require.NoError(t, err)
	t.Cleanup(sim.Close)
	const repo = "octo/demo"
	require.NoError(t, sim.AddRepo(repo, githubsim.RepoOptions{}))
	// An address that refuses: a listener closed at once.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	dead := "http://" + l.Addr().String() + DefaultWebhookPath
	require.NoError(t, l.Close())
	hook, err := sim.AddHook(githubsim.Hook{URL: dead, Secret: "s"})
	require.NoError(t, err)
	is, err := sim.OpenIssue(repo, "dana", "A widget", "")
	require.NoError(t, err)
	_, err = sim.Comment(repo, is.Number, "dana", "lost to a refused connection")
	require.NoError(t, err)
	require.NoError(t, sim.WaitDeliveries(context.Background()))
	failedAtStart := 0
	for _, d := range sim.Deliveries() {
		if !d.OK() {
			failedAtStart++
		}
	}
	require.Positive(t, failedAtStart)

	set, err := integrations.New(integrations.Config{GitHub: &integrations.GitHubConfig{
		Transport: integrations.TransportAPI, MaxAttempts: 1, TimeoutSeconds: 10,
		API: integrations.GitHubAPIConfig{BaseURL: sim.URL()},
	}}, integrations.Deps{Env: func(k string) (string, bool) { return map[string]string{"GH_TOKEN": "tok"}[k], k == "GH_TOKEN" }})
	require.NoError(t, err)
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC) // the redeliverer's own clock, nothing else reads it
	var events []string
	const backoff = 30 * time.Second
	// The store loopd keeps the asks in: the queue's handled bucket.
	q, err := queue.Open(context.Background(), queue.Config{StoreDir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(q.Close)
	rd := &redeliverer{integ: set, store: q, repos: []string{repo}, hookID: hook, path: DefaultWebhookPath,
		record: func(name string, _ graph.Level, _ ...graph.Field) { events = append(events, name) },
		now:    func() time.Time { return now }, reported: map[string]bool{}, backoff: backoff}
	pass := func() redeliveryStats {
		t.Helper()
		st := rd.pass(context.Background())
		require.Empty(t, st.Stopped)
		require.NoError(t, sim.WaitDeliveries(context.Background()))
		return st
	}

	st := pass()
	require.Equal(t, failedAtStart, st.Asked, "each failed delivery asked for")
	require.Equal(t, failedAtStart, sim.RedeliveryRequests())
	for ask := 2; ask <= redeliverAsksPerDelivery; ask++ {
		wait := backoff << (ask - 2)
		now = now.Add(wait - time.Second)
		st = pass()
		require.Zero(t, st.Asked, "ask %d: not before its back-off of %v", ask, wait)
		require.Equal(t, failedAtStart, st.Deferred)
		now = now.Add(time.Second)
		st = pass()
		require.Equal(t, failedAtStart, st.Asked, "ask %d: once its back-off of %v has passed", ask, wait)
	}
	require.Equal(t, failedAtStart*redeliverAsksPerDelivery, sim.RedeliveryRequests())

	now = now.Add(24 * time.Hour)
	st = pass()
	require.Zero(t, st.Asked)
	require.Equal(t, failedAtStart, st.GaveUp, "past the cap: given up, said once")
	for range 3 {
		now = now.Add(24 * time.Hour)
		st = pass()
		require.Zero(t, st.Asked+st.GaveUp+st.Deferred, "nothing more: %+v", st)
	}
	require.Equal(t, failedAtStart*redeliverAsksPerDelivery, sim.RedeliveryRequests())
	gaveUp := 0
	for _, e := range events {
		if e == "reconcile.redelivery_gave_up" {
			gaveUp++
		}
	}
	require.Equal(t, failedAtStart, gaveUp)
}
