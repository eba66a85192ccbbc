package ingress

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/integrations"
	"github.com/theloop-dev/theloop/integrations/githubsim"
)

// ghFake is the world's GitHub: integrations/githubsim — the one GitHub
// stand-in every test uses — on the world's clock, so the created_at and
// updated_at it writes are the times the poller and the receivers see.
// Repository octo/repo; items are numbered from 15 (as a repository with
// history), or from what a test asks with at.
type ghFake struct {
	t   *testing.T
	sim *githubsim.Server
}

const simRepo = "octo/repo"

func newGHFake(t *testing.T, clock *stepClock) *ghFake {
	sim, err := githubsim.Start(githubsim.Config{Token: "tok", Now: clock.Now})
	require.NoError(t, err)
	t.Cleanup(sim.Close)
	require.NoError(t, sim.AddRepo(simRepo, githubsim.RepoOptions{FirstNumber: 15}))
	return &ghFake{t: t, sim: sim}
}

// at makes the next item opened number n (numbers only move on).
func (f *ghFake) at(n int) {
	require.NoError(f.t, f.sim.AddRepo(simRepo, githubsim.RepoOptions{FirstNumber: n}))
}

// open opens an issue as author with labels and returns its number.
func (f *ghFake) open(author string, labels ...string) int {
	is, err := f.sim.OpenIssue(simRepo, author, "Add X", "", labels...)
	require.NoError(f.t, err)
	return is.Number
}

// openPR opens a pull request as author whose body closes the issues
// given, and returns its number.
func (f *ghFake) openPR(author string, closes []int, labels ...string) int {
	var body []string
	for _, n := range closes {
		body = append(body, "Closes #"+strconv.Itoa(n))
	}
	pr, err := f.sim.OpenPullRequestWith(simRepo, githubsim.PullRequest{Author: author, Title: "Fix", Body: strings.Join(body, "\n"), Labels: labels})
	require.NoError(f.t, err)
	return pr.Number
}

// comment posts body on item n as author and returns the comment's id.
func (f *ghFake) comment(n int, author, body string) string {
	c, err := f.sim.Comment(simRepo, n, author, body)
	require.NoError(f.t, err)
	return strconv.FormatInt(c.ID, 10)
}

// edit replaces comment id's body as its author does: updated_at moves on,
// created_at stays. It returns the new updated_at as GitHub writes it.
func (f *ghFake) edit(id, body string) string {
	n, err := strconv.ParseInt(id, 10, 64)
	require.NoError(f.t, err)
	author := ""
	for _, c := range f.comments() {
		if c.ID == n {
			author = c.Author
		}
	}
	c, err := f.sim.EditComment(simRepo, n, author, body)
	require.NoError(f.t, err)
	return c.UpdatedAt.UTC().Format(time.RFC3339)
}

func (f *ghFake) comments() []githubsim.Comment {
	var out []githubsim.Comment
	for n := 1; n < 100; n++ {
		cs, err := f.sim.Comments(simRepo, n)
		if err == nil {
			out = append(out, cs...)
		}
	}
	return out
}

// updatedAt is comment id's current updated_at as GitHub writes it.
func (f *ghFake) updatedAt(id string) string {
	for _, c := range f.comments() {
		if strconv.FormatInt(c.ID, 10) == id {
			return c.UpdatedAt.UTC().Format(time.RFC3339)
		}
	}
	f.t.Fatalf("no comment %s", id)
	return ""
}

// requests is how many REST and GraphQL requests GitHub received.
func (f *ghFake) requests() int { return len(f.sim.Requests()) }

// pollWorld is a poller wired to the fake through the real integrations
// client (api transport).
type pollWorld struct {
	clock  *stepClock
	gh     *ghFake
	sink   *memSink
	store  *PortableStore
	poller *Poller
	root   string
}

func newPollWorld(t *testing.T) *pollWorld {
	// One clock for the whole world: GitHub's timestamps, the router's
	// dedup window, the receivers built on it and the poller all read it.
	// It starts at the real time, so no date is pinned that real time
	// will pass.
	clock := &stepClock{t: time.Now().UTC()}
	gh := newGHFake(t, clock)
	set, err := integrations.New(integrations.Config{GitHub: &integrations.GitHubConfig{
		Transport: integrations.TransportAPI, MaxAttempts: 2, TimeoutSeconds: 5,
		API: integrations.GitHubAPIConfig{BaseURL: gh.sim.URL()},
	}}, integrations.Deps{
		Env:   func(k string) (string, bool) { return map[string]string{"GH_TOKEN": "tok"}[k], k == "GH_TOKEN" },
		Sleep: func(ctx context.Context, d time.Duration) error { return ctx.Err() },
	})
	require.NoError(t, err)
	root := t.TempDir()
	router, err := NewRouter(testConfig(), RouterDeps{Clock: clock})
	require.NoError(t, err)
	store := NewPortableStore(root, nil)
	sink := newMemSink()
	p, err := NewPoller(PollerConfig{Sources: []PollSource{{Repos: []string{"octo/repo"}}}, StateRoot: root, Interval: time.Minute},
		PollerDeps{GitHub: set, Sink: sink, Router: router, Store: store, Clock: clock})
	require.NoError(t, err)
	return &pollWorld{clock: clock, gh: gh, sink: sink, store: store, poller: p, root: root}
}

// cycle runs one pass, first moving the clock past any back-off.
func (w *pollWorld) cycle(t *testing.T) CycleStats {
	t.Helper()
	w.clock.advance(time.Second + w.poller.Backoff())
	st, _ := w.poller.Reconcile(context.Background())
	return st
}

// stepClock is a clock tests move by hand.
type stepClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *stepClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *stepClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func deliveries(evs []*Event) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.Event+"/"+e.Action+"/"+e.DeliveryID)
	}
	return out
}

const autoLabel = "the-loop: auto-execute"

func TestPollerDiscoveryAndCommentsSinceLedger(t *testing.T) {
	w := newPollWorld(t)
	w.gh.open("alice", autoLabel, "bug") // #15
	w.gh.open("alice")                   // #16, unlabelled
	w.gh.comment(15, "alice", "some history")
	startID := w.gh.comment(15, "alice", "the-loop start")
	w.gh.comment(15, "mallory", "the-loop stop")

	st := w.cycle(t)
	require.Equal(t, 1, st.ItemsSeen)
	evs := w.sink.all()
	require.Len(t, evs, 2, deliveries(evs))
	pres := evs[0]
	require.Equal(t, "issues", pres.Event)
	require.Equal(t, "labeled", pres.Action)
	require.True(t, pres.Labeled)
	require.Equal(t, "alice", pres.Actor)
	require.Equal(t, SourcePoll, pres.Source)
	require.Equal(t, "github:octo/repo#15", pres.WorkItems[0].String())
	// The start already on the thread is pending (no control record): it is
	// forwarded; the rest of the history is baselined.
	start := evs[1]
	require.Equal(t, "poll-comment-"+startID, start.DeliveryID)
	require.Equal(t, &ControlCommand{Command: CmdStart, Actor: "alice", Note: "https://github.com/octo/repo/issues/15#issuecomment-" + startID}, start.Control)

	// Nothing new: nothing sent.
	w.cycle(t)
	require.Len(t, w.sink.all(), 2)

	// New comments since the ledger: the authorized one is forwarded, the
	// unauthorized and the self-marked are not, ever.
	okID := w.gh.comment(15, "alice", "approved, go ahead")
	w.gh.comment(15, "mallory", "approved")
	w.gh.comment(15, "alice", "status\n\n<!-- the-loop:agent-comment -->\n")
	w.cycle(t)
	w.cycle(t)
	evs = w.sink.all()
	require.Len(t, evs, 3, deliveries(evs))
	require.Equal(t, "poll-comment-"+okID, evs[2].DeliveryID)
	require.Equal(t, "issue_comment", evs[2].Event)
	require.Nil(t, evs[2].Control)

	// The ledger survived in the portable record.
	l, err := w.store.PollLedger(mustRef(t, "github:octo/repo#15"))
	require.NoError(t, err)
	require.True(t, l.Presence.Kept)
	require.Len(t, l.SeenComments, 6)
	require.NotEmpty(t, l.LastPolledAt)

	// The heartbeat.
	var hb Heartbeat
	b, err := os.ReadFile(filepath.Join(w.root, "poll-status.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &hb))
	require.Equal(t, 60, hb.IntervalSeconds)
}

func TestPollerUnauthorizedAuthorGetsNoPresence(t *testing.T) {
	w := newPollWorld(t)
	n := w.gh.open("mallory", autoLabel)
	w.cycle(t)
	require.Empty(t, w.sink.all())
	// An authorized user's comment on it is still processed.
	w.gh.comment(n, "alice", "the-loop start")
	w.cycle(t)
	evs := w.sink.all()
	require.Len(t, evs, 1)
	require.Equal(t, CmdStart, evs[0].Control.Command)
}

func TestPollerPullRequestThread(t *testing.T) {
	w := newPollWorld(t)
	issue := w.gh.open("alice") // #15, not labelled: reached through the PR
	w.gh.at(20)
	pr := w.gh.openPR("alice", []int{issue}, autoLabel)
	w.cycle(t)
	evs := w.sink.all()
	require.Len(t, evs, 1)
	require.Equal(t, "pull_request", evs[0].Event)
	require.Equal(t, []string{"github:octo/repo#15", "github:octo/repo#20"}, []string{evs[0].WorkItems[0].String(), evs[0].WorkItems[1].String()})

	w.clock.advance(time.Second)
	_, err := w.gh.sim.AddReview(simRepo, pr, githubsim.Review{Author: "alice", State: "APPROVED"})
	require.NoError(t, err)
	w.clock.advance(time.Second)
	rc, err := w.gh.sim.AddReviewComment(simRepo, pr, githubsim.ReviewComment{Author: "alice", Body: "nit", Path: "a.go", Line: 3})
	require.NoError(t, err)
	w.clock.advance(time.Second)
	changes, err := w.gh.sim.AddReview(simRepo, pr, githubsim.Review{Author: "alice", Body: "needs work", State: "CHANGES_REQUESTED"})
	require.NoError(t, err)
	w.clock.advance(time.Second)
	_, err = w.gh.sim.AddReview(simRepo, pr, githubsim.Review{Author: "alice", Body: "draft", State: "PENDING"})
	require.NoError(t, err)
	w.cycle(t)
	evs = w.sink.all()
	require.Equal(t, []string{
		"pull_request/labeled/" + evs[0].DeliveryID,
		"pull_request_review_comment/created/poll-review-comment-" + strconv.FormatInt(rc.ID, 10),
		"pull_request_review/submitted/poll-review-" + strconv.FormatInt(changes.ID, 10),
	}, deliveries(evs))
	require.Equal(t, "CHANGES_REQUESTED", evs[2].Comments[0].State)
}

func TestPollerClosure(t *testing.T) {
	w := newPollWorld(t)
	n := w.gh.open("alice", autoLabel) // #15
	w.cycle(t)
	require.Len(t, w.sink.all(), 1)

	// Removing the label alone does not close anything.
	require.NoError(t, w.gh.sim.RemoveLabel(simRepo, n, "alice", autoLabel))
	w.cycle(t)
	require.Len(t, w.sink.all(), 1)

	// Closed: one close event, the ledger dropped.
	require.NoError(t, w.gh.sim.CloseIssue(simRepo, n, "alice"))
	st := w.cycle(t)
	require.Equal(t, 1, st.Closures)
	evs := w.sink.all()
	require.Equal(t, "issues/closed/poll-close-github:octo/repo#15-closed", deliveries(evs)[1])
	l, err := w.store.PollLedger(mustRef(t, "github:octo/repo#15"))
	require.NoError(t, err)
	require.Nil(t, l)
	w.cycle(t)
	require.Len(t, w.sink.all(), 2)

	// Reopened and labelled again: a new sighting, a new presence event.
	require.NoError(t, w.gh.sim.ReopenIssue(simRepo, n, "alice"))
	require.NoError(t, w.gh.sim.AddLabel(simRepo, n, "alice", autoLabel))
	w.cycle(t)
	evs = w.sink.all()
	require.Len(t, evs, 3)
	require.True(t, strings.HasPrefix(evs[2].DeliveryID, "poll-presence-github:octo/repo#15-"))
	require.NotEqual(t, evs[0].DeliveryID, evs[2].DeliveryID)
}

func TestPollerFailingListingLeavesItemsAlone(t *testing.T) {
	w := newPollWorld(t)
	w.gh.open("alice", autoLabel) // #15
	w.cycle(t)
	w.gh.sim.InjectFault(githubsim.Fault{Method: "GET", Path: "/repos/octo/repo/issues", Status: 502})
	st := w.cycle(t)
	require.Zero(t, st.Closures)
	require.Len(t, w.sink.all(), 1)
	require.NotZero(t, w.poller.Backoff(), "a cycle in which every call failed backs off")
}

func TestPollerRateLimitBackoff(t *testing.T) {
	w := newPollWorld(t)
	w.gh.open("alice", autoLabel) // #15
	reset := strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10)
	w.gh.sim.InjectFault(githubsim.Fault{Status: 403, Header: map[string]string{"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": reset}})
	st, err := w.poller.Reconcile(context.Background())
	require.True(t, st.RateLimited)
	require.True(t, st.Interrupted)
	require.ErrorIs(t, err, errRateLimited)
	require.Equal(t, 2*time.Minute, w.poller.Backoff())
	// A caller that does not wait (the daemon's own ticker) is refused
	// without a request.
	before := w.gh.requests()
	w.clock.advance(time.Minute)
	_, err = w.poller.Reconcile(context.Background())
	require.ErrorIs(t, err, ErrBackingOff)
	require.Equal(t, before, w.gh.requests())
	w.cycle(t)
	require.Equal(t, 4*time.Minute, w.poller.Backoff())
	require.Equal(t, before+1, w.gh.requests(), "a rate-limited cycle stops at the first refusal")
	for range 10 {
		w.cycle(t)
	}
	require.Equal(t, MaxPollBackoff, w.poller.Backoff())

	// Run waits the back-off, not the interval.
	var waits []time.Duration
	ctx, cancel := context.WithCancel(context.Background())
	w.poller.d.Sleep = func(ctx context.Context, d time.Duration) error {
		waits = append(waits, d)
		w.clock.advance(d)
		if len(waits) == 2 {
			w.gh.sim.RemoveFaults()
		}
		if len(waits) == 3 {
			cancel()
		}
		return ctx.Err()
	}
	require.ErrorIs(t, w.poller.Run(ctx), context.Canceled)
	require.Equal(t, []time.Duration{MaxPollBackoff, MaxPollBackoff, time.Minute}, waits)
	require.Len(t, w.sink.all(), 1, "after the limit lifts the item is discovered")
}

// TestPollerServerErrorStormLosesNoComment: GitHub answers 500 to a third of
// the requests and the Sink refuses a quarter of the hand-offs; every
// authorized comment still arrives, once, in thread order.
func TestPollerServerErrorStormLosesNoComment(t *testing.T) {
	w := newPollWorld(t)
	w.gh.open("alice", autoLabel) // #15
	w.cycle(t)
	var want []string
	before := w.gh.requests()
	w.gh.sim.InjectFault(githubsim.Fault{Status: 500, Every: 3}) // a third of the requests
	puts := 0
	flaky := SinkFunc(func(ctx context.Context, ev *Event) error {
		puts++
		if puts%4 == 0 {
			return ErrUnavailable
		}
		return w.sink.Put(ctx, ev)
	})
	w.poller.d.Sink = flaky
	for round := range 30 {
		if round < 20 {
			want = append(want, "poll-comment-"+w.gh.comment(15, "alice", "comment "+strconv.Itoa(round)))
		}
		w.cycle(t)
	}
	w.gh.sim.RemoveFaults()
	w.cycle(t)
	var got []string
	for _, e := range w.sink.all()[1:] {
		got = append(got, e.DeliveryID)
	}
	require.Equal(t, want, got)
	require.Greater(t, w.gh.requests()-before, 30)
}

func TestNewPollerValidates(t *testing.T) {
	_, err := NewPoller(PollerConfig{}, PollerDeps{})
	require.Error(t, err)
	router, _ := NewRouter(testConfig(), RouterDeps{})
	_, err = NewPoller(PollerConfig{Sources: []PollSource{{Repos: []string{"bad"}}}},
		PollerDeps{GitHub: &integrations.Set{}, Sink: newMemSink(), Router: router, Store: NewPortableStore(t.TempDir(), nil)})
	require.ErrorIs(t, err, ErrInvalidConfig)
	require.True(t, strings.Contains(err.Error(), "bad"))
}

// TestPollerSkipsWhatTheWebhookDelivered: one change, one event, whichever
// ingress saw it first.
func TestPollerSkipsWhatTheWebhookDelivered(t *testing.T) {
	w := newPollWorld(t)
	w.gh.open("alice", autoLabel) // #15
	w.cycle(t)
	id := w.gh.comment(15, "alice", "looks good")
	recv, err := NewReceiver(testConfig(), ReceiverDeps{Sink: w.sink, Router: w.poller.d.Router})
	require.NoError(t, err)
	n, _ := strconv.Atoi(id)
	body := mustJSON(t, map[string]any{
		"action": "created", "repository": repoJSON("octo/repo"), "issue": map[string]any{"number": 15},
		"comment": map[string]any{"id": n, "body": "looks good", "updated_at": "2026-01-01T00:00:00Z", "user": map[string]any{"login": "alice"}},
		"sender":  map[string]any{"login": "alice"},
	})
	rec := serve(recv, delivery{event: "issue_comment", id: "gh-guid", body: body}.request([]byte("s3cret")))
	require.Equal(t, 202, rec.Code)
	require.Len(t, w.sink.all(), 2)
	w.cycle(t)
	require.Len(t, w.sink.all(), 2)
	l, err := w.store.PollLedger(mustRef(t, "github:octo/repo#15"))
	require.NoError(t, err)
	require.True(t, l.Seen("comment-"+id))
}

func TestPollerCorruptLedgerStartsAfresh(t *testing.T) {
	w := newPollWorld(t)
	w.gh.open("alice", autoLabel) // #15
	w.gh.comment(15, "alice", "old history")
	ref := mustRef(t, "github:octo/repo#15")
	require.NoError(t, os.MkdirAll(w.store.Dir(), 0o700))
	require.NoError(t, os.WriteFile(w.store.Path(ref), []byte("{broken"), 0o600))
	st := w.cycle(t)
	require.Equal(t, 1, st.Failures)
	require.Len(t, w.sink.all(), 1, "presence only: the history is baselined")
	l, err := w.store.PollLedger(ref)
	require.NoError(t, err)
	require.NotNil(t, l)
	matches, _ := filepath.Glob(w.store.Path(ref) + ".corrupt-*")
	require.Len(t, matches, 1, "the unreadable record is kept aside")
}

// editWebhook is the issue_comment webhook GitHub sends for comment id on
// #15 (action created or edited) at updatedAt.
func editWebhook(t *testing.T, action, id, body, updatedAt string) []byte {
	n, err := strconv.Atoi(id)
	require.NoError(t, err)
	pl := map[string]any{
		"action": action, "repository": repoJSON("octo/repo"), "issue": map[string]any{"number": 15},
		"comment": map[string]any{"id": n, "body": body, "updated_at": updatedAt, "user": map[string]any{"login": "alice"}},
		"sender":  map[string]any{"login": "alice"},
	}
	if action == "edited" {
		pl["changes"] = map[string]any{"body": map[string]any{"from": "(earlier)"}}
	}
	return mustJSON(t, pl)
}

// TestPollerSeesCommentEdits: an edit (a new updated_at) is one new change,
// offered once as "edited" and never as a control command; an unchanged
// comment is never offered again.
func TestPollerSeesCommentEdits(t *testing.T) {
	w := newPollWorld(t)
	w.gh.open("alice", autoLabel) // #15
	w.cycle(t)
	id := w.gh.comment(15, "alice", "looks good")
	w.cycle(t)
	require.Equal(t, []string{"issue_comment/created/poll-comment-" + id}, deliveries(w.sink.all()[1:]))

	// Unchanged: nothing, cycle after cycle.
	for range 3 {
		require.Zero(t, w.cycle(t).CommentsForwarded)
	}
	require.Len(t, w.sink.all(), 2)

	// Edited into a keyword: one edited event, no control command.
	at := w.gh.edit(id, "the-loop start")
	st := w.cycle(t)
	require.Equal(t, 1, st.CommentsForwarded)
	evs := w.sink.all()
	require.Len(t, evs, 3, deliveries(evs))
	ed := evs[2]
	require.Equal(t, "issue_comment", ed.Event)
	require.Equal(t, "edited", ed.Action)
	require.Equal(t, "poll-comment-"+id+"@"+at, ed.DeliveryID)
	require.Equal(t, SourcePoll, ed.Source)
	require.Nil(t, ed.Control, "an edit never executes")
	require.Equal(t, Comment{ID: id, Author: "alice", Body: "the-loop start", UpdatedAt: at,
		URL: "https://github.com/octo/repo/issues/15#issuecomment-" + id, Item: "github:octo/repo#15"}, ed.Comments[0])
	require.Equal(t, "issue_comment/edited/octo/repo/"+id+"@"+at, ed.ContentKey())
	var pl map[string]any
	require.NoError(t, json.Unmarshal(ed.Payload, &pl))
	require.Equal(t, "edited", pl["action"])
	require.Equal(t, at, obj(pl, "comment")["updated_at"])

	// The edit is not offered again; the ledger holds its version.
	w.cycle(t)
	w.cycle(t)
	require.Len(t, w.sink.all(), 3)
	l, err := w.store.PollLedger(mustRef(t, "github:octo/repo#15"))
	require.NoError(t, err)
	v, ok := l.Version("comment-" + id)
	require.True(t, ok)
	require.Equal(t, at, v)

	// A second edit is a second change.
	at2 := w.gh.edit(id, "looks good, really")
	w.cycle(t)
	evs = w.sink.all()
	require.Len(t, evs, 4)
	require.Equal(t, "poll-comment-"+id+"@"+at2, evs[3].DeliveryID)
	require.Equal(t, "looks good, really", evs[3].Comments[0].Body)
}

// TestPollerEditByWebhookAndPollHasOneEffect: the same edit arriving by
// webhook and by poll is one event, whichever ingress sees it first.
func TestPollerEditByWebhookAndPollHasOneEffect(t *testing.T) {
	for _, webhookFirst := range []bool{true, false} {
		t.Run(map[bool]string{true: "webhook first", false: "poll first"}[webhookFirst], func(t *testing.T) {
			w := newPollWorld(t)
			w.gh.open("alice", autoLabel) // #15
			w.cycle(t)
			id := w.gh.comment(15, "alice", "looks good")
			w.cycle(t)
			require.Len(t, w.sink.all(), 2)
			recv, err := NewReceiver(testConfig(), ReceiverDeps{Sink: w.sink, Router: w.poller.d.Router})
			require.NoError(t, err)
			at := w.gh.edit(id, "looks good, one nit")
			hook := func() int {
				body := editWebhook(t, "edited", id, "looks good, one nit", at)
				return serve(recv, delivery{event: "issue_comment", id: "gh-edit-guid", body: body}.request([]byte("s3cret"))).Code
			}
			if webhookFirst {
				require.Equal(t, 202, hook())
				require.Len(t, w.sink.all(), 3)
				require.Equal(t, SourceWebhook, w.sink.all()[2].Source)
				require.Zero(t, w.cycle(t).CommentsForwarded)
			} else {
				require.Equal(t, 1, w.cycle(t).CommentsForwarded)
				require.Len(t, w.sink.all(), 3)
				require.Equal(t, SourcePoll, w.sink.all()[2].Source)
				require.Equal(t, 202, hook(), "a duplicate is answered 202 without a second event")
			}
			w.cycle(t)
			evs := w.sink.all()
			require.Len(t, evs, 3, deliveries(evs))
			require.Equal(t, "issue_comment/edited/octo/repo/"+id+"@"+at, evs[2].ContentKey())
		})
	}
}

// TestPollerEditAfterWebhookCreation: the webhook delivered the creation,
// the comment was edited before the poller first saw it: the poller offers
// the edit alone, not the creation again.
func TestPollerEditAfterWebhookCreation(t *testing.T) {
	w := newPollWorld(t)
	w.gh.open("alice", autoLabel) // #15
	w.cycle(t)
	id := w.gh.comment(15, "alice", "looks good")
	created := w.gh.updatedAt(id)
	recv, err := NewReceiver(testConfig(), ReceiverDeps{Sink: w.sink, Router: w.poller.d.Router})
	require.NoError(t, err)
	rec := serve(recv, delivery{event: "issue_comment", id: "gh-create-guid", body: editWebhook(t, "created", id, "looks good", created)}.request([]byte("s3cret")))
	require.Equal(t, 202, rec.Code)
	at := w.gh.edit(id, "looks good, one nit")
	w.cycle(t)
	w.cycle(t)
	require.Equal(t, []string{
		"issue_comment/created/gh-create-guid",
		"issue_comment/edited/poll-comment-" + id + "@" + at,
	}, deliveries(w.sink.all()[1:]))
}

// TestPollerEditRules: edits follow the router's rules (unauthorized and
// self-marked never forwarded), a ledger without versions is baselined
// without an event, and an edit the Sink did not keep is offered again.
func TestPollerEditRules(t *testing.T) {
	t.Run("unauthorized and self-marked edits", func(t *testing.T) {
		w := newPollWorld(t)
		w.gh.open("alice", autoLabel) // #15
		w.cycle(t)
		m := w.gh.comment(15, "mallory", "hi")
		a := w.gh.comment(15, "alice", "hi")
		w.cycle(t)
		require.Len(t, w.sink.all(), 2)
		w.gh.edit(m, "the-loop start")
		w.gh.edit(a, "status\n\n<!-- the-loop:agent-comment -->\n")
		w.cycle(t)
		w.cycle(t)
		require.Len(t, w.sink.all(), 2, deliveries(w.sink.all()))
	})
	t.Run("a ledger without versions is baselined", func(t *testing.T) {
		w := newPollWorld(t)
		w.gh.open("alice", autoLabel) // #15
		w.cycle(t)
		id := w.gh.comment(15, "alice", "hi")
		w.cycle(t)
		ref := mustRef(t, "github:octo/repo#15")
		l, err := w.store.PollLedger(ref)
		require.NoError(t, err)
		l.CommentVersions = nil // as written before versions were kept
		require.NoError(t, w.store.SavePollLedger(ref, l))
		w.gh.edit(id, "hi there")
		w.cycle(t)
		require.Len(t, w.sink.all(), 2, "no version to compare with: baselined, not offered")
		at := w.gh.edit(id, "hi there again")
		w.cycle(t)
		evs := w.sink.all()
		require.Len(t, evs, 3)
		require.Equal(t, "poll-comment-"+id+"@"+at, evs[2].DeliveryID)
	})
	t.Run("an edit the sink refused is offered again", func(t *testing.T) {
		w := newPollWorld(t)
		w.gh.open("alice", autoLabel) // #15
		w.cycle(t)
		id := w.gh.comment(15, "alice", "hi")
		w.cycle(t)
		at := w.gh.edit(id, "hi there")
		w.sink.setDown(true)
		st := w.cycle(t)
		require.Equal(t, 1, st.Failures)
		w.sink.setDown(false)
		w.cycle(t)
		w.cycle(t)
		evs := w.sink.all()
		require.Len(t, evs, 3)
		require.Equal(t, "poll-comment-"+id+"@"+at, evs[2].DeliveryID)
	})
}

// TestPollerCreationFirstSeenEdited: a comment created and edited between
// two passes is offered once, as its creation with the current body; the
// edit's late webhook has no second effect, and later passes are quiet.
func TestPollerCreationFirstSeenEdited(t *testing.T) {
	w := newPollWorld(t)
	w.gh.open("alice", autoLabel) // #15
	w.cycle(t)
	id := w.gh.comment(15, "alice", "draft")
	at := w.gh.edit(id, "final words")
	w.cycle(t)
	evs := w.sink.all()
	require.Equal(t, []string{"issue_comment/created/poll-comment-" + id}, deliveries(evs[1:]))
	require.Equal(t, "final words", evs[1].Comments[0].Body)
	recv, err := NewReceiver(testConfig(), ReceiverDeps{Sink: w.sink, Router: w.poller.d.Router})
	require.NoError(t, err)
	rec := serve(recv, delivery{event: "issue_comment", id: "gh-late-edit", body: editWebhook(t, "edited", id, "final words", at)}.request([]byte("s3cret")))
	require.Equal(t, 202, rec.Code)
	w.cycle(t)
	require.Len(t, w.sink.all(), 2, deliveries(w.sink.all()))
}
