package dashboard

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"sort"
	"time"
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

// attentionList is the "attention" event's payload.
type attentionList struct {
	Count int            `json:"count"`
	Rows  []attentionRow `json:"rows"`
}

var attentionLabels = map[string]string{
	AttentionGate: "gate waiting", AttentionQuestion: "question", AttentionParked: "parked",
	AttentionDead: "session dead", AttentionSpawn: "spawn failed",
}

// attention builds the list from the board's items and the open
// questions, oldest first.
func attention(items []Item, qs []Question, now time.Time) attentionList {
	var rows []attentionRow
	titles := make(map[string]string, len(items))
	add := func(it Item, kind, why string, at time.Time) {
		r := attentionRow{Ref: it.Ref, Title: it.Title, Page: "/item?ref=" + url.QueryEscape(it.Ref), Kind: kind, Label: attentionLabels[kind], Why: clip(why, 400), at: at}
		if !at.IsZero() {
			r.Since = at.UTC().Format(time.RFC3339)
			r.Age = humanDuration(now.Sub(at))
		}
		rows = append(rows, r)
	}
	for _, it := range items {
		titles[it.Ref] = it.Title
		switch {
		case it.State == StateWaiting && it.Human:
			add(it, AttentionGate, fmt.Sprintf("%s waits for an authorized person's decision", it.Node), it.Since)
		case it.State == StateParked:
			why := "parked at " + it.Node
			if it.Finding != "" {
				why += ": " + it.Finding
			}
			add(it, AttentionParked, why, it.Since)
		case it.State == StateSpawnFailed:
			add(it, AttentionSpawn, it.Finding, it.Since)
		}
		if it.Attach != "" && !it.SessionLive && it.State != StateDone && it.State != StateSpawnFailed {
			since := it.LastEventAt
			if since.IsZero() {
				since = it.Since
			}
			add(it, AttentionDead, "the agent's session is not running at "+it.Node+"; `loopctl sessions start` brings it back", since)
		}
	}
	for _, q := range qs {
		it := Item{Ref: q.Ref, Title: titles[q.Ref]}
		add(it, AttentionQuestion, q.Text, q.At)
	}
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].at.Before(rows[j].at) })
	if rows == nil {
		rows = []attentionRow{}
	}
	return attentionList{Count: len(rows), Rows: rows}
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
