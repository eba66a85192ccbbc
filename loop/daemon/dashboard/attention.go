package dashboard

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"sort"
	"time"

	"github.com/theloop-dev/theloop/loop/api"
)

// "Needs you": the board's first view lists what waits on a human, oldest
// first, with why and for how long — gates waiting for a decision,
// questions the agent asked with `loopctl ask` (with the question), parked
// nodes, sessions that died under a work item that is not done, and
// spawns that failed. The list comes from the same Items the board shows
// plus the open questions (QuestionSource); the page title carries the
// count and the hub sends the list again whenever it changes ("attention"
// events), so the badge in the header is live.

// Question is a question an agent asked on its work item (`loopctl ask`)
// that no answer has reached yet.
type Question struct {
	Ref  string
	Text string
	At   time.Time
}

// QuestionSource is implemented by a Source that knows the open questions.
type QuestionSource interface {
	Questions(ctx context.Context) ([]Question, error)
}

// Capacity is a work item a cluster node declines for capacity: its
// events wait and the node already owns as many items as it may.
type Capacity struct {
	Ref  string
	Node string
	// MaxSessions is the node's capacity (service.maxSessions).
	MaxSessions int
	Since       time.Time
}

// CapacitySource is implemented by a Source that knows the items declined
// for capacity.
type CapacitySource interface {
	Capacity(ctx context.Context) ([]Capacity, error)
}

// waits are what "needs you" lists beside the board's items.
type waits struct {
	qs      []Question
	caps    []Capacity
	budgets []Budget
}

// Attention kinds (CSS class tokens).
const (
	AttentionGate     = "gate"
	AttentionQuestion = "question"
	AttentionParked   = "parked"
	AttentionDead     = "dead-session"
	AttentionSpawn    = "spawn-failed"
	AttentionCapacity = "capacity"
	AttentionBudget   = "budget"
)

// attentionRow is one line of "needs you".
type attentionRow struct {
	Ref   string `json:"ref"`
	Title string `json:"title"`
	Page  string `json:"page"`
	Kind  string `json:"kind"`
	Label string `json:"label"`
	Why   string `json:"why"`
	Since string `json:"since"`
	Age   string `json:"age"`

	at time.Time
}

// attentionList is the "attention" event's payload: Count items, the
// oldest maxAttentionRows of them in Rows (More says how many are left
// out).
type attentionList struct {
	Count int            `json:"count"`
	Rows  []attentionRow `json:"rows"`
	More  int            `json:"more,omitempty"`
}

// maxAttentionRows bounds the list shown (and sent on every change): the
// oldest first, the rest counted.
const maxAttentionRows = 200

var attentionLabels = map[string]string{
	AttentionGate: "gate waiting", AttentionQuestion: "question", AttentionParked: "parked",
	AttentionDead: "session dead", AttentionSpawn: "spawn failed", AttentionCapacity: "no capacity",
	AttentionBudget: "budget",
}

// attention builds the list from the board's items, the open questions
// and the capacity refusals, oldest first. Only the rows shown are built:
// a board of 10,000 items may have thousands waiting.
func attention(items []Item, w waits, now time.Time) attentionList {
	return attentionN(items, w, now, maxAttentionRows)
}

// attentionAll is every entry, oldest first.
func attentionAll(items []Item, w waits, now time.Time) []attentionRow {
	return attentionN(items, w, now, -1).Rows
}

func attentionN(items []Item, w waits, now time.Time, limit int) attentionList {
	type cand struct {
		it   *Item
		q    *Question
		c    *Capacity
		b    *Budget
		kind string
		at   time.Time
	}
	qs := w.qs
	var cs []cand
	byRef := make(map[string]*Item, len(qs))
	for i := range items {
		it := &items[i]
		switch {
		case it.State == StateWaiting && it.Human:
			cs = append(cs, cand{it: it, kind: AttentionGate, at: it.Since})
		case it.State == StateParked:
			cs = append(cs, cand{it: it, kind: AttentionParked, at: it.Since})
		case it.State == StateSpawnFailed:
			cs = append(cs, cand{it: it, kind: AttentionSpawn, at: it.Since})
		}
		if it.Attach != "" && !it.SessionLive && !it.State.Finished() && it.State != StateSpawnFailed {
			at := it.LastEventAt
			if at.IsZero() {
				at = it.Since
			}
			cs = append(cs, cand{it: it, kind: AttentionDead, at: at})
		}
	}
	if len(qs) > 0 || len(w.caps) > 0 || len(w.budgets) > 0 {
		for i := range items {
			byRef[items[i].Ref] = &items[i]
		}
	}
	for i := range qs {
		it := byRef[qs[i].Ref]
		if it == nil {
			it = &Item{Ref: qs[i].Ref}
		}
		cs = append(cs, cand{it: it, q: &qs[i], kind: AttentionQuestion, at: qs[i].At})
	}
	for i := range w.caps {
		it := byRef[w.caps[i].Ref]
		if it == nil {
			it = &Item{Ref: w.caps[i].Ref}
		}
		cs = append(cs, cand{it: it, c: &w.caps[i], kind: AttentionCapacity, at: w.caps[i].Since})
	}
	for i := range w.budgets {
		it := byRef[w.budgets[i].Ref]
		if it == nil {
			it = &Item{Ref: w.budgets[i].Ref}
		}
		cs = append(cs, cand{it: it, b: &w.budgets[i], kind: AttentionBudget, at: w.budgets[i].Since})
	}
	sort.SliceStable(cs, func(i, j int) bool { return cs[i].at.Before(cs[j].at) })
	l := attentionList{Count: len(cs), Rows: []attentionRow{}}
	if limit >= 0 && len(cs) > limit {
		cs, l.More = cs[:limit], len(cs)-limit
	}
	for _, c := range cs {
		it := c.it
		var why string
		switch c.kind {
		case AttentionGate:
			why = fmt.Sprintf("%s waits for an authorized person's decision", it.Node)
		case AttentionParked:
			why = "parked at " + it.Node
			if it.Finding != "" {
				why += ": " + it.Finding
			}
		case AttentionSpawn:
			why = it.Finding
		case AttentionDead:
			why = "the agent's session is not running at " + it.Node + "; `loopctl sessions start` brings it back"
		case AttentionQuestion:
			why = c.q.Text
		case AttentionCapacity:
			why = fmt.Sprintf("cluster node %s is at capacity (service.maxSessions %d) and declines it; a node with room takes it — close a finished session or raise service.maxSessions", c.c.Node, c.c.MaxSessions)
		}
		if c.kind == AttentionBudget {
			why = c.b.Why
		}
		if it.Usage != "" {
			why += " · spent " + it.Usage + " (estimate)"
		}
		r := attentionRow{Ref: it.Ref, Title: it.Title, Page: "/item?ref=" + url.QueryEscape(it.Ref), Kind: c.kind, Label: attentionLabels[c.kind], Why: clip(why, 400), at: c.at}
		if !c.at.IsZero() {
			r.Since = c.at.UTC().Format(time.RFC3339)
			r.Age = humanDuration(now.Sub(c.at))
		}
		l.Rows = append(l.Rows, r)
	}
	return l
}

// NeedsYou is the "needs you" list for other clients (MCP's
// list_attention): every entry, oldest first, not only the rows the board
// shows.
func NeedsYou(ctx context.Context, src Source, now time.Time) ([]api.AttentionItem, error) {
	items, err := src.Items(ctx)
	if err != nil {
		return nil, err
	}
	l := attentionAll(items, sourceWaits(ctx, src), now)
	out := make([]api.AttentionItem, 0, len(l))
	for _, r := range l {
		it := api.AttentionItem{Ref: r.Ref, Title: r.Title, Kind: r.Kind, Why: r.Why}
		if !r.at.IsZero() {
			it.Since = r.at.UTC()
			it.WaitingSeconds = max(0, now.Sub(r.at).Seconds())
		}
		out = append(out, it)
	}
	return out, nil
}

// waits reads the open questions and capacity refusals (none when the
// Source keeps none).
func (d *Dashboard) waits(ctx context.Context) waits {
	return sourceWaits(ctx, d.deps.Source)
}

func sourceWaits(ctx context.Context, src Source) waits {
	var w waits
	if qs, ok := src.(QuestionSource); ok {
		if out, err := qs.Questions(ctx); err == nil {
			w.qs = out
		}
	}
	if cs, ok := src.(CapacitySource); ok {
		if out, err := cs.Capacity(ctx); err == nil {
			w.caps = out
		}
	}
	if bs, ok := src.(BudgetSource); ok {
		if out, err := bs.Budgets(ctx); err == nil {
			w.budgets = out
		}
	}
	return w
}

// attentionEvent is the SSE frame for the list.
func attentionEvent(l attentionList) []byte {
	b, _ := json.Marshal(l)
	return append(append([]byte("event: attention\ndata: "), b...), '\n', '\n')
}
