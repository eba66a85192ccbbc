package daemon_test

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/ingress"
	"github.com/theloop-dev/theloop/loop/daemon"
	"github.com/theloop-dev/theloop/loop/daemon/slackchan"
	"github.com/theloop-dev/theloop/loop/daemon/slackchan/slacksim"
	"github.com/theloop-dev/theloop/sessions"
)

// The Slack channel end to end (docs/daemon.md §11.5): the real daemon
// and its webhook listener, githubsim, a fake claude in real tmux, and
// slacksim for Slack's Web API. Slack's Events API requests are signed
// here as Slack signs them and posted to loopd's listener.

var slackSecret = []byte("slack-signing-secret-for-tests")

func (w *world) slack(body []byte, at time.Time, form bool, hdr ...string) int {
	w.t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://"+w.d.Addr()+slackchan.DefaultEventsPath, bytes.NewReader(body))
	require.NoError(w.t, err)
	req.Header.Set("Content-Type", "application/json")
	if form {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	slacksim.Sign(req, slackSecret, body, at)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(w.t, err)
	_ = resp.Body.Close()
	return resp.StatusCode
}

func (w *world) slackMirrors(n int) []string {
	w.t.Helper()
	cs, err := w.sim.Comments(repoFull, n)
	require.NoError(w.t, err)
	var out []string
	for _, c := range cs {
		if strings.Contains(c.Body, "Relayed from Slack") {
			out = append(out, c.Body)
		}
	}
	return out
}

func TestSlackThreadRepliesReachTheSessionButDecideNoGate(t *testing.T) {
	// loopd's own environment holds the Slack credentials; the agent must
	// not (docs/decisions.md §18).
	for _, k := range []string{"THE_LOOP_SLACK_BOT_TOKEN", "THE_LOOP_SLACK_APP_TOKEN", "THE_LOOP_SLACK_SIGNING_SECRET"} {
		t.Setenv(k, "FAKE-SLACK-"+k)
	}
	sim := slacksim.New()
	t.Cleanup(sim.Close)
	w := newWorld(t, func(c *daemon.Config) {
		landlockOnly(c)
		c.Slack = &slackchan.Config{Mode: slackchan.ModeEvents, Channel: "#loop", BotToken: "xoxb-test", SigningSecret: slackSecret,
			Users: map[string]string{"UDANA": human, "UMALLORY": stranger, "UERIN": "erin"}, APIURL: sim.APIURL()}
		c.Routing.Authorized = []string{"team:octo/approvers"} // erin's right is GitHub's answer
		c.Routing.AuthorizedCache = time.Millisecond
	})
	w.sim.SetTeam("octo", "approvers", "erin")
	n := w.toRequirementsApproval()
	item := w.item(n)

	// The thread opened at spawn, once.
	posts, err := sim.WaitPosts(1, 30*time.Second)
	require.NoError(t, err)
	require.Contains(t, posts[0].Text, fmt.Sprintf("https://github.com/%s/issues/%d", repoFull, n))
	var th slackchan.Thread
	w.eventually("the thread to be bound", func() bool {
		var ok bool
		th, ok = w.d.SlackThread(item)
		return ok
	})
	require.Equal(t, posts[0].TS, th.TS)

	// The harness's environment: no Slack credential.
	argv, err := os.ReadFile(filepath.Join(w.claude, "argv.log"))
	require.NoError(t, err)
	pid, err := strconv.Atoi(strings.SplitN(string(argv), "\t", 2)[0])
	require.NoError(t, err)
	environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	require.NoError(t, err)
	require.NotContains(t, string(environ), "FAKE-SLACK", "a Slack token reached the agent's environment")
	require.Contains(t, string(environ), "THE_LOOP_WORK_ITEM=", "the environment was read")

	// dana (authorized) approves in Slack; Slack retries the delivery.
	now := time.Now()
	ev := slacksim.MessageEvent("EvApprove", th.Channel, th.TS, "1700000100.000100", "UDANA", "Approved, ship it.")
	require.Equal(t, http.StatusOK, w.slack(ev, now, false))
	require.Equal(t, http.StatusOK, w.slack(ev, now, false, "X-Slack-Retry-Num", "1", "X-Slack-Retry-Reason", "http_timeout"))
	w.eventually("the reply to reach the session", func() bool {
		return strings.Contains(w.received(), "Approved, ship it.")
	})
	w.eventually("the thread note", func() bool { return len(sim.Posts()) >= 2 })
	w.waitIdle() // the mirror's webhook came back through ingress
	require.Equal(t, 1, strings.Count(w.received(), "Approved, ship it."), "delivered once")
	require.Contains(t, w.received(), "[message from @dana (Slack user UDANA) via Slack and loopd, not from the ticket]")
	mirrors := w.slackMirrors(n)
	require.Len(t, mirrors, 1, "mirrored once")
	require.True(t, ingress.SelfAuthored(mirrors[0]))
	require.NotEmpty(t, w.withField("routing.dropped", "reason", "self-authored"), "the mirror came back and was dropped")
	w.requireAtGate(n, "a decision word in Slack decides no gate")
	note := sim.Posts()[1]
	require.Equal(t, th.TS, note.ThreadTS)
	require.Contains(t, note.Text, fmt.Sprintf("comment on the ticket as @dana: https://github.com/%s/issues/%d", repoFull, n))

	// mallory is mapped but not authorized; a stranger is not mapped; a
	// forged request is refused: none of them changes anything.
	before := w.received()
	require.Equal(t, http.StatusOK, w.slack(slacksim.MessageEvent("EvMallory", th.Channel, th.TS, "1700000101.000100", "UMALLORY", "Approved"), now, false))
	require.Equal(t, http.StatusOK, w.slack(slacksim.MessageEvent("EvStranger", th.Channel, th.TS, "1700000102.000100", "USTRANGER", "Approved"), now, false))
	require.Equal(t, http.StatusUnauthorized, w.slack(slacksim.MessageEvent("EvOld", th.Channel, th.TS, "1700000103.000100", "UDANA", "Approved"), now.Add(-10*time.Minute), false))
	require.Equal(t, http.StatusOK, w.slack(slacksim.SlashCommand("UMALLORY", "stop octo/demo#"+strconv.Itoa(n), "trig-mallory"), now, true))
	w.eventually("both drops to be recorded", func() bool { return w.count("channel.slack.dropped") >= 3 })
	w.waitIdle()
	require.Equal(t, before, w.received())
	require.Len(t, w.slackMirrors(n), 1)
	rec, err := sessions.OpenRegistry(sessions.RegistryDir(w.cfg.StateRoot))
	require.NoError(t, err)
	r, err := rec.Get(item)
	require.NoError(t, err)
	require.Equal(t, sessions.StatusActive, r.Status, "mallory's /the-loop stop did nothing")
	w.requireAtGate(n, "nothing from unauthorized people")

	// dana pauses and resumes from Slack: loopctl's paths, announced on
	// the ticket naming the Slack user, and still no gate moves.
	require.Equal(t, http.StatusOK, w.slack(slacksim.SlashCommand("UDANA", "pause octo/demo#"+strconv.Itoa(n), "trig-pause"), now, true))
	r, err = rec.Get(item)
	require.NoError(t, err)
	require.Equal(t, sessions.StatusPaused, r.Status)
	require.Equal(t, http.StatusOK, w.slack(slacksim.SlashCommand("UDANA", "resume octo/demo#"+strconv.Itoa(n), "trig-resume"), now, true))
	r, err = rec.Get(item)
	require.NoError(t, err)
	require.Equal(t, sessions.StatusActive, r.Status)
	w.waitIdle()
	cs, err := w.sim.Comments(repoFull, n)
	require.NoError(t, err)
	var announced int
	for _, c := range cs {
		if strings.Contains(c.Body, "Issued from Slack by Slack user UDANA (GitHub @dana)") {
			announced++
			require.True(t, ingress.SelfAuthored(c.Body))
		}
	}
	require.Equal(t, 2, announced)
	w.requireAtGate(n, "session controls decide no gate")

	// A restart reuses the thread and still knows the handled event.
	w.stop()
	w.start()
	require.Equal(t, http.StatusOK, w.slack(ev, time.Now(), false, "X-Slack-Retry-Num", "2"))
	w.waitIdle()
	th2, ok := w.d.SlackThread(item)
	require.True(t, ok)
	require.Equal(t, th, th2)
	require.Equal(t, 1, strings.Count(w.received(), "Approved, ship it."))
	require.Len(t, w.slackMirrors(n), 1)

	// erin is on no list of logins: the team rule lets her speak from
	// Slack; taken off the team, her next message is dropped.
	require.Equal(t, http.StatusOK, w.slack(slacksim.MessageEvent("EvErin", th.Channel, th.TS, "1700000104.000100", "UERIN", "Looks right to me."), time.Now(), false))
	w.eventually("the team member's reply to reach the session", func() bool { return strings.Contains(w.received(), "Looks right to me.") })
	require.Contains(t, w.received(), "[message from @erin (Slack user UERIN) via Slack and loopd, not from the ticket]")
	w.waitIdle()
	w.sim.RemoveTeamMember("octo", "approvers", "erin")
	time.Sleep(5 * time.Millisecond) // past the 1 ms TTL
	drops := w.count("channel.slack.dropped")
	require.Equal(t, http.StatusOK, w.slack(slacksim.MessageEvent("EvErin2", th.Channel, th.TS, "1700000105.000100", "UERIN", "One more thing."), time.Now(), false))
	w.eventually("the former member's message to be dropped", func() bool { return w.count("channel.slack.dropped") > drops })
	require.NotContains(t, w.received(), "One more thing.")

	// stop, then start again from Slack: the session ends and comes back
	// (queued as the ticket's start keyword), in the same thread.
	parents := sim.Posts()
	now = time.Now()
	require.Equal(t, http.StatusOK, w.slack(slacksim.SlashCommand("UDANA", "stop octo/demo#"+strconv.Itoa(n), "trig-stop"), now, true))
	rec, err = sessions.OpenRegistry(sessions.RegistryDir(w.cfg.StateRoot))
	require.NoError(t, err)
	r, err = rec.Get(item)
	require.NoError(t, err)
	require.False(t, r.Status.Live(), "stopped from Slack")
	spawned := w.spawns()
	require.Equal(t, http.StatusOK, w.slack(slacksim.SlashCommand("UDANA", "start octo/demo#"+strconv.Itoa(n), "trig-start"), now, true))
	w.eventually("the session to start again", func() bool { return w.spawns() > spawned })
	w.waitIdle()
	require.Len(t, w.withField("control.slack", "command", "start"), 1)
	require.Equal(t, len(parents), len(sim.Posts()), "no second thread")
	w.requireAtGate(n, "stop and start decide no gate")
}
