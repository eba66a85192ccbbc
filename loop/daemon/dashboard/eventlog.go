package dashboard

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/loop"
)

// The Events page (/log): the event log queried by work item, kind and
// time — the same stream the item page's timeline and the metrics read
// (Source.Events; the daemon's is its own event log, docs/decisions.md
// §24), newest first, each row with its raw record one click away. It
// reads and changes nothing else.

// EventQuery is the Events page's question of the event log.
type EventQuery struct {
	// Item is a work item's ref ("github:o/r#7") or a bare id ("7",
	// "#7", "issue-7": any ref numbered 7); "" for every item.
	Item string
	// Kind is an event name ("graph.blocked"), or a family of them when it
	// ends in "." or "*" ("graph.", "session.*"); "" for every kind.
	Kind string
	// Since keeps events at or after it, Until events before it (zero: no
	// bound).
	Since, Until time.Time
	// Limit keeps the newest Limit matching events (at least 1).
	Limit int
	// Skip, with Until, is the older page's cursor: Until is then inclusive
	// of its instant, and the Skip newest events at exactly Until are left
	// out (the newer pages showed them). Events logged in the same instant
	// (the log's times are often equal to the microsecond) straddle a page
	// boundary without one being lost or shown twice.
	Skip int
}

// EventSearcher is a Source that answers an EventQuery itself, filtering
// as it reads its log (the daemon's, over loop.EventQuery). A Source
// without it is asked for Events and filtered here.
type EventSearcher interface {
	SearchEvents(ctx context.Context, q EventQuery) ([]Event, error)
}

// Bounds of the page's query.
const (
	defaultEventRows = 200
	maxEventRows     = 2000
	maxQueryParam    = 256
)

// eventFamilies are the kinds offered as families in the kind field's
// suggestions, besides the names on the page.
var eventFamilies = []string{"graph.*", "session.*", "dispatch.*", "control.*", "reconcile.*", "daemon.*", "routing.*", "outbox.*", "workspace.*", "notify.*"}

// eventForm is the query as the form shows it back (the text as typed).
type eventForm struct {
	Item, Kind, Since, Until, Limit string
}

// parseEventQuery reads the page's query parameters (item, kind, since,
// until, limit) at now. Every parameter is outside input: each problem is
// one sentence naming the parameter and what to write instead, and the
// query returned is still usable (a bad value is left out).
func parseEventQuery(q url.Values, now time.Time) (EventQuery, eventForm, []string) {
	form := eventForm{Item: clip(strings.TrimSpace(q.Get("item")), maxQueryParam), Kind: clip(strings.TrimSpace(q.Get("kind")), maxQueryParam),
		Since: clip(strings.TrimSpace(q.Get("since")), maxQueryParam), Until: clip(strings.TrimSpace(q.Get("until")), maxQueryParam),
		Limit: clip(strings.TrimSpace(q.Get("limit")), maxQueryParam)}
	out := EventQuery{Limit: defaultEventRows}
	var problems []string
	if form.Item != "" {
		if printable(form.Item) {
			out.Item = form.Item
		} else {
			problems = append(problems, "item: write a work item's ref (github:owner/repo#7) or its number (7); control characters are not allowed")
		}
	}
	if form.Kind != "" {
		if validKind(form.Kind) {
			out.Kind = form.Kind
		} else {
			problems = append(problems, fmt.Sprintf("kind %q: write an event name (graph.blocked) or a family ending in . or * (graph.*); letters, digits, . _ - only", form.Kind))
		}
	}
	at := func(name, v string) time.Time {
		if v == "" {
			return time.Time{}
		}
		t, err := loop.ParseSince(v, now)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s %q: write a time ago (90m, 2h, 3d), a date (2026-11-01) or an RFC 3339 time", name, v))
			return time.Time{}
		}
		return t
	}
	out.Since, out.Until = at("since", form.Since), at("until", form.Until)
	if !out.Since.IsZero() && !out.Until.IsZero() && !out.Since.Before(out.Until) {
		problems = append(problems, "since is not before until: nothing can match; swap them or widen the window")
	}
	if v := strings.TrimSpace(q.Get("skip")); v != "" {
		n, err := strconv.Atoi(clip(v, maxQueryParam))
		switch {
		case err != nil || n < 0 || n > maxEventRows*maxEventRows:
			problems = append(problems, fmt.Sprintf("skip %q: the older-page link's count of events already shown at until; follow the link again from the newer page", clip(v, 32)))
		case out.Until.IsZero():
			problems = append(problems, "skip: it counts events at until; give until too (the older-page link does)")
		default:
			out.Skip = n
		}
	}
	if form.Limit != "" {
		n, err := strconv.Atoi(form.Limit)
		switch {
		case err != nil || n < 1:
			problems = append(problems, fmt.Sprintf("limit %q: write a whole number from 1 to %d", form.Limit, maxEventRows))
		case n > maxEventRows:
			problems = append(problems, fmt.Sprintf("limit %d: at most %d rows are shown; narrow the query by item, kind or time", n, maxEventRows))
			out.Limit = maxEventRows
		default:
			out.Limit = n
		}
	}
	return out, form, problems
}

// validKind: an event name or family — the characters event names use.
func validKind(s string) bool {
	body := strings.TrimSuffix(s, "*")
	if body == "" {
		return false
	}
	for _, r := range body {
		if !(r == '.' || r == '_' || r == '-' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

func printable(s string) bool {
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}

// matches is the fallback filter for a Source without SearchEvents:
// loop.EventQuery's own, so that both read item and kind alike.
func (q EventQuery) matches(e Event) bool {
	rec := loop.EventRecord{Time: e.Time, Event: e.Name}
	if e.WorkItem != "" {
		rec.Fields = []graph.Field{{Key: "work_item", Value: e.WorkItem}}
	}
	return loop.EventQuery{WorkItem: q.Item, Event: q.Kind, Since: q.Since, Until: q.Until}.Match(rec)
}

// searchEvents asks the Source for q's events, oldest first.
func (d *Dashboard) searchEvents(ctx context.Context, q EventQuery) ([]Event, error) {
	if s, ok := d.deps.Source.(EventSearcher); ok {
		return s.SearchEvents(ctx, q)
	}
	ref := ""
	if strings.Contains(q.Item, ":") {
		ref = q.Item
	}
	all, err := d.deps.Source.Events(ctx, ref, q.Since, 0)
	if err != nil {
		return nil, err
	}
	var out []Event
	for _, e := range all {
		if q.matches(e) {
			out = append(out, e)
		}
	}
	if len(out) > q.Limit {
		out = out[len(out)-q.Limit:]
	}
	return out, nil
}

// pageEvents is the page's events, oldest first: q's newest Limit, or,
// with a Skip cursor, the newest Limit at or before Until less the Skip
// newest at exactly Until.
func (d *Dashboard) pageEvents(ctx context.Context, q EventQuery) ([]Event, error) {
	if q.Skip == 0 {
		return d.searchEvents(ctx, q)
	}
	bound := q.Until
	wide := q
	wide.Until, wide.Limit, wide.Skip = bound.Add(time.Nanosecond), q.Limit+q.Skip, 0
	evs, err := d.searchEvents(ctx, wide)
	if err != nil {
		return nil, err
	}
	for i, drop := len(evs)-1, q.Skip; i >= 0 && drop > 0; i-- {
		if evs[i].Time.Equal(bound) {
			evs = append(evs[:i], evs[i+1:]...)
			drop--
		}
	}
	if len(evs) > q.Limit {
		evs = evs[len(evs)-q.Limit:]
	}
	return evs, nil
}

// eventRow is one event on the page.
type eventRow struct {
	At, Name, Item, ItemPage, Kind, Text, Raw string
}

type eventsPage struct {
	Title    string
	Form     eventForm
	Problems []string
	Rows     []eventRow
	// Full: the page holds Limit rows, older ones may match.
	Full  bool
	Limit int
	Kinds []string
	Error string
	// Older is the link to the next (older) page of the same query.
	Older string
}

// eventLog renders the Events page.
func (d *Dashboard) eventLog(w http.ResponseWriter, r *http.Request, _ *session) {
	q, form, problems := parseEventQuery(r.URL.Query(), d.deps.Now())
	p := eventsPage{Title: "Events", Form: form, Problems: problems, Limit: q.Limit}
	evs, err := d.pageEvents(r.Context(), q)
	if err != nil {
		w.WriteHeader(http.StatusInternalServerError)
		p.Error = "reading the event log failed: " + err.Error()
	}
	kinds := map[string]bool{}
	p.Rows = make([]eventRow, 0, len(evs))
	for i := len(evs) - 1; i >= 0; i-- {
		e := evs[i]
		kinds[e.Name] = true
		desc := describe(e, timelineInput{})
		row := eventRow{At: e.Time.UTC().Format("2006-01-02 15:04:05"), Name: e.Name, Item: e.WorkItem, Kind: desc.Kind, Text: desc.Text, Raw: desc.Raw}
		if e.WorkItem != "" {
			row.ItemPage = "/item?ref=" + url.QueryEscape(e.WorkItem)
		}
		p.Rows = append(p.Rows, row)
	}
	p.Full = len(evs) >= q.Limit
	if p.Full && len(evs) > 0 {
		// The next page ends at this one's oldest instant, less the events
		// at that instant shown here (and on the pages before, when this
		// page began at the same instant).
		oldest, shown := evs[0].Time, 0
		for _, e := range evs {
			if e.Time.Equal(oldest) {
				shown++
			}
		}
		if q.Skip > 0 && oldest.Equal(q.Until) {
			shown += q.Skip
		}
		older := r.URL.Query()
		older.Set("until", oldest.UTC().Format(time.RFC3339Nano))
		older.Set("skip", strconv.Itoa(shown))
		p.Older = "/log?" + older.Encode()
	}
	for k := range kinds {
		p.Kinds = append(p.Kinds, k)
	}
	sort.Strings(p.Kinds)
	p.Kinds = append(p.Kinds, eventFamilies...)
	d.render(w, "events.html", p)
}
