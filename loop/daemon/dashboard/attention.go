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

// Attention kinds (CSS class tokens).
const (
	AttentionGate     = "gate"
	AttentionQuestion = "question"
	AttentionParked   = "parked"
	AttentionDead     = "dead-session"
	AttentionSpawn    = "spawn-failed"
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
	AttentionDead: "session dead", AttentionSpawn: "spawn failed",
}

// attention builds the list from the board's items and the open
// questions, oldest first. Only the rows shown are built: a board of
// 10,000 items may have thousands waiting.
func attention(items []Item, qs []Question, now time.Time) attentionList {
	return attentionN(items, qs, now, maxAttentionRows)
}

// attentionAll is every entry, oldest first.
func attentionAll(items []Item, qs []Question, now time.Time) []attentionRow {
	return attentionN(items, qs, now, -1).Rows
}

func attentionN(items []Item, qs []Question, now time.Time, limit int) attentionList {
	type cand struct {
		it   *Item
		q    *Question
		kind string
		at   time.Time
	}
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
		if it.Attach != "" && !it.SessionLive && it.State != StateDone && it.State != StateSpawnFailed {
			at := it.LastEventAt
			if at.IsZero() {
				at = it.Since
			}
			cs = append(cs, cand{it: it, kind: AttentionDead, at: at})
		}
	}
	if len(qs) > 0 {
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
	l := attentionAll(items, sourceQuestions(ctx, src), now)
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

// questions reads the open questions (none when the Source keeps none).
func (d *Dashboard) questions(ctx context.Context) []Question {
	return sourceQuestions(ctx, d.deps.Source)
}

func sourceQuestions(ctx context.Context, src Source) []Question {
	qs, ok := src.(QuestionSource)
	if !ok {
		return nil
	}
	out, err := qs.Questions(ctx)
	if err != nil {
		return nil
	}
	return out
}

// attentionEvent is the SSE frame for the list.
func attentionEvent(l attentionList) []byte {
	b, _ := json.Marshal(l)
	return append(append([]byte("event: attention\ndata: "), b...), '\n', '\n')
}
