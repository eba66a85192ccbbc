package ingress

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/integrations"
)

// ghFake is an httptest GitHub serving the REST and GraphQL endpoints the
// poller reaches through integrations: issues listed by label, one issue,
// its comments, a PR's reviews and inline comments, and
// closingIssuesReferences. fail, when set, may answer a request instead.
type ghFake struct {
	t   *testing.T
	srv *httptest.Server

	mu       sync.Mutex
	issues   map[int]*ghIssue // repo octo/repo
	nextID   int
	requests []string
	fail     func(r *http.Request) (status int, header map[string]string, ok bool)
}

type ghIssue struct {
	number         int
	title, author  string
	state          string
	pr, merged     bool
	labels         []string
	comments       []map[string]any
	reviews        []map[string]any
	reviewComments []map[string]any
	closes         []int
}

func newGHFake(t *testing.T) *ghFake {
	f := &ghFake{t: t, issues: map[int]*ghIssue{}, nextID: 100}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /repos/octo/repo/issues", f.list)
	mux.HandleFunc("GET /repos/octo/repo/issues/{n}", f.issue)
	mux.HandleFunc("GET /repos/octo/repo/issues/{n}/comments", func(w http.ResponseWriter, r *http.Request) {
		f.items(w, r, func(is *ghIssue) []map[string]any { return is.comments })
	})
	mux.HandleFunc("GET /repos/octo/repo/pulls/{n}/reviews", func(w http.ResponseWriter, r *http.Request) {
		f.items(w, r, func(is *ghIssue) []map[string]any { return is.reviews })
	})
	mux.HandleFunc("GET /repos/octo/repo/pulls/{n}/comments", func(w http.ResponseWriter, r *http.Request) {
		f.items(w, r, func(is *ghIssue) []map[string]any { return is.reviewComments })
	})
	mux.HandleFunc("POST /graphql", f.graphql)
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.requests = append(f.requests, r.Method+" "+r.URL.Path)
		fail := f.fail
		f.mu.Unlock()
		if fail != nil {
			if status, h, ok := fail(r); ok {
				for k, v := range h {
					w.Header().Set(k, v)
				}
				w.WriteHeader(status)
				_, _ = w.Write([]byte(`{"message":"injected"}`))
				return
			}
		}
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *ghFake) write(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func (f *ghFake) add(is *ghIssue) *ghIssue {
	f.mu.Lock()
	defer f.mu.Unlock()
	if is.state == "" {
		is.state = "open"
	}
	f.issues[is.number] = is
	return is
}

func (f *ghFake) comment(n int, author, body string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nextID++
	is := f.issues[n]
	is.comments = append(is.comments, map[string]any{
		"id": f.nextID, "user": map[string]any{"login": author}, "body": body,
		"html_url":   "https://github.com/octo/repo/issues/" + strconv.Itoa(n) + "#issuecomment-" + strconv.Itoa(f.nextID),
		"created_at": time.Unix(1_700_000_000+int64(f.nextID), 0).UTC().Format(time.RFC3339),
		"updated_at": time.Unix(1_700_000_000+int64(f.nextID), 0).UTC().Format(time.RFC3339),
	})
	return strconv.Itoa(f.nextID)
}

// edit replaces comment id's body on issue n as GitHub does: updated_at
// moves on (an hour per edit here), created_at stays. It returns the new
// updated_at.
func (f *ghFake) edit(n int, id, body string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.issues[n].comments {
		if strconv.Itoa(c["id"].(int)) != id {
			continue
		}
		at, err := time.Parse(time.RFC3339, c["updated_at"].(string))
		require.NoError(f.t, err)
		c["body"], c["updated_at"] = body, at.Add(time.Hour).UTC().Format(time.RFC3339)
		return c["updated_at"].(string)
	}
	f.t.Fatalf("no comment %s on #%d", id, n)
	return ""
}

// updatedAt is comment id's current updated_at on issue n.
func (f *ghFake) updatedAt(n int, id string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.issues[n].comments {
		if strconv.Itoa(c["id"].(int)) == id {
			return c["updated_at"].(string)
		}
	}
	return ""
}

func (f *ghFake) setFail(fn func(r *http.Request) (int, map[string]string, bool)) {
	f.mu.Lock()
	f.fail = fn
	f.mu.Unlock()
}

func (f *ghFake) list(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	label := r.URL.Query().Get("labels")
	out := []map[string]any{}
	for n := 1; n < 1000; n++ {
		is := f.issues[n]
		if is == nil || is.state != "open" {
			continue
		}
		has := false
		var labels []map[string]any
		for _, l := range is.labels {
			labels = append(labels, map[string]any{"name": l})
			has = has || l == label
		}
		if !has {
			continue
		}
		m := map[string]any{"number": n, "title": is.title, "html_url": "https://github.com/octo/repo/issues/" + strconv.Itoa(n), "labels": labels}
		if is.pr {
			m["pull_request"] = map[string]any{}
		}
		out = append(out, m)
	}
	f.write(w, out)
}

func (f *ghFake) get(r *http.Request) *ghIssue {
	n, _ := strconv.Atoi(r.PathValue("n"))
	return f.issues[n]
}

func (f *ghFake) issue(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	is := f.get(r)
	if is == nil {
		w.WriteHeader(404)
		return
	}
	m := map[string]any{"number": is.number, "title": is.title, "state": is.state, "user": map[string]any{"login": is.author},
		"html_url": "https://github.com/octo/repo/issues/" + strconv.Itoa(is.number), "labels": []any{}}
	if is.pr {
		pr := map[string]any{"merged_at": nil}
		if is.merged {
			pr["merged_at"] = "2026-01-01T00:00:00Z"
		}
		m["pull_request"] = pr
	}
	f.write(w, m)
}

func (f *ghFake) items(w http.ResponseWriter, r *http.Request, pick func(*ghIssue) []map[string]any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	is := f.get(r)
	if is == nil {
		w.WriteHeader(404)
		return
	}
	out := pick(is)
	if out == nil {
		out = []map[string]any{}
	}
	f.write(w, out)
}

func (f *ghFake) graphql(w http.ResponseWriter, r *http.Request) {
	var q struct {
		Variables struct {
			Number int `json:"number"`
		} `json:"variables"`
	}
	_ = json.NewDecoder(r.Body).Decode(&q)
	f.mu.Lock()
	defer f.mu.Unlock()
	nodes := []any{}
	if is := f.issues[q.Variables.Number]; is != nil {
		for _, c := range is.closes {
			nodes = append(nodes, map[string]any{"number": c, "repository": map[string]any{"nameWithOwner": "octo/repo"}})
		}
	}
	f.write(w, map[string]any{"data": map[string]any{"repository": map[string]any{"pullRequest": map[string]any{
		"closingIssuesReferences": map[string]any{"nodes": nodes}}}}})
}

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
	gh := newGHFake(t)
	set, err := integrations.New(integrations.Config{GitHub: &integrations.GitHubConfig{
		Transport: integrations.TransportAPI, MaxAttempts: 2, TimeoutSeconds: 5,
		API: integrations.GitHubAPIConfig{BaseURL: gh.srv.URL},
	}}, integrations.Deps{
		Env:        func(k string) (string, bool) { return map[string]string{"GH_TOKEN": "tok"}[k], k == "GH_TOKEN" },
		HTTPClient: gh.srv.Client(),
		Sleep:      func(ctx context.Context, d time.Duration) error { return ctx.Err() },
	})
	require.NoError(t, err)
	root := t.TempDir()
	// One clock for the whole world: the router's dedup window, the
	// receivers built on it and the poller all read it. It starts at the
	// real time, so no date is pinned that real time will pass.
	clock := &stepClock{t: time.Now().UTC()}
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
	w.gh.add(&ghIssue{number: 15, title: "Add X", author: "alice", labels: []string{autoLabel, "bug"}})
	w.gh.add(&ghIssue{number: 16, title: "unlabelled", author: "alice"})
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
	w.gh.add(&ghIssue{number: 3, author: "mallory", labels: []string{autoLabel}})
	w.cycle(t)
	require.Empty(t, w.sink.all())
	// An authorized user's comment on it is still processed.
	w.gh.comment(3, "alice", "the-loop start")
	w.cycle(t)
	evs := w.sink.all()
	require.Len(t, evs, 1)
	require.Equal(t, CmdStart, evs[0].Control.Command)
}

func TestPollerPullRequestThread(t *testing.T) {
	w := newPollWorld(t)
	pr := w.gh.add(&ghIssue{number: 9, author: "alice", pr: true, labels: []string{autoLabel}, closes: []int{4}})
	w.cycle(t)
	evs := w.sink.all()
	require.Len(t, evs, 1)
	require.Equal(t, "pull_request", evs[0].Event)
	require.Equal(t, []string{"github:octo/repo#4", "github:octo/repo#9"}, []string{evs[0].WorkItems[0].String(), evs[0].WorkItems[1].String()})

	w.gh.mu.Lock()
	pr.reviews = append(pr.reviews,
		map[string]any{"id": 501, "user": map[string]any{"login": "alice"}, "body": "", "state": "APPROVED", "submitted_at": "2026-01-01T00:00:01Z"},
		map[string]any{"id": 502, "user": map[string]any{"login": "alice"}, "body": "needs work", "state": "CHANGES_REQUESTED", "submitted_at": "2026-01-01T00:00:03Z"},
		map[string]any{"id": 503, "user": map[string]any{"login": "alice"}, "body": "draft", "state": "PENDING", "submitted_at": "2026-01-01T00:00:04Z"})
	pr.reviewComments = append(pr.reviewComments,
		map[string]any{"id": 601, "user": map[string]any{"login": "alice"}, "body": "nit", "path": "a.go", "line": 3, "created_at": "2026-01-01T00:00:02Z"})
	w.gh.mu.Unlock()
	w.cycle(t)
	evs = w.sink.all()
	require.Equal(t, []string{
		"pull_request/labeled/" + evs[0].DeliveryID,
		"pull_request_review_comment/created/poll-review-comment-601",
		"pull_request_review/submitted/poll-review-502",
	}, deliveries(evs))
	require.Equal(t, "CHANGES_REQUESTED", evs[2].Comments[0].State)
}

func TestPollerClosure(t *testing.T) {
	w := newPollWorld(t)
	is := w.gh.add(&ghIssue{number: 15, author: "alice", labels: []string{autoLabel}})
	w.cycle(t)
	require.Len(t, w.sink.all(), 1)

	// Removing the label alone does not close anything.
	w.gh.mu.Lock()
	is.labels = nil
	w.gh.mu.Unlock()
	w.cycle(t)
	require.Len(t, w.sink.all(), 1)

	// Closed: one close event, the ledger dropped.
	w.gh.mu.Lock()
	is.state = "closed"
	w.gh.mu.Unlock()
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
	w.gh.mu.Lock()
	is.state, is.labels = "open", []string{autoLabel}
	w.gh.mu.Unlock()
	w.cycle(t)
	evs = w.sink.all()
	require.Len(t, evs, 3)
	require.True(t, strings.HasPrefix(evs[2].DeliveryID, "poll-presence-github:octo/repo#15-"))
	require.NotEqual(t, evs[0].DeliveryID, evs[2].DeliveryID)
}

func TestPollerFailingListingLeavesItemsAlone(t *testing.T) {
	w := newPollWorld(t)
	w.gh.add(&ghIssue{number: 15, author: "alice", labels: []string{autoLabel}})
	w.cycle(t)
	w.gh.setFail(func(r *http.Request) (int, map[string]string, bool) {
		return 502, nil, r.URL.Path == "/repos/octo/repo/issues"
	})
	st := w.cycle(t)
	require.Zero(t, st.Closures)
	require.Len(t, w.sink.all(), 1)
	require.NotZero(t, w.poller.Backoff(), "a cycle in which every call failed backs off")
}

func TestPollerRateLimitBackoff(t *testing.T) {
	w := newPollWorld(t)
	w.gh.add(&ghIssue{number: 15, author: "alice", labels: []string{autoLabel}})
	reset := strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10)
	w.gh.setFail(func(r *http.Request) (int, map[string]string, bool) {
		return 403, map[string]string{"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": reset}, true
	})
	st, err := w.poller.Reconcile(context.Background())
	require.True(t, st.RateLimited)
	require.True(t, st.Interrupted)
	require.ErrorIs(t, err, errRateLimited)
	require.Equal(t, 2*time.Minute, w.poller.Backoff())
	// A caller that does not wait (the daemon's own ticker) is refused
	// without a request.
	before := len(w.gh.requests)
	w.clock.advance(time.Minute)
	_, err = w.poller.Reconcile(context.Background())
	require.ErrorIs(t, err, ErrBackingOff)
	require.Equal(t, before, len(w.gh.requests))
	w.cycle(t)
	require.Equal(t, 4*time.Minute, w.poller.Backoff())
	require.Equal(t, before+1, len(w.gh.requests), "a rate-limited cycle stops at the first refusal")
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
			w.gh.setFail(nil)
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
	w.gh.add(&ghIssue{number: 15, author: "alice", labels: []string{autoLabel}})
	w.cycle(t)
	var want []string
	n := 0
	w.gh.setFail(func(r *http.Request) (int, map[string]string, bool) {
		n++
		return 500, nil, n%3 == 0
	})
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
	w.gh.setFail(nil)
	w.cycle(t)
	var got []string
	for _, e := range w.sink.all()[1:] {
		got = append(got, e.DeliveryID)
	}
	require.Equal(t, want, got)
	require.Greater(t, n, 30)
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
	w.gh.add(&ghIssue{number: 15, author: "alice", labels: []string{autoLabel}})
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
	w.gh.add(&ghIssue{number: 15, author: "alice", labels: []string{autoLabel}})
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
	w.gh.add(&ghIssue{number: 15, author: "alice", labels: []string{autoLabel}})
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
	at := w.gh.edit(15, id, "the-loop start")
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
	at2 := w.gh.edit(15, id, "looks good, really")
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
			w.gh.add(&ghIssue{number: 15, author: "alice", labels: []string{autoLabel}})
			w.cycle(t)
			id := w.gh.comment(15, "alice", "looks good")
			w.cycle(t)
			require.Len(t, w.sink.all(), 2)
			recv, err := NewReceiver(testConfig(), ReceiverDeps{Sink: w.sink, Router: w.poller.d.Router})
			require.NoError(t, err)
			at := w.gh.edit(15, id, "looks good, one nit")
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
	w.gh.add(&ghIssue{number: 15, author: "alice", labels: []string{autoLabel}})
	w.cycle(t)
	id := w.gh.comment(15, "alice", "looks good")
	created := w.gh.updatedAt(15, id)
	recv, err := NewReceiver(testConfig(), ReceiverDeps{Sink: w.sink, Router: w.poller.d.Router})
	require.NoError(t, err)
	rec := serve(recv, delivery{event: "issue_comment", id: "gh-create-guid", body: editWebhook(t, "created", id, "looks good", created)}.request([]byte("s3cret")))
	require.Equal(t, 202, rec.Code)
	at := w.gh.edit(15, id, "looks good, one nit")
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
		w.gh.add(&ghIssue{number: 15, author: "alice", labels: []string{autoLabel}})
		w.cycle(t)
		m := w.gh.comment(15, "mallory", "hi")
		a := w.gh.comment(15, "alice", "hi")
		w.cycle(t)
		require.Len(t, w.sink.all(), 2)
		w.gh.edit(15, m, "the-loop start")
		w.gh.edit(15, a, "status\n\n<!-- the-loop:agent-comment -->\n")
		w.cycle(t)
		w.cycle(t)
		require.Len(t, w.sink.all(), 2, deliveries(w.sink.all()))
	})
	t.Run("a ledger without versions is baselined", func(t *testing.T) {
		w := newPollWorld(t)
		w.gh.add(&ghIssue{number: 15, author: "alice", labels: []string{autoLabel}})
		w.cycle(t)
		id := w.gh.comment(15, "alice", "hi")
		w.cycle(t)
		ref := mustRef(t, "github:octo/repo#15")
		l, err := w.store.PollLedger(ref)
		require.NoError(t, err)
		l.CommentVersions = nil // as written before versions were kept
		require.NoError(t, w.store.SavePollLedger(ref, l))
		w.gh.edit(15, id, "hi there")
		w.cycle(t)
		require.Len(t, w.sink.all(), 2, "no version to compare with: baselined, not offered")
		at := w.gh.edit(15, id, "hi there again")
		w.cycle(t)
		evs := w.sink.all()
		require.Len(t, evs, 3)
		require.Equal(t, "poll-comment-"+id+"@"+at, evs[2].DeliveryID)
	})
	t.Run("an edit the sink refused is offered again", func(t *testing.T) {
		w := newPollWorld(t)
		w.gh.add(&ghIssue{number: 15, author: "alice", labels: []string{autoLabel}})
		w.cycle(t)
		id := w.gh.comment(15, "alice", "hi")
		w.cycle(t)
		at := w.gh.edit(15, id, "hi there")
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
	w.gh.add(&ghIssue{number: 15, author: "alice", labels: []string{autoLabel}})
	w.cycle(t)
	id := w.gh.comment(15, "alice", "draft")
	at := w.gh.edit(15, id, "final words")
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
