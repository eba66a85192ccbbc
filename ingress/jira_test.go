package ingress

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/integrations"
	"github.com/theloop-dev/theloop/integrations/jirasim"
	"github.com/theloop-dev/theloop/workitem"
)

const (
	jiraSecret = "jira-s3cret"
	jiraDana   = "557058:dana"  // an authorized Cloud accountId
	jiraMal    = "557058:mallo" // not authorized
)

func jiraProjects(t testing.TB) *workitem.JiraProjects {
	t.Helper()
	p, err := workitem.NewJiraProjects(map[string]string{"PROJ": "octo/repo"})
	require.NoError(t, err)
	return p
}

func jiraTestConfig() Config {
	c := testConfig()
	c.AuthorizedUsers = append(c.AuthorizedUsers, JiraActorPrefix+jiraDana)
	return c
}

// jiraWorld is a GitHub receiver with the Jira endpoint beside it.
type jiraWorld struct {
	recv *Receiver
	jira *JiraReceiver
	sink *memSink
	log  *logSink
}

func newJiraWorld(t testing.TB) *jiraWorld {
	t.Helper()
	w := &jiraWorld{sink: newMemSink(), log: &logSink{}}
	recv, err := NewReceiver(jiraTestConfig(), ReceiverDeps{Sink: w.sink, Log: w.log})
	require.NoError(t, err)
	w.recv = recv
	w.jira, err = NewJiraReceiver(JiraConfig{Secret: []byte(jiraSecret), Projects: jiraProjects(t)}, func() *Receiver { return recv })
	require.NoError(t, err)
	return w
}

func jiraComment(event, key, id, author, editor, body string) []byte {
	at := time.Now().UTC()
	c := jirasim.Comment{ID: id, Author: author, Body: body, Created: at, Updated: at}
	b := jirasim.CommentEvent("https://acme.atlassian.net", event, key, c, at)
	if editor != author {
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		m["comment"].(map[string]any)["updateAuthor"] = map[string]any{"accountId": editor}
		b, _ = json.Marshal(m)
	}
	return b
}

func (w *jiraWorld) post(t testing.TB, id, sig string, body []byte) int {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, DefaultJiraPath, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if id != "" {
		req.Header.Set("X-Atlassian-Webhook-Identifier", id)
	}
	if sig != "" {
		req.Header.Set("X-Hub-Signature", sig)
	}
	rec := httptest.NewRecorder()
	w.jira.ServeHTTP(rec, req)
	return rec.Code
}

func TestJiraWebhookIsAuthenticatedAsAtlassianSignsIt(t *testing.T) {
	w := newJiraWorld(t)
	body := jiraComment("comment_created", "PROJ-7", "10001", jiraDana, jiraDana, "Approved")

	// Unsigned, forged (another secret), a GitHub-style header, a
	// signature of another body: 401, nothing kept.
	assert.Equal(t, http.StatusUnauthorized, w.post(t, "d-1", "", body))
	assert.Equal(t, http.StatusUnauthorized, w.post(t, "d-1", jirasim.Sign("guess", body), body))
	assert.Equal(t, http.StatusUnauthorized, w.post(t, "d-1", strings.ToUpper(jirasim.Sign(jiraSecret, body)), body))
	assert.Equal(t, http.StatusUnauthorized, w.post(t, "d-1", jirasim.Sign(jiraSecret, append([]byte(" "), body...)), body))
	assert.Equal(t, http.StatusBadRequest, w.post(t, "", jirasim.Sign(jiraSecret, body), body), "no X-Atlassian-Webhook-Identifier")
	require.Empty(t, w.sink.all())
	assert.Equal(t, int64(4), w.recv.Stats().Rejected["invalid-signature"])

	// Signed as Jira signs: 202, one event shaped like a GitHub comment's.
	require.Equal(t, http.StatusAccepted, w.post(t, "d-1", jirasim.Sign(jiraSecret, body), body))
	evs := w.sink.all()
	require.Len(t, evs, 1)
	ev := evs[0]
	assert.Equal(t, JiraCommentEvent, ev.Event)
	assert.Equal(t, "created", ev.Action)
	assert.Equal(t, "jira-d-1", ev.DeliveryID)
	assert.Equal(t, "octo/repo", ev.Repo)
	assert.Equal(t, "jira:octo/repo#7", ev.WorkItems[0].String())
	assert.Equal(t, "jira:"+jiraDana, ev.Actor)
	require.Len(t, ev.Comments, 1)
	assert.Equal(t, Comment{ID: "10001", Author: "jira:" + jiraDana, Body: "Approved", URL: "https://acme.atlassian.net/rest/api/2/issue/PROJ-7/comment/10001",
		UpdatedAt: ev.Comments[0].UpdatedAt, Item: "jira:octo/repo#7"}, ev.Comments[0])
	assert.Equal(t, SourceWebhook, ev.Source)

	// Jira's retry of the same delivery, and the same comment under another
	// delivery id: acknowledged, not kept again.
	require.Equal(t, http.StatusAccepted, w.post(t, "d-1", jirasim.Sign(jiraSecret, body), body))
	require.Equal(t, http.StatusAccepted, w.post(t, "d-2", jirasim.Sign(jiraSecret, body), body))
	require.Len(t, w.sink.all(), 1)

	// A body over the cap is refused before its end is read.
	big := append(append([]byte(`{"x":"`), bytes.Repeat([]byte("a"), int(DefaultMaxBodyBytes))...), '"', '}')
	assert.Equal(t, http.StatusRequestEntityTooLarge, w.post(t, "d-3", jirasim.Sign(jiraSecret, big), big))

	// Not the endpoint's: another path, a query, another method.
	rec := httptest.NewRecorder()
	w.jira.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, DefaultJiraPath, nil))
	assert.Equal(t, http.StatusMethodNotAllowed, rec.Code)
	rec = httptest.NewRecorder()
	w.jira.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, DefaultJiraPath+"?x=1", bytes.NewReader(body)))
	assert.Equal(t, http.StatusNotFound, rec.Code)

	// The sink down: 503 with Retry-After, so Jira retries.
	w.sink.setDown(true)
	other := jiraComment("comment_created", "PROJ-7", "10002", jiraDana, jiraDana, "later")
	rec = httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, DefaultJiraPath, bytes.NewReader(other))
	req.Header.Set("X-Atlassian-Webhook-Identifier", "d-4")
	req.Header.Set("X-Hub-Signature", jirasim.Sign(jiraSecret, other))
	w.jira.ServeHTTP(rec, req)
	assert.Equal(t, http.StatusServiceUnavailable, rec.Code)
	assert.NotEmpty(t, rec.Header().Get("Retry-After"))
}

func TestJiraRoutingIsGitHubsRouting(t *testing.T) {
	w := newJiraWorld(t)
	router := w.recv.Router()
	route := func(delivery string, body []byte) (*Event, DropReason) {
		ev, drop, err := RouteJira(router, jiraProjects(t), delivery, body)
		require.NoError(t, err)
		return ev, drop
	}
	for _, tc := range []struct {
		name string
		body []byte
		drop DropReason
	}{
		{"a stranger", jiraComment("comment_created", "PROJ-1", "1", jiraMal, jiraMal, "Approved"), DropUnauthorized},
		{"loopd's own comment", jiraComment("comment_created", "PROJ-1", "2", jiraDana, jiraDana, "done <!-- the-loop:agent-comment -->"), DropSelfAuthored},
		{"another's edit of dana's comment", jiraComment("comment_updated", "PROJ-1", "3", jiraDana, jiraMal, "Approved"), DropSenderNotAuthor},
		{"a project not served", jiraComment("comment_created", "OTHER-1", "4", jiraDana, jiraDana, "Approved"), DropRepositoryUnbound},
		{"not a key", jiraComment("comment_created", "proj-x", "5", jiraDana, jiraDana, "Approved"), DropNoWorkItem},
		{"an issue event", []byte(`{"webhookEvent":"jira:issue_updated","issue":{"key":"PROJ-1"}}`), DropDisabledEvent},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev, drop := route("r-"+tc.name, tc.body)
			assert.Nil(t, ev)
			assert.Equal(t, tc.drop, drop)
		})
	}
	// A GitHub login of the same spelling is not the Jira account.
	ev, drop := route("r-alice", jiraComment("comment_created", "PROJ-1", "6", "alice", "alice", "Approved"))
	assert.Nil(t, ev)
	assert.Equal(t, DropUnauthorized, drop, "routing.authorizedUsers' alice is a GitHub login")

	// A control keyword of a created comment is parsed with the router's
	// vocabulary; an edit's never is.
	ev, drop = route("r-start", jiraComment("comment_created", "PROJ-2", "7", jiraDana, jiraDana, "the-loop start"))
	require.Empty(t, drop)
	require.NotNil(t, ev.Control)
	assert.Equal(t, CmdStart, ev.Control.Command)
	assert.Equal(t, "jira:"+jiraDana, ev.Control.Actor)
	ev, drop = route("r-start-edit", jiraComment("comment_updated", "PROJ-2", "7", jiraDana, jiraDana, "the-loop stop"))
	require.Empty(t, drop)
	assert.Nil(t, ev.Control)

	_, _, err := RouteJira(router, jiraProjects(t), "r-bad", []byte(`["not an object"]`))
	require.ErrorIs(t, err, ErrInvalidPayload)
}

func TestJiraReceiverRefusesWhatCannotBeSafe(t *testing.T) {
	recv, err := NewReceiver(jiraTestConfig(), ReceiverDeps{Sink: newMemSink()})
	require.NoError(t, err)
	cur := func() *Receiver { return recv }
	_, err = NewJiraReceiver(JiraConfig{Projects: jiraProjects(t)}, cur)
	require.ErrorIs(t, err, ErrInvalidConfig, "no secret")
	_, err = NewJiraReceiver(JiraConfig{Secret: []byte("x"), Projects: jiraProjects(t), Path: DefaultPath}, cur)
	require.ErrorContains(t, err, "GitHub receiver's path")
	_, err = NewJiraReceiver(JiraConfig{Secret: []byte("x")}, cur)
	require.ErrorContains(t, err, "projects is empty")
}

// TestJiraPollFindsWhatTheWebhookMissed: the poll against jirasim's JQL
// search and comment list, with loopd's own integrations: a first pass
// records the cursor and offers nothing; a comment made after it is
// offered once, as its webhook would have been (same content key); a pass
// that cannot keep a comment keeps the cursor, so the next pass offers it
// again.
func TestJiraPollFindsWhatTheWebhookMissed(t *testing.T) {
	clock := &jiraClock{t: time.Now().UTC()} // one clock for Jira and loopd
	js := jirasim.Start(jirasim.Config{Email: "bot@example.com", Token: "tok", Now: clock.Now})
	t.Cleanup(js.Close)
	js.AddIssue("PROJ-1")
	js.AddIssue("OTHER-1")
	set, err := integrations.New(integrations.Config{Jira: &integrations.JiraConfig{API: integrations.JiraAPIConfig{BaseURL: js.URL()}}},
		integrations.Deps{Env: func(k string) (string, bool) {
			v, ok := map[string]string{integrations.DefaultJiraEmailEnv: "bot@example.com", integrations.DefaultJiraTokenEnv: "tok"}[k]
			return v, ok
		}})
	require.NoError(t, err)
	sink := newMemSink()
	router, err := NewRouter(jiraTestConfig(), RouterDeps{Clock: clock})
	require.NoError(t, err)
	root := t.TempDir()
	p, err := NewJiraPoller(JiraPollConfig{Projects: jiraProjects(t), StateRoot: root},
		JiraPollDeps{Jira: set, Router: func() *Router { return router }, Sink: sink})
	require.NoError(t, err)
	ctx := context.Background()

	js.AddComment("PROJ-1", jiraDana, "before loopd ever watched")
	st, err := p.Poll(ctx)
	require.NoError(t, err)
	assert.Zero(t, st.Offered, "the first pass records the cursor only")
	_, err = os.Stat(filepath.Join(root, "jira-poll.json"))
	require.NoError(t, err)

	clock.add(10 * time.Minute)
	id := js.AddComment("PROJ-1", jiraDana, "Approved")
	js.AddComment("PROJ-1", jiraMal, "Approved")   // not authorized: dropped
	js.AddComment("OTHER-1", jiraDana, "Approved") // not served
	clock.add(time.Minute)
	sink.setDown(true)
	_, err = p.Poll(ctx)
	require.Error(t, err, "a comment not kept fails the pass")
	sink.setDown(false)
	clock.add(time.Minute)
	st, err = p.Poll(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, st.Kept)
	evs := sink.all()
	require.Len(t, evs, 1)
	ev := evs[0]
	assert.Equal(t, SourcePoll, ev.Source)
	assert.Equal(t, "jira-poll-PROJ-1-"+id, ev.DeliveryID)
	assert.Equal(t, "jira:"+jiraDana, ev.Actor)
	assert.Equal(t, id, ev.Comments[0].ID)
	webhook := &Event{Event: JiraCommentEvent, Action: "created", Repo: "octo/repo", Comments: []Comment{{ID: id}}}
	assert.Equal(t, webhook.ContentKey(), ev.ContentKey(), "one content identity whichever path brings it")

	clock.add(time.Minute)
	st, err = p.Poll(ctx)
	require.NoError(t, err)
	assert.Zero(t, st.Kept, "a comment is offered once")
	found := false
	for _, r := range js.Requests() {
		if r.Path == "/rest/api/2/search/jql" {
			found = true
		}
	}
	assert.True(t, found, "the poll searched with JQL")
}

type jiraClock struct{ t time.Time }

func (c *jiraClock) Now() time.Time      { return c.t }
func (c *jiraClock) add(d time.Duration) { c.t = c.t.Add(d) }

var _ graph.Clock = (*jiraClock)(nil)

// FuzzJiraWebhook: whatever an authenticated sender posts, RouteJira
// never panics, yields exactly one of an event, a drop or an error, and an
// event only for an authorized, non-self Jira account on a served
// project's item whose ref round-trips.
func FuzzJiraWebhook(f *testing.F) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, ev := range []string{"comment_created", "comment_updated", "comment_deleted", "jira:issue_updated"} {
		for _, body := range []string{"Approved", "the-loop start", "the-loop stop\nthe-loop start", "<!-- the-loop:agent-comment -->"} {
			f.Add(jirasim.CommentEvent("https://x.atlassian.net", ev, "PROJ-12", jirasim.Comment{ID: "100", Author: jiraDana, Body: body, Created: at, Updated: at}, at))
		}
	}
	for _, s := range []string{`{}`, `[]`, `null`, ` {"webhookEvent":"comment_created","comment":{"id":12},"issue":{"key":"PROJ-1"}}`,
		`{"webhookEvent":"comment_created","comment":{"id":"1","body":{"type":"doc"},"author":{"accountId":"557058:dana"}},"issue":{"key":"PROJ-0"}}`,
		`{"webhookEvent":"comment_created","comment":{"id":"1","body":"x","author":{"accountId":"557058:dana\n"}},"issue":{"key":"PROJ-99999999999"}}`} {
		f.Add([]byte(s))
	}
	cfg := jiraTestConfig()
	router, err := NewRouter(cfg, RouterDeps{Dedup: NewDeduper(16, 0, nil)})
	if err != nil {
		f.Fatal(err)
	}
	projects := jiraProjects(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		ev, drop, err := RouteJira(router, projects, "jira-fuzz", body)
		set := 0
		for _, b := range []bool{ev != nil, drop != "", err != nil} {
			if b {
				set++
			}
		}
		if set != 1 {
			t.Fatalf("exactly one of event, drop (%q) and error (%v) must be set", drop, err)
		}
		if ev == nil {
			return
		}
		if len(ev.WorkItems) != 1 || ev.WorkItems[0].Provider != workitem.JiraProvider {
			t.Fatalf("work items %v", ev.WorkItems)
		}
		back, err := workitem.Parse(ev.WorkItems[0].String())
		if err != nil || back != ev.WorkItems[0] {
			t.Fatalf("ref %#v does not round-trip: %v", ev.WorkItems[0], err)
		}
		if _, ok := projects.Key(ev.WorkItems[0]); !ok {
			t.Fatal("an item of no served project")
		}
		if !strings.HasPrefix(ev.Actor, JiraActorPrefix) || !router.Authorized(ev.Actor) {
			t.Fatalf("actor %q routed", ev.Actor)
		}
		if len(ev.Comments) != 1 || SelfAuthored(ev.Comments[0].Body) || ev.Comments[0].Author != ev.Actor {
			t.Fatalf("comments %+v", ev.Comments)
		}
		if ev.Control != nil && (ev.Action != "created" || !ev.Control.Ambiguous && !ev.Control.Command.Valid()) {
			t.Fatalf("control %+v on %s", ev.Control, ev.Action)
		}
		if _, err := json.Marshal(ev); err != nil {
			t.Fatalf("the Event does not encode: %v", err)
		}
	})
}
