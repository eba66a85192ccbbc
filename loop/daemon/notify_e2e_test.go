package daemon_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/hooks"
	"github.com/theloop-dev/theloop/loop"
	"github.com/theloop-dev/theloop/loop/daemon"
	"github.com/theloop-dev/theloop/loop/daemon/slackchan"
	"github.com/theloop-dev/theloop/loop/daemon/slackchan/slacksim"
)

// loopd's own notifications end to end (docs/daemon.md §11.6): the real
// daemon, githubsim, a fake claude in real tmux and slacksim. A spawn is
// told to the operator's collaborators through both channels (the item's
// Slack thread, a marked comment on the ticket mentioning them); an
// unauthorized comment is dropped and told in Slack only, and a second
// one within the interval is not told again.
func TestDaemonNotificationsReachTheChannels(t *testing.T) {
	sim := slacksim.New()
	t.Cleanup(sim.Close)
	w := newWorld(t, func(c *daemon.Config) {
		landlockOnly(c)
		c.Slack = &slackchan.Config{Mode: slackchan.ModeEvents, Channel: "#loop", BotToken: "xoxb-test", SigningSecret: slackSecret,
			Users: map[string]string{"UDANA": human}, APIURL: sim.APIURL()}
		c.Notifications = loop.DaemonNotifications{Enabled: true,
			Events: map[string][]string{
				loop.NotifyWorkItemSpawned:          {"operator"},
				loop.NotifyEventDroppedUnauthorized: {"operator"},
			},
			Channels:      []string{loop.NotifyChannelSlack, loop.NotifyChannelTicket},
			Collaborators: loop.Collaborators{{Login: human, Roles: []string{"operator"}, Slack: "UDANA"}, {Login: "eve", Roles: []string{"auditor"}}},
		}
	})
	n := w.openLabeled()
	item := w.item(n)
	w.eventually("the spawn", func() bool { return w.spawns() == 1 })

	notice := func(event string) []slacksim.Post {
		var out []slacksim.Post
		for _, p := range sim.Posts() {
			if strings.Contains(p.Text, "the-loop (loopd): "+event) {
				out = append(out, p)
			}
		}
		return out
	}
	w.eventually("the spawn notice in Slack", func() bool { return len(notice(loop.NotifyWorkItemSpawned)) == 1 })
	p := notice(loop.NotifyWorkItemSpawned)[0]
	require.Contains(t, p.Text, "work-item-spawned for "+item.String()+": loopd started a session for it. Roles: operator — <@UDANA>")
	require.NotContains(t, p.Text, "eve", "only the roles the event names")
	th, ok := w.d.SlackThread(item)
	require.True(t, ok)
	require.Equal(t, th.TS, p.ThreadTS, "in the work item's thread")

	ticketNotices := func() []string {
		var out []string
		for _, b := range w.commentBodies(n) {
			if strings.Contains(b, "the-loop (loopd): ") {
				out = append(out, b)
			}
		}
		return out
	}
	w.eventually("the spawn notice on the ticket", func() bool { return len(ticketNotices()) == 1 })
	body := ticketNotices()[0]
	require.True(t, hooks.SelfAuthored(body), "marked as the-loop's, so it wakes nobody's session")
	require.Contains(t, body, "Roles: operator — @dana")
	w.eventually("the outcomes recorded", func() bool { return w.count("notify.sent") >= 2 })

	// mallory is not authorized: her comments are dropped, and told once.
	_, err := w.sim.Comment(repoFull, n, stranger, "the-loop execute")
	require.NoError(t, err)
	w.eventually("the drop notice", func() bool { return len(notice(loop.NotifyEventDroppedUnauthorized)) == 1 })
	require.Contains(t, notice(loop.NotifyEventDroppedUnauthorized)[0].Text, "a comment from @mallory, who is not authorized, was dropped")
	_, err = w.sim.Comment(repoFull, n, stranger, "the-loop execute, again")
	require.NoError(t, err)
	w.waitIdle()
	w.eventually("the second drop", func() bool { return len(w.withField("routing.dropped", "reason", "unauthorized-actor")) >= 2 })
	// The notifier decides in the sink's Emit, before the drop is
	// observed: had it queued a notice, the queue would hold it now.
	require.Len(t, notice(loop.NotifyEventDroppedUnauthorized), 1, "a second drop within the interval is not told again")
	for _, b := range ticketNotices() {
		require.NotContains(t, b, loop.NotifyEventDroppedUnauthorized, "a stranger's noise is never copied onto the ticket")
	}
	require.Len(t, ticketNotices(), 1, fmt.Sprint(ticketNotices()))
}
