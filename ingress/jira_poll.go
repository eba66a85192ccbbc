package ingress

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/internal/atomicfile"
	"github.com/theloop-dev/theloop/ops"
	"github.com/theloop-dev/theloop/workitem"
)

// The Jira poll: what the webhook missed while loopd was down. Jira Cloud
// retries a failed delivery a few times and then gives up, so at start and
// every interval loopd searches the served projects for issues updated
// since its cursor (JQL, relative to Jira's own clock: `updated >= "-Nm"`,
// so neither a skewed clock nor the Jira user's time zone shifts the
// window), lists their comments, and offers every comment created since
// the cursor as the same Event its webhook would have been — the same
// content key, so the queue's content claim (docs/decisions.md §15) gives
// one effect whichever arrives first, and a comment seen twice by the poll
// is one effect too. The cursor is written only after a pass in which
// every offered comment was kept; a pass that fails is repeated whole.
//
// A first pass without a cursor offers nothing and records the cursor:
// comments made before loopd ever watched were not missed.

// JiraPollConfig configures the Jira poll.
type JiraPollConfig struct {
	Projects *workitem.JiraProjects
	// Interval between passes (default DefaultPollInterval).
	Interval time.Duration
	// StateRoot holds jira-poll.json (the cursor).
	StateRoot string
}

// JiraPollDeps is the outside world of the poll.
type JiraPollDeps struct {
	// Jira answers jira.search-issues and jira.list-comments.
	Jira graph.Integrations
	// Router is the router in force (a reload replaces it): it routes the
	// comments (allowlist, keywords, dedup) as it routes the webhook's.
	// Sink keeps them.
	Router func() *Router
	Sink   Sink
	// Log receives poll.cycle and poll.provider_error (default: discarded).
	Log graph.Sink
}

// JiraPoller runs the poll. Run it in one goroutine; Poll is one pass.
type JiraPoller struct {
	cfg  JiraPollConfig
	deps JiraPollDeps
}

// jiraPollLookback caps a pass's window: the queue keeps content claims
// for 7 days, and an older window would reach past them.
const jiraPollLookback = 6 * 24 * time.Hour

// jiraPollMargin widens every window: JQL's dates have minute resolution.
const jiraPollMargin = 2 * time.Minute

// NewJiraPoller checks the configuration.
func NewJiraPoller(cfg JiraPollConfig, deps JiraPollDeps) (*JiraPoller, error) {
	if len(cfg.Projects.Projects()) == 0 || deps.Jira == nil || deps.Router == nil || deps.Sink == nil || cfg.StateRoot == "" {
		return nil, errors.New("ingress: NewJiraPoller needs served projects, the Jira integration, a router, a sink and a state root")
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultPollInterval
	}
	return &JiraPoller{cfg: cfg, deps: deps}, nil
}

// CursorPath is where the poll keeps its cursor.
func (p *JiraPoller) CursorPath() string { return filepath.Join(p.cfg.StateRoot, "jira-poll.json") }

type jiraCursor struct {
	// Since is when the last complete pass started.
	Since time.Time `json:"since"`
	// Floor is when the poll first ran: no comment made before is offered
	// (the margin of later windows never reaches past it).
	Floor time.Time `json:"floor"`
}

// Run polls at once, then every interval, until ctx ends.
func (p *JiraPoller) Run(ctx context.Context) {
	for {
		if _, err := p.Poll(ctx); err != nil && ctx.Err() == nil {
			p.emit(EventPollProviderErr, graph.LevelWarning, graph.Field{Key: "provider", Value: "jira"}, graph.Field{Key: "error", Value: err.Error()})
		}
		t := time.NewTimer(p.cfg.Interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// JiraPollStats is what one pass did.
type JiraPollStats struct {
	Issues, Offered, Kept int
}

// Poll is one pass. It returns an error when Jira could not be asked or a
// comment could not be kept (the cursor then stays where it was).
func (p *JiraPoller) Poll(ctx context.Context) (JiraPollStats, error) {
	var st JiraPollStats
	now := p.deps.Router().Clock().Now()
	cur, ok, err := p.readCursor()
	if err != nil {
		return st, err
	}
	if !ok {
		return st, p.writeCursor(jiraCursor{Since: now, Floor: now})
	}
	since := cur.Since.Add(-jiraPollMargin)
	if now.Sub(since) > jiraPollLookback {
		since = now.Add(-jiraPollLookback)
	}
	floor := cur.Floor
	minutes := int(now.Sub(since)/time.Minute) + 1
	quoted := make([]string, 0)
	for _, k := range p.cfg.Projects.Projects() {
		quoted = append(quoted, `"`+k+`"`)
	}
	jql := fmt.Sprintf(`project in (%s) AND updated >= "-%dm" ORDER BY updated ASC`, strings.Join(quoted, ", "), minutes)
	res, err := p.deps.Jira.Call(ctx, ops.JiraSearchIssues, map[string]any{"jql": jql})
	if err != nil {
		return st, fmt.Errorf("jira poll: search: %w", err)
	}
	var errs []error
	for _, is := range valueMaps(res, "issues") {
		key := is.String("key")
		st.Issues++
		if err := p.pollIssue(ctx, key, since, floor, &st); err != nil {
			errs = append(errs, err)
		}
	}
	p.emit(EventPollCycle, graph.LevelDebug, graph.Field{Key: "provider", Value: "jira"}, graph.Field{Key: "issues", Value: st.Issues},
		graph.Field{Key: "offered", Value: st.Offered}, graph.Field{Key: "kept", Value: st.Kept})
	if err := errors.Join(errs...); err != nil {
		return st, err
	}
	return st, p.writeCursor(jiraCursor{Since: now, Floor: floor})
}

// pollIssue offers the comments of one issue created since since and
// after floor.
func (p *JiraPoller) pollIssue(ctx context.Context, key string, since, floor time.Time, st *JiraPollStats) error {
	if _, err := p.cfg.Projects.Ref(key); err != nil {
		return nil // not a served project's issue (or not a key): nothing to offer
	}
	res, err := p.deps.Jira.Call(ctx, ops.JiraListComments, map[string]any{"issue": key})
	if err != nil {
		return fmt.Errorf("jira poll: comments of %s: %w", key, err)
	}
	r := p.deps.Router()
	for _, c := range valueMaps(res, "comments") {
		created, err := ParseJiraTime(c.String("createdAt"))
		if err != nil || created.Before(since) || !created.After(floor) {
			continue
		}
		id := c.String("id")
		raw, _ := json.Marshal(id)
		jc := &JiraComment{ID: raw, Body: c.String("body"),
			Author: JiraUser{Name: c.String("author")}, Created: c.String("createdAt")}
		delivery := JiraDeliveryPrefix + "poll-" + key + "-" + id
		ev, drop := jiraEvent(r, p.cfg.Projects, delivery, "created", key, jc, nil)
		if drop != "" {
			continue
		}
		ev.Source = SourcePoll
		st.Offered++
		err = p.deps.Sink.Put(ctx, ev)
		switch {
		case err == nil:
			st.Kept++
		case errors.Is(err, ErrDuplicate):
		default:
			return fmt.Errorf("jira poll: keep comment %s of %s: %w", id, key, err)
		}
		r.Kept(ev)
	}
	return nil
}

// JiraTimeFormat is how Jira's REST API and webhooks write times.
const JiraTimeFormat = "2006-01-02T15:04:05.000-0700"

// ParseJiraTime parses a Jira time (also RFC 3339).
func ParseJiraTime(s string) (time.Time, error) {
	if t, err := time.Parse(JiraTimeFormat, s); err == nil {
		return t, nil
	}
	return time.Parse(time.RFC3339, s)
}

func (p *JiraPoller) readCursor() (jiraCursor, bool, error) {
	var c jiraCursor
	b, err := os.ReadFile(p.CursorPath())
	if errors.Is(err, os.ErrNotExist) {
		return c, false, nil
	}
	if err != nil {
		return c, false, fmt.Errorf("jira poll: %w", err)
	}
	if err := json.Unmarshal(b, &c); err != nil || c.Since.IsZero() {
		// An unreadable cursor is replaced: the next pass starts from now,
		// and says so.
		p.emit(EventPollProviderErr, graph.LevelWarning, graph.Field{Key: "provider", Value: "jira"},
			graph.Field{Key: "error", Value: "the cursor " + p.CursorPath() + " is unreadable; polling from now on"})
		return c, false, nil
	}
	return c, true, nil
}

func (p *JiraPoller) writeCursor(c jiraCursor) error {
	c.Since, c.Floor = c.Since.UTC(), c.Floor.UTC()
	b, _ := json.Marshal(c)
	if err := os.MkdirAll(p.cfg.StateRoot, 0o700); err != nil {
		return fmt.Errorf("jira poll: %w", err)
	}
	if err := atomicfile.Write(p.CursorPath(), b, 0o600); err != nil {
		return fmt.Errorf("jira poll: the cursor: %w", err)
	}
	return nil
}

func (p *JiraPoller) emit(name string, level graph.Level, fields ...graph.Field) {
	if p.deps.Log != nil {
		p.deps.Log.Emit(graph.LogEvent{Time: p.deps.Router().Clock().Now(), Name: name, Level: level, Fields: fields})
	}
}

// valueMaps is the list of objects under key of an operation's answer.
func valueMaps(res map[string]any, key string) []graph.Values {
	list, _ := res[key].([]any)
	out := make([]graph.Values, 0, len(list))
	for _, e := range list {
		if m, ok := e.(map[string]any); ok {
			out = append(out, graph.Values(m))
		}
	}
	return out
}
