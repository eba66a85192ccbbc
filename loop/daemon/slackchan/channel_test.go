package slackchan_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/ingress"
	"github.com/theloop-dev/theloop/loop/daemon/slackchan"
	"github.com/theloop-dev/theloop/loop/daemon/slackchan/slacksim"
	"github.com/theloop-dev/theloop/workitem"
)

// backend records what the channel asks of loopd.
type backend struct {
	mu         sync.Mutex
	authorized map[string]bool
	comments   []string
	replies    []string
	controls   []string
	replyErr   error
	// slow, when set, holds Control until it is closed.
	slow chan struct{}
}

func (b *backend) Authorized(_ context.Context, login string, _ workitem.Ref) string {
	if b.authorized[login] {
		return ""
	}
	return login + " is not allowed"
}

func (b *backend) Comment(_ context.Context, item workitem.Ref, body string) (string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.comments = append(b.comments, body)
	return fmt.Sprintf("%s#issuecomment-%d", item.URL(), len(b.comments)), nil
}

func (b *backend) Reply(_ context.Context, item workitem.Ref, from slackchan.Person, text string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.replyErr != nil {
		return b.replyErr
	}
	b.replies = append(b.replies, item.String()+"|"+from.Login+"|"+text)
	return nil
}

func (b *backend) Control(_ context.Context, item workitem.Ref, from slackchan.Person, verb string) (string, error) {
	if b.slow != nil {
		<-b.slow
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.controls = append(b.controls, verb+"|"+item.String()+"|"+from.Login)
	return "queued", nil
}

func (b *backend) snapshot() (comments, replies, controls []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.comments...), append([]string(nil), b.replies...), append([]string(nil), b.controls...)
}

type recorder struct {
	mu    sync.Mutex
	names []string
}

func (r *recorder) record(name string, _ graph.Level, _ ...graph.Field) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.names = append(r.names, name)
}

func (r *recorder) count(name string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, x := range r.names {
		if x == name {
			n++
		}
	}
	return n
}

var (
	secret = []byte("8f742231b10e8888abcd99yyyzzz85a5")
	item   = workitem.Ref{Provider: "github", Owner: "octo", Repo: "app", Number: 12}
)

type world struct {
	sim *slacksim.Server
	ch  *slackchan.Channel
	be  *backend
	rec *recorder
	now time.Time
	dir string
}

func newWorld(t *testing.T, mode string) *world {
	t.Helper()
	w := &world{sim: slacksim.New(), be: &backend{authorized: map[string]bool{"alice": true, "mallory": false}}, rec: &recorder{},
		now: time.Now(), dir: t.TempDir()}
	t.Cleanup(w.sim.Close)
	w.open(t, mode)
	return w
}

func (w *world) open(t *testing.T, mode string) {
	t.Helper()
	cfg := slackchan.Config{Mode: mode, Channel: "#loop", BotToken: "xoxb-test", AppToken: "xapp-test", SigningSecret: secret,
		Users: map[string]string{"UALICE": "alice", "UMALLORY": "mallory"}, StateDir: w.dir, APIURL: w.sim.APIURL()}
	ch, err := slackchan.New(cfg, slackchan.Deps{Backend: w.be, Now: func() time.Time { return w.now }, Record: w.rec.record})
	require.NoError(t, err)
	w.ch = ch
	t.Cleanup(func() { _ = ch.Close() })
}

// send posts a body signed at time at to the channel's Events API handler.
func (w *world) send(t *testing.T, body []byte, at time.Time, form bool, hdr map[string]string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, slackchan.DefaultEventsPath, bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	if form {
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	slacksim.Sign(r, secret, body, at)
	for k, v := range hdr {
		r.Header.Set(k, v)
	}
	rr := httptest.NewRecorder()
	w.ch.Handler().ServeHTTP(rr, r)
	return rr
}

func TestThreadOpenedOnceAndKeptAcrossRestart(t *testing.T) {
	w := newWorld(t, slackchan.ModeEvents)
	th, err := w.ch.OpenThread(context.Background(), item)
	require.NoError(t, err)
	posts := w.sim.Posts()
	require.Len(t, posts, 1)
	require.Equal(t, "#loop", posts[0].Channel)
	require.Equal(t, "xoxb-test", posts[0].Token)
	require.Contains(t, posts[0].Text, "https://github.com/octo/app/issues/12")
	require.Equal(t, slackchan.Thread{Channel: "CLOOP", TS: posts[0].TS}, th)

	again, err := w.ch.OpenThread(context.Background(), item)
	require.NoError(t, err)
	require.Equal(t, th, again)
	require.NoError(t, w.ch.Close())

	w.open(t, slackchan.ModeEvents) // a restart: a new channel on the same state dir
	kept, ok := w.ch.Thread(item)
	require.True(t, ok)
	require.Equal(t, th, kept)
	again, err = w.ch.OpenThread(context.Background(), item)
	require.NoError(t, err)
	require.Equal(t, th, again)
	require.Len(t, w.sim.Posts(), 1, "the restart reuses the thread")
}

func TestReplyDeliveredOnceDespiteRetriesAndDuplicates(t *testing.T) {
	w := newWorld(t, slackchan.ModeEvents)
	th, err := w.ch.OpenThread(context.Background(), item)
	require.NoError(t, err)

	ev := slacksim.MessageEvent("Ev001", th.Channel, th.TS, "1700000001.000100", "UALICE", "please also cover the empty list &amp; n &lt; 0")
	require.Equal(t, http.StatusOK, w.send(t, ev, w.now, false, nil).Code)
	// Slack's retries of the same delivery, and the same event id again.
	require.Equal(t, http.StatusOK, w.send(t, ev, w.now, false, map[string]string{"X-Slack-Retry-Num": "1", "X-Slack-Retry-Reason": "http_timeout"}).Code)
	require.Equal(t, http.StatusOK, w.send(t, ev, w.now.Add(time.Second), false, map[string]string{"X-Slack-Retry-Num": "2"}).Code)
	require.NoError(t, w.ch.Close()) // waits for the handling

	comments, replies, _ := w.be.snapshot()
	require.Equal(t, []string{"github:octo/app#12|alice|please also cover the empty list & n < 0"}, replies, "Slack's escapes undone")
	require.Len(t, comments, 1)
	require.True(t, ingress.SelfAuthored(comments[0]), "the mirror is marked, so no ingress acts on it")
	require.Contains(t, comments[0], "> please also cover the empty list & n < 0")
	require.Contains(t, comments[0], "Slack user UALICE (GitHub @alice)")
	require.Equal(t, 2, w.rec.count("channel.slack.duplicate"))
	require.Len(t, w.sim.Posts(), 1, "nothing answered in the thread")

	// The ledger is on disk: after a restart the same event is still a
	// duplicate.
	w.open(t, slackchan.ModeEvents)
	require.Equal(t, http.StatusOK, w.send(t, ev, w.now, false, map[string]string{"X-Slack-Retry-Num": "3"}).Code)
	require.NoError(t, w.ch.Close())
	_, replies, _ = w.be.snapshot()
	require.Len(t, replies, 1)
}

func TestUnmappedOrUnauthorizedSlackUsersChangeNothing(t *testing.T) {
	w := newWorld(t, slackchan.ModeEvents)
	th, err := w.ch.OpenThread(context.Background(), item)
	require.NoError(t, err)
	for i, user := range []string{"USTRANGER", "UMALLORY"} {
		ev := slacksim.MessageEvent(fmt.Sprintf("Ev10%d", i), th.Channel, th.TS, "1700000002.000100", user, "approved, ship it")
		require.Equal(t, http.StatusOK, w.send(t, ev, w.now, false, nil).Code)
		rr := w.send(t, slacksim.SlashCommand(user, "stop octo/app#12", fmt.Sprintf("trig-%d", i)), w.now, true, nil)
		require.Equal(t, http.StatusOK, rr.Code)
		require.Contains(t, rr.Body.String(), "Not relayed")
	}
	// Messages that are not people's thread replies: a bot, an edit, a
	// top-level message, another thread.
	for i, ev := range [][]byte{
		[]byte(`{"type":"event_callback","event_id":"Ev200","event":{"type":"message","subtype":"bot_message","bot_id":"B1","channel":"` + th.Channel + `","thread_ts":"` + th.TS + `","ts":"1.2","text":"approved"}}`),
		[]byte(`{"type":"event_callback","event_id":"Ev201","event":{"type":"message","subtype":"message_changed","channel":"` + th.Channel + `","message":{"user":"UALICE","text":"approved"}}}`),
		slacksim.MessageEvent("Ev202", th.Channel, "", "1700000003.000100", "UALICE", "approved"),
		slacksim.MessageEvent("Ev203", th.Channel, "1600000000.000001", "1700000003.000200", "UALICE", "approved"),
	} {
		require.Equal(t, http.StatusOK, w.send(t, ev, w.now, false, nil).Code, i)
	}
	require.NoError(t, w.ch.Close())
	comments, replies, controls := w.be.snapshot()
	require.Empty(t, comments)
	require.Empty(t, replies)
	require.Empty(t, controls)
	require.Len(t, w.sim.Posts(), 1, "only the thread's parent")
	require.Equal(t, 4, w.rec.count("channel.slack.dropped"))
}

func TestForgedRequestsAre401AndDoNothing(t *testing.T) {
	w := newWorld(t, slackchan.ModeEvents)
	th, err := w.ch.OpenThread(context.Background(), item)
	require.NoError(t, err)
	ev := slacksim.MessageEvent("Ev300", th.Channel, th.TS, "1700000004.000100", "UALICE", "hello")
	send := func(mut func(r *http.Request)) int {
		r := httptest.NewRequest(http.MethodPost, "/slack/events", bytes.NewReader(ev))
		r.Header.Set("Content-Type", "application/json")
		slacksim.Sign(r, secret, ev, w.now)
		mut(r)
		rr := httptest.NewRecorder()
		w.ch.Handler().ServeHTTP(rr, r)
		return rr.Code
	}
	cases := map[string]func(r *http.Request){
		"wrong secret":    func(r *http.Request) { slacksim.Sign(r, []byte("another-secret"), ev, w.now) },
		"six minutes old": func(r *http.Request) { slacksim.Sign(r, secret, ev, w.now.Add(-6*time.Minute)) },
		"from the future": func(r *http.Request) { slacksim.Sign(r, secret, ev, w.now.Add(6*time.Minute)) },
		"no signature":    func(r *http.Request) { r.Header.Del("X-Slack-Signature") },
		"no timestamp":    func(r *http.Request) { r.Header.Del("X-Slack-Request-Timestamp") },
		"v1 scheme": func(r *http.Request) {
			r.Header.Set("X-Slack-Signature", "v1="+strings.TrimPrefix(r.Header.Get("X-Slack-Signature"), "v0="))
		},
		"timestamp swapped": func(r *http.Request) { r.Header.Set("X-Slack-Request-Timestamp", fmt.Sprint(w.now.Unix()-1)) },
		"body changed": func(r *http.Request) {
			r.Body = httpBody(bytes.Replace(ev, []byte("hello"), []byte("approved"), 1))
		},
	}
	for name, mut := range cases {
		require.Equal(t, http.StatusUnauthorized, send(mut), name)
	}
	require.NoError(t, w.ch.Close())
	comments, replies, _ := w.be.snapshot()
	require.Empty(t, comments)
	require.Empty(t, replies)
	require.Equal(t, len(cases), w.rec.count("channel.slack.rejected"))

	// The signed original still passes: the event id was not burnt by the
	// forgeries.
	w.open(t, slackchan.ModeEvents)
	require.Equal(t, http.StatusOK, send(func(*http.Request) {}))
	require.NoError(t, w.ch.Close())
	_, replies, _ = w.be.snapshot()
	require.Len(t, replies, 1)
}

func TestDecisionWordInSlackIsRelayedNotDecided(t *testing.T) {
	w := newWorld(t, slackchan.ModeEvents)
	th, err := w.ch.OpenThread(context.Background(), item)
	require.NoError(t, err)
	ev := slacksim.MessageEvent("Ev400", th.Channel, th.TS, "1700000005.000100", "UALICE", "Approved, ship it.")
	require.Equal(t, http.StatusOK, w.send(t, ev, w.now, false, nil).Code)
	rr := w.send(t, slacksim.SlashCommand("UALICE", "approve octo/app#12", "trig-approve"), w.now, true, nil)
	require.Equal(t, http.StatusOK, rr.Code)
	var ans map[string]string
	require.NoError(t, json.Unmarshal(rr.Body.Bytes(), &ans))
	require.Equal(t, "ephemeral", ans["response_type"])
	require.Contains(t, ans["text"], "passes no gate")
	require.Contains(t, ans["text"], "https://github.com/octo/app/issues/12")
	_, err = w.sim.WaitPosts(2, 10*time.Second)
	require.NoError(t, err)
	require.NoError(t, w.ch.Close())

	comments, replies, controls := w.be.snapshot()
	require.Len(t, comments, 1)
	require.True(t, ingress.SelfAuthored(comments[0]), "posted with loopd's marker: dropped by ingress, so it cannot decide a gate")
	require.Contains(t, comments[0], "decides no gate")
	require.Contains(t, comments[0], "@alice, to decide, comment here yourself")
	require.Len(t, replies, 1, "the agent still hears it")
	require.Empty(t, controls)
	posts := w.sim.Posts()
	require.Len(t, posts, 2)
	note := posts[1]
	require.Equal(t, th.TS, note.ThreadTS)
	require.Contains(t, note.Text, "<@UALICE>")
	require.Contains(t, note.Text, "comment on the ticket as @alice: https://github.com/octo/app/issues/12")
	require.Equal(t, 2, w.rec.count("channel.slack.decision_relayed"))
}

func TestSlashCommandRelaysControlsOnce(t *testing.T) {
	w := newWorld(t, slackchan.ModeEvents)
	for _, verb := range slackchan.Verbs {
		rr := w.send(t, slacksim.SlashCommand("UALICE", verb+" octo/app#12", "trig-"+verb), w.now, true, nil)
		require.Equal(t, http.StatusOK, rr.Code)
		require.Contains(t, rr.Body.String(), verb+" github:octo/app#12: queued (as @alice")
	}
	rr := w.send(t, slacksim.SlashCommand("UALICE", "pause octo/app#12", "trig-pause"), w.now, true, map[string]string{"X-Slack-Retry-Num": "1"})
	require.Contains(t, rr.Body.String(), "already handled")
	rr = w.send(t, slacksim.SlashCommand("UALICE", "pause", "trig-x"), w.now, true, nil)
	require.Contains(t, rr.Body.String(), "usage:")
	_, _, controls := w.be.snapshot()
	require.Equal(t, []string{"start|github:octo/app#12|alice", "pause|github:octo/app#12|alice", "resume|github:octo/app#12|alice", "stop|github:octo/app#12|alice"}, controls)
}

func TestURLVerificationAnswersTheChallenge(t *testing.T) {
	w := newWorld(t, slackchan.ModeEvents)
	rr := w.send(t, []byte(`{"type":"url_verification","token":"x","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"}`), w.now, false, nil)
	require.Equal(t, http.StatusOK, rr.Code)
	require.Equal(t, "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P", rr.Body.String())
}

func TestConfigFailsClosed(t *testing.T) {
	base := slackchan.Config{Mode: slackchan.ModeEvents, Channel: "#loop", BotToken: "xoxb-1", StateDir: t.TempDir()}
	_, err := slackchan.New(base, slackchan.Deps{Backend: &backend{}})
	require.ErrorIs(t, err, slackchan.ErrNoSigningSecret)
	require.ErrorContains(t, err, "THE_LOOP_SLACK_SIGNING_SECRET")
	require.ErrorContains(t, err, "channels.slack.signingSecretEnv")

	sock := base
	sock.Mode = slackchan.ModeSocket
	_, err = slackchan.New(sock, slackchan.Deps{Backend: &backend{}})
	require.ErrorContains(t, err, "THE_LOOP_SLACK_APP_TOKEN")

	bad := base
	bad.SigningSecret = secret
	bad.Users = map[string]string{"alice": "alice"}
	_, err = slackchan.New(bad, slackchan.Deps{Backend: &backend{}})
	require.ErrorContains(t, err, "is not a Slack user id")
}

func TestSocketMode(t *testing.T) {
	w := newWorld(t, slackchan.ModeSocket)
	th, err := w.ch.OpenThread(context.Background(), item)
	require.NoError(t, err)
	w.ch.Start()
	conn, err := w.sim.Conn(10 * time.Second)
	require.NoError(t, err)

	payload := json.RawMessage(slacksim.MessageEvent("Ev500", th.Channel, th.TS, "1700000006.000100", "UALICE", "use the v2 endpoint"))
	for retry, id := range []string{"env-1", "env-2"} { // a redelivery of the same event
		require.NoError(t, conn.WriteJSON(slacksim.Envelope(id, "events_api", payload, retry)))
		ack, err := w.sim.NextAck(10 * time.Second)
		require.NoError(t, err)
		require.Equal(t, id, ack.EnvelopeID)
	}
	ev := slacksim.MessageEvent("Ev501", th.Channel, th.TS, "1700000006.000200", "USTRANGER", "stop everything")
	require.NoError(t, conn.WriteJSON(slacksim.Envelope("env-3", "events_api", json.RawMessage(ev), 0)))
	_, err = w.sim.NextAck(10 * time.Second)
	require.NoError(t, err)

	// An inner event slack-go cannot read is still acknowledged (else
	// Slack redelivers it forever) and does nothing.
	odd := json.RawMessage(`{"type":"event_callback","event_id":"Ev502","event":{"type":"made_up_event","user":"UALICE"}}`)
	require.NoError(t, conn.WriteJSON(slacksim.Envelope("env-odd", "events_api", odd, 0)))
	ack, err := w.sim.NextAck(10 * time.Second)
	require.NoError(t, err)
	require.Equal(t, "env-odd", ack.EnvelopeID)

	slash := map[string]any{"command": "/the-loop", "text": "pause octo/app#12", "user_id": "UALICE", "trigger_id": "trig-sock", "channel_id": "C1"}
	require.NoError(t, conn.WriteJSON(slacksim.Envelope("env-4", "slash_commands", slash, 0)))
	ack, err = w.sim.NextAck(10 * time.Second)
	require.NoError(t, err)
	require.Equal(t, "env-4", ack.EnvelopeID)
	require.Contains(t, string(ack.Payload), "pause github:octo/app#12: queued (as @alice")
	require.NoError(t, w.ch.Close())

	_, replies, controls := w.be.snapshot()
	require.Equal(t, []string{"github:octo/app#12|alice|use the v2 endpoint"}, replies)
	require.Equal(t, []string{"pause|github:octo/app#12|alice"}, controls)
}

func TestDeliveryFailureIsSaidInTheThread(t *testing.T) {
	w := newWorld(t, slackchan.ModeEvents)
	w.be.replyErr = errors.New("github:octo/app#12's session is stopped; start it before replying")
	th, err := w.ch.OpenThread(context.Background(), item)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, w.send(t, slacksim.MessageEvent("Ev600", th.Channel, th.TS, "1700000007.000100", "UALICE", "hello?"), w.now, false, nil).Code)
	require.NoError(t, w.ch.Close())
	posts := w.sim.Posts()
	require.Len(t, posts, 2)
	require.Contains(t, posts[1].Text, "not delivered to the session")
	comments, _, _ := w.be.snapshot()
	require.Len(t, comments, 1, "the ticket still has the message")
}

// A control slower than Slack's 3 s is answered "in progress" and its
// outcome posted to the person when it comes.
func TestSlowSlashCommandAnswersLater(t *testing.T) {
	w := newWorld(t, slackchan.ModeEvents)
	w.be.slow = make(chan struct{})
	rr := w.send(t, slacksim.SlashCommand("UALICE", "stop octo/app#12", "trig-slow"), w.now, true, nil)
	require.Equal(t, http.StatusOK, rr.Code)
	require.Contains(t, rr.Body.String(), "stop github:octo/app#12 relayed as @alice; still in progress")
	require.Empty(t, w.sim.Posts())
	close(w.be.slow)
	posts, err := w.sim.WaitPosts(1, 10*time.Second)
	require.NoError(t, err)
	require.Equal(t, "UALICE", posts[0].User, "ephemeral, to the person")
	require.Equal(t, "C1", posts[0].Channel)
	require.Contains(t, posts[0].Text, "stop github:octo/app#12: queued (as @alice")
	require.NoError(t, w.ch.Close())
	_, _, controls := w.be.snapshot()
	require.Equal(t, []string{"stop|github:octo/app#12|alice"}, controls)
}
