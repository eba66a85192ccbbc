package dashboard

import (
	"fmt"
	"html/template"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"sort"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/loop/api/login"
)

func TestParseEventQuery(t *testing.T) {
	for _, tc := range []struct {
		name     string
		q        string
		want     EventQuery
		problems []string
	}{
		{name: "empty", q: "", want: EventQuery{Limit: defaultEventRows}},
		{name: "all", q: "item=github:o/r%237&kind=graph.*&since=2h&until=2026-11-30T11:30:00Z&limit=5",
			want: EventQuery{Item: "github:o/r#7", Kind: "graph.*", Since: t0.Add(-2 * time.Hour), Until: t0.Add(-30 * time.Minute), Limit: 5}},
		{name: "bare id and family", q: "item=7&kind=session.", want: EventQuery{Item: "7", Kind: "session.", Limit: defaultEventRows}},
		{name: "bad kind", q: "kind=graph%20blocked", want: EventQuery{Limit: defaultEventRows}, problems: []string{`kind "graph blocked"`}},
		{name: "star alone", q: "kind=*", want: EventQuery{Limit: defaultEventRows}, problems: []string{`kind "*"`}},
		{name: "bad since", q: "since=yesterday", want: EventQuery{Limit: defaultEventRows}, problems: []string{`since "yesterday": write a time ago`}},
		{name: "bad until", q: "until=soon", want: EventQuery{Limit: defaultEventRows}, problems: []string{`until "soon"`}},
		{name: "window upside down", q: "since=1h&until=2h", want: EventQuery{Since: t0.Add(-time.Hour), Until: t0.Add(-2 * time.Hour), Limit: defaultEventRows}, problems: []string{"since is not before until"}},
		{name: "limit zero", q: "limit=0", want: EventQuery{Limit: defaultEventRows}, problems: []string{`limit "0"`}},
		{name: "limit too big", q: "limit=99999", want: EventQuery{Limit: maxEventRows}, problems: []string{"at most 2000 rows"}},
		{name: "limit not a number", q: "limit=ten", want: EventQuery{Limit: defaultEventRows}, problems: []string{`limit "ten"`}},
		{name: "control character in item", q: "item=a%00b", want: EventQuery{Limit: defaultEventRows}, problems: []string{"item: write"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := url.ParseQuery(tc.q)
			require.NoError(t, err)
			got, _, problems := parseEventQuery(v, t0)
			require.Equal(t, tc.want, got)
			require.Len(t, problems, len(tc.problems), "%q", problems)
			for i, p := range tc.problems {
				require.Contains(t, problems[i], p)
			}
		})
	}
}

// FuzzParseEventQuery: any query string parses without a panic, into a
// query whose limit is in bounds, whose kind is one the log can match,
// and whose form values are bounded.
func FuzzParseEventQuery(f *testing.F) {
	for _, s := range []string{"", "item=github:o/r%237&kind=graph.*&since=2h&until=2026-11-30&limit=5", "kind=*", "since=-5m", "limit=-1",
		"until=2026-11-30T11:30:00.123456789Z", "item=%ff%fe&kind=%00", "since=9999999999999h", "limit=" + strings.Repeat("9", 40), "kind=graph..&item=#7"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		v, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		q, form, problems := parseEventQuery(v, t0)
		if q.Limit < 1 || q.Limit > maxEventRows {
			t.Fatalf("limit %d out of bounds", q.Limit)
		}
		if q.Kind != "" && !validKind(q.Kind) {
			t.Fatalf("kind %q accepted", q.Kind)
		}
		if q.Item != "" && !printable(q.Item) {
			t.Fatalf("item %q accepted", q.Item)
		}
		for _, s := range []string{form.Item, form.Kind, form.Since, form.Until, form.Limit} {
			if utf8.RuneCountInString(s) > maxQueryParam+1 {
				t.Fatalf("form value of %d runes kept", utf8.RuneCountInString(s))
			}
		}
		for _, p := range problems {
			if p == "" {
				t.Fatal("an empty problem")
			}
		}
	})
}

func TestEventsPage(t *testing.T) {
	h := newHarness(t, "dana", []string{"dana"})
	h.src.events = append(h.src.events,
		Event{Time: t0.Add(-80 * time.Minute), Name: "session.spawned", WorkItem: "github:o/r#8", Fields: map[string]any{"harness": "claude", "tmux_target": hostileTitle}},
		Event{Time: t0.Add(-70 * time.Minute), Name: "graph.blocked", WorkItem: "github:o/r#8", Fields: map[string]any{"node": "design", "hook": "validate-artifacts", "message": hostileFinding}},
		Event{Time: t0.Add(-60 * time.Minute), Name: "daemon.started"},
	)
	sort.SliceStable(h.src.events, func(i, j int) bool { return h.src.events[i].Time.Before(h.src.events[j].Time) }) // the log's order
	c := h.client(t)
	page := func(q string) string {
		t.Helper()
		code, body, _ := get(t, c, h.srv.URL+"/log?"+q)
		require.Equal(t, http.StatusOK, code, body)
		return body
	}
	events := func(body string) []string {
		var out []string
		for _, m := range strings.Split(body, `<tr class="kind-`)[1:] {
			_, rest, _ := strings.Cut(m, `data-event="`)
			name, rest, _ := strings.Cut(rest, `"`)
			_, rest, _ = strings.Cut(rest, `data-item="`)
			item, _, _ := strings.Cut(rest, `"`)
			out = append(out, name+"@"+item)
		}
		return out
	}

	all := page("")
	require.Contains(t, all, `<a href="/log">Events</a>`, "the navigation links the page")
	require.Equal(t, []string{"daemon.started@", "graph.advanced@github:o/r#7", "graph.blocked@github:o/r#8", "session.spawned@github:o/r#8", "graph.blocked@github:o/r#7", "graph.advanced@github:o/r#7", "graph.started@github:o/r#7"}, events(all), "newest first, every item")
	require.NotContains(t, all, "<script>alert", "event fields are escaped")
	require.Contains(t, all, template.HTMLEscapeString(hostileFinding))
	require.Contains(t, all, `<a href="/item?ref=github%3Ao%2Fr%238">github:o/r#8</a>`)

	require.Equal(t, []string{"graph.blocked@github:o/r#8", "graph.blocked@github:o/r#7"}, events(page("kind=graph.blocked")))
	require.Equal(t, []string{"graph.blocked@github:o/r#8", "session.spawned@github:o/r#8"}, events(page("item="+url.QueryEscape("github:o/r#8"))))
	require.Equal(t, []string{"graph.blocked@github:o/r#8", "session.spawned@github:o/r#8"}, events(page("item=8")), "a bare number matches the ref")
	require.Equal(t, []string{"graph.advanced@github:o/r#7", "graph.blocked@github:o/r#7", "graph.advanced@github:o/r#7", "graph.started@github:o/r#7"}, events(page("item=7&kind=graph.*")))
	require.Equal(t, []string{"graph.blocked@github:o/r#8", "session.spawned@github:o/r#8", "graph.blocked@github:o/r#7", "graph.advanced@github:o/r#7"}, events(page("since=2h30m&until="+url.QueryEscape(t0.Add(-time.Hour).Format(time.RFC3339)))))

	limited := page("limit=2")
	require.Equal(t, []string{"daemon.started@", "graph.advanced@github:o/r#7"}, events(limited))
	require.Contains(t, limited, "(the newest 2; older ones may match)")
	older := strings.ReplaceAll(between(t, limited, `id="event-older" href="`, `"`), "&amp;", "&")
	code, body, _ := get(t, c, h.srv.URL+older)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, []string{"graph.blocked@github:o/r#8", "session.spawned@github:o/r#8"}, events(body), "the older page goes on where this one stopped")

	// The item page links its own events.
	code, item, _ := get(t, c, h.srv.URL+"/item?ref="+url.QueryEscape("github:o/r#8"))
	require.Equal(t, http.StatusOK, code)
	link := strings.ReplaceAll(between(t, item, `id="item-events" href="`, `"`), "&amp;", "&")
	code, body, _ = get(t, c, h.srv.URL+link)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, []string{"graph.blocked@github:o/r#8", "session.spawned@github:o/r#8"}, events(body))

	bad := page("kind=%3Cscript%3E&limit=x")
	require.Contains(t, bad, `id="event-problems"`)
	require.Contains(t, bad, "kind &#34;&lt;script&gt;&#34;: write an event name")
	require.Contains(t, bad, `limit &#34;x&#34;`)
	require.Len(t, events(bad), 7, "a bad parameter is left out, the rest still answers")
	require.Contains(t, page("kind=nothing.here"), `id="event-none"`)
}

func TestSettingsPageRedacts(t *testing.T) {
	src, _, _ := testWorld(t)
	key := []byte("0123456789abcdef0123456789abcdef")
	rows := []Setting{
		{Key: "state.root", Value: "/var/lib/loopd/state", Source: "file"},
		{Key: "queue.url", Value: "nats://loopd:hunter2-secret@nats.example:4222", Source: "file"},
		{Key: "routing.workspace.cloneUrl", Value: "https://x-access-token:ghs_abcdefghijklmnopqrstuvwxyz0123@github.com/{owner}/{repo}.git", Source: "file"},
		{Key: "integrations.jira.token", Value: "plain-jira-secret-value", Source: "file"},
		{Key: "webhooks.ghWebhook.secretEnv", Value: "THE_LOOP_GH_WEBHOOK_SECRET", Source: "default"},
		{Key: "routing.budget.item.tokens", Value: "5000", Source: "file"},
		{Key: "routing.promptTemplate", Value: "hello " + "ghp_" + strings.Repeat("a", 36) + " and the known one s3cr3t-known", Source: "file"},
		{Key: "routing.authorizedUsers", Value: hostileTitle, Source: "file"},
		{Key: "integrations", Value: map[string]any{"jira": map[string]any{"site": "https://acme.atlassian.net", "apiToken": "literal-jira-token-value", "tokenEnv": "JIRA_TOKEN"}}, Source: "file"},
		{Key: "routing.tmux.harnessKillGraceSeconds", Value: 3 * time.Second, Source: "default"},
		{Key: "$THE_LOOP_GH_WEBHOOK_SECRET", Value: "(set)", Source: "env"},
	}
	d, err := New(Config{Key: key}, Deps{Source: src, Now: func() time.Time { return t0 }, Settings: func() []Setting { return rows },
		Scrub: func(s string) string { return strings.ReplaceAll(s, "s3cr3t-known", "[redacted]") }})
	require.NoError(t, err)
	srv := newServer(t, d)
	c := loggedIn(t, srv.URL, key)
	code, body, _ := get(t, c, srv.URL+"/settings")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, `<a href="/settings">Settings</a>`)
	value := func(k string) string { return between(t, body, `<tr data-key="`+k+`"`, "</tr>") }
	require.Contains(t, value("state.root"), "/var/lib/loopd/state")
	require.Contains(t, value("queue.url"), "nats://[redacted]@nats.example:4222")
	require.Contains(t, value("routing.workspace.cloneUrl"), "https://[redacted]@github.com/")
	require.Contains(t, value("integrations.jira.token"), "<td class=\"value\">[redacted]</td>")
	require.Contains(t, value("webhooks.ghWebhook.secretEnv"), "THE_LOOP_GH_WEBHOOK_SECRET", "a variable's name is no secret")
	require.Contains(t, value("routing.budget.item.tokens"), "5000", "a count of tokens is no token")
	require.Contains(t, value("routing.promptTemplate"), "hello [redacted] and the known one [redacted]")
	require.Contains(t, value("$THE_LOOP_GH_WEBHOOK_SECRET"), "(set)")
	require.Contains(t, value("integrations"), "jira=apiToken=[redacted], site=https://acme.atlassian.net, tokenEnv=JIRA_TOKEN", "a credential inside a free block, by its key")
	require.Contains(t, value("routing.tmux.harnessKillGraceSeconds"), `<td class="value">3</td>`, "durations in seconds, as loopctl config show prints them")
	for _, s := range []string{"hunter2", "ghs_abc", "plain-jira", "literal-jira", "ghp_aaa", "s3cr3t", "<script>alert"} {
		require.NotContains(t, body, s)
	}
	code, body, _ = get(t, c, srv.URL+"/settings?key=queue")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, `1 of 11 keys`)
	require.NotContains(t, body, `data-key="state.root"`)

	// Read-only: no method but GET reaches it.
	res, err := c.PostForm(srv.URL+"/settings", url.Values{"queue.url": {"nats://evil"}})
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusMethodNotAllowed, res.StatusCode)
}

func TestEventsAndSettingsNeedALogin(t *testing.T) {
	h := newHarness(t, "dana", []string{"dana"})
	anon := &http.Client{}
	for _, p := range []string{"/log", "/log?kind=graph.*", "/settings"} {
		code, body, _ := get(t, anon, h.srv.URL+p)
		require.Equal(t, http.StatusUnauthorized, code, p)
		require.NotContains(t, body, "graph.advanced")
	}
}

// between is the text of s after the first start, up to end.
// Events logged in one instant straddle a page boundary: following the
// older-page links, two at a time, shows each of them once, in order,
// whether the instant spans one boundary or several (issue 38).
func TestEventsPageOlderLinksKeepEventsOfOneInstant(t *testing.T) {
	h := newHarness(t, "dana", []string{"dana"})
	same := t0.Add(-30 * time.Minute)
	h.src.events = nil
	want := []string{}
	for i := range 7 {
		at := same
		switch {
		case i == 0:
			at = same.Add(-time.Minute) // one before the instant
		case i == 6:
			at = same.Add(time.Minute) // one after it
		}
		name := fmt.Sprintf("graph.step-%d", i)
		h.src.events = append(h.src.events, Event{Time: at, Name: name, WorkItem: "github:o/r#7"})
		want = append([]string{name}, want...)
	}
	c := h.client(t)
	var seen []string
	next := "/log?limit=2"
	for pages := 0; next != ""; pages++ {
		require.Less(t, pages, 10, "the links end")
		code, body, _ := get(t, c, h.srv.URL+next)
		require.Equal(t, http.StatusOK, code, body)
		require.NotContains(t, body, `id="event-problems"`, body)
		for _, m := range strings.Split(body, `data-event="`)[1:] {
			name, _, _ := strings.Cut(m, `"`)
			seen = append(seen, name)
		}
		next = ""
		if strings.Contains(body, `id="event-older" href="`) {
			next = strings.ReplaceAll(between(t, body, `id="event-older" href="`, `"`), "&amp;", "&")
		}
	}
	require.Equal(t, want, seen, "every event once, newest first, across the pages")

	// A skip without until is refused, naming both.
	code, body, _ := get(t, c, h.srv.URL+"/log?skip=2")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, "skip: it counts events at until; give until too")
}

func between(t *testing.T, s, start, end string) string {
	t.Helper()
	_, rest, ok := strings.Cut(s, start)
	require.True(t, ok, "%q not in the page", start)
	v, _, ok := strings.Cut(rest, end)
	require.True(t, ok, "%q not after %q", end, start)
	return v
}

func newServer(t *testing.T, d *Dashboard) *httptest.Server {
	srv := httptest.NewServer(d.Handler())
	t.Cleanup(func() { srv.Close(); _ = d.Close() })
	return srv
}

// loggedIn is a client logged in to the dashboard at base.
func loggedIn(t *testing.T, base string, key []byte) *http.Client {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Transport: browserOrigin{base}}
	res, err := c.Get(base + "/login?token=" + url.QueryEscape(login.Mint(key, t0)))
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode)
	return c
}
